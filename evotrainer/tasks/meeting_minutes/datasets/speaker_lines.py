"""Transcripts as ``Speaker: text`` lines, optionally stamped ``[hh:mm:ss]`` or ``[mm:ss]``.

Accepted lines (blank lines are skipped)::

    Aiko: Let's start with the budget.
    [00:01:05] Bao Tran: The quote came in high.
    [01:12] Aiko: Can we phase it?
        which would spread the cost        <- a continuation line: appended to the previous turn

A *speaker label* is 1-6 words before the first ``": "`` (or a line-final ``":"``): letters, digits,
spaces and ``. ' - _ & /``, plus any parenthesised part; when it has several words, each starts with a capital letter or a
digit (particles such as "van", "de", "bin" excepted; a parenthesised part such as "(Chair)" is not
checked), so ``So the plan is: ...`` reads as a
continuation, not as a speaker "So the plan is". A line that is not a speaker line continues the
previous turn; one that comes before any speaker line is an error.

Timestamps: ``[h:mm:ss]`` / ``[hh:mm:ss]`` (minutes and seconds < 60) or ``[mm:ss]`` (seconds < 60),
optionally with a fraction (``[00:01:05.250]``); they must not go backwards. A bracket at the start of
a line that opens like a time (digits then ``:``) but is not a valid one is an error (``[00:7x]``);
``[laughter]`` is just text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evotrainer.errors import DataError

__all__ = ["Turn", "looks_timestamped", "parse_speaker_lines", "parse_timestamp", "render_turns", "speaker_label"]


@dataclass(frozen=True)
class Turn:
    """One speaker turn.

    Attributes:
        speaker: the label as written (whitespace-normalised).
        text: what was said, continuation lines joined with single spaces (may be "" only while parsing).
        start: seconds from the start of the meeting when the line was stamped, else None.
        line: 1-based line of the turn's first line in its file.
    """

    speaker: str
    text: str
    start: float | None = None
    line: int = 0


_SPEAKER_LINE = re.compile(r"^(?P<speaker>[^\W_][^:]{0,119}?)\s*:(?:\s+(?P<text>.*)|\s*)$")
_LABEL_CORE = re.compile(r"^[\w .'’&/-]+$")
_PAREN = re.compile(r"\([^()]*\)")
_STAMP = re.compile(r"^\[(?P<body>[^\]]*)\]\s*(?P<rest>.*)$")
_TIME_LIKE = re.compile(r"^\s*\d+\s*:")  # "[00:7x]" is a (bad) time, "[laughter]" is text
_TIME = re.compile(r"^(?P<a>\d{1,2}):(?P<b>\d{2})(?::(?P<c>\d{2}))?(?:[.,](?P<frac>\d{1,3}))?$")
_PARTICLES = frozenset({"van", "von", "der", "den", "de", "del", "della", "da", "di", "du", "la", "le", "bin",
                        "bint", "al", "el", "y", "ter", "ten"})
_MAX_LABEL_WORDS = 6


def parse_timestamp(body: str, where: str) -> float:
    """Seconds of a bracket body ``hh:mm:ss``, ``h:mm:ss`` or ``mm:ss`` (optional ``.fff``).

    Args:
        body: the text between the brackets.
        where: ``file:line`` for the error message.

    Returns:
        Seconds from the start, >= 0.

    Raises:
        DataError: not one of those forms, or minutes / seconds >= 60 (names ``where``).
    """
    match = _TIME.match(body.strip())
    expected = "expected [hh:mm:ss] or [mm:ss] with minutes and seconds below 60"
    if not match:
        raise DataError(f"{where}: bad timestamp [{body}]; {expected}")
    a, b = int(match["a"]), int(match["b"])
    frac = float("0." + match["frac"]) if match["frac"] else 0.0
    if match["c"] is not None:
        hours, minutes, seconds = a, b, int(match["c"])
        if minutes >= 60 or seconds >= 60:
            raise DataError(f"{where}: bad timestamp [{body}]; {expected}")
    else:
        hours, minutes, seconds = 0, a, b
        if seconds >= 60:
            raise DataError(f"{where}: bad timestamp [{body}]; {expected}")
    return hours * 3600 + minutes * 60 + seconds + frac


def speaker_label(label: str) -> str | None:
    """The whitespace-normalised ``label`` when it reads as a speaker name (rule in the module docstring), else None."""
    core = label
    for _ in range(3):  # "The Chair (Hon. Anthony Rota (Nipissing, Lib.))": nested parentheses
        core = _PAREN.sub(" ", core)
    words = core.split()
    if not words or len(words) > _MAX_LABEL_WORDS or not _LABEL_CORE.match(core) or len(label) > 120:
        return None
    if len(words) > 1:
        for word in words:
            head = word[:1]
            if not (head.isupper() or head.isdigit()) and word.lower() not in _PARTICLES:
                return None
    return " ".join(label.split())


def looks_timestamped(text: str) -> bool:
    """True when the first non-blank line of ``text`` starts with a time-like bracket (``[00:01] ...``)."""
    for line in text.splitlines():
        if line.strip():
            match = _STAMP.match(line.strip())
            return bool(match and _TIME_LIKE.match(match["body"]))
    return False


def parse_speaker_lines(text: str, *, source: str, first_line: int = 1,
                        line_label: str | None = None) -> list[Turn]:
    """Parse a transcript into turns (format in the module docstring).

    Args:
        text: the transcript.
        source: the file named in errors (``source:LINE``).
        first_line: file line number of the first line of ``text`` (>= 1).
        line_label: when set, errors read ``source:first_line (<line_label> line k)`` instead, for
            transcripts embedded in one line of another file (JSONL).

    Returns:
        The turns in order, each with non-empty text (a labelled line that never got text is dropped).

    Raises:
        DataError: a non-blank line before any speaker line, a bad or backwards timestamp, a stamp
            not followed by ``Speaker: text``, or no turn at all. Messages name the file and line and
            say what was expected.
    """
    turns: list[Turn] = []
    last_time: tuple[float, str] | None = None
    for k, raw in enumerate(text.splitlines()):
        line = raw.strip()
        where = f"{source}:{first_line} ({line_label} line {k + 1})" if line_label else f"{source}:{first_line + k}"
        if not line:
            continue
        start: float | None = None
        body = line
        stamp = _STAMP.match(line)
        if stamp and _TIME_LIKE.match(stamp["body"]):
            start = parse_timestamp(stamp["body"], where)
            if last_time is not None and start < last_time[0]:
                raise DataError(f"{where}: timestamp [{stamp['body'].strip()}] is earlier than "
                                f"[{last_time[1]}] before it; expected times that never go backwards")
            last_time = (start, stamp["body"].strip())
            body = stamp["rest"]
        match = _SPEAKER_LINE.match(body)
        speaker = speaker_label(match["speaker"]) if match else None
        if speaker is not None and match is not None:
            turns.append(Turn(speaker, " ".join((match["text"] or "").split()), start, first_line + k))
            continue
        if start is not None:
            raise DataError(f"{where}: expected 'Speaker: text' after the timestamp, got {_clip(body)!r}")
        if not turns:
            raise DataError(f"{where}: expected a 'Speaker: text' or '[hh:mm:ss] Speaker: text' line "
                            f"before any other text, got {_clip(line)!r}")
        prev = turns[-1]
        joined = f"{prev.text} {' '.join(line.split())}".strip()
        turns[-1] = Turn(prev.speaker, joined, prev.start, prev.line)
    turns = [t for t in turns if t.text]
    if not turns:
        where = f"{source}:{first_line}" if line_label else str(source)
        raise DataError(f"{where}: no speaker turns; expected 'Speaker: text' lines")
    return turns


def render_turns(turns: Sequence[Turn]) -> str:
    """The canonical transcript: one ``Speaker: text`` line per turn (timestamps dropped)."""
    return "\n".join(f"{t.speaker}: {t.text}" for t in turns)


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
