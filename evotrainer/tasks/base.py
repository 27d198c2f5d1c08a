"""The task-family protocol and the records tasks and rewards travel in."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from evotrainer.backends.base import Message

__all__ = [
    "ActionItem",
    "MeetingTask",
    "MetaScore",
    "RewardBreakdown",
    "TaskFamily",
    "content_hash",
]


def content_hash(text: str) -> str:
    """sha256 hex of whitespace-normalised, lower-cased text: the identity of a transcript."""
    norm = " ".join(text.split()).lower()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ActionItem:
    """An action item: who does what (by when, if said)."""

    owner: str
    task: str
    due: str = ""


@dataclass(frozen=True)
class MeetingTask:
    """One meeting: the transcript and its ground truth.

    Attributes:
        task_id: unique within its source (generated: derived from seed and index).
        transcript: ``Speaker: text`` lines, one turn per line.
        reference_minutes: human or generated reference minutes (may be empty for generated tasks).
        topics: ground-truth topics discussed.
        decisions: ground-truth decisions (final ones; reversed decisions appear in their final form).
        action_items: ground-truth action items with owners.
        source: "generated", a dataset name, or a file name.
        meta: free-form extra fields (domain, difficulty, n_words, ...); not part of identity.
    """

    task_id: str
    transcript: str
    reference_minutes: str = ""
    topics: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    action_items: tuple[ActionItem, ...] = ()
    source: str = "generated"
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def content_hash(self) -> str:
        """Identity of the transcript (see :func:`content_hash`)."""
        return content_hash(self.transcript)


@dataclass(frozen=True)
class RewardBreakdown:
    """A harness reward for one output.

    Attributes:
        total: sum_i w_i * R_i in [0, 1] (weights on the simplex), higher is better; 0.0 when the
            degenerate-output guard fired.
        components: each reward component in [0, 1], by name (reported even when guarded).
        degenerate: None, or the guard's reason ("empty", "copied_transcript", "repetition").
    """

    total: float
    components: Mapping[str, float]
    degenerate: str | None = None


@dataclass(frozen=True)
class MetaScore:
    """The fixed meta-validation score of one output against one item.

    Attributes:
        value: in [0, 1], higher is better.
        parts: the metric's parts by name (e.g. "rouge_l", "action_f1"), each in [0, 1].
    """

    value: float
    parts: Mapping[str, float]


class TaskFamily(Protocol):
    """What the loops need from a task domain."""

    name: str
    scorer_version: str
    """Changes whenever reward or metric code changes scores (part of the fitness-cache key)."""

    @property
    def difficulty_bounds(self) -> Mapping[str, tuple[float, float]]:
        """Each difficulty knob's (low, high), in the knob's natural unit."""
        ...

    @property
    def reward_components(self) -> tuple[str, ...]:
        """Names of the reward components, in a fixed order."""
        ...

    def generate(
        self, rng: np.random.Generator, difficulty: Mapping[str, float], n: int
    ) -> list[MeetingTask]:
        """Generate ``n`` tasks at ``difficulty`` from ``rng`` (deterministic given the rng state)."""
        ...

    def build_messages(self, sections: Sequence[tuple[str, str]], task: MeetingTask) -> tuple[Message, ...]:
        """The chat a policy with these prompt sections sends for ``task``."""
        ...

    def reward(self, output: str, task: MeetingTask, weights: Mapping[str, float]) -> RewardBreakdown:
        """Harness reward of ``output`` on ``task`` under reward ``weights`` (on the simplex)."""
        ...

    def meta_score(self, output: str, task: MeetingTask) -> MetaScore:
        """Fixed meta-validation score of ``output`` on ``task``; no harness parameter touches it."""
        ...
