"""Weight training pooled over runs: does the trained adapter beat the same prompt without it, over seeds?

A self-evolution run (``mode=selfevolve``) ends with its policy prompt scored on the transfer items without
adapter (the *base*) and with its final adapter; a distillation run (``mode=distill``) scores the student's short
prompt alone and with the adapter it trained. Either gives one S_val per item and arm (in [0, 1], higher is
better). Pooled over runs, ``adapter − base`` is a cluster bootstrap over groups (an item's group, e.g. the
document a window is cut from; else its id): each group's difference is averaged over its items and over the runs that
scored them, and the groups are resampled (:func:`evotrainer.stats.bootstrap.cluster_difference` keyed by group;
windows of one document are not independent, Davison & Hinkley 1997, sec. 3.8). A self-evolution run that kept no
round compares the base with itself and adds a difference of 0 on each item: leaving it out would bias the pool
upward. Verdict: "the adapter helps" only when the interval's lower bound is above 0. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evotrainer.stats.bootstrap import cluster_difference, rng_for
from evotrainer.stats.generalisation import format_diff

__all__ = ["AdapterRun", "PooledAdapter", "from_distill", "pool_adapters"]


@dataclass(frozen=True)
class AdapterRun:
    """One run's base and adapter arms on its comparison items.

    Attributes:
        run_id: the archive's run id.
        mode: ``"selfevolve"`` or ``"distill"``.
        seed: the run's root seed.
        base_id / adapter_id: the policies compared (the prompt alone; the prompt with the adapter).
        item_ids: task ids, shape (n,).
        groups: each item's cluster (its group, else its id), shape (n,).
        base_values / adapter_values: S_val per item in [0, 1], shape (n,).
    """

    run_id: str
    mode: str
    seed: int
    base_id: str
    adapter_id: str
    item_ids: tuple[str, ...]
    groups: tuple[str, ...]
    base_values: tuple[float, ...]
    adapter_values: tuple[float, ...]

    def __post_init__(self) -> None:
        n = len(self.item_ids)
        if not len(self.groups) == len(self.base_values) == len(self.adapter_values) == n:
            raise ValueError(f"run {self.run_id!r}: {n} items but {len(self.groups)} groups, "
                             f"{len(self.base_values)} base and {len(self.adapter_values)} adapter values")


@dataclass(frozen=True)
class PooledAdapter:
    """``adapter − base`` over runs (positive: the adapter scores higher).

    Attributes:
        runs: runs pooled; items: distinct item ids; groups: distinct groups (the resampled clusters).
        base_mean / adapter_mean: mean S_val over the runs' items, in [0, 1].
        mean: mean over groups of each group's mean difference, in [-1, 1]; low / high: its percentile interval.
        share_better: share of resamples with a mean > 0, in [0, 1] (not a p-value).
        wins / losses / ties: (run, item) pairs where the adapter scores higher / lower / the same.
        verdict: one line; helps: the interval's lower bound is above 0; level: coverage in (0, 1).
    """

    runs: int
    items: int
    groups: int
    base_mean: float
    adapter_mean: float
    mean: float
    low: float
    high: float
    share_better: float
    wins: int
    losses: int
    ties: int
    verdict: str
    helps: bool
    level: float

    @property
    def n(self) -> int:
        """Clusters resampled (for :func:`~evotrainer.stats.generalisation.format_diff`)."""
        return self.groups


def pool_adapters(runs: Sequence[AdapterRun], *, seed: int, level: float = 0.95,
                  n_resamples: int = 2000) -> PooledAdapter | None:
    """Pool ``adapter − base`` over ``runs`` (module docstring); None when ``runs`` is empty.

    Args:
        runs: one :class:`AdapterRun` per run; runs of one setup share the items and their groups.
        seed: bootstrap seed (the generator is ``rng_for(seed, "adapter_pool")``).
        level: interval coverage in (0, 1); n_resamples: bootstrap resamples, >= 1.
    """
    if not runs:
        return None
    pairs = [(r.groups, np.asarray(r.adapter_values, float) - np.asarray(r.base_values, float)) for r in runs]
    pooled = cluster_difference(pairs, rng=rng_for(seed, "adapter_pool"), level=level, n_resamples=n_resamples)
    if pooled is None:
        return None
    d = pooled.diff
    base_values = [v for r in runs for v in r.base_values]
    adapter_values = [v for r in runs for v in r.adapter_values]
    base = float(np.mean(base_values)) if base_values else 0.0
    adapter = float(np.mean(adapter_values)) if adapter_values else 0.0
    where = f"pooled over {len(runs)} run{'s' if len(runs) != 1 else ''}, {d.n} groups"
    head = (f"adapter − base {format_diff(d)} ({where}, {level:.0%} interval), W/L/T "
            f"{pooled.wins}/{pooled.losses}/{pooled.ties}")
    if d.n < 2:
        tail = ": one group, no interval"
    elif d.low > 0:
        tail = ": the adapter helps"
    elif d.high < 0:
        tail = ": the adapter hurts"
    else:
        tail = ": no difference shown (the interval holds 0)"
    return PooledAdapter(len(runs), len({i for r in runs for i in r.item_ids}), d.n, base, adapter, d.mean, d.low,
                         d.high, d.share_b_better, pooled.wins, pooled.losses, pooled.ties, head + tail,
                         d.n >= 2 and d.low > 0, float(level))


def from_distill(doc: Mapping[str, Any]) -> AdapterRun:
    """The student with and without its adapter from a ``mode=distill`` result file's document.

    The base arm is the student's short prompt alone: the ``student_prompt`` arm, or the arm of the same policy
    (the plain prompt or the teacher) when the run scored that prompt under another role.

    Raises:
        ValueError: the document lacks the student, its prompt's arm or the per-item values.
    """
    try:
        arms, student_prompt = doc["arms"], doc["student_prompt"]
        if "student" not in arms:
            raise ValueError("no 'student' arm")
        base_role = "student_prompt" if "student_prompt" in arms else next(
            (r for r, a in arms.items() if r != "student" and a.get("policy_id") == student_prompt), None)
        if base_role is None:
            raise ValueError(f"no arm scores the student's prompt {student_prompt!r} alone")
        items = doc["items"]
        return AdapterRun(
            run_id=str(doc["run_id"]), mode="distill", seed=int(doc["seed"]), base_id=str(arms[base_role]["policy_id"]),
            adapter_id=str(arms["student"]["policy_id"]), item_ids=tuple(str(i["id"]) for i in items),
            groups=tuple(str(i.get("group") or i["id"]) for i in items),
            base_values=tuple(float(i.get(base_role) or 0.0) for i in items),
            adapter_values=tuple(float(i.get("student") or 0.0) for i in items))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a distill result document: missing {exc}") from None
