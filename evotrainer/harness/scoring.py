"""How a harness candidate is scored, from its racers to the number CMA-ES is told: :class:`ScoringRule`.

A harness candidate (one proposal of the candidate source, run for ``inner.generations`` under its knobs and reward
weights) is scored in these steps, each a member of :class:`ScoringRule`:

1. **Racers** (:attr:`ScoringRule.racers`, ``outer.screen_top_k``): its fittest policy, the lead's fittest child and
   its fittest other new genomes (``LLMObjective.racers`` picks them).
2. **The race** (:meth:`ScoringRule.race`; the algorithm and its sources: :mod:`evotrainer.harness.racing`): the
   racers and the incumbent (the race's reference, scored on every item) on the same selection items, the screening
   items first, then ``outer.race.sizes`` items, then all of them (:meth:`ScoringRule.stages`). A racer stops when it
   is confidently worse (one-sided paired t bound at ``outer.race.drop_level``), when its paired mean difference is
   at or below ``outer.race.futility`` before the last stage, or when it is not among the ``outer.race.survivors``
   best of a stage.
3. **The race estimate** (:meth:`ScoringRule.estimate`): the leader's whole-set S_val, estimated from the items it
   ran as the reference's whole-set mean plus the leader's paired mean difference (S_val units, can be < 0). It is
   archived unchanged (``harness_candidates.race_estimate``). A candidate that crashed, whose racers all failed or
   whose estimate is not finite (:func:`~evotrainer.stats.bootstrap.finite`) has none: it failed.
4. **Reward hacking** (:meth:`ScoringRule.score`, ``outer.hack_check.*``): flagged when inner fitness rose by more
   than ``fitness_rise`` (reward units) while the estimate fell more than ``s_val_drop`` below the *current* S_val
   (the estimate of the population the candidate started from).
5. **The score CMA-ES is told** (:attr:`CandidateScore.told`): the race estimate, less ``penalty`` when flagged;
   None for a failed candidate, which the searcher turns into its worst penalty (``CMASearch.tell``). Higher is
   better; the sign flips once, inside the CMA-ES wrapper.
6. **Whole set and promotion**: a candidate whose estimate beats the incumbent's whole-set S_val
   (:meth:`ScoringRule.worth_scoring`) is scored on every selection item and replaces the incumbent only when
   :attr:`ScoringRule.promotion` (:class:`~evotrainer.harness.promotion.PromotionRule` at ``outer.race.level``)
   says so: a paired lower bound above 0, and with ``outer.race.stratum_level`` set, not confidently worse on any
   item source (the task id's prefix) of 3 or more selection items.

The outer loop (``run/outer_loop.py``) and the race's bookkeeping (``run/screening.py``) both take their rule
from :meth:`ScoringRule.from_config`; to change how candidates are scored, change this file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evotrainer.harness.promotion import PromotionRule
from evotrainer.harness.racing import Evaluate, Race, race_stages, run_race
from evotrainer.stats.bootstrap import finite, mean_stderr

__all__ = ["CandidateScore", "ScoringRule"]


@dataclass(frozen=True)
class CandidateScore:
    """One harness candidate's score (:meth:`ScoringRule.score`); S_val units, higher is better."""

    estimate: float | None  # the race estimate; None = failed
    delta: float | None  # estimate minus the current S_val it started from
    flagged: bool  # reward hacking (module docstring, step 4)
    told: float | None  # what CMA-ES is told; None = failed (the searcher's worst penalty)


@dataclass(frozen=True)
class ScoringRule:
    """How a harness candidate is scored (module docstring). Pure: numbers in, numbers out. Each field is the
    ``outer.*`` key beside it (ranges: the configuration reference)."""

    racers: int = 3  # outer.screen_top_k: policies per candidate that race
    sizes: tuple[int, ...] = (24,)  # outer.race.sizes: item counts between the screening items and all of them
    level: float = 0.95  # outer.race.level: one-sided confidence of "better" and of a promotion
    drop_level: float = 0.8  # outer.race.drop_level: one-sided confidence of "worse"
    survivors: int = 1  # outer.race.survivors: racers that go on after a stage
    futility: float | None = 0.0  # outer.race.futility: S_val units; None = never
    hack_check: bool = True  # outer.hack_check.enabled
    fitness_rise: float = 0.01  # outer.hack_check.fitness_rise: reward units
    s_val_drop: float = 0.01  # outer.hack_check.s_val_drop: S_val units
    penalty: float = 0.05  # outer.hack_check.penalty: S_val units
    stratum_level: float | None = None  # outer.race.stratum_level: None = no "worse on a stratum" check

    @classmethod
    def from_config(cls, outer: Any) -> ScoringRule:
        """The rule of an ``OuterConfig``'s ``screen_top_k``, ``race.*`` and ``hack_check.*``."""
        race, hack = outer.race, outer.hack_check
        return cls(racers=outer.screen_top_k, sizes=tuple(race.sizes), level=race.level, drop_level=race.drop_level,
                   survivors=race.survivors, futility=race.futility, hack_check=hack.enabled,
                   fitness_rise=hack.fitness_rise, s_val_drop=hack.s_val_drop, penalty=hack.penalty,
                   stratum_level=race.stratum_level)

    def stages(self, n_items: int, first: int) -> tuple[int, ...]:
        """Cumulative item counts of a race over ``n_items`` selection items whose first ``first`` are the
        screening items (:func:`~evotrainer.harness.racing.race_stages`); empty without items."""
        return race_stages(n_items, max(first, 1), self.sizes) if n_items else ()

    def race(self, n_racers: int, reference: Sequence[float], evaluate: Evaluate, stages: Sequence[int]) -> Race:
        """Race ``n_racers`` policies against the reference's per-item values, shape (n,), in race order
        (:func:`~evotrainer.harness.racing.run_race` with this rule's levels, survivors and futility)."""
        return run_race(n_racers, reference, evaluate, stages, level=self.level, drop_level=self.drop_level,
                        survivors=self.survivors, futility=self.futility)

    def estimate(self, reference: Sequence[float], race: Race) -> float | None:
        """The race estimate: the reference's mean over ``reference`` (its whole-set values) plus the leader's
        paired mean difference; None when nobody raced."""
        if race.leader is None:
            return None
        return mean_stderr(reference)[0] + race.entries[race.leader].bound.mean

    def score(self, estimate: float | None, inner_gain: float | None, current: float) -> CandidateScore:
        """The candidate's :class:`CandidateScore` (module docstring, steps 4 and 5).

        Args:
            estimate: its race estimate (finite) or None (failed).
            inner_gain: best inner fitness at the end minus the starting population's best on the same batch
                (reward units); None or non-finite = unknown, which never flags.
            current: the current S_val the candidate started from (S_val units).
        """
        if estimate is None:
            return CandidateScore(None, None, False, None)
        delta, gain = estimate - current, finite(inner_gain)
        flagged = self.hack_check and gain is not None and gain > self.fitness_rise and delta < -self.s_val_drop
        return CandidateScore(estimate, delta, flagged, estimate - (self.penalty if flagged else 0.0))

    def worth_scoring(self, estimate: float | None, incumbent_s_val: float) -> bool:
        """Whether a candidate is scored on the whole selection set: its estimate beats the incumbent's S_val."""
        return estimate is not None and estimate > incumbent_s_val

    @property
    def promotion(self) -> PromotionRule:
        """When a whole-set scored candidate replaces the incumbent (paired lower bound above 0 at ``level``, and
        not confidently worse on any item source at ``stratum_level`` when that is set)."""
        return PromotionRule(self.level, stratum_level=self.stratum_level)
