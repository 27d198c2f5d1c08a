"""The archive events of a self-evolution run (``mode=selfevolve``; evotrainer/selfevolve/): its own variants of
the ``setup`` and ``summary`` kinds, told from the co-evolution ones by ``payload["mode"]``
(:data:`evotrainer.events.kinds.MODE_TYPES`), and its ``selfevolve_transfer`` kind. Same payload contract as
:mod:`evotrainer.events.kinds`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from evotrainer.events.base import Event

__all__ = ["SelfEvolveSetupEvent", "SelfEvolveSummaryEvent", "SelfEvolveTransferEvent"]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfEvolveTransferEvent(Event):
    """The base model vs the final adapter, both under the run's policy prompt, on the transfer items at the end of
    a self-evolution run (:mod:`evotrainer.selfevolve.transfer` builds and reads it; none when no item is scored)."""

    kind: ClassVar[str] = "selfevolve_transfer"
    version: int | None = None
    """Payload version (``selfevolve.transfer.PAYLOAD_VERSION``)."""
    item_ids: tuple[str, ...] = ()
    """Task ids of the transfer items, in scoring order."""
    groups: tuple[str, ...] = ()
    """Each item's cluster of the bootstrap (its group, ``Task.group``, e.g. the document a window
    is of; its own id when it has none)."""
    base_policy: str | None = None
    """The policy scored without adapter."""
    final_policy: str | None = None
    """The policy after the last round (the base itself when no round was kept)."""
    final_adapter: str | None = None
    """Its adapter folder relative to the run folder, None without one."""
    base_values: tuple[float, ...] = ()
    """S_val of each item without adapter, in [0, 1] (a failed item counts 0.0)."""
    final_values: tuple[float, ...] = ()
    """S_val of each item with the final adapter, same order."""
    comparison: Mapping[str, Any] | None = None
    """``final − base``: ``base_mean``, ``final_mean``, ``diff`` (mean over clusters of the per-cluster mean
    difference), ``low``, ``high`` (percentile interval of a cluster bootstrap), ``share_better``, ``clusters``,
    ``wins``, ``losses``, ``ties`` (per item), ``level``; None when nothing was compared."""
    verdict: str | None = None
    """One line: the difference with its interval and what it shows."""
