"""Long generated meetings: several generated meetings read as one, so that its topics drift and its last
decisions and action items come late (issue 29). What ships in ``validation_set/long_generated.jsonl`` (made
by ``scripts/make_long_generated.py``) and what the long-meeting smoke experiment and tests read; the real
long meetings (ELITR, CC BY-NC-SA) stay outside the repository.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from evotrainer.tasks.base import content_hash
from evotrainer.tasks.meeting_minutes.generator import generate
from evotrainer.tasks.meeting_minutes.minutes_format import format_minutes
from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["generate_long", "join_meetings"]


def join_meetings(parts: Sequence[MeetingTask], task_id: str | None = None,
                  source: str = "generated_long") -> MeetingTask:
    """One meeting made of ``parts`` in order: transcripts joined, and the topics, decisions and action items
    of every part in order as its ground truth and reference minutes.

    Args:
        parts: meetings, >= 1.
        task_id: the id (default ``mml-<hash of the transcript>``).
        source: the item's source label.

    Raises:
        ValueError: no parts.
    """
    if not parts:
        raise ValueError("join_meetings: no meetings to join")
    transcript = "\n".join(p.transcript.strip() for p in parts)
    topics = tuple(t for p in parts for t in p.topics)
    decisions = tuple(d for p in parts for d in p.decisions)
    items = tuple(a for p in parts for a in p.action_items)
    meta = {"parts": len(parts), "n_words": len(transcript.split()),
            "part_words": [len(p.transcript.split()) for p in parts]}
    return MeetingTask(task_id or f"mml-{content_hash(transcript)[:12]}", transcript,
                       reference_minutes=format_minutes(topics, decisions, items), topics=topics,
                       decisions=decisions, action_items=items, source=source, meta=meta)


def generate_long(rng: np.random.Generator, n: int, parts: int, difficulty: Mapping[str, float]) -> list[MeetingTask]:
    """``n`` long meetings, each :func:`join_meetings` of ``parts`` meetings generated at ``difficulty``
    (:func:`~evotrainer.tasks.meeting_minutes.generator.generate`; deterministic given the rng state).

    Raises:
        ValueError: ``n`` < 0 or ``parts`` < 1.
    """
    if n < 0 or parts < 1:
        raise ValueError(f"generate_long: n must be >= 0 and parts >= 1, got n={n}, parts={parts}")
    return [join_meetings(generate(rng, difficulty, parts)) for _ in range(n)]
