"""Racing: decide between policies on growing item sets, from paired evidence only.

A promotion (a candidate's policy replacing the incumbent) is a *selection*, decided from paired
evidence: both policies on the same items, the per-item differences ``candidate - reference``, and a
one-sided Student-t bound on their mean (the paired t-test; Student 1908). The candidate is
*confidently better* when the lower bound at ``level`` is above 0, *confidently worse* when the upper
bound at ``drop_level`` is below 0, undecided otherwise. The run's *claim* is made elsewhere: the
held-out comparison at its end, on items no race used.

:func:`run_race` spends evaluations where the decision is close. Racing (Maron & Moore 1997,
"The racing algorithm: model selection for lazy learners"; Birattari et al. 2002, F-Race; the
paired t-test variant of irace, López-Ibáñez et al. 2016) evaluates all candidates on a first,
small item set, drops every candidate that is already confidently worse than the reference, and
continues the others on more items, up to the whole selection set. On top of that, only the best
``survivors`` candidates by paired mean go on after each stage (successive halving's cut, Jamieson
& Talwalkar 2016): one harness candidate promotes at most one policy, so paying for a second one on
every item buys nothing. With ``futility`` set, a candidate whose paired mean is at or below it
after a stage that is not the last also stops (a non-binding futility stop, as in group-sequential
trials, Jennison & Turnbull 2000, ch. 10): its estimated effect points the wrong way, so it is very
unlikely to reach a lower bound above 0 on the remaining items, and every item costs a rollout.
The reference (the incumbent) is already scored on every item.

All functions are pure; scores are higher-is-better per-item values (S_val items, in [0, 1]).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from evotrainer.stats.bootstrap import mean_stderr

__all__ = ["PairedBound", "Race", "RaceEntry", "paired_bound", "race_stages", "run_race"]


@dataclass(frozen=True)
class PairedBound:
    """One-sided bounds on the mean per-item difference ``candidate - reference``.

    Attributes:
        mean: mean difference (S_val units; positive: the candidate scores higher).
        low: lower bound at the level asked for (-inf with fewer than 2 items).
        high: upper bound at the level asked for (+inf with fewer than 2 items).
        n: items paired.
        wins: items where the candidate scores higher.
        losses: items where it scores lower.
        ties: items where both score the same.
    """

    mean: float
    low: float
    high: float
    n: int
    wins: int
    losses: int
    ties: int

    @property
    def better(self) -> bool:
        """Confidently better: the lower bound is above 0."""
        return self.low > 0

    @property
    def worse(self) -> bool:
        """Confidently worse: the upper bound is below 0."""
        return self.high < 0

    def as_dict(self) -> dict[str, float | int | None]:
        """JSON-safe (infinite bounds become None)."""
        def f(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {"mean": f(self.mean), "low": f(self.low), "high": f(self.high), "n": self.n, "wins": self.wins,
                "losses": self.losses, "ties": self.ties}


def paired_bound(reference: Sequence[float], candidate: Sequence[float], level: float = 0.95) -> PairedBound:
    """Paired one-sided Student-t bounds on ``mean(candidate - reference)``.

    Args:
        reference: per-item scores of the reference policy, shape (n,).
        candidate: per-item scores of the candidate on the same items, same order, shape (n,).
        level: one-sided confidence of each bound, in (0.5, 1). ``low`` is the bound the mean
            difference exceeds with that confidence; ``high`` the one it stays under.

    Returns:
        The bounds; with identical differences on every item (zero spread) both bounds equal the mean.

    Raises:
        ValueError: lengths differ, or ``level`` is outside (0.5, 1).
    """
    if not 0.5 < level < 1:
        raise ValueError(f"paired_bound: level must be in (0.5, 1), got {level!r}")
    a, b = np.asarray(reference, dtype=float), np.asarray(candidate, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired_bound: {a.size} reference vs {b.size} candidate items")
    d = b - a  # (n,)
    n = int(d.size)
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    mean, stderr = mean_stderr(d)
    if stderr is None:  # fewer than 2 items: no bound
        return PairedBound(mean, -math.inf, math.inf, n, wins, losses, n - wins - losses)
    half = float(stats.t.ppf(level, n - 1)) * stderr
    return PairedBound(mean, mean - half, mean + half, n, wins, losses, n - wins - losses)


def race_stages(n_items: int, first: int, sizes: Sequence[int] = ()) -> tuple[int, ...]:
    """Cumulative item counts of a race's stages: ``first``, then ``sizes``, then all ``n_items``.

    Counts above ``n_items`` are clipped, repeats and decreasing counts dropped; the last stage is
    always ``n_items``. ``race_stages(75, 8, [24]) == (8, 24, 75)``.

    Raises:
        ValueError: ``n_items`` or ``first`` is below 1.
    """
    if n_items < 1 or first < 1:
        raise ValueError(f"race_stages: need n_items >= 1 and first >= 1, got {n_items}, {first}")
    out: list[int] = []
    for size in (first, *sizes, n_items):
        size = min(int(size), n_items)
        if not out or size > out[-1]:
            out.append(size)
    return tuple(out)


@dataclass(frozen=True)
class RaceEntry:
    """How one candidate ended its race.

    Attributes:
        index: the candidate's position in the list raced.
        items: items it was evaluated on (a prefix of the race order).
        bound: its paired bounds against the reference on those items, at ``level`` for the
            ``better`` decision (the ``worse`` decision used ``drop_level``).
        status: ``"worse"`` (dropped: confidently worse), ``"futile"`` (stopped: paired mean at or
            below the futility bound before the last stage), ``"cut"`` (not among the stage's
            survivors), ``"better"`` (confidently better on every item), ``"undecided"`` (ran every
            item, neither).
    """

    index: int
    items: int
    bound: PairedBound
    status: str


@dataclass(frozen=True)
class Race:
    """A finished race.

    Attributes:
        entries: one per candidate, in candidate order.
        leader: index of the candidate with the best paired mean among those that went furthest
            (None when there were no candidates).
        stages: cumulative item counts of the stages that were run.
        evaluations: policy-item evaluations spent (the reference's excluded: it is scored already).
    """

    entries: tuple[RaceEntry, ...]
    leader: int | None
    stages: tuple[int, ...]
    evaluations: int


Evaluate = Callable[[Sequence[int], int, int], Sequence[Sequence[float | None]]]


def run_race(
    n_candidates: int, reference: Sequence[float], evaluate: Evaluate, stages: Sequence[int], *,
    level: float = 0.95, drop_level: float = 0.95, survivors: int = 1, futility: float | None = None,
) -> Race:
    """Race ``n_candidates`` policies against a reference scored on every item (module docstring).

    Args:
        n_candidates: candidates, >= 0; the first is the one the caller would keep on ties.
        reference: the reference's per-item scores in race order, shape (n,) with n = ``stages[-1]``.
        evaluate: ``(candidate indices, start, end) -> per-item scores`` of each listed candidate on
            items ``start:end`` of the race order, one sequence of ``end - start`` values per index
            (None = failed item, counted 0 like S_val does).
        stages: cumulative item counts, increasing (:func:`race_stages`).
        level: one-sided confidence of the promotion bound (``better``), in (0.5, 1).
        drop_level: one-sided confidence of the drop bound (``worse``), in (0.5, 1).
        survivors: candidates that go on after each stage but the last, >= 1.
        futility: stop a candidate whose paired mean is <= this after a stage but the last (S_val
            units; None = never).

    Returns:
        The :class:`Race`.

    Raises:
        ValueError: stages not increasing, the reference shorter than the last stage, ``survivors`` < 1,
            or ``evaluate`` returned the wrong number of values.
    """
    if any(b <= a for a, b in zip(stages, stages[1:], strict=False)) or not stages or stages[0] < 1:
        raise ValueError(f"run_race: stages must be positive and increasing, got {list(stages)}")
    if len(reference) < stages[-1]:
        raise ValueError(f"run_race: the reference has {len(reference)} items, the race needs {stages[-1]}")
    if survivors < 1:
        raise ValueError(f"run_race: survivors must be >= 1, got {survivors}")
    ref = [float(v) for v in reference]
    values: dict[int, list[float]] = {i: [] for i in range(n_candidates)}
    ended: dict[int, RaceEntry] = {}
    alive, start, evaluations, run = list(range(n_candidates)), 0, 0, []
    for k, end in enumerate(stages):
        if not alive:
            break
        got = evaluate(list(alive), start, end)
        if len(got) != len(alive) or any(len(v) != end - start for v in got):
            raise ValueError(f"run_race: evaluate returned {[len(v) for v in got]} values for "
                             f"{len(alive)} candidates x {end - start} items")
        evaluations += len(alive) * (end - start)
        run.append(end)
        for i, vals in zip(alive, got, strict=True):
            values[i].extend(0.0 if v is None else float(v) for v in vals)
        last = k == len(stages) - 1
        going: list[tuple[float, int]] = []
        bounds: dict[int, PairedBound] = {}
        for i in alive:
            drop = paired_bound(ref[:end], values[i], drop_level)
            keep = paired_bound(ref[:end], values[i], level)
            if drop.worse:
                ended[i] = RaceEntry(i, end, keep, "worse")
            elif last:
                ended[i] = RaceEntry(i, end, keep, "better" if keep.better else "undecided")
            elif futility is not None and keep.mean <= futility:
                ended[i] = RaceEntry(i, end, keep, "futile")
            else:
                bounds[i] = keep
                going.append((-keep.mean, i))
        going.sort()
        for _, i in going[survivors:]:
            ended[i] = RaceEntry(i, end, bounds[i], "cut")
        alive = [i for _, i in going[:survivors]]
        start = end
    entries = tuple(ended[i] for i in range(n_candidates))
    leader = None
    if entries:
        furthest = max(e.items for e in entries)
        leader = min((e for e in entries if e.items == furthest), key=lambda e: (-e.bound.mean, e.index)).index
    return Race(entries, leader, tuple(run), evaluations)
