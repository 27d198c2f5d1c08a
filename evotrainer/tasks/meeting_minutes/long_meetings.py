"""Long generated meetings: several generated meetings read as one, so that its topics drift and its last
decisions and action items come late. What ships in ``validation_set/long_generated.jsonl`` (made
by ``scripts/make_long_generated.py``) and what the long-meeting smoke experiment and tests read; the real
long meetings (ELITR, CC BY-NC-SA) stay outside the repository.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from evotrainer.tasks.meeting_minutes.generator import generate, join_meetings
from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["generate_long", "join_meetings"]


def generate_long(rng: np.random.Generator, n: int, parts: int, difficulty: Mapping[str, float]) -> list[MeetingTask]:
    """``n`` long meetings, each :func:`join_meetings` of ``parts`` meetings generated at ``difficulty``
    (:func:`~evotrainer.tasks.meeting_minutes.generator.generate`; deterministic given the rng state).

    Raises:
        ValueError: ``n`` < 0 or ``parts`` < 1.
    """
    if n < 0 or parts < 1:
        raise ValueError(f"generate_long: n must be >= 0 and parts >= 1, got n={n}, parts={parts}")
    return [join_meetings(generate(rng, difficulty, parts)) for _ in range(n)]
