"""The transfer report pooled over runs (a sweep over seeds): does the gain transfer on average over the seeds?

Each run of one setup scores its final best, its best seed and the plain prompt on the same transfer items
(``task.transfer_path``; :mod:`evotrainer.stats.transfer`); for each pair ``a − b`` the runs' per-item differences
are pooled by :func:`evotrainer.stats.bootstrap.cluster_difference` (items keyed by task id).

A run whose final best is its best seed contributes ``final best − best seed`` = 0 on each item (evolution
gained nothing on that seed); leaving it out would bias the pool upward. Verdict, as for one run: "gain
transfers (pooled over N runs)" only when the pooled lower bounds of ``final best − best seed`` and
``final best − plain prompt`` are both above 0 (no run with a plain prompt: judged on the first alone, and
said so), else "no transfer gain shown: ..." naming what does not hold. S_val in [0, 1], higher is better.
Pure: reports in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evotrainer.stats.bootstrap import cluster_difference, rng_for
from evotrainer.stats.generalisation import format_diff
from evotrainer.stats.transfer import _HEADLINE, _PAIRS, LABELS, TransferReport, _why, read_report

__all__ = ["PooledComparison", "PooledTransfer", "pool_transfer", "read_run"]


@dataclass(frozen=True)
class PooledComparison:
    """``a − b`` pooled over runs; reads like a :class:`~evotrainer.stats.bootstrap.PairedDifference`.

    Attributes:
        a, b: roles (keys of :data:`evotrainer.stats.transfer.LABELS`); positive: ``a`` scores higher.
        label: "final best − best seed" etc.
        mean: mean over items of each item's difference averaged over runs, in [-1, 1].
        low, high: the cluster-bootstrap percentile interval.
        share_b_better: share of resamples with a mean > 0, in [0, 1] (not a p-value).
        n: distinct items (the resampled clusters).
        runs: runs that scored both roles.
        wins, losses, ties: (run, item) pairs where ``a`` scores higher, lower, the same (summed over runs).
    """

    a: str
    b: str
    label: str
    mean: float
    low: float
    high: float
    share_b_better: float
    n: int
    runs: int
    wins: int
    losses: int
    ties: int


@dataclass(frozen=True)
class PooledTransfer:
    """The transfer report of several runs. ``runs``: reports pooled; ``items``: distinct item ids;
    ``comparisons``: one per pair some run scored; ``transfers``: the verdict's yes/no; ``level``: coverage."""

    runs: int
    items: int
    comparisons: tuple[PooledComparison, ...]
    verdict: str
    transfers: bool
    level: float


def _pair(reports: Sequence[TransferReport], a: str, b: str, *, seed: int, level: float,
          n_resamples: int) -> PooledComparison | None:
    runs = [(r.item_ids, np.asarray(r.values[r.roles.index(a)]) - np.asarray(r.values[r.roles.index(b)]))
            for r in reports if a in r.roles and b in r.roles]
    pooled = cluster_difference(runs, rng=rng_for(seed, "transfer_pool", a, b), level=level, n_resamples=n_resamples)
    if pooled is None:
        return None
    d = pooled.diff
    return PooledComparison(a, b, f"{LABELS[a]} − {LABELS[b]}", d.mean, d.low, d.high, d.share_b_better, d.n,
                            pooled.runs, pooled.wins, pooled.losses, pooled.ties)


def pool_transfer(reports: Sequence[TransferReport], *, seed: int, level: float = 0.95,
                  n_resamples: int = 2000) -> PooledTransfer | None:
    """Pool the transfer reports of several runs (module docstring); None when ``reports`` is empty.

    Args:
        reports: one :class:`~evotrainer.stats.transfer.TransferReport` per run (``transfer.read_report``); runs of
            one setup share the items, keyed by task id (runs with other items add clusters, not pairs).
        seed: bootstrap seed; each pair's generator is ``rng_for(seed, "transfer_pool", a, b)``.
        level: interval coverage in (0, 1); n_resamples: bootstrap resamples, >= 1.
    """
    if not reports:
        return None
    kw = {"seed": seed, "level": level, "n_resamples": n_resamples}
    comps = tuple(c for a, b in _PAIRS if (c := _pair(reports, a, b, **kw)) is not None)
    head = [c for c in comps if (c.a, c.b) in _HEADLINE]
    failing = [c for c in head if not c.low > 0]
    where = f"pooled over {len(reports)} run{'s' if len(reports) != 1 else ''}"
    tail = "" if len(head) == len(_HEADLINE) else " (no plain prompt compared: no run has one)"
    if not failing:
        verdict = f"gain transfers ({where}): " + "; ".join(f"{c.label} {format_diff(c)}" for c in head) + tail
    else:
        verdict = ("no transfer gain shown: " + "; ".join(f"{c.label} {format_diff(c)} ({_why(c)})" for c in failing)
                   + f", {where}" + tail)
    items = len({i for r in reports for i in r.item_ids})
    return PooledTransfer(len(reports), items, comps, verdict, not failing, float(level))


def read_run(rows: Sequence[Any]) -> tuple[TransferReport | None, dict[str, Any] | None]:
    """(report, cell) from a run's ``transfer`` event rows: the report to pool (None when there is none or it
    is unreadable) and the run's JSON cell, ``{"transfers", "verdict", "items"}`` (``transfers`` None and the
    problem as ``verdict`` when unreadable), or None when the run has no transfer event."""
    report, problem = read_report(rows)
    if report is None:
        return None, None if problem is None else {"transfers": None, "verdict": problem, "items": 0}
    return report, {"transfers": report.transfers, "verdict": report.verdict, "items": len(report.item_ids)}
