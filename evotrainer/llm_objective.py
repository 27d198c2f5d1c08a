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
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from evotrainer.archive.recorder import RunRecorder
from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.config import Config
from evotrainer.errors import ConfigError, EvoTrainerError
from evotrainer.harness import Harness
from evotrainer.harness.objective import CandidateResult, FullScore
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
from evotrainer.search.exemplars import exemplars_from_tasks
from evotrainer.search.genome import Policy
from evotrainer.search.inner_loop import GenerationReport, InnerResult, run_inner_loop
from evotrainer.search.mutation_prompts import MUTATION_STYLES, MutationStyle
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.phrases import PhraseBank
from evotrainer.search.style_library import apply_style_mutation, plan_style_mutation
from evotrainer.search.toolbox import InnerLoopConfig
from evotrainer.seeding import Seeds
from evotrainer.tasks.base import MeetingTask, TaskFamily

__all__ = ["LLMObjective", "TokenMeter", "inner_config", "lora_workshop", "planned_requests", "subset_mean"]

_KIND_WORDS = {"meta_screen": "screening", "meta_val": "whole selection set:", "meta_heldout": "held-out set:"}


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


def inner_config(cfg: Config) -> InnerLoopConfig:
    """The inner loop's settings from ``cfg.inner``; decoding genes centred on ``cfg.decoding``."""
    i = cfg.inner
    return InnerLoopConfig(
        population_size=i.population_size, elites=i.elites, tournament_size=i.tournament_size,
        cx_prob=i.cx_prob, mut_prob=i.mut_prob, llm_mutation_share=i.llm_mutation_share,
        llm_merge_share=i.llm_merge_share, reflective_share=i.reflective_share,
        phrase_mutation_share=i.phrase_mutation_share, decoding_mutation_share=i.decoding_mutation_share,
        phrase_band_low=i.phrase_band[0], phrase_band_high=i.phrase_band[1],
        near_duplicate_cosine=i.near_duplicate_cosine, min_diversity=i.min_diversity,
        adaptive_operators=i.adaptive_operators, exemplar_mutation_share=i.exemplar_mutation_share,
        prefill_mutation_share=i.prefill_mutation_share, lead_offspring=i.lead_offspring,
        section_match_cosine=i.section_match_cosine, style_evolution_every=i.style_evolution_every,
        style_min_trials=i.style_min_trials, adapter_mutation_share=i.adapter_mutation_share,
        adapter_noise_share=i.adapter_noise_share,
        max_prompt_words=i.max_prompt_words, hall_of_fame_size=i.hall_of_fame_size,
        decoding_genes=decoding_genes_for(sampling_from(cfg.decoding)),
    )


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


def subset_mean(evaluation: MetaEvaluation, indices: Sequence[int]) -> float:
    """Mean of an evaluation's per-item values over ``indices`` (failed items count 0)."""
    vals = [evaluation.per_item[i] or 0.0 for i in indices]
    return float(np.mean(vals)) if vals else 0.0


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

    Raises:
        ConfigError: adapter genes are on but the policy model is not a transformers backend.
    """

    def __init__(
        self, *, evaluator: RolloutEvaluator, mutator: Any, meter: TokenMeter, family: TaskFamily,
        rec: RunRecorder, console: Console, timings: MutableMapping[str, float], cfg: Config, seeds: Seeds,
        selection: Sequence[MeetingTask], screen: Sequence[MeetingTask], forbidden: set[str],
        phrase_bank: PhraseBank | None = None, adapters_root: str | Path | None = None,
    ) -> None:
        self.evaluator, self.mutator, self.meter, self.family = evaluator, mutator, meter, family
        self.rec, self.console, self.timings, self.cfg, self.seeds = rec, console, timings, cfg, seeds
        self.selection, self.screen, self.forbidden = list(selection), list(screen), forbidden
        self.screen_idx = [i for i, t in enumerate(self.selection) if any(t is s for s in self.screen)]
        self.inner_cfg = inner_config(cfg)
        self.phrase_bank = phrase_bank
        self.operator_stats = OperatorStats()
        self.styles: tuple[MutationStyle, ...] = MUTATION_STYLES
        self.candidates_run = 0
        self.lead: Policy | None = None  # best policy screened so far (None: the population's first)
        self.lead_screen: float | None = None  # its screening S_val
        self.lead_tried: tuple[str, ...] = ()  # mutation kinds tried on the lead since it became the lead
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
        """Run one harness candidate: task batch, K inner generations, screening of the best policy.

        The inner loop gives ``inner.lead_offspring`` slots per generation to mutants of the lead (the best
        policy screened so far, see :meth:`set_lead`; the population's first when none was set), rotating
        through the mutation kinds across candidates until the lead changes.
        """
        tokens0 = self.meter.tokens
        tasks = self.draw_tasks(harness, harness_id, outer_generation)
        lead = self.lead if self.lead is not None else (population[0] if population else None)
        result = self._inner(population, tasks, harness, harness_id, outer_generation, lead)
        best, screen = self._screen(result, population, harness_id, outer_generation)
        if screen.s_val is not None and (self.lead_screen is None or screen.s_val > self.lead_screen):
            self.set_lead(best, screen.s_val, harness_id, outer_generation)
        try:
            start_max = float(result.logbook[0]["max"])
        except (IndexError, KeyError, TypeError, ValueError):
            start_max = float("nan")
        gain = result.best_fitness - start_max if np.isfinite(start_max) else None
        return CandidateResult(
            best=best, population=tuple(result.population), screen_s_val=screen.s_val,
            full_score=partial(self.full_score, best, harness_id, outer_generation),
            inner_gain=gain, best_fitness=result.best_fitness, generated_tokens=self.meter.tokens - tokens0,
        )

    def set_lead(self, policy: Policy, screen_s_val: float | None, harness_id: str = "h0",
                 outer_generation: int = 0) -> None:
        """Make ``policy`` (screening S_val ``screen_s_val``, None = unknown) the lead of later candidates
        (archived as a ``lead`` event)."""
        self.lead, self.lead_screen, self.lead_tried = policy, screen_s_val, ()
        self.rec.event("lead", outer_generation=outer_generation, harness_id=harness_id, policy_id=policy.id,
                       screen_s_val=screen_s_val)

    def _screen(self, result: InnerResult, population: Sequence[Policy], harness_id: str,
                outer_generation: int) -> tuple[Policy, MetaEvaluation]:
        """Screen the candidate's fittest policy and ``outer.screen_top_k - 1`` of its new genomes.

        Fitness on generated meetings and S_val disagree (on the 2-core runs the seeds kept the top
        fitness while evolved children screened better or worse at random), so children made under this
        harness get a screening too: the fittest child of the lead first (it is compared with its parent
        on the same items), then the fittest other new genomes. They are scored in one batched call
        (archived as ``meta_screen``). Returns the policy with the best screening S_val (ties: the
        earlier one) and its evaluation.
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
        evaluations = self.meta_many(chosen, self.screen, "meta_screen", harness_id, outer_generation)
        scores = [e.s_val if e.s_val is not None else -np.inf for e in evaluations]
        k = int(np.argmax(scores))  # first maximum: the fitter policy wins ties
        if len(chosen) > 1:
            self.console.print(f"  screened {len(chosen)} policies: "
                               + ", ".join(f"{p.id} {v:.4f}" for p, v in zip(chosen, scores, strict=True))
                               + f" -> {chosen[k].id}", markup=False, highlight=False)
        return chosen[k], evaluations[k]

    def full_score(self, policy: Policy, harness_id: str, outer_generation: int) -> FullScore:
        """``policy`` on the whole selection set (archived as ``meta_val``)."""
        tokens0 = self.meter.tokens
        full = self._meta(policy, self.selection, "meta_val", harness_id, outer_generation)
        screen = subset_mean(full, self.screen_idx) if full.s_val is not None else None
        return FullScore(full.s_val, screen, self.meter.tokens - tokens0)

    def heldout(self, policy: Policy, items: Sequence[MeetingTask], outer_generation: int) -> MetaEvaluation:
        """``policy`` on the held-out items (archived as ``meta_heldout``; never used to select)."""
        return self._meta(policy, items, "meta_heldout", None, outer_generation)

    def _meta(self, policy: Policy, items: Sequence[MeetingTask], kind: str, harness_id: str | None,
              outer_generation: int) -> MetaEvaluation:
        return self.meta_many([policy], items, kind, harness_id, outer_generation)[0]

    def meta_many(self, policies: Sequence[Policy], items: Sequence[MeetingTask], kind: str,
                   harness_id: str | None, outer_generation: int) -> list[MetaEvaluation]:
        """``policies`` scored on ``items`` in one batched call, each archived as ``kind``."""
        t0 = time.perf_counter()
        n = len(policies)
        where = "gen 0" if harness_id == "h0" else harness_id or "final best"
        label = f"{where}: {_KIND_WORDS.get(kind, kind)} {n} polic{'y' if n == 1 else 'ies'} on {len(items)} items"
        with task(label, planned_requests(policies, items), console=self.console):
            evaluations = list(self.evaluator.meta_evaluate(list(policies), items))
        self.timings["meta-validation"] = self.timings.get("meta-validation", 0.0) + time.perf_counter() - t0
        for evaluation in evaluations:
            self.rec.meta(evaluation, kind=kind, harness_id=harness_id, outer_generation=outer_generation)
        return evaluations

    def _inner(
        self, population: Sequence[Policy], tasks: Sequence[MeetingTask], harness: Harness, hid: str, g: int,
        lead: Policy | None = None,
    ) -> InnerResult:
        """K inner generations under one harness candidate, archived as they go."""
        inner_gen = (g - 1) * self.cfg.inner.generations
        calls = iter(range(inner_gen, inner_gen + 10**6))
        rec, timings, console = self.rec, self.timings, self.console
        passing = None if self.adapter_backend is None else PassingSampleRecorder(
            tasks, self.family, threshold=self.cfg.inner.adapter_pass_threshold, forbidden=self.forbidden)

        def on_evaluations(evaluations) -> None:
            rec.fitness(evaluations, harness_id=hid, outer_generation=g, inner_generation=next(calls))
            if passing is not None:  # the Lamarckian adapter mutation learns from these
                passing.record(evaluations)

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

        feedback = FeedbackRecorder(tasks, forbidden=self.forbidden)
        workshop = None
        if passing is not None:
            from evotrainer.adapters import SFTExample

            workshop = lora_workshop(self.adapter_backend, self.adapters_root, self.cfg,
                                     lambda policy: [SFTExample(chat) for chat in passing(policy)])
        exemplars = exemplars_from_tasks(tasks, forbidden=self.forbidden, max_words=self.inner_cfg.max_prompt_words // 3)
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
            styles=self.styles, exemplars=exemplars, adapters=workshop, lead=lead, lead_tried=self.lead_tried,
        )
        self.lead_tried += result.lead_kinds
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
