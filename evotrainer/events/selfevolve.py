"""The archive events of a self-evolution run (``mode=selfevolve``; evotrainer/selfevolve/): its own variants of
the ``setup`` and ``summary`` kinds, told from the co-evolution ones by ``payload["mode"]``
(:data:`evotrainer.events.kinds.MODE_TYPES`). Same payload contract as :mod:`evotrainer.events.kinds`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from evotrainer.events.base import Event

__all__ = ["SelfEvolveSetupEvent", "SelfEvolveSummaryEvent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfEvolveSetupEvent(Event):
    """A self-evolution run's policy and items (kind ``setup`` with ``mode`` ``selfevolve``)."""

    kind: ClassVar[str] = "setup"
    mode: str = "selfevolve"
    """Always ``selfevolve`` (what tells it from :class:`SetupEvent`)."""
    policy: str | None = None
    """The policy trained."""
    dev_tasks: tuple[str, ...] = ()
    """Task ids of the development tasks."""
    val_items: tuple[str, ...] = ()
    """Task ids of the meta-validation items scored."""
    seed_tasks: tuple[str, ...] = ()
    """Task ids of the pool's seed tasks."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfEvolveSummaryEvent(Event):
    """A self-evolution run's result (kind ``summary`` with ``mode`` ``selfevolve``)."""

    kind: ClassVar[str] = "summary"
    mode: str = "selfevolve"
    """Always ``selfevolve``."""
    baseline_dev: float | None = None
    """Development score before training, in [0, 1]."""
    baseline_val: float | None = None
    """Meta-validation S_val before training, None without items."""
    final_policy: str | None = None
    """The policy kept at the end."""
    final_adapter: str | None = None
    """Its adapter folder relative to the run folder, None without one."""
    rounds: tuple[tuple[int, str, float | None, float | None], ...] = ()
    """Per round: ``(round, status, dev_score, val_score)``."""
    generated_tokens: int | None = None
    """Tokens generated in all."""
