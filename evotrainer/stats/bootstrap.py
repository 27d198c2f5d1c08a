"""Statistics over items: which values count (:func:`finite`, :func:`item_values`), the mean and its standard error
(:func:`mean_stderr`, every S_val and race bound), and the bootstrap of every report (``mode=evaluate``, generalisation, transfer, the ablation): intervals over items, paired
differences, per-group means.

Percentile bootstrap (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 13): resample
items with replacement, take the mean of each resample, read the interval off the quantiles. A paired
difference resamples the same item indices for both policies (ch. 16's paired design), so the
interval reflects the per-item differences, not two independent spreads. Every function takes its
random generator; :func:`rng_for` derives one from the run seed and a label, so an interval does
not depend on which other policies were evaluated in the same run.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TIE", "ClusterDifference", "GroupScore", "PairedDifference", "bootstrap_interval", "cluster_difference",
           "finite", "group_scores", "item_values", "mean_stderr", "paired_difference", "rng_for", "tally"]

TIE = 1e-12
"""A per-item difference with ``|d|`` at or below this is a tie (identical outputs score identically)."""


def finite(x: Any) -> float | None:
    """``x`` as a float when it is a finite int or float (not a bool), else None: the one check that a score,
    an estimate or a knob value is usable (None, NaN and infinities count as failed or unknown)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def item_values(values: Sequence[float | None]) -> tuple[float, ...]:
    """Per-item scores as S_val counts them: a failed (None) or non-finite item is 0.0."""
    return tuple(finite(v) or 0.0 for v in values)


def mean_stderr(values: Sequence[float]) -> tuple[float, float | None]:
    """``(mean, standard error)`` of per-item ``values``, shape (n,), finite: the error is the sample standard
    deviation / sqrt(n), None below 2 items; the mean of no item is 0.0."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return 0.0, None
    return float(arr.mean()), (float(arr.std(ddof=1)) / math.sqrt(arr.size) if arr.size >= 2 else None)


def rng_for(seed: int, *labels: str) -> np.random.Generator:
    """A generator determined by ``seed`` and ``labels`` only (SeedSequence of the seed and a label hash)."""
    digest = hashlib.sha256("\x1f".join(labels).encode("utf-8")).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([int(seed), *words]))


def bootstrap_interval(
    values: Sequence[float], *, rng: np.random.Generator, n_resamples: int = 2000, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over items.

    Args:
        values: per-item scores, shape (n,), each in [0, 1], higher is better.
        rng: explicit generator (reproducible intervals).
        n_resamples: bootstrap resamples, >= 1.
        level: coverage in (0, 1).

    Returns:
        (low, high) of the mean; (v, v) for a single item, (0, 0) for none.
    """
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        v = float(arr.mean()) if arr.size else 0.0
        return v, v
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))  # (n_resamples, n)
    means = arr[idx].mean(axis=1)  # (n_resamples,)
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


@dataclass(frozen=True)
class PairedDifference:
    """Mean of ``b - a`` over the same items, with its paired bootstrap interval.

    Attributes:
        mean: mean difference in score units (positive: ``b`` scores higher).
        low: lower end of the interval.
        high: upper end.
        share_b_better: share of resamples whose mean difference is > 0, in [0, 1] (a bootstrap
            estimate of how often ``b`` beats ``a``; not a p-value).
        n: items paired.
    """

    mean: float
    low: float
    high: float
    share_b_better: float
    n: int


def paired_difference(
    a: Sequence[float], b: Sequence[float], *, rng: np.random.Generator, n_resamples: int = 2000,
    level: float = 0.95,
) -> PairedDifference:
    """Paired percentile bootstrap of ``mean(b) - mean(a)`` over items (same indices for both).

    Args:
        a: per-item scores of the reference policy, shape (n,).
        b: per-item scores of the other policy on the same items, shape (n,).
        rng: explicit generator.
        n_resamples: resamples, >= 1.
        level: coverage in (0, 1).

    Raises:
        ValueError: lengths differ.
    """
    arr_a, arr_b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if arr_a.shape != arr_b.shape:
        raise ValueError(f"paired_difference: {arr_a.size} vs {arr_b.size} items")
    diff = arr_b - arr_a  # (n,)
    if diff.size == 0:
        return PairedDifference(0.0, 0.0, 0.0, 0.0, 0)
    if diff.size == 1:
        d = float(diff[0])
        return PairedDifference(d, d, d, float(d > 0), 1)
    idx = rng.integers(0, diff.size, size=(n_resamples, diff.size))  # (n_resamples, n)
    means = diff[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return PairedDifference(float(diff.mean()), float(np.quantile(means, alpha)),
                            float(np.quantile(means, 1 - alpha)), float((means > 0).mean()), int(diff.size))


@dataclass(frozen=True)
class GroupScore:
    """Mean score of one policy on one group of items (a source, a domain, a length bucket).

    Attributes:
        kind: the stratum kind ("all", "source", "domain", "length").
        group: the group label.
        n: items in the group.
        mean: mean score in [0, 1], higher is better.
        low: bootstrap interval low.
        high: bootstrap interval high.
    """

    kind: str
    group: str
    n: int
    mean: float
    low: float
    high: float


def group_scores(
    values: Sequence[float],
    labels: Sequence[Mapping[str, str]],
    *,
    kinds: Sequence[str],
    order: Mapping[str, Sequence[str]] | None = None,
    seed: int = 0,
    name: str = "",
    n_resamples: int = 2000,
    level: float = 0.95,
) -> list[GroupScore]:
    """Per-group means with bootstrap intervals, for each stratum kind.

    Args:
        values: per-item scores, shape (n,), in [0, 1].
        labels: per-item stratum labels (``{"source": ..., "length": ...}``), shape (n,).
        kinds: stratum kinds to group by, in output order; an item whose label is "" is left out of
            that kind.
        order: group order per kind (groups not listed follow, sorted); default sorted.
        seed: run seed; each group's generator is :func:`rng_for(seed, name, kind, group)`.
        name: the policy's label (part of the generator's identity).
        n_resamples: bootstrap resamples.
        level: interval coverage.

    Returns:
        One :class:`GroupScore` per (kind, group) that holds at least one item.

    Raises:
        ValueError: ``values`` and ``labels`` differ in length.
    """
    if len(values) != len(labels):
        raise ValueError(f"group_scores: {len(values)} values for {len(labels)} items")
    out: list[GroupScore] = []
    for kind in kinds:
        groups: dict[str, list[float]] = {}
        for value, lab in zip(values, labels, strict=True):
            key = lab.get(kind, "")
            if key:
                groups.setdefault(key, []).append(float(value))
        preferred = [g for g in (order or {}).get(kind, ()) if g in groups]
        for group in preferred + sorted(g for g in groups if g not in preferred):
            vals = groups[group]
            lo, hi = bootstrap_interval(vals, rng=rng_for(seed, name, kind, group), n_resamples=n_resamples,
                                        level=level)
            out.append(GroupScore(kind, group, len(vals), float(np.mean(vals)), lo, hi))
    return out


def tally(d: Sequence[float] | np.ndarray) -> tuple[int, int, int]:
    """``(wins, losses, ties)`` of per-item differences ``d``, shape (n,): above :data:`TIE`, below ``-TIE``,
    in between."""
    arr = np.asarray(d, dtype=float)
    wins, losses = int((arr > TIE).sum()), int((arr < -TIE).sum())
    return wins, losses, arr.size - wins - losses


@dataclass(frozen=True)
class ClusterDifference:
    """Per-item differences of several runs pooled by a cluster bootstrap over items (:func:`cluster_difference`).

    Attributes:
        diff: mean over items of each item's difference averaged over the runs that scored it, with the
            percentile interval of resampling items (``diff.n``: distinct items, the clusters).
        runs: runs pooled.
        pairs: (run, item) differences pooled.
        wins, losses, ties: (run, item) differences as :func:`tally` counts them, summed over runs.
    """

    diff: PairedDifference
    runs: int
    pairs: int
    wins: int
    losses: int
    ties: int


def cluster_difference(runs: Sequence[tuple[Sequence[str], Sequence[float]]], *, rng: np.random.Generator,
                       level: float = 0.95, n_resamples: int = 2000) -> ClusterDifference | None:
    """Pool per-item differences ``a − b`` of several runs (a sweep over seeds) by a cluster bootstrap by item.

    Runs of one setup repeat the same items, so their differences are not independent; resampling
    (run, item) pairs would give an interval too narrow by about sqrt(runs) when seeds agree. Instead each
    item's difference is averaged over the runs that scored it and the items are resampled with replacement
    (Davison & Hinkley 1997, *Bootstrap Methods and their Application*, sec. 3.8; Field & Welsh 2007;
    percentile interval as :func:`paired_difference`). Items weigh equally, whatever number of runs scored them.

    Args:
        runs: one ``(item_ids, differences)`` per run, both shape (n_items,); runs of one setup share item ids
            (an id seen in one run only is a cluster of one run).
        rng: the bootstrap generator (e.g. :func:`rng_for`).
        level: interval coverage in (0, 1); n_resamples: bootstrap resamples, >= 1.

    Returns:
        None when ``runs`` is empty.

    Raises:
        ValueError: a run's ids and differences differ in length.
    """
    by_item: dict[str, list[float]] = {}
    wins = losses = 0
    for ids, values in runs:
        d = np.asarray(values, dtype=float)  # (n_items,)
        w, lo, _ = tally(d)
        wins, losses = wins + w, losses + lo
        for item, x in zip(ids, d, strict=True):
            by_item.setdefault(str(item), []).append(float(x))
    if not runs:
        return None
    item_means = [float(np.mean(v)) for v in by_item.values()]  # (n_items,)
    diff = paired_difference([0.0] * len(item_means), item_means, rng=rng, n_resamples=n_resamples, level=level)
    pairs = sum(len(v) for v in by_item.values())
    return ClusterDifference(diff, len(runs), pairs, wins, losses, pairs - wins - losses)
