"""The ``transfer`` archive event (re-exported by :mod:`evotrainer.events.kinds`, which registers it).

The contract of :mod:`evotrainer.events.kinds` holds (frozen, slotted, every field defaulted so an older or
partial payload still reads, key order = field order). :mod:`evotrainer.stats.transfer` builds it (``to_event``) and reads it back (``from_event``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from evotrainer.events.base import Event

__all__ = ["TransferEvent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferEvent(Event):
    """The final best, the best seed and a plain prompt on real items no selection used (the transfer
    report, written after the ``generalisation`` event; none when ``task.transfer_path`` gives no items)."""

    kind: ClassVar[str] = "transfer"
    version: int | None = None
    """Payload version (``transfer.PAYLOAD_VERSION``)."""
    item_ids: tuple[str, ...] = ()
    """Task ids of the transfer items, in scoring order."""
    roles: tuple[str, ...] = ()
    """Which policy each column is: ``final_best``, ``best_seed``, ``plain_prompt`` (absent without one)."""
    policy_ids: tuple[str, ...] = ()
    """Policy id per role, same order."""
    means: tuple[float, ...] = ()
    """Mean S_val per role over the items, in [0, 1]."""
    values: tuple[tuple[float, ...], ...] = ()
    """Per role, the S_val of each item (same order as ``item_ids``; a failed item counts 0.0)."""
    comparisons: tuple[Mapping[str, Any], ...] = ()
    """Paired comparisons ``a − b``: ``a``, ``b`` (roles), ``diff`` (mean difference), ``low``, ``high`` (the
    percentile bootstrap interval), ``share_better``, ``n``, ``wins``, ``losses``, ``ties``, ``level``."""
    level: float | None = None
    """Interval coverage, in (0, 1)."""
    transfers: bool | None = None
    """True only when the lower bounds of ``final best − best seed`` and ``final best − plain prompt`` are > 0."""
    verdict: str | None = None
    """The verdict sentence ("gain transfers: ..." or "no transfer gain shown: ...")."""
