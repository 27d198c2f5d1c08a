"""Strata of meeting items for per-group results: source, domain and transcript length bucket."""

from __future__ import annotations

from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["LENGTH_BUCKETS", "length_bucket", "strata_of", "word_count"]

LENGTH_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("<300", 0, 300),
    ("300-600", 300, 600),
    ("600-1000", 600, 1000),
    (">=1000", 1000, None),
)
"""(label, low inclusive, high exclusive or None) in transcript words, shortest first."""

def word_count(transcript: str) -> int:
    """Whitespace-separated tokens of a transcript, speaker labels included (``validation_set``'s ``n_words``)."""
    return len(transcript.split())


def length_bucket(n_words: int) -> str:
    """The :data:`LENGTH_BUCKETS` label holding ``n_words`` (>= 0)."""
    for label, low, high in LENGTH_BUCKETS:
        if n_words >= low and (high is None or n_words < high):
            return label
    return LENGTH_BUCKETS[0][0]  # negative counts cannot happen; keep the function total


def strata_of(task: MeetingTask) -> dict[str, str]:
    """``{"source", "domain", "length"}`` labels of an item (domain from ``meta["domain"]``, "" when absent)."""
    domain = task.meta.get("domain") if task.meta else None
    return {
        "source": task.source,
        "domain": str(domain) if domain else "",
        "length": length_bucket(word_count(task.transcript)),
    }
