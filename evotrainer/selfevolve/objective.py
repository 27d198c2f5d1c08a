"""The outer loop over the training harness of ``mode=selfevolve`` (``selfevolve.outer_loop=true``).

A harness candidate is what a self-evolution run trains on and how it judges: the generator's difficulty knobs
(where the candidate's generated tasks start; its curriculum moves them from there), the judge's rule reward
weights, and the ``outer.extras`` ``real_share`` (share of pool tasks drawn from ``task.train_path``) and
``pass_threshold`` (judge score a sample needs to be trained on); a knob the harness does not search keeps its
``selfevolve.*`` value. :class:`SelfEvolveObjective` runs ``selfevolve.rounds`` rounds
(:func:`~evotrainer.selfevolve.round.run_round`) from the base policy with a fresh adapter under the candidate,
then races the final policy against the incumbent on the meta-validation items, with the evolve mode's race
(:class:`~evotrainer.run.screening.Screening`): the candidate's score is its final adapter's S_val, higher is
better. Every candidate starts from the base model; the outer loop's population is not carried over.

:func:`search_harness` builds the harness space and the candidate source from ``outer.*`` as the evolve mode does
and runs :func:`~evotrainer.run.outer_loop.run_outer_loop`; ``outer.budget.train_tokens`` stops it from
starting a new candidate once the LoRA input tokens of the candidates so far reach it.

Archive: each candidate's rounds are ``selfevolve_rounds`` rows numbered on from the previous candidate's (the
n-th candidate's set-up pool at round ``n * (rounds + 1)``, its rounds the next ``rounds``), one
``selfevolve candidate`` phase event per candidate names them, and each candidate is a ``harness_candidates`` row
(``python -m evotrainer.archive harness RUN``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from rich.console import Console

from evotrainer.archive.recorder import RunRecorder
from evotrainer.archive.schema import RoundRow
from evotrainer.backends.usage import RunUsage
from evotrainer.config import Config, SelfEvolveConfig
from evotrainer.events.kinds import PhaseEvent
from evotrainer.genome import Policy
from evotrainer.harness import Harness, space_from_specs
from evotrainer.harness.candidates import candidate_source
from evotrainer.harness.objective import CandidateResult
from evotrainer.harness.scoring import ScoringRule
from evotrainer.run.control import RunControl
from evotrainer.run.outer_loop import OuterResult, run_outer_loop
from evotrainer.run.runtime import task_settings
from evotrainer.run.screening import Screening
from evotrainer.run.validation_split import screening_subset
from evotrainer.seeding import Seeds
from evotrainer.selfevolve.display import PhaseTimer
from evotrainer.selfevolve.examples import reference_items
from evotrainer.selfevolve.pool import PoolTask, add_to_pool, check_disjoint, draw_real, real_count
from evotrainer.selfevolve.round import RoundModels, RoundSetup, SelfEvolveState, TrainFn, pool_row, run_round
from evotrainer.tasks.base import SelfEvolving, Task

__all__ = ["HarnessSearch", "SelfEvolveObjective", "candidate_settings", "search_harness"]


def candidate_settings(cfg: SelfEvolveConfig, harness: Harness) -> SelfEvolveConfig:
    """``cfg`` with the harness' ``real_share`` and ``pass_threshold`` extras (each kept when the harness has none)."""
    extras = harness.extras
    return replace(cfg, real_share=float(extras.get("real_share", cfg.real_share)),
                   pass_threshold=float(extras.get("pass_threshold", cfg.pass_threshold)))


class SelfEvolveObjective:
    """Scores a training-harness candidate by the S_val of the adapter it trains (module docstring).

    Args:
        policy: the base policy every candidate starts from (no adapter of its own is assumed).
        models: the round's models (policy model, judge, embedder, trainer, evaluator).
        family: the task family.
        cfg: ``selfevolve`` settings (``rounds`` per candidate; the unsearched knobs).
        setup: the run's fixed dev set, held-apart hashes and paths; each candidate gets its reward weights, no
            per-round meta-validation (the race scores the final policy) and adapters under ``adapters/<harness id>``.
        difficulty: the generator's start knobs (the harness' difficulty knobs override them).
        dev_score: the base policy's dev score (the first round's keep/revert reference).
        real_items: real training items (``task.train_path``) a candidate's pool may draw.
        seeds: the run's named streams (each candidate draws from ``selfevolve/<harness id>/...``).
        rec: the run's archive writer.
        screening: the race on the meta-validation selection items.
        usage: the run's token meters.
        train: the LoRA trainer.
        console: progress output.

    Attributes:
        rows: every candidate's round rows, in order.
        incumbent: the policy later races compare with (set by the outer loop).
    """

    def __init__(self, *, policy: Policy, models: RoundModels, family: SelfEvolving, cfg: SelfEvolveConfig,
                 setup: RoundSetup, difficulty: Mapping[str, float], dev_score: float, real_items: Sequence[Task],
                 seeds: Seeds, rec: RunRecorder, screening: Screening, usage: RunUsage, train: TrainFn,
                 console: Console) -> None:
        self.policy, self.models, self.family, self.cfg, self.setup = policy, models, family, cfg, setup
        self.difficulty, self.dev_score, self.real_items = dict(difficulty), dev_score, tuple(real_items)
        self.seeds, self.rec, self.screening, self.usage = seeds, rec, screening, usage
        self.train, self.console = train, console
        self.rows: list[RoundRow] = []
        self.incumbent: Policy | None = None
        self._count = 0

    def set_incumbent(self, policy: Policy, harness_id: str = "h0", outer_generation: int = 0) -> None:
        """Make ``policy`` the reference of later races (called by the outer loop)."""
        self.incumbent = policy

    def __call__(self, harness: Harness, population: Sequence[Any], harness_id: str,
                 outer_generation: int) -> CandidateResult:
        """``selfevolve.rounds`` rounds under ``harness`` from the base policy, then the race of the final policy.
        ``population`` is not used (every candidate starts from the base model)."""
        self._count += 1
        offset = self._count * (self.cfg.rounds + 1)
        s = candidate_settings(self.cfg, harness)
        setup = replace(self.setup, val=(), reward_weights=dict(harness.reward_weights),
                        adapter_root=self.setup.adapter_root / harness_id)
        tokens0 = self.usage.completion_tokens()
        state = self._start(s, {**self.difficulty, **harness.difficulty}, harness_id, offset)
        rows: list[RoundRow] = []
        for k in range(1, s.rounds + 1):
            with PhaseTimer(self.console, f"{harness_id} round {k}") as timer:
                out = run_round(state, self.models, self.family, s, setup,
                                self.seeds.numpy(f"selfevolve/{harness_id}/round{k}"), self.rec, train=self.train,
                                timer=timer)
            state = out.state
            rows.append(out.row)
        self.rows.extend(rows)
        train_tokens = sum(int(r.train.get("input_tokens") or 0) for r in rows)
        final = state.policy
        best, estimate = self.screening.race([final], self.incumbent or final, final, harness_id, outer_generation)
        self.rec.emit(PhaseEvent(name="selfevolve candidate", fields={
            "harness_id": harness_id, "outer_generation": outer_generation, "rounds": [r.round for r in rows],
            "statuses": [r.status for r in rows], "final_policy": final.id, "train_tokens": train_tokens}))
        return CandidateResult(
            best=best, population=(best,), race_estimate=estimate,
            full_score=partial(self.screening.full_score, best, harness_id, outer_generation),
            generated_tokens=self.usage.completion_tokens() - tokens0, train_tokens=train_tokens)

    def _start(self, s: SelfEvolveConfig, difficulty: Mapping[str, float], hid: str, offset: int) -> SelfEvolveState:
        """A candidate's set-up: its seed pool (real items by its ``real_share``, the rest generated at its
        difficulty), the seed references as replay, the base policy and dev score."""
        real, real_left = draw_real(self.real_items, real_count(s.seed_tasks, s.real_share, len(self.real_items)),
                                    self.seeds.numpy(f"selfevolve/{hid}/seed_real"))
        generated = self.family.generate(self.seeds.numpy(f"selfevolve/{hid}/seed_tasks"), dict(difficulty),
                                         s.seed_tasks - len(real))
        check_disjoint(generated, self.setup.forbidden, "seed tasks")
        update = add_to_pool([], [PoolTask(t, offset, "seed", dict(difficulty)) for t in generated]
                             + [PoolTask(t, offset, "real") for t in real], embed=self.models.embedder.encode,
                             cosine=s.dedup_cosine, cap=s.pool_cap, forbidden=self.setup.forbidden)
        self.rec.se_pool([pool_row(p, self.family) for p in update.pool])
        return SelfEvolveState(round=offset, policy=self.policy, pool=update.pool,
                               replay=reference_items((p.task for p in update.pool), self.family),
                               difficulty=dict(difficulty), dev_score=self.dev_score, real=real_left)


@dataclass(frozen=True)
class HarnessSearch:
    """What :func:`search_harness` returns: the outer loop's result and every candidate's round rows."""

    outer: OuterResult
    rows: tuple[RoundRow, ...]

    @property
    def best(self) -> Policy:
        """The incumbent's policy (the base policy when no candidate beat it)."""
        return self.outer.incumbent.best


def search_harness(cfg: Config, *, policy: Policy, models: RoundModels, family: SelfEvolving, setup: RoundSetup,
                   val: Sequence[Task], difficulty: Mapping[str, float], dev_score: float, real_items: Sequence[Task],
                   seeds: Seeds, rec: RunRecorder, usage: RunUsage, train: TrainFn,
                   console: Console, control: RunControl | None = None) -> HarnessSearch:
    """Run the outer loop over the training harness (module docstring); the base policy is generation 0.

    Args:
        val: the meta-validation items the race and the whole-set scores use (the selection set; none held out).
        control: stop decisions at each candidate boundary (budget, STOP file, a resumed run's replay); budget
            limits alone when None.
        (the rest: as :class:`SelfEvolveObjective`.)

    Raises:
        ConfigError: a bad harness space (``outer.*``).
        EvoTrainerError: ``val`` is empty (nothing to race on).
    """
    o = cfg.outer
    settings = task_settings(cfg, family)
    space = space_from_specs(
        settings.space, family.spec.difficulty_bounds, settings.difficulty, settings.reward_weights, knobs=o.knobs,
        evolve_reward_weights=o.evolve_reward_weights, reward_logit_bounds=tuple(o.reward_weight_bounds),
        extras=o.extras)
    search = candidate_source(o.candidate_source, x0=space.initial_vector(), sigma0=o.sigma0, popsize=o.popsize,
                              cma_seed=seeds.int("cma"), rng=seeds.numpy("random_harness"), sigma_floor=o.sigma_floor)
    screening = Screening(evaluator=models.evaluator, usage=usage, rec=rec, console=console, timings={},
                          selection=val, screen=screening_subset(val, o.screen_size), rule=ScoringRule.from_config(o))
    objective = SelfEvolveObjective(
        policy=policy, models=models, family=family, cfg=cfg.selfevolve, setup=setup, difficulty=difficulty,
        dev_score=dev_score, real_items=real_items, seeds=seeds, rec=rec, screening=screening, usage=usage,
        train=train, console=console)
    start = CandidateResult(best=policy, population=(policy,), race_estimate=None,
                            full_score=partial(screening.full_score, policy, "h0", 0))
    console.print(f"[bold]outer loop over the training harness[/]: {o.candidate_source}, {o.generations} "
                  f"generation(s) x {o.popsize} candidates of {cfg.selfevolve.rounds} round(s); harness "
                  f"{', '.join(space.names)}")
    out = run_outer_loop(objective, start, space.decode(space.initial_vector()), space, search, o, rec,
                         console=console, control=control)
    console.print(f"outer loop stopped ({out.stop.key}: {out.stop.detail}); best {out.incumbent.harness_id}: "
                  f"policy {out.incumbent.best.id}, S_val {out.incumbent.s_val:.4f} (base {out.s_val_curve[0]:.4f}); "
                  f"{out.usage.train_tokens} training tokens", markup=False, highlight=False)
    return HarnessSearch(out, tuple(objective.rows))
