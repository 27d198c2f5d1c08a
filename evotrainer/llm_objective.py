"""The real objective of the outer loop: a harness candidate scored with the policy model.

:class:`LLMObjective` is what ``coevolution.run_evolve`` hands to ``coevolution.run_outer_loop``:
called with a harness and a population, it draws a task batch at the harness' difficulty, runs
``inner.generations`` DEAP generations under the harness' reward weights (archiving every policy,
fitness and generation as it goes; ``inner.lead_offspring`` slots per generation mutate the *lead*, the best
policy screened so far), screens the fittest policy, the lead's fittest mutant and the fittest other new
genomes on the fixed screening items and returns
a :class:`~evotrainer.harness.objective.CandidateResult` whose ``full_score`` scores that policy on the
whole selection set only when the outer loop asks for it.

Generated tokens are counted by wrapping the policy model and the mutator in :class:`TokenMeter`.

With ``inner.adapter_mutation_share > 0`` policies also carry LoRA adapter genes: each inner-loop call gets an
:class:`~evotrainer.search.adapter_ops.AdapterWorkshop` (:func:`lora_workshop`) on the transformers policy
model, whose Lamarckian fine-tunes learn from the policies' own passing outputs on that call's training batch
(:class:`~evotrainer.rollout.PassingSampleRecorder`); new adapters go to ``<run dir>/adapters/<policy id>``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from evotrainer.archive.recorder import RunRecorder
from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.config import Config
from evotrainer.errors import ConfigError, EvoTrainerError
from evotrainer.genome import Policy
from evotrainer.harness import Harness
from evotrainer.harness.objective import CandidateResult, FullScore
from evotrainer.harness.racing import Race, race_stages, run_race
from evotrainer.progress import task
from evotrainer.rollout import (
    FeedbackRecorder,
    MetaEvaluation,
    PassingSampleRecorder,
    RolloutEvaluator,
    batch_id_for,
)
from evotrainer.runtime import sampling_from
from evotrainer.search.adapter_ops import AdapterWorkshop
from evotrainer.search.decoding import decoding_genes_for
from evotrainer.search.exemplars import ExperiencePool, exemplars_from_tasks
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import GenerationReport, InnerResult, run_inner_loop
from evotrainer.search.mutation_prompts import MUTATION_STYLES, MutationStyle
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.pareto_front import choose_parent, item_wins
from evotrainer.search.phrases import PhraseBank
from evotrainer.search.style_library import apply_style_mutation, plan_style_mutation
from evotrainer.seeding import Seeds
from evotrainer.tasks.base import MeetingTask, TaskFamily
from evotrainer.validation_split import race_order

__all__ = ["LLMObjective", "TokenMeter", "inner_config", "lora_workshop", "planned_requests"]

_KIND_WORDS = {"meta_screen": "racing", "meta_val": "whole selection set:", "meta_heldout": "held-out set:"}


class TokenMeter:
    """An LLM wrapper that counts generated tokens (everything else is passed through).

    Args:
        llm: any object with ``name`` and ``generate(requests) -> list[Generation]``.

    Attributes:
        tokens: generated tokens of every call so far (a shared counter when two meters share ``counter``).
    """

    def __init__(self, llm: Any, counter: list[int] | None = None) -> None:
        self._llm = llm
        self._counter = counter if counter is not None else [0]
        self.name = getattr(llm, "name", type(llm).__name__)

    @property
    def tokens(self) -> int:
        return self._counter[0]

    @property
    def wrapped(self) -> Any:
        """The metered backend itself (e.g. the ``HFBackend`` that adapter training needs)."""
        return self._llm

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = self._llm.generate(requests)
        self._counter[0] += sum(max(int(g.generated_tokens), 0) for g in out)
        return out

    def __getattr__(self, item: str) -> Any:
        return getattr(self._llm, item)


def inner_config(cfg: Config) -> InnerConfig:
    """``cfg.inner`` itself, or a copy whose null ``decoding_genes`` are the defaults centred on ``cfg.decoding``."""
    if cfg.inner.decoding_genes is not None:
        return cfg.inner
    return replace(cfg.inner, decoding_genes=list(decoding_genes_for(sampling_from(cfg.decoding))))


def lora_workshop(
    backend: Any, root: str | Path, cfg: Config, samples: Callable[[Policy], Sequence[Any]]
) -> AdapterWorkshop:
    """The adapter operators' mechanics on a transformers policy model (``evotrainer.adapters``).

    Args:
        backend: the policy model's ``HFBackend`` (unwrapped from any :class:`TokenMeter`).
        root: folder for new adapters (created; made absolute so archived paths stay valid).
        cfg: the run config: ``inner.adapter_lora`` (the short fine-tune; its rank is also the crossover rank)
            and ``inner.adapter_noise_scale``.
        samples: ``policy -> SFTExample list``: its passing outputs on the current training batch.

    Returns:
        The workshop: fine-tune = :func:`~evotrainer.adapters.train_lora` without replay (continuing from
        the parent adapter when there is one), perturb = :func:`~evotrainer.adapters.mut_adapter_noise`,
        merge = :func:`~evotrainer.adapters.cx_adapters` at weight 0.5.

    Raises:
        ConfigError: ``backend`` is not a transformers backend (vLLM serves adapters but cannot train
            them), its model is not float32 on the CPU, or ``inner.adapter_lora`` is out of range.
    """
    from evotrainer.adapters import LoraTrainConfig, cx_adapters, mut_adapter_noise, train_lora
    from evotrainer.backends.hf import HFBackend

    if not isinstance(backend, HFBackend):
        raise ConfigError(f"inner.adapter_mutation_share > 0 needs the transformers policy backend "
                          f"(model.backend=hf), got {type(backend).__name__}")
    model = backend.model
    dtype = next(model.parameters()).dtype
    if model.device.type == "cpu" and str(dtype) != "torch.float32":
        raise ConfigError(f"inner.adapter_mutation_share > 0 trains LoRA adapters, which needs model.dtype=float32 "
                          f"on the CPU, got {dtype}")
    settings = asdict(cfg.inner.adapter_lora)
    try:
        train_cfg = LoraTrainConfig(**{**settings, "target_modules": tuple(settings["target_modules"])})
    except ConfigError as exc:
        raise ConfigError(f"inner.adapter_lora: {exc}") from None
    folder = Path(root).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    scale = cfg.inner.adapter_noise_scale

    def finetune(parent: str | None, examples: Sequence[Any], out: Path, rng: np.random.Generator) -> str:
        return train_lora(backend, examples, (), train_cfg, out, rng=rng, parent_adapter=parent).adapter_dir

    return AdapterWorkshop(
        root=folder, samples=samples, finetune=finetune,
        perturb=lambda parent, out, rng: mut_adapter_noise(parent, out, rng=rng, scale=scale),
        merge=lambda a, b, out: cx_adapters(a, b, out, weight=0.5, rank=train_cfg.rank),
    )


def planned_requests(policies: Sequence[Policy], items: Sequence[Any]) -> int:
    """Generation requests a batched evaluation plans: distinct genomes x items (an upper bound: the
    fitness cache may serve some). The ``total`` of a progress task (:mod:`evotrainer.progress`)."""
    return len({p.genome_hash for p in policies}) * len(items)


class LLMObjective:
    """Scores harness candidates with the policy model (see the module docstring).

    Args:
        evaluator: rollouts and scoring on the (metered) policy model.
        mutator: the (metered) mutator model for LLM variation, or None.
        meter: the token meter shared by the policy model and the mutator.
        family: the task family (generates task batches).
        rec: the run's archive writer.
        console: where inner generations are printed.
        timings: phase -> seconds, accumulated in place.
        cfg: the run config.
        seeds: the run's named RNG streams.
        selection: the selection part of the meta-validation set.
        screen: the screening subset (items of ``selection``).
        forbidden: content hashes of every meta-validation item (never allowed in a task batch).
        phrase_bank: the run's phrase bank (grows across candidates), or None without an embedder.
        adapters_root: where new adapter folders go when ``inner.adapter_mutation_share > 0`` (default:
            ``adapters/`` next to the archive file, i.e. in the run dir for the default archive path).

    Attributes:
        stop_check: called with ``outer_generation``, ``harness_id``, ``inner_generation`` after each inner
            generation; raises to end the run there (``RunControl.inner_boundary``); None = never.

    Raises:
        ConfigError: adapter genes are on but the policy model is not a transformers backend.
    """

    stop_check: Callable[..., None] | None = None

    def __init__(
        self, *, evaluator: RolloutEvaluator, mutator: Any, meter: TokenMeter, family: TaskFamily,
        rec: RunRecorder, console: Console, timings: MutableMapping[str, float], cfg: Config, seeds: Seeds,
        selection: Sequence[MeetingTask], screen: Sequence[MeetingTask], forbidden: set[str],
        phrase_bank: PhraseBank | None = None, adapters_root: str | Path | None = None,
    ) -> None:
        self.evaluator, self.mutator, self.meter, self.family = evaluator, mutator, meter, family
        self.rec, self.console, self.timings, self.cfg, self.seeds = rec, console, timings, cfg, seeds
        self.selection, self.screen, self.forbidden = list(selection), list(screen), forbidden
        self.order = race_order(self.selection, self.screen)  # per-item vectors are in this order
        self._position = {id(t): i for i, t in enumerate(self.order)}
        self.stages = race_stages(len(self.order), max(len(self.screen), 1), cfg.outer.race.sizes) if self.order else ()
        self.inner_cfg = inner_config(cfg)
        self.phrase_bank = phrase_bank
        self.operator_stats = OperatorStats()
        self.experience = ExperiencePool()  # solved training episodes (families with ``experience``)
        self.styles: tuple[MutationStyle, ...] = MUTATION_STYLES
        self.candidates_run = 0
        self._items: dict[str, dict[int, float]] = {}  # genome hash -> race position -> S_val item value
        self._parts: dict[str, list[tuple[int, dict[str, float]]]] = {}  # genome hash -> (items, mean parts)
        self.incumbent: Policy | None = None  # the reference every race compares with (set_incumbent)
        self.front: dict[str, Policy] = {}  # genome hash -> first policy scored on selection items (Pareto parents)
        self.lead: Policy | None = None  # the parent of the latest candidate's lead mutants
        self.lead_tried: dict[str, tuple[str, ...]] = {}  # policy id -> mutation kinds tried on it as lead
        self.adapter_backend = None
        if cfg.inner.adapter_mutation_share > 0:
            backend = evaluator.llm
            while isinstance(backend, TokenMeter):
                backend = backend.wrapped
            self.adapter_backend = backend
            self.adapters_root = Path(adapters_root) if adapters_root is not None else (
                Path(rec.store.path).resolve().parent / "adapters")
            lora_workshop(backend, self.adapters_root, cfg, lambda policy: ())  # fail early on a bad setup

    def draw_tasks(self, harness: Harness, harness_id: str, outer_generation: int) -> list[MeetingTask]:
        """A generated task batch at ``harness.difficulty`` (logged as a ``task_batch`` event).

        Raises:
            EvoTrainerError: the batch shares a transcript with the meta-validation set.
        """
        rng = self.seeds.numpy("tasks/g0" if harness_id == "h0" else f"tasks/{harness_id}")
        tasks = self.family.generate(rng, harness.difficulty, self.cfg.task.tasks_per_generation)
        leaked = [t.task_id for t in tasks if t.content_hash in self.forbidden]
        if leaked:  # generated transcripts should never coincide with hand-written ones
            raise EvoTrainerError(f"task batch contains meta-validation transcripts {leaked}")
        self.rec.event("task_batch", outer_generation=outer_generation, harness_id=harness_id,
                       batch_id=batch_id_for(tasks), task_ids=[t.task_id for t in tasks],
                       content_hashes=[t.content_hash for t in tasks])
        return tasks

    def __call__(
        self, harness: Harness, population: Sequence[Policy], harness_id: str, outer_generation: int
    ) -> CandidateResult:
        """Run one harness candidate: task batch, K inner generations, a race of its best policies.

        The inner loop gives ``inner.lead_offspring`` slots per generation to mutants of the *lead*, a
        parent drawn from the per-item Pareto front of the policies scored on the whole selection set
        (:meth:`choose_lead`), rotating through the mutation kinds until each was tried on it. The
        candidate's fittest policies then race the incumbent (:meth:`race`); ``screen_s_val`` is the
        race's estimate of the leader's whole-set S_val (the incumbent's mean plus the paired mean
        difference on the items raced), and ``full_score`` is free when the leader ran every item.
        """
        tokens0 = self.meter.tokens
        tasks = self.draw_tasks(harness, harness_id, outer_generation)
        lead = self.choose_lead(population, harness_id, outer_generation)
        result = self._inner(population, tasks, harness, harness_id, outer_generation, lead)
        best, estimate = self.race(result, population, harness_id, outer_generation)
        try:
            start_max = float(result.logbook[0]["max"])
        except (IndexError, KeyError, TypeError, ValueError):
            start_max = float("nan")
        gain = result.best_fitness - start_max if np.isfinite(start_max) else None
        return CandidateResult(
            best=best, population=tuple(result.population), screen_s_val=estimate,
            full_score=partial(self.full_score, best, harness_id, outer_generation),
            inner_gain=gain, best_fitness=result.best_fitness, generated_tokens=self.meter.tokens - tokens0,
        )

    def set_incumbent(self, policy: Policy, harness_id: str = "h0", outer_generation: int = 0) -> None:
        """Make ``policy`` the reference of later races (the outer loop calls this on every promotion).

        Archived as an ``incumbent_reference`` event; the policy is a member of the Pareto front
        (:meth:`choose_lead`).
        """
        self.incumbent = policy
        self.front.setdefault(policy.genome_hash, policy)
        self.rec.event("incumbent_reference", outer_generation=outer_generation, harness_id=harness_id,
                       policy_id=policy.id)

    def vector(self, policy: Policy) -> list[float] | None:
        """``policy``'s per-item S_val values on the selection set in race order, or None when any is unknown."""
        known = self._items.get(policy.genome_hash, {})
        if len(known) < len(self.order):
            return None
        return [known[i] for i in range(len(self.order))]

    def choose_lead(self, population: Sequence[Policy], harness_id: str, outer_generation: int) -> Policy | None:
        """The parent of this candidate's lead mutants, drawn from the per-item Pareto front.

        The front (:func:`~evotrainer.search.pareto_front.item_wins`) is taken over the screening items,
        the items every raced or screened policy (the seeds of generation 0, each candidate's racers, the
        incumbent) has a value on; a policy is drawn with probability proportional to the items it wins.
        The incumbent (or the population's first) when no policy is known there. Archived as a ``lead``
        event with the front.
        """
        first = self.stages[0] if self.stages else 0
        vectors: dict[str, list[float]] = {}
        members: dict[str, Policy] = {}
        for gh, policy in self.front.items():
            known = self._items.get(gh, {})
            if first and all(i in known for i in range(first)):
                vectors[policy.id] = [known[i] for i in range(first)]
                members[policy.id] = policy
        wins = item_wins(vectors)
        pick = choose_parent(wins, self.seeds.python(f"lead/{harness_id}"))
        lead = members[pick] if pick is not None else (
            self.incumbent if self.incumbent is not None else (population[0] if population else None))
        if lead is not None:
            self.lead = lead
            self.rec.event("lead", outer_generation=outer_generation, harness_id=harness_id, policy_id=lead.id,
                           front=wins)
        return lead

    def race(self, result: InnerResult, population: Sequence[Policy], harness_id: str,
             outer_generation: int) -> tuple[Policy, float | None]:
        """Race the candidate's fittest policy and ``outer.screen_top_k - 1`` of its new genomes against the
        incumbent (``harness/racing.py``): all on the screening items, then the best survivor on the
        ``outer.race.sizes`` item counts and the whole selection set, dropping every policy that is
        confidently worse. Evaluations are archived as ``meta_screen`` rows, the race as a ``race`` event.

        Fitness on generated meetings and S_val disagree, so the lead's fittest child is raced first
        (compared with its parent), then the fittest other new genomes.

        Returns:
            The race's leader and its estimated whole-set S_val (None when every evaluation failed).
        """
        known = {p.genome_hash for p in population}
        fitness = result.fitness
        lead_ids = {p.id for p in result.lead_children}
        pool = {p.genome_hash: p for p in (*result.hall_of_fame, *result.population, *result.lead_children)}
        new = sorted((p for h, p in pool.items() if h not in known and p.id in fitness and h != result.best.genome_hash),
                     key=lambda p: -fitness[p.id])
        slots = max(self.cfg.outer.screen_top_k - 1, 0)
        lead_first = [p for p in new if p.id in lead_ids][: min(slots, 1)]
        chosen = [result.best, *lead_first, *[p for p in new if p not in lead_first][: slots - len(lead_first)]]
        if not self.stages:
            raise EvoTrainerError("racing needs at least one selection item (the meta-validation set is empty)")
        reference = self.incumbent if self.incumbent is not None else (population[0] if population else result.best)
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

        rc = self.cfg.outer.race
        race = run_race(len(chosen), ref, evaluate, self.stages, level=rc.level, drop_level=rc.drop_level,
                        survivors=rc.survivors, futility=rc.futility)
        self._log_race(race, chosen, reference, harness_id, outer_generation)
        leader = chosen[race.leader] if race.leader is not None else result.best
        if race.leader is None or len(failed) == len(chosen):
            return leader, None
        entry = race.entries[race.leader]
        return leader, float(np.mean(ref)) + entry.bound.mean

    def _log_race(self, race: Race, chosen: Sequence[Policy], reference: Policy, harness_id: str,
                  outer_generation: int) -> None:
        self.rec.event("race", outer_generation=outer_generation, harness_id=harness_id, reference=reference.id,
                       stages=list(race.stages), evaluations=race.evaluations,
                       leader=None if race.leader is None else chosen[race.leader].id,
                       level=self.cfg.outer.race.level, drop_level=self.cfg.outer.race.drop_level,
                       entries=[{"policy_id": chosen[e.index].id, "items": e.items, "status": e.status,
                                 **e.bound.as_dict()} for e in race.entries])
        self.console.print(f"  race vs {reference.id} ({race.evaluations} evaluations): " + ", ".join(
            f"{chosen[e.index].id} {e.status} after {e.items} ({e.bound.mean:+.4f})" for e in race.entries)
            + (f" -> {chosen[race.leader].id}" if race.leader is not None else ""), markup=False, highlight=False)

    def full_score(self, policy: Policy, harness_id: str, outer_generation: int) -> FullScore:
        """``policy`` on the whole selection set: only items not yet scored are evaluated; the whole-set
        value is archived as one ``meta_val`` row. ``screen_s_val`` is on the same scale (the race's
        estimates are whole-set estimates), ``per_item`` in race order."""
        tokens0 = self.meter.tokens
        missing = [t for i, t in enumerate(self.order) if i not in self._items.get(policy.genome_hash, {})]
        if missing:
            evaluation = self.meta_many([policy], missing, "meta_screen", harness_id, outer_generation,
                                        words="whole selection set, items not yet scored:")[0]
            if evaluation.s_val is None:
                self.rec.meta(evaluation, kind="meta_val", harness_id=harness_id, outer_generation=outer_generation)
                return FullScore(None, None, self.meter.tokens - tokens0)
        vec = self.vector(policy) or [0.0] * len(self.order)
        s_val = float(np.mean(vec)) if vec else 0.0
        self.rec.meta(self._whole_set(policy, vec), kind="meta_val", harness_id=harness_id,
                      outer_generation=outer_generation)
        return FullScore(s_val, s_val, self.meter.tokens - tokens0, tuple(vec))

    def _whole_set(self, policy: Policy, vec: Sequence[float]) -> MetaEvaluation:
        """One whole-selection-set evaluation assembled from the per-item values scored so far."""
        chunks = self._parts.get(policy.genome_hash, [])
        weight = sum(n for n, _ in chunks) or 1
        names = {k for _, parts in chunks for k in parts}
        parts = {k: sum(n * p.get(k, 0.0) for n, p in chunks) / weight for k in sorted(names)}
        n = len(vec)
        mean = float(np.mean(vec)) if n else 0.0
        stderr = float(np.std(vec, ddof=1) / np.sqrt(n)) if n >= 2 else None
        return MetaEvaluation(policy.id, policy.genome_hash, batch_id_for(self.selection), mean, stderr, parts,
                              tuple(vec), (), 0, 0.0, True, None)

    def heldout(self, policy: Policy, items: Sequence[MeetingTask], outer_generation: int) -> MetaEvaluation:
        """``policy`` on the held-out items (archived as ``meta_heldout``; never used to select)."""
        return self.meta_many([policy], items, "meta_heldout", None, outer_generation)[0]

    def meta_many(self, policies: Sequence[Policy], items: Sequence[MeetingTask], kind: str,
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
            self.front.setdefault(evaluation.genome_hash, next(p for p in policies if p.genome_hash ==
                                                               evaluation.genome_hash))
            fresh = [p for p in positions if p not in known]
            for p, v in zip(positions, evaluation.per_item, strict=True):
                known[p] = 0.0 if v is None else float(v)
            if fresh:
                self._parts.setdefault(evaluation.genome_hash, []).append((len(fresh), dict(evaluation.parts)))
        return evaluations

    def _inner(
        self, population: Sequence[Policy], tasks: Sequence[MeetingTask], harness: Harness, hid: str, g: int,
        lead: Policy | None = None,
    ) -> InnerResult:
        """K inner generations under one harness candidate, archived as they go."""
        inner_gen = (g - 1) * self.cfg.inner.generations
        calls = iter(range(inner_gen, inner_gen + 10**6))
        rec, timings, console = self.rec, self.timings, self.console
        experience_of = getattr(self.family, "experience", None)
        passing = None if self.adapter_backend is None else PassingSampleRecorder(
            tasks, self.family, threshold=self.cfg.inner.adapter_pass_threshold, forbidden=self.forbidden)

        def on_evaluations(evaluations) -> None:
            rec.fitness(evaluations, harness_id=hid, outer_generation=g, inner_generation=next(calls))
            if passing is not None:  # the Lamarckian adapter mutation learns from these
                passing.record(evaluations)
            if experience_of is not None:  # solved training episodes become exemplars of later batches
                for e in (e for e in evaluations if not e.cached):  # a cached one was seen when made
                    for t, out in zip(tasks, e.outputs, strict=False):
                        self.experience.add(t.size, experience_of(t, out))

        def on_generation(report: GenerationReport) -> None:
            rec.policies([*report.intermediates, *report.children])
            for phase, sec in report.timings.items():
                timings[f"inner: {phase}"] = timings.get(f"inner: {phase}", 0.0) + sec
            rec.event("phase", name="inner_generation", harness_id=hid, generation=report.generation,
                      **report.timings)
            rec.event("inner_generation", harness_id=hid, outer_generation=g, generation=report.generation,
                      record={k: v for k, v in report.record.items()
                              if isinstance(v, (int, float, str)) and not k.startswith("t_")},
                      children=[c.id for c in report.children], rejected=report.rejected,
                      skipped=report.skipped, mutator_error=report.mutator_error)
            if report.initial:
                return
            r = report.record
            console.print(
                f"    gen {report.generation}: max {_fmt(r.get('max'))} mean {_fmt(r.get('mean'))} "
                f"| {len(report.children)} children, {report.rejected} rejected"
                f"{' | SKIPPED (all evaluations failed)' if report.skipped else ''} | "
                + " ".join(f"{k} {v:.1f}s" for k, v in report.timings.items())
            )
            if self.stop_check is not None:  # a STOP file: end the run at this boundary
                self.stop_check(outer_generation=g, harness_id=hid, inner_generation=report.generation)

        feedback = FeedbackRecorder(tasks, forbidden=self.forbidden)
        workshop = None
        if passing is not None:
            from evotrainer.adapters import SFTExample

            workshop = lora_workshop(self.adapter_backend, self.adapters_root, self.cfg,
                                     lambda policy: [SFTExample(chat) for chat in passing(policy)])
        max_words = self.inner_cfg.max_prompt_words // 3
        exemplars = exemplars_from_tasks(tasks, self.family.exemplar, forbidden=self.forbidden,
                                         max_words=max_words)
        exemplars = tuple(dict.fromkeys(self.experience.retrieve(tasks, max_words=max_words) + exemplars))
        fitness = self.evaluator.fitness_function(
            tasks, harness.reward_weights, on_evaluations=on_evaluations, feedback=feedback)

        def evaluate(policies: Sequence[Policy]) -> list[float | None]:
            with task(f"  {hid}: evaluating {len(policies)} policies on {len(tasks)} tasks",
                      planned_requests(policies, tasks), console=console):
                return fitness(policies)

        result = run_inner_loop(
            population, generations=self.cfg.inner.generations, evaluate=evaluate, mutator=self.mutator,
            cfg=self.inner_cfg, rng=self.seeds.python(f"inner/{hid}"), start_generation=inner_gen,
            on_generation=on_generation, phrase_bank=self.phrase_bank, feedback=feedback,
            styles=self.styles, exemplars=exemplars, adapters=workshop, lead=lead,
            lead_tried=self.lead_tried.get(lead.id, ()) if lead is not None else (),
        )
        if lead is not None:
            self.lead_tried[lead.id] = self.lead_tried.get(lead.id, ()) + tuple(result.lead_kinds)
        self.operator_stats = self.operator_stats.merged(result.operator_stats)
        rec.event("operator_stats", harness_id=hid, outer_generation=g, stats=result.operator_stats.to_dict())
        self.candidates_run += 1
        every = self.inner_cfg.style_evolution_every
        if self.mutator is not None and every > 0 and self.candidates_run % every == 0:
            self._evolve_styles(hid, g)
        return result

    def _evolve_styles(self, hid: str, g: int) -> None:
        """Hyper-mutation of the style library from the run's operator statistics (archived as an event)."""
        plan = plan_style_mutation(
            self.styles, self.operator_stats, self.seeds.python(f"styles/{hid}"), g,
            params=self.inner_cfg.mutator_params, min_trials=self.inner_cfg.style_min_trials,
            task_hint=self.inner_cfg.task_hint)
        if plan is None:
            return
        try:
            text = self.mutator.generate([plan.request])[0].text
        except Exception as exc:  # a failing mutator never stops the run: the library stays as it is
            self.rec.event("style_library", harness_id=hid, outer_generation=g, accepted=False, error=repr(exc))
            return
        new = apply_style_mutation(self.styles, plan, text, min_on_topic=self.inner_cfg.min_on_topic)
        self.rec.event("style_library", harness_id=hid, outer_generation=g, accepted=new is not None,
                       retired=plan.worst, rewritten=plan.best, new_name=plan.new_name, answer=text,
                       library=[[s.name, s.instruction] for s in (new or self.styles)])
        if new is not None:
            self.styles = new
            instruction = next(s.instruction for s in new if s.name == plan.new_name)
            self.console.print(f"    style library: {plan.worst} retired, {plan.new_name} added "
                               f"({instruction!r})", markup=False, highlight=False)


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4f}"
