"""Fixed splits of the meta-validation set: selection vs held-out, and the screening subset.

* :func:`split_validation` holds out a share of the items for the final report only: no selection
  (screening, promotion, rollback, early stopping) ever sees them. The split is stratified by
  transcript length: items are ranked by (word count, task id) and every ``1/share``-th rank, offset
  by half a stride, is held out (with 44 items and share 0.25: ranks 2, 6, 10, ..., 42). It depends
  only on the items, never on a seed or the file order.
* :func:`screening_subset` picks a fixed subset of the selection items, stratified the same way, on
  which every harness candidate is screened.

Reporting the final best on the held-out part next to its selection score makes the winner's-curse
inflation of selecting on a finite set visible (the best of many noisy scores is biased upward).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from evotrainer.errors import ConfigError
from evotrainer.tasks.base import MeetingTask

__all__ = ["screening_subset", "split_validation"]


def _ranked(items: Sequence[MeetingTask]) -> list[MeetingTask]:
    return sorted(items, key=lambda t: (len(t.transcript.split()), t.task_id))


def split_validation(
    items: Sequence[MeetingTask], heldout_share: float
) -> tuple[list[MeetingTask], list[MeetingTask]]:
    """Split into (selection, held-out), both in the input order.

    Args:
        items: the meta-validation set.
        heldout_share: in [0, 1); ``round(n * share)`` items are held out (0 -> none).

    Raises:
        ConfigError: the share is outside [0, 1) or leaves no selection item (key
            ``outer.heldout_share``).
    """
    if not (math.isfinite(heldout_share) and 0 <= heldout_share < 1):
        raise ConfigError(f"config key 'outer.heldout_share': expected a value in [0, 1), got {heldout_share!r}")
    n = len(items)
    n_held = int(math.floor(n * heldout_share + 0.5))
    if n_held == 0:
        return list(items), []
    if n - n_held < 1:
        raise ConfigError(f"config key 'outer.heldout_share': {heldout_share} of {n} item(s) leaves no "
                          "item to select on")
    ranked = _ranked(items)
    stride = n / n_held
    held_ids = {id(ranked[min(n - 1, int((i + 0.5) * stride))]) for i in range(n_held)}
    return [t for t in items if id(t) not in held_ids], [t for t in items if id(t) in held_ids]


def screening_subset(items: Sequence[MeetingTask], k: int) -> list[MeetingTask]:
    """A fixed subset of ``k`` items stratified by transcript length (evenly spaced ranks).

    Deterministic: depends only on the items, so every candidate is screened on the same items.
    """
    if k >= len(items):
        return list(items)
    ranked = _ranked(items)
    picks = np.linspace(0, len(ranked) - 1, k).round().astype(int)
    return [ranked[i] for i in sorted(set(picks.tolist()))]
