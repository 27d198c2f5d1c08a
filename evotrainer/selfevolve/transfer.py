"""Does the trained adapter help on real items no round used? The base model vs the final adapter at a run's end.

At the end of ``mode=selfevolve`` the run's policy prompt is scored twice on the transfer items
(``task.transfer_path``, real items of other groups than the meta-validation set and the training items; the
first ``selfevolve.transfer_limit``): without any adapter (the *base*) and with the adapter of the last kept round
(the *final* policy; the base itself when no round was kept). Greedy decoding, the family's fixed metric (S_val
per item in [0, 1], higher is better, a failed item 0.0), one batched call.

The comparison is ``final − base`` item by item: the mean over clusters of each cluster's mean difference, where a
cluster is an item's group (``Task.group``: e.g. the windows of one document; an item without a group is its own
cluster), with the percentile interval of a cluster bootstrap over groups
(:func:`evotrainer.stats.bootstrap.cluster_difference`; windows of one document are not independent, Davison &
Hinkley 1997, sec. 3.8), and wins / losses / ties counted per item (:func:`evotrainer.stats.bootstrap.tally`).
Pure apart from :func:`score_transfer` (the evaluator and recorder, duck-typed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evotrainer.events.selfevolve import SelfEvolveTransferEvent
from evotrainer.genome import Policy
from evotrainer.stats.bootstrap import PairedDifference, cluster_difference, item_values, rng_for
from evotrainer.stats.generalisation import format_diff
from evotrainer.tasks.base import Task

__all__ = ["PAYLOAD_VERSION", "AdapterTransfer", "base_policy", "compare_adapter", "from_event", "score_transfer",
           "to_event"]

PAYLOAD_VERSION = 1


@dataclass(frozen=True)
class AdapterTransfer:
    """``final − base`` on the transfer items.

    Attributes:
        item_ids: task ids, shape (n,).
        groups: each item's cluster (its group, else its id), shape (n,).
        base_id / final_id: the policies compared (equal ids or genomes: no adapter was kept).
        base_values / final_values: S_val per item in [0, 1], shape (n,).
        diff: the cluster bootstrap of ``final − base`` (``diff.n``: clusters).
        wins / losses / ties: items where the final adapter scores higher / lower / the same.
        same: the final policy is the base (no round kept): nothing to compare.
        level: interval coverage in (0, 1).
    """

    item_ids: tuple[str, ...]
    groups: tuple[str, ...]
    base_id: str
    final_id: str
    base_values: tuple[float, ...]
    final_values: tuple[float, ...]
    diff: PairedDifference
    wins: int
    losses: int
    ties: int
    same: bool = False
    level: float = 0.95

    @property
    def base_mean(self) -> float:
        """Mean S_val of the base over the items, in [0, 1]."""
        return float(np.mean(self.base_values)) if self.base_values else 0.0

    @property
    def final_mean(self) -> float:
        """Mean S_val of the final adapter over the items, in [0, 1]."""
        return float(np.mean(self.final_values)) if self.final_values else 0.0

    @property
    def verdict(self) -> str:
        """One line: the means, ``final − base`` with its interval, W/L/T and what it shows."""
        n, k = len(self.item_ids), self.diff.n
        head = (f"transfer ({n} items of {k} groups): base {self.base_mean:.4f}, final adapter {self.final_mean:.4f}; "
                f"final − base {format_diff(self.diff)} ({self.level:.0%} interval, bootstrap over groups), "
                f"W/L/T {self.wins}/{self.losses}/{self.ties}")
        if self.same:
            return head + ": no round was kept, the final policy is the base"
        if self.diff.n < 2:
            return head + ": one group, no interval"
        if self.diff.low > 0:
            return head + ": the adapter helps"
        if self.diff.high < 0:
            return head + ": the adapter hurts"
        return head + ": no difference shown (the interval holds 0)"


def base_policy(policy: Policy) -> Policy:
    """``policy`` without adapter: the policy itself when it has none, else a copy with id ``<id>+base``."""
    if policy.adapter is None:
        return policy
    return Policy(id=f"{policy.id}+base", sections=policy.sections, parent_ids=(policy.id,), operator="no_adapter",
                  generation=policy.generation, root_id=policy.root_id or policy.id, adapter=None,
                  decoding=policy.decoding)


def compare_adapter(
    item_ids: Sequence[str], groups: Sequence[str | None], base: Sequence[float | None],
    final: Sequence[float | None], *, base_id: str, final_id: str, seed: int, same: bool | None = None,
    level: float = 0.95, n_resamples: int = 2000,
) -> AdapterTransfer:
    """Compare ``final − base`` per item, clustered by group (module docstring).

    Args:
        item_ids: task ids, shape (n,), n >= 1.
        groups: each item's group (None: the item is its own cluster), shape (n,).
        base / final: per-item S_val in [0, 1], shape (n,); None or non-finite counts 0.0 (a failed item).
        base_id / final_id: the policies' ids.
        seed: the run's root seed (the bootstrap generator is ``rng_for(seed, "selfevolve_transfer", base_id,
            final_id)``).
        same: the final policy is the base; None: the ids are compared.
        level: interval coverage in (0, 1); n_resamples: bootstrap resamples, >= 1.

    Raises:
        ValueError: no item, or the lengths differ.
    """
    n = len(item_ids)
    if n == 0 or not len(groups) == len(base) == len(final) == n:
        raise ValueError(f"compare_adapter: {n} items, {len(groups)} groups, {len(base)} base and {len(final)} "
                         "final values (expected equal and >= 1)")
    b, f = item_values(base), item_values(final)
    clusters = tuple(str(g) if g is not None else f"item:{i}" for g, i in zip(groups, item_ids, strict=True))
    d = np.asarray(f) - np.asarray(b)  # (n,)
    pooled = cluster_difference([(clusters, d)], rng=rng_for(seed, "selfevolve_transfer", base_id, final_id),
                                level=level, n_resamples=n_resamples)
    assert pooled is not None  # one run given
    return AdapterTransfer(tuple(str(i) for i in item_ids), clusters, base_id, final_id, b, f, pooled.diff,
                           pooled.wins, pooled.losses, pooled.ties, base_id == final_id if same is None else same,
                           float(level))


def to_event(t: AdapterTransfer, final_adapter: str | None) -> SelfEvolveTransferEvent:
    """The archive's ``selfevolve_transfer`` event of ``t`` (every number shown plus the per-item values)."""
    return SelfEvolveTransferEvent(
        version=PAYLOAD_VERSION, item_ids=t.item_ids, groups=t.groups, base_policy=t.base_id, final_policy=t.final_id,
        final_adapter=final_adapter, base_values=t.base_values, final_values=t.final_values,
        comparison={"base_mean": t.base_mean, "final_mean": t.final_mean, "diff": t.diff.mean, "low": t.diff.low,
                    "high": t.diff.high, "share_better": t.diff.share_b_better, "clusters": t.diff.n,
                    "wins": t.wins, "losses": t.losses, "ties": t.ties, "same": t.same, "level": t.level},
        verdict=t.verdict)


def from_event(e: SelfEvolveTransferEvent) -> AdapterTransfer:
    """The comparison :func:`to_event` stored. Raises ValueError when its ``comparison`` is missing or malformed."""
    c = e.comparison
    try:
        if c is None:
            raise KeyError("comparison")
        diff = PairedDifference(float(c["diff"]), float(c["low"]), float(c["high"]), float(c["share_better"]),
                                int(c["clusters"]))
        return AdapterTransfer(e.item_ids, e.groups, str(e.base_policy), str(e.final_policy), e.base_values,
                               e.final_values, diff, int(c["wins"]), int(c["losses"]), int(c["ties"]),
                               bool(c.get("same", False)), float(c.get("level", 0.95)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"selfevolve_transfer event: the comparison is malformed ({type(exc).__name__}: {exc})"
                         ) from None


def score_transfer(evaluator: Any, rec: Any, start: Policy, final: Policy, items: Sequence[Task], *, seed: int,
                   final_adapter: str | None) -> AdapterTransfer | None:
    """Score the base (``start`` without adapter) and ``final`` on ``items`` in one batched call
    (``evaluator.meta_evaluate``; one rollout per distinct genome), archive both evaluations (kind
    ``meta_transfer``) and the ``selfevolve_transfer`` event (``rec.meta``, ``rec.emit``), and return the comparison;
    None, with nothing scored, when ``items`` is empty.

    Args:
        evaluator: a :class:`~evotrainer.rollout.RolloutEvaluator` (greedy, the family's metric).
        rec: the run's :class:`~evotrainer.archive.recorder.RunRecorder` (``policies``, ``meta``, ``emit``).
        start: the run's starting policy (its prompt; its adapter, if any, is left out).
        final: the policy after the last round.
        items: the transfer items.
        seed: the run's root seed.
        final_adapter: ``final``'s adapter folder as archived (relative to the run folder), for the event.
    """
    if not items:
        return None
    base = base_policy(start)
    if base is not start:
        rec.policies([base])
    evals = evaluator.meta_evaluate([base, final], list(items))
    for e in evals if final.genome_hash != base.genome_hash else evals[:1]:
        rec.meta(e, kind="meta_transfer")
    result = compare_adapter([t.task_id for t in items], [t.group for t in items], list(evals[0].per_item),
                             list(evals[1].per_item), base_id=base.id, final_id=final.id, seed=seed,
                             same=final.genome_hash == base.genome_hash)
    rec.emit(to_event(result, final_adapter))
    return result
