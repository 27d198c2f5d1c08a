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
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = [
    "COPY_NGRAM",
    "COPY_SHARE",
    "COPY_SPAN_WORDS",
    "DISTINCT_NGRAM_MIN",
    "REPEAT_LINE_SHARE",
    "REPEAT_MIN_COUNT",
    "degenerate_reason",
]

COPY_NGRAM = 8
COPY_SHARE = 0.75
COPY_SPAN_WORDS = 50
REPEAT_MIN_COUNT = 3
REPEAT_LINE_SHARE = 0.4
DISTINCT_NGRAM_MIN = 0.5

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


def degenerate_reason(output: str, transcript: str) -> str | None:
    """Why ``output`` is degenerate, or None when it is not.

    Args:
        output: model minutes (untrusted text).
        transcript: the meeting transcript the output was written from.

    Returns:
        ``"empty"``, ``"copied_transcript"``, ``"repetition"``, or None (never raises).
    """
    out_tokens = _tokens(output)
    if not out_tokens:
        return "empty"
    if _copied(out_tokens, transcript):
        return "copied_transcript"
    if _repetitive(output, out_tokens):
        return "repetition"
    return None
