"""Cutting a long transcript into overlapping windows at speaker-turn boundaries (docs/long_meetings.md).

Pure functions: text and token counts in, windows out. A *turn* is one non-empty ``Speaker: text`` line of
the transcript. A window is a run of consecutive turns whose token count is at most the window size; the
next window starts a few turns back so that it repeats at most ``overlap`` tokens of the one before (the
merge step then sees a decision that straddles a boundary in both parts). A single turn longer than the
window is first split at word boundaries into pieces that each keep the speaker label.

Windowing long inputs for a model of short context and merging the partial outputs is the "chunk and merge"
(map-reduce) scheme of long-document summarisation, e.g. Zhang et al. 2022, "SummN: A Multi-Stage
Summarization Framework for Long Input Dialogues and Documents" (ACL), which also cuts meeting transcripts at
speaker turns; the code here is ours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Window", "plan_windows", "speaker_turns", "split_long_turns", "transcript_windows"]


@dataclass(frozen=True)
class Window:
    """One window of a transcript.

    Attributes:
        start: index of its first turn (in the turn list after long turns were split), >= 0.
        end: one past its last turn, > ``start``.
        text: its turns joined by newlines.
        tokens: its token count (sum of its turns' counts).
    """

    start: int
    end: int
    text: str
    tokens: int


def speaker_turns(transcript: str) -> list[str]:
    """The non-empty lines of ``transcript``, stripped: one speaker turn each."""
    return [line.strip() for line in transcript.splitlines() if line.strip()]


def _speaker(turn: str) -> tuple[str, str]:
    """``("Name: ", rest)`` when the turn starts with a short speaker label, else ``("", turn)``."""
    head, sep, rest = turn.partition(":")
    if sep and 0 < len(head) <= 40 and "\n" not in head and len(head.split()) <= 4:
        return head + ": ", rest.strip()
    return "", turn


def split_long_turns(turns: Sequence[str], count: Callable[[str], int], size: int) -> list[str]:
    """``turns`` with every turn of more than ``size`` tokens split at word boundaries into pieces of about
    equal word count, each prefixed with the turn's speaker label, so that no piece exceeds ``size``.

    Args:
        turns: speaker turns (:func:`speaker_turns`).
        count: tokens of a text (the model's tokenizer).
        size: window size in tokens, >= 1.

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"window size must be >= 1 token, got {size}")
    out: list[str] = []
    for turn in turns:
        n = count(turn)
        if n <= size:
            out.append(turn)
            continue
        label, body = _speaker(turn)
        words = body.split()
        pieces = max(2, math.ceil(n / size))
        while True:  # more pieces until each fits (a label or odd tokenisation can push one over)
            step = max(1, math.ceil(len(words) / pieces))
            split = [label + " ".join(words[i:i + step]) for i in range(0, len(words), step)]
            if all(count(p) <= size for p in split) or step == 1:
                break
            pieces += 1
        out += split
    return out


def plan_windows(turn_tokens: Sequence[int], size: int, overlap: int) -> list[tuple[int, int]]:
    """Windows over turns of the given token counts, as ``(start, end)`` turn ranges in order.

    Each window takes turns greedily while their sum stays <= ``size`` (always at least one turn); the next
    window starts at the earliest turn such that the turns it repeats from the previous window sum to at
    most ``overlap`` tokens, and always at least one turn later than the previous start. The union of the
    windows is every turn; consecutive windows overlap by whole turns only.

    Args:
        turn_tokens: tokens per turn, each >= 0.
        size: window size in tokens, >= 1.
        overlap: tokens a window may repeat from the one before, in ``[0, size)``.

    Returns:
        ``[(start, end), ...]`` with ``start < end``; one window ``(0, n)`` when everything fits; ``[]``
        for no turns.

    Raises:
        ValueError: ``size`` < 1 or ``overlap`` outside ``[0, size)``.
    """
    if size < 1:
        raise ValueError(f"window size must be >= 1 token, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"window overlap must be in [0, {size}) tokens, got {overlap}")
    n = len(turn_tokens)
    windows: list[tuple[int, int]] = []
    start = 0
    while start < n:
        end, total = start, 0
        while end < n and (end == start or total + turn_tokens[end] <= size):
            total += turn_tokens[end]
            end += 1
        windows.append((start, end))
        if end >= n:
            break
        back, repeated = end, 0
        while back - 1 > start and repeated + turn_tokens[back - 1] <= overlap:
            back -= 1
            repeated += turn_tokens[back]
        start = back
    return windows


def transcript_windows(transcript: str, count: Callable[[str], int], size: int, overlap: int) -> list[Window]:
    """The windows of ``transcript`` (:func:`speaker_turns` -> :func:`split_long_turns` -> :func:`plan_windows`).

    Args:
        transcript: ``Speaker: text`` lines.
        count: tokens of one turn (the model's tokenizer; the newline joining turns is not counted).
        size: window size in tokens, >= 1.
        overlap: repeated tokens between consecutive windows, in ``[0, size)``.

    Raises:
        ValueError: bad ``size`` or ``overlap``.
    """
    turns = split_long_turns(speaker_turns(transcript), count, size)
    tokens = [count(t) for t in turns]
    return [Window(s, e, "\n".join(turns[s:e]), sum(tokens[s:e])) for s, e in plan_windows(tokens, size, overlap)]
