"""Degenerate-output guard: outputs that game word-overlap scores get a total of zero.

Checks, in order (the first that fires names the reason):

1. ``"empty"``: no word at all (whitespace or punctuation only).
2. ``"copied_transcript"``: the output is mostly pasted from the transcript. With lower-cased word
   tokens, more than :data:`COPY_SHARE` of the output's :data:`COPY_NGRAM`-grams occur in the
   transcript, or the output contains a verbatim run of at least :data:`COPY_SPAN_WORDS` transcript
   words. Thresholds are set above what human references do: on the 152 QMSum items the most
   extractive reference has 55% of its 8-grams in the transcript and a longest verbatim run of
   29 words; the generated references have none.
3. ``"repetition"``: a degenerate loop. Either one line (case- and space-normalised) occurs at least
   :data:`REPEAT_MIN_COUNT` times and makes up at least :data:`REPEAT_LINE_SHARE` of the non-empty
   lines; or, with at least 6 lines, fewer than half the lines are distinct; or, with at least 20
   words, fewer than :data:`DISTINCT_NGRAM_MIN` of the word 4-grams are distinct (loops without
   newlines).
4. ``"speaker_continuation"``: the output goes on with the dialogue instead of summarising it (a
   paraphrased continuation escapes check 2 but still shares many words with the reference, which
   ROUGE rewards). A line is a *speaker line* when it reads ``Label: text`` (optionally after a
   bullet, a ``[hh:mm:ss]`` stamp or bold markers) where the label, case-insensitively, is a speaker
   of the transcript, the first or last word of one, or a generic tag ("Speaker", "Speaker 2",
   "Person A", "A"); a line holding several turns ("... so. Bob: yes.") is split at each known
   speaker first. Not counted, so that minutes listing owners are not flagged: lines under an
   action-item header ("## Action items", "Next steps:"), and bullet lines unless their text reads as
   an utterance (it opens with "I", "we", "yeah", "um", "okay", "so", ... or ends with "?"), since
   ``- Alice: send the report`` is how minutes write an owned item. The check fires when at least
   :data:`SPEAKER_MIN_LINES` lines are speaker lines and they are at least
   :data:`SPEAKER_LINE_SHARE` of the non-header lines. Calibrated on human references: the 152
   QMSum references and the 100 references of ``validation_set/meeting_minutes.jsonl`` have no
   speaker line at all (their ``- Owner: task`` bullets, up to 69 % of a reference's lines, sit under
   "## Action items"), tested in ``tests/tasks/meeting_minutes/test_guard_speakers.py``. Nor are lines that
   narrate in the third person (a reporting verb such as "discussed", "presented", "emphasised" and no
   first- or second-person word): minutes organised by speaker (``**Professor D:** The meeting began with
   Professor D presenting the results``), which the 1.5B writes under the plain prompt.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["COPY_NGRAM", "COPY_SHARE", "COPY_SPAN_WORDS", "DISTINCT_NGRAM_MIN", "REPEAT_LINE_SHARE",
           "REPEAT_MIN_COUNT", "SPEAKER_LINE_SHARE", "SPEAKER_MIN_LINES", "degenerate_reason",
           "speaker_line_share"]

COPY_NGRAM = 8
COPY_SHARE = 0.75
COPY_SPAN_WORDS = 50
REPEAT_MIN_COUNT = 3
REPEAT_LINE_SHARE = 0.4
DISTINCT_NGRAM_MIN = 0.5
SPEAKER_LINE_SHARE = 0.5
SPEAKER_MIN_LINES = 3

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return [t.casefold() for t in _TOKEN.findall(text)]


def _ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _copied(out_tokens: list[str], transcript: str) -> bool:
    grams = _ngrams(out_tokens, COPY_NGRAM)
    if not grams:
        return False
    source = set(_ngrams(_tokens(transcript), COPY_NGRAM))
    hits = [g in source for g in grams]
    if sum(hits) / len(grams) > COPY_SHARE:
        return True
    # A run of k consecutive hit 8-grams is a verbatim span of k + 7 words.
    run = best = 0
    for hit in hits:
        run = run + 1 if hit else 0
        best = max(best, run)
    return best + COPY_NGRAM - 1 >= COPY_SPAN_WORDS


def _repetitive(output: str, out_tokens: list[str]) -> bool:
    lines = [" ".join(line.split()).casefold() for line in output.splitlines() if line.strip()]
    if lines:
        top = Counter(lines).most_common(1)[0][1]
        if top >= REPEAT_MIN_COUNT and top / len(lines) >= REPEAT_LINE_SHARE:
            return True
        if len(lines) >= 6 and len(set(lines)) / len(lines) < 0.5:
            return True
    grams = _ngrams(out_tokens, 4)
    return len(out_tokens) >= 20 and len(set(grams)) / len(grams) < DISTINCT_NGRAM_MIN


_TRANSCRIPT_SPEAKER = re.compile(r"^\s*(?:\[[^\]]{0,20}\]\s*)?(?P<label>[^\W_][^:\n]{0,59}?)\s*:\s", re.M)
_PREFIXED = re.compile(
    r"^\s*(?P<bullet>(?:[-*•+‣◦–]|\d{1,2}[.)])\s+)?(?:\[[^\]]{0,20}\]\s*)?(?:\*\*|__)?"
    r"(?P<label>[^\W_][^:]{0,59}?)(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?P<text>\S.*)$"
)
_GENERIC_SPEAKER = re.compile(r"^(?:(?:speaker|spk|person|participant|voice|user)\s*[-_#]?\s*(?:\d{1,2}|[a-z])?|"
                              r"[a-z]\d?)$")
_HEADER = re.compile(r"^\s*(?:#{1,6}\s*(?P<h>.*)|(?:\*\*|__)(?P<b>[^*_]{1,60})(?:\*\*|__)\s*:?|"
                     r"(?P<l>[A-Za-z][\w /&'-]{0,40}):)\s*$")
_PARTICLES = frozenset({"van", "von", "der", "den", "de", "del", "da", "di", "du", "la", "le", "bin", "al", "el"})
_ACTION_HEADER = re.compile(r"action|next step|to-?do|to do|task|follow|assign|owner|responsib", re.I)
_UTTERANCE = re.compile(
    r"^(?:i|i'm|i'll|i've|i'd|we|we're|we'll|we've|you|yeah|yes|yep|no|nope|um+|uh+|hmm+|mm+|oh|okay|ok|well|"
    r"so|right|sure|alright|thanks|thank you|hi|hello|hey|good morning|let's)\b", re.I)


# A line of minutes organised by speaker narrates in the third person ("**Professor D:** The team discussed ...",
# "Kirsty Williams AM: Minister of Education, discussing ..."); a turn of dialogue speaks in the first or second.
_REPORTING = re.compile(  # past and -ing forms only: "notes", "reports", "updates" are nouns too
    r"\b(?:discuss|present|not|emphasi[sz]|mention|express|highlight|suggest|explain|rais|propos|report|describ|"
    r"address|outlin|summari[sz]|stat|introduc|conclud|acknowledg|confirm|argu|ask|agre|updat|provid|shar)"
    r"(?:ed|ing)\b|\b(?:pointed out|talked about)\b", re.I)
_FIRST_SECOND_PERSON = re.compile(r"\b(?:i|i'm|i'll|i've|i'd|me|my|we|we're|we'll|we've|us|our|you|you're|your)\b",
                                  re.I)


def _narrates(text: str) -> bool:
    """A third-person account of what a speaker did (a reporting verb, no first or second person), not a turn."""
    return bool(_REPORTING.search(text)) and not _FIRST_SECOND_PERSON.search(text) and not _UTTERANCE.match(text)


def _norm(label: str) -> str:
    return " ".join(label.replace("*", " ").replace("_", " ").split()).casefold()


def _speaker_names(transcript: str) -> set[str]:
    """Speaker labels of the transcript, with the first and last word of each (case-folded)."""
    names: set[str] = set()
    for match in _TRANSCRIPT_SPEAKER.finditer(transcript):
        raw = match["label"].split()
        # "So the plan is: ..." continues a turn; a several-word label has capitalised words.
        if not 1 <= len(raw) <= 6 or (len(raw) > 1 and not all(w[:1].isupper() or w[:1].isdigit() or
                                                                   w in _PARTICLES for w in raw)):
            continue
        label = _norm(match["label"])
        words = label.split()
        names.add(label)
        names.update(w for w in (words[0], words[-1]) if len(w) >= 2)
    return names


def _split_turns(output: str, names: set[str]) -> list[str]:
    """Non-empty lines, a line with several ``Name: text`` turns split before each known name."""
    lines = [line for line in output.splitlines() if line.strip()]
    long_names = sorted((n for n in names if len(n) >= 2), key=len, reverse=True)
    if not long_names:
        return lines
    inline = re.compile(r"(?<=[.!?…\"”])\s+(?=(?:" + "|".join(re.escape(n) for n in long_names) + r")\s*:\s)",
                        re.I)
    return [part for line in lines for part in inline.split(line) if part.strip()]


def _invented_speaker(label: str, names: set[str]) -> bool:
    """A label in the transcript's own style with another letter or number: ``Grad F`` beside ``Grad A``."""
    words = label.split()
    return len(words) == 2 and words[0] in names and len(words[1]) <= 2 and words[1].isalnum()


def speaker_line_share(output: str, transcript: str) -> tuple[int, int]:
    """Speaker lines of ``output`` and its non-header lines (rule 4 of the module docstring).

    Returns:
        ``(n_speaker_lines, n_lines)``, both >= 0; ``n_lines`` counts non-empty lines that are not
        section headers (after splitting lines that hold several turns).
    """
    names = _speaker_names(transcript)
    in_actions = False
    speaker = total = 0
    for line in _split_turns(output, names):
        header = _HEADER.match(line)
        if header:
            in_actions = bool(_ACTION_HEADER.search(header["h"] or header["b"] or header["l"] or ""))
            continue
        total += 1
        match = _PREFIXED.match(line)
        if not match or in_actions:
            continue
        label = _norm(match["label"])
        if label not in names and not _GENERIC_SPEAKER.match(label) and not _invented_speaker(label, names):
            continue
        text = match["text"].strip().strip("*_ ")
        if match["bullet"] and not (_UTTERANCE.match(text) or text.endswith("?")):
            continue  # "- Alice: send the report" is an owned action item
        if _narrates(text):
            continue  # "Alice: presented the budget" summarises her part: minutes by speaker
        speaker += 1
    return speaker, total


def _speaker_continuation(output: str, transcript: str) -> bool:
    speaker, total = speaker_line_share(output, transcript)
    return speaker >= SPEAKER_MIN_LINES and speaker >= SPEAKER_LINE_SHARE * total


def degenerate_reason(output: str, transcript: str) -> str | None:
    """Why ``output`` is degenerate, or None when it is not.

    Args:
        output: model minutes (untrusted text).
        transcript: the meeting transcript the output was written from.

    Returns:
        ``"empty"``, ``"copied_transcript"``, ``"repetition"``, ``"speaker_continuation"``, or None
        (the first check of the module docstring that fires; never raises).
    """
    out_tokens = _tokens(output)
    if not out_tokens:
        return "empty"
    if _copied(out_tokens, transcript):
        return "copied_transcript"
    if _repetitive(output, out_tokens):
        return "repetition"
    if _speaker_continuation(output, transcript):
        return "speaker_continuation"
    return None
