"""The events of one evaluation, recorded in every mode by :class:`~evotrainer.archive.recorder.RunRecorder`
(registered and re-exported by :mod:`evotrainer.events.kinds`, whose payload contract holds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from evotrainer.events.base import Event, payload_key

__all__ = ["InputHandlingEvent", "TrajectoriesEvent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _EvaluationEvent(Event):
    """The keys both kinds open with: which evaluation it was."""

    policy_id: str | None = None
    """The policy evaluated."""
    batch_id: str | None = None
    """The task batch (its items in order: the ``task_batch`` or ``setup`` event)."""
    evaluation_kind: str | None = field(default=None, metadata=payload_key("kind"))
    """The evaluation's kind (``fitness``, ``meta_screen``, ``meta_val``, ...); payload key ``kind``."""
    harness_id: str | None = None
    """The candidate, None outside one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrajectoriesEvent(_EvaluationEvent):
    """The freshly generated episodes of one evaluation (multi-step families only)."""

    kind: ClassVar[str] = "trajectories"
    trajectories: tuple[Any, ...] = ()
    """One per output: the episode as parsed JSON, or ``{"text": ...}`` when it was not JSON."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InputHandlingEvent(_EvaluationEvent):
    """How the items of one fresh evaluation were read when any was not read whole (a long input windowed or
    cut is never silent)."""

    kind: ClassVar[str] = "input_handling"
    handling: tuple[str, ...] = ()
    """One :class:`~evotrainer.input_handling.InputHandling` code per item, in batch order: ``whole``,
    ``windowed:N``, ``cut:S`` (S: share of the input's words the model saw, in [0, 1])."""
