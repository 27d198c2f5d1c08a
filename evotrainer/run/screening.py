"""Screening: scoring policies on the selection items, remembering per-item values, and racing candidates.

:class:`Screening` is one of the named parts of a harness candidate's run (:mod:`evotrainer.evolve.llm_objective`;
:mod:`evotrainer.selfevolve.objective` races its candidates' adapters with it):

- it keeps the selection set in *race order* (the screening items first, :func:`~evotrainer.run.validation_split.race_order`)
  and, per genome, the S_val value of every item scored so far, so no policy is scored twice on an item;
- :meth:`Screening.race` races a candidate's fittest policies against a reference on growing item prefixes and
  returns the leader's race estimate, both by the run's :class:`~evotrainer.harness.scoring.ScoringRule`;
- :meth:`Screening.full_score` completes a policy's whole-set score from the items still missing.

Every evaluation is archived (``meta_screen``, ``meta_val``, ``meta_heldout`` rows) and each race as a
``race`` event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from rich.console import Console

from evotrainer.archive.recorder import RunRecorder
from evotrainer.backends.usage import RunUsage
from evotrainer.errors import EvoTrainerError
from evotrainer.events.kinds import RaceEvent
from evotrainer.genome import Policy
from evotrainer.harness.objective import FullScore
from evotrainer.harness.racing import Race
from evotrainer.harness.scoring import ScoringRule
from evotrainer.progress import task
from evotrainer.rollout import MetaEvaluation, RolloutEvaluator, batch_id_for
from evotrainer.run.validation_split import race_order
from evotrainer.stats.bootstrap import mean_stderr
from evotrainer.stats.generalisation import source_of

__all__ = ["Screening", "planned_requests"]

_KIND_WORDS = {"meta_screen": "racing", "meta_val": "whole selection set:", "meta_heldout": "held-out set:"}


def planned_requests(policies: Sequence[Policy], items: Sequence[Any]) -> int:
    """Generation requests a batched evaluation plans: distinct genomes x items (an upper bound: the
    fitness cache may serve some). The ``total`` of a progress task (:mod:`evotrainer.progress`)."""
    return len({p.genome_hash for p in policies}) * len(items)


class Screening:
    """Per-item S_val bookkeeping on the selection set, and the race of a candidate's policies.

    Args:
        evaluator: rollouts and scoring on the (metered) policy model.
        usage: the run's token meters (``completion_tokens()``: generated so far).
        rec: the run's archive writer.
        console: where progress is shown (races are printed by a subscriber to the ``race`` event,
            :class:`~evotrainer.evolve.console_view.ConsoleView`).
        timings: phase -> seconds, accumulated in place (``"meta-validation"``).
        selection: the selection part of the meta-validation set.
        screen: the screening subset (items of ``selection``).
        rule: how candidates are scored (its race stages, levels, survivors, futility and estimate).
        on_scored: called with the first policy of each genome scored on selection items (the lead's
            Pareto front, :class:`~evotrainer.evolve.lead.LeadState`), or None.

    Attributes:
        order: the selection items in race order; per-item vectors follow it.
        stages: the race's item counts (:meth:`~evotrainer.harness.scoring.ScoringRule.stages`); empty without items.
    """

    def __init__(
        self, *, evaluator: RolloutEvaluator, usage: RunUsage, rec: RunRecorder, console: Console,
        timings: MutableMapping[str, float], selection: Sequence[Any], screen: Sequence[Any], rule: ScoringRule,
        on_scored: Callable[[Policy], None] | None = None,
    ) -> None:
        self.evaluator, self.usage, self.rec, self.console, self.timings = evaluator, usage, rec, console, timings
        self.selection, self.screen, self.rule, self.on_scored = list(selection), list(screen), rule, on_scored
        self.order = race_order(self.selection, self.screen)
        self._position = {id(t): i for i, t in enumerate(self.order)}
        self.stages = rule.stages(len(self.order), len(self.screen))
        self._items: dict[str, dict[int, float]] = {}  # genome hash -> race position -> S_val item value
        self._parts: dict[str, list[tuple[int, dict[str, float]]]] = {}  # genome hash -> (items, mean parts)

    # --- per-item values ----------------------------------------------------------------------------

    def vector(self, policy: Policy) -> list[float] | None:
        """``policy``'s per-item S_val values on the selection set in race order, or None when any is unknown."""
        known = self._items.get(policy.genome_hash, {})
        if len(known) < len(self.order):
            return None
        return [known[i] for i in range(len(self.order))]

    def first_stage_vector(self, policy: Policy) -> list[float] | None:
        """``policy``'s values on the race's first stage (the screening items), or None when any is unknown
        or there are no stages."""
        first = self.stages[0] if self.stages else 0
        known = self._items.get(policy.genome_hash, {})
        if not first or not all(i in known for i in range(first)):
            return None
        return [known[i] for i in range(first)]

    def meta_many(self, policies: Sequence[Policy], items: Sequence[Any], kind: str,
                  harness_id: str | None, outer_generation: int, words: str | None = None) -> list[MetaEvaluation]:
        """``policies`` scored on ``items`` in one batched call, each archived as ``kind``; per-item values on
        selection items are remembered (a failed item counts 0, as in S_val)."""
        t0 = time.perf_counter()
        n = len(policies)
        where = "gen 0" if harness_id == "h0" else harness_id or "final"
        if words is None:
            words = "screening" if (kind == "meta_screen" and harness_id == "h0") else _KIND_WORDS.get(kind, kind)
        label = f"{where}: {words} {n} polic{'y' if n == 1 else 'ies'} on {len(items)} items"
        with task(label, planned_requests(policies, items), console=self.console):
            evaluations = list(self.evaluator.meta_evaluate(list(policies), items))
        self.timings["meta-validation"] = self.timings.get("meta-validation", 0.0) + time.perf_counter() - t0
        positions = [self._position.get(id(t)) for t in items]
        for evaluation in evaluations:
            self.rec.meta(evaluation, kind=kind, harness_id=harness_id, outer_generation=outer_generation)
            if evaluation.s_val is None or any(p is None for p in positions):
                continue
            known = self._items.setdefault(evaluation.genome_hash, {})
            if self.on_scored is not None:
                self.on_scored(next(p for p in policies if p.genome_hash == evaluation.genome_hash))
            fresh = [p for p in positions if p not in known]
            for p, v in zip(positions, evaluation.per_item, strict=True):
                known[p] = 0.0 if v is None else float(v)
            if fresh:
                self._parts.setdefault(evaluation.genome_hash, []).append((len(fresh), dict(evaluation.parts)))
        return evaluations

    def full_score(self, policy: Policy, harness_id: str, outer_generation: int) -> FullScore:
        """``policy`` on the whole selection set: only items not yet scored are evaluated; the whole-set
        value is archived as one ``meta_val`` row; ``per_item`` in race order."""
        tokens0 = self.usage.completion_tokens()
        missing = [t for i, t in enumerate(self.order) if i not in self._items.get(policy.genome_hash, {})]
        if missing:
            evaluation = self.meta_many([policy], missing, "meta_screen", harness_id, outer_generation,
                                        words="whole selection set, items not yet scored:")[0]
            if evaluation.s_val is None:
                self.rec.meta(evaluation, kind="meta_val", harness_id=harness_id, outer_generation=outer_generation)
                return FullScore(None, self.usage.completion_tokens() - tokens0)
        vec = self.vector(policy) or [0.0] * len(self.order)
        whole = self._whole_set(policy, vec)
        self.rec.meta(whole, kind="meta_val", harness_id=harness_id, outer_generation=outer_generation)
        return FullScore(whole.s_val, self.usage.completion_tokens() - tokens0, tuple(vec),
                         tuple(source_of(t.task_id) for t in self.order))

    def _whole_set(self, policy: Policy, vec: Sequence[float]) -> MetaEvaluation:
        """One whole-selection-set evaluation assembled from the per-item values scored so far."""
        chunks = self._parts.get(policy.genome_hash, [])
        weight = sum(n for n, _ in chunks) or 1
        names = {k for _, parts in chunks for k in parts}
        parts = {k: sum(n * p.get(k, 0.0) for n, p in chunks) / weight for k in sorted(names)}
        mean, stderr = mean_stderr(vec)
        return MetaEvaluation(policy.id, policy.genome_hash, batch_id_for(self.selection), mean, stderr, parts,
                              tuple(vec), (), 0, 0.0, True, None)

    # --- the race -----------------------------------------------------------------------------------

    def race(self, chosen: Sequence[Policy], reference: Policy, fallback: Policy, harness_id: str,
             outer_generation: int) -> tuple[Policy, float | None]:
        """Race ``chosen`` against ``reference`` by :meth:`ScoringRule.race
        <evotrainer.harness.scoring.ScoringRule.race>` on :attr:`stages`. Evaluations are archived as
        ``meta_screen`` rows, the race as a ``race`` event.

        Returns:
            The race's leader (``fallback`` when there is none) and its race estimate
            (:meth:`~evotrainer.harness.scoring.ScoringRule.estimate`; None when every evaluation failed).

        Raises:
            EvoTrainerError: the selection set is empty.
        """
        if not self.stages:
            raise EvoTrainerError("racing needs at least one selection item (the meta-validation set is empty)")
        ref = self.vector(reference)
        if ref is None:  # a reference never scored on every item (objectives driven without the outer loop)
            self.full_score(reference, harness_id, outer_generation)
            ref = self.vector(reference) or [0.0] * len(self.order)
        failed: set[int] = set()

        def evaluate(indices: Sequence[int], start: int, end: int) -> list[list[float | None]]:
            evaluations = self.meta_many([chosen[i] for i in indices], self.order[start:end], "meta_screen",
                                         harness_id, outer_generation)
            failed.update(i for i, e in zip(indices, evaluations, strict=True) if e.s_val is None)
            return [list(e.per_item) for e in evaluations]

        race = self.rule.race(len(chosen), ref, evaluate, self.stages)
        self._log_race(race, chosen, reference, harness_id, outer_generation)
        leader = chosen[race.leader] if race.leader is not None else fallback
        return leader, (None if len(failed) == len(chosen) else self.rule.estimate(ref, race))

    def _log_race(self, race: Race, chosen: Sequence[Policy], reference: Policy, harness_id: str,
                  outer_generation: int) -> None:
        self.rec.emit(RaceEvent(
            outer_generation=outer_generation, harness_id=harness_id, reference=reference.id,
            stages=tuple(race.stages), evaluations=race.evaluations,
            leader=None if race.leader is None else chosen[race.leader].id,
            level=self.rule.level, drop_level=self.rule.drop_level,
            entries=tuple({"policy_id": chosen[e.index].id, "items": e.items, "status": e.status,
                           **e.bound.as_dict()} for e in race.entries)))
