"""Does the run's gain transfer? The final best, the best seed and a plain prompt on real items no selection used.

DESIGN (turn 3): a gain counts only when it transfers to real items no selection used, against a plain
prompt too. The held-out comparison (:mod:`evotrainer.stats.generalisation`) draws from the meta-validation pool;
this one scores, at the end of ``mode=evolve`` and in one batched call, the final best, the best seed and a
*plain prompt* (``task.plain_prompt`` as its whole system prompt) on ``task.transfer_path``'s items, and
compares pairs item by item: mean difference, paired percentile bootstrap interval (Efron & Tibshirani 1993,
ch. 16; :func:`evotrainer.stats.bootstrap.paired_difference`), wins, losses, ties. Verdict: "gain transfers"
only when the lower bounds of ``final best − best seed`` and ``final best − plain prompt`` are both above 0,
else "no transfer gain shown: ..." naming what does not hold; a final best that is the best seed has no
evolved gain to transfer (still compared with the plain prompt). S_val in [0, 1], higher is better; a failed
item counts 0.0. Pure apart from :func:`score_transfer` (the objective's screening and recorder, duck-typed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evotrainer.events.transfer import TransferEvent
from evotrainer.genome import Policy
from evotrainer.stats.bootstrap import PairedDifference, item_values, paired_difference, rng_for, tally
from evotrainer.stats.generalisation import format_diff

__all__ = ["LABELS", "PAYLOAD_VERSION", "ROLES", "TransferComparison", "TransferReport", "compare_transfer",
           "from_event", "plain_policy", "read_report", "score_transfer", "to_event"]

PAYLOAD_VERSION = 1
ROLES = ("final_best", "best_seed", "plain_prompt")
LABELS = {"final_best": "final best", "best_seed": "best seed", "plain_prompt": "plain prompt"}
_PAIRS = (("final_best", "best_seed"), ("final_best", "plain_prompt"), ("best_seed", "plain_prompt"))
_HEADLINE = _PAIRS[:2]  # the verdict needs both lower bounds above 0


@dataclass(frozen=True)
class TransferComparison:
    """``a − b`` on the transfer items, paired. ``a``, ``b``: roles (keys of :data:`LABELS`); ``diff``: the
    paired bootstrap of ``a − b`` (positive: ``a`` scores higher); wins / losses / ties counted for ``a``."""

    a: str
    b: str
    diff: PairedDifference
    wins: int
    losses: int
    ties: int

    @property
    def label(self) -> str:
        return f"{LABELS.get(self.a, self.a)} − {LABELS.get(self.b, self.b)}"


@dataclass(frozen=True)
class TransferReport:
    """The transfer report of one run. ``values``: shape (n_roles, n_items), S_val per item in [0, 1], rows in
    ``roles`` order, columns in ``item_ids`` order. ``transfers``: the verdict's yes/no."""

    item_ids: tuple[str, ...]
    roles: tuple[str, ...]
    policy_ids: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]
    comparisons: tuple[TransferComparison, ...]
    verdict: str
    transfers: bool
    level: float = 0.95

    @property
    def means(self) -> tuple[float, ...]:
        return tuple(float(np.mean(v)) if v else 0.0 for v in self.values)


def _why(d: PairedDifference) -> str:
    return "worse" if d.high < 0 else "no gain" if d.mean <= 0 else "its interval reaches 0"


def _verdict(comps: Sequence[TransferComparison], same: bool) -> tuple[bool, str]:
    by = {(c.a, c.b): c for c in comps}
    plain = by.get(("final_best", "plain_prompt"))
    if same:
        vs = ("no plain prompt to compare with" if plain is None else
              f"against the plain prompt {format_diff(plain.diff)}"
              f"{'' if plain.diff.low > 0 else f' ({_why(plain.diff)})'}")
        return False, f"no transfer gain shown: the final best is the best seed (no evolved gain to transfer); {vs}"
    head = [c for c in comps if (c.a, c.b) in _HEADLINE]
    failing = [c for c in head if not c.diff.low > 0]
    tail = "" if plain is not None else " (no plain prompt compared: task.plain_prompt is null)"
    if not failing:
        return True, "gain transfers: " + "; ".join(f"{c.label} {format_diff(c.diff)}" for c in head) + tail
    return False, ("no transfer gain shown: "
                   + "; ".join(f"{c.label} {format_diff(c.diff)} ({_why(c.diff)})" for c in failing) + tail)


def compare_transfer(
    policy_ids: Mapping[str, str], values: Mapping[str, Sequence[float | None]], item_ids: Sequence[str], *,
    seed: int, same: bool | None = None, level: float = 0.95, n_resamples: int = 2000,
) -> TransferReport:
    """Compare the roles pairwise on the same items and give the verdict (module docstring).

    Args:
        policy_ids: role -> policy id; ``final_best`` and ``best_seed`` required, ``plain_prompt`` optional.
        values: role -> per-item S_val, shape (n_items,), in [0, 1]; None or NaN counts 0.0 (a failed item).
        item_ids: task ids of the items, in the same order.
        seed: the run's root seed (bootstrap generators ``rng_for(seed, "transfer", a_id, b_id)``).
        same: the final best is the best seed (same genome); None: the ids are compared.
        level: interval coverage in (0, 1); n_resamples: bootstrap resamples, >= 1.

    Raises ValueError when a required role is missing or a vector's length differs from ``item_ids``.
    """
    if "final_best" not in policy_ids or "best_seed" not in policy_ids:
        raise ValueError("compare_transfer: final_best and best_seed are required")
    roles = tuple(r for r in ROLES if r in policy_ids)
    vecs = {r: item_values(values[r]) for r in roles}
    if any(len(v) != len(item_ids) for v in vecs.values()):
        raise ValueError(f"compare_transfer: {[len(v) for v in vecs.values()]} values for {len(item_ids)} items")
    same = policy_ids["final_best"] == policy_ids["best_seed"] if same is None else same
    comps = []
    for a, b in _PAIRS:
        if a not in vecs or b not in vecs or (same and "best_seed" in (a, b)):
            continue
        rng = rng_for(seed, "transfer", policy_ids[a], policy_ids[b])
        diff = paired_difference(vecs[b], vecs[a], rng=rng, n_resamples=n_resamples, level=level)  # a − b
        comps.append(TransferComparison(a, b, diff, *tally(np.asarray(vecs[a]) - np.asarray(vecs[b]))))
    transfers, verdict = _verdict(comps, same)
    return TransferReport(tuple(str(i) for i in item_ids), roles, tuple(policy_ids[r] for r in roles),
                          tuple(vecs[r] for r in roles), tuple(comps), verdict, transfers, float(level))


# --- archive event ------------------------------------------------------------------------------------


def to_event(r: TransferReport) -> TransferEvent:
    """The archive's ``transfer`` event of ``r`` (every number shown plus the per-item values)."""
    comps = tuple({"a": c.a, "b": c.b, "diff": c.diff.mean, "low": c.diff.low, "high": c.diff.high,
                   "share_better": c.diff.share_b_better, "n": c.diff.n, "wins": c.wins, "losses": c.losses,
                   "ties": c.ties, "level": r.level} for c in r.comparisons)
    return TransferEvent(version=PAYLOAD_VERSION, item_ids=r.item_ids, roles=r.roles, policy_ids=r.policy_ids,
                         means=r.means, values=r.values, comparisons=comps, level=r.level,
                         transfers=r.transfers, verdict=r.verdict)


def from_event(e: TransferEvent) -> TransferReport:
    """The report stored by :func:`to_event` (verdict as stored). Raises ValueError on a malformed comparison."""
    try:
        comps = tuple(TransferComparison(str(c["a"]), str(c["b"]), PairedDifference(
            float(c["diff"]), float(c["low"]), float(c["high"]), float(c.get("share_better", 0.0)),
            int(c.get("n", len(e.item_ids)))), int(c["wins"]), int(c["losses"]), int(c["ties"]))
            for c in e.comparisons)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"transfer event: a comparison is malformed ({type(exc).__name__}: {exc})") from None
    return TransferReport(e.item_ids, e.roles, e.policy_ids, e.values, comps, e.verdict or "",
                          bool(e.transfers), e.level if e.level is not None else 0.95)


def read_report(rows: Sequence[Any]) -> tuple[TransferReport | None, str | None]:
    """(report, problem) from a run's ``transfer`` event rows (``store.events(run_id, kind="transfer")``):
    the last one, or None with no problem when there is none, or None and a one-line problem when unreadable."""
    if not rows:
        return None, None
    try:
        return from_event(rows[-1].event), None
    except ValueError as exc:  # DataError is a ValueError
        return None, f"the transfer event could not be read: {exc}"


def plain_policy(text: str | None) -> Policy | None:
    """The plain-prompt policy: ``text`` as its whole system prompt (empty format and rules), or None."""
    return Policy.seed("plain_prompt", {"role": text.strip(), "format": "", "rules": ""}) if text and text.strip() else None


def score_transfer(screening: Any, rec: Any, best: Policy, seed_policy: Policy, plain_text: str | None,
                   items: Sequence[Any], *, seed: int, outer_generation: int) -> TransferReport | None:
    """Score the final best, the best seed and the plain prompt on ``items`` in one batched call
    (``screening.meta_many``, archived as ``meta_transfer``; one rollout per distinct genome), compare them
    and archive a ``transfer`` event (``rec.emit``). None, with nothing scored, when ``items`` is empty."""
    if not items:
        return None
    plain = plain_policy(plain_text)
    roles = {"final_best": best, "best_seed": seed_policy, **({"plain_prompt": plain} if plain else {})}
    rec.policies([plain] if plain else [])  # archived like any policy (``archive policy plain_prompt``)
    distinct: dict[str, Policy] = {}
    for p in roles.values():
        distinct.setdefault(p.genome_hash, p)  # one rollout per genome, archived under its first role's id
    evals = screening.meta_many(list(distinct.values()), items, "meta_transfer", None, outer_generation,
                                words="transfer set:")
    by_hash = {e.genome_hash: list(e.per_item) for e in evals}
    values = {r: by_hash.get(p.genome_hash, [None] * len(items)) for r, p in roles.items()}
    report = compare_transfer({r: p.id for r, p in roles.items()}, values, [t.task_id for t in items], seed=seed,
                              same=best.genome_hash == seed_policy.genome_hash)
    rec.emit(to_event(report))
    return report
