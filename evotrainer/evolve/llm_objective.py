"""The real objective of the outer loop: one harness candidate run with the policy model.

:class:`LLMObjective` is what ``coevolution.run_evolve`` hands to ``outer_loop.run_outer_loop``. Called
with a harness and a population, it runs one candidate, top to bottom in :meth:`LLMObjective.__call__`:

1. draw a task batch at the harness' difficulty (:meth:`LLMObjective.draw_tasks`);
2. choose the lead, the parent of ``inner.lead_offspring`` mutants per generation
   (:class:`~evotrainer.evolve.lead.LeadState`);
3. run ``inner.generations`` DEAP generations under the harness' reward weights and with its strategy knobs
   applied to the inner config (``outer.strategy``: operator shares, mutator temperature;
   :meth:`~evotrainer.search.inner_config.InnerConfig.with_strategy`), archiving every policy, fitness and
   generation as it goes (:meth:`LLMObjective._inner`, :func:`~evotrainer.search.inner_loop.run_inner_loop`);
4. race the fittest policy, the lead's fittest mutant and the fittest other new genomes against the
   incumbent on the selection items (:class:`~evotrainer.run.screening.Screening`; how a candidate is
   scored: :mod:`evotrainer.harness.scoring`);
5. return a :class:`~evotrainer.harness.objective.CandidateResult` whose ``full_score`` completes the
   leader's whole-set score only when the outer loop asks for it.

The style library evolves between candidates (:class:`~evotrainer.evolve.style_evolution.StyleLibrary`).
Tokens are counted per role by the run's :class:`~evotrainer.backends.usage.RunUsage`.

With ``inner.adapter_mutation_share > 0`` policies also carry LoRA adapter genes: each inner-loop call gets an
:class:`~evotrainer.search.adapter_ops.AdapterWorkshop` (:func:`lora_workshop`) on the transformers policy
model, whose Lamarckian fine-tunes learn from the policies' own passing outputs on that call's training batch
(:class:`~evotrainer.rollout.PassingSampleRecorder`); new adapters go to ``<run dir>/adapters/<policy id>``.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from evotrainer.archive.recorder import RunRecorder
from evotrainer.backends.usage import RunUsage, unwrap
from evotrainer.config import Config
from evotrainer.errors import ConfigError, EvoTrainerError
from evotrainer.events.kinds import InnerGenerationEvent, OperatorStatsEvent, PhaseEvent, TaskBatchEvent
from evotrainer.evolve.lead import LeadState
from evotrainer.evolve.style_evolution import StyleLibrary
from evotrainer.genome import Policy
from evotrainer.harness import Harness
from evotrainer.harness.objective import CandidateResult
from evotrainer.harness.scoring import ScoringRule
from evotrainer.progress import task
from evotrainer.rollout import (
    FeedbackRecorder,
    PassingSampleRecorder,
    RolloutEvaluator,
    batch_id_for,
)
from evotrainer.run.gene_support import remote_decoding_genes
from evotrainer.run.runtime import sampling_from
from evotrainer.run.screening import Screening, planned_requests
from evotrainer.search.adapter_ops import AdapterWorkshop
from evotrainer.search.decoding import decoding_genes_for
from evotrainer.search.exemplars import ExperiencePool, exemplars_from_tasks
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import GenerationReport, InnerResult, initial_population, run_inner_loop
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.operators_registry import DEFAULT_REGISTRY, OperatorRegistry
from evotrainer.search.phrases import PhraseBank
from evotrainer.search.toolbox import build_toolbox
from evotrainer.seeding import Seeds
from evotrainer.stats.bootstrap import finite
from evotrainer.tasks.base import Exemplars, SelfEvolving, Task, TaskFamily

__all__ = ["LLMObjective", "inner_config", "lora_workshop", "planned_requests", "task_batch"]


def _no_exemplar(task: Task, max_items: int = 2) -> None:
    return None


def inner_config(cfg: Config, family: Any = None) -> InnerConfig:
    """``cfg.inner`` with its unset domain texts filled in from ``family`` (``family.spec.texts``,
    :meth:`~evotrainer.search.inner_config.InnerConfig.with_texts`; none when ``family`` is None) and its null
    ``decoding_genes`` the defaults centred on ``cfg.decoding`` (those the policy's server honours with
    ``model.backend=openai``: ``gene_support.remote_decoding_genes``)."""
    inner = cfg.inner if family is None else cfg.inner.with_texts(family.spec.texts)
    if inner.decoding_genes is not None:
        return inner
    genes = remote_decoding_genes(decoding_genes_for(sampling_from(cfg.decoding)), cfg.model)
    return replace(inner, decoding_genes=genes)


def lora_workshop(
    backend: Any, root: str | Path, cfg: Config, samples: Callable[[Policy], Sequence[Any]]
) -> AdapterWorkshop:
    """The adapter operators' mechanics on a transformers policy model (``evotrainer.adapters``).

    Args:
        backend: the policy model's ``HFBackend`` (unwrapped from its :class:`~evotrainer.backends.usage.UsageMeter`).
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
            them), its model is float16 on the CPU, or ``inner.adapter_lora`` is out of range.
    """
    from evotrainer.adapters import cx_adapters, mut_adapter_noise, train_lora
    from evotrainer.backends.hf import HFBackend

    if not isinstance(backend, HFBackend):
        raise ConfigError(f"inner.adapter_mutation_share > 0 needs the transformers policy backend "
                          f"(model.backend=hf), got {type(backend).__name__}")
    model = backend.model
    dtype = next(model.parameters()).dtype
    if model.device.type == "cpu" and str(dtype) == "torch.float16":
        raise ConfigError("inner.adapter_mutation_share > 0 trains LoRA adapters, which model.dtype=float16 cannot "
                          "do on the CPU; use float32 or bfloat16 (auto)")
    train_cfg = cfg.inner.adapter_lora.check("inner.adapter_lora")
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


class LLMObjective:
    """Scores harness candidates with the policy model (see the module docstring). The state that lives across
    candidates is kept in three named parts: :attr:`screening` (per-item S_val values and the race,
    :class:`~evotrainer.run.screening.Screening`), :attr:`leads` (incumbent, Pareto front, lead,
    :class:`~evotrainer.evolve.lead.LeadState`) and :attr:`style_library` (the mutation styles,
    :class:`~evotrainer.evolve.style_evolution.StyleLibrary`).

    Args:
        evaluator: rollouts and scoring on the (metered) policy model.
        mutator: the (metered) mutator model for LLM variation, or None.
        usage: the run's token meters, one per role (the policy model's and the mutator's among them).
        family: the task family (generates task batches).
        rec: the run's archive writer.
        console: where progress is shown (inner generations, races and style changes are printed by a
            subscriber to the archive's events, :class:`~evotrainer.evolve.console_view.ConsoleView`).
        timings: phase -> seconds, accumulated in place.
        cfg: the run config.
        seeds: the run's named RNG streams.
        selection: the selection part of the meta-validation set.
        screen: the screening subset (items of ``selection``).
        forbidden: content hashes of every meta-validation item (never allowed in a task batch).
        phrase_bank: the run's phrase bank (grows across candidates), or None without an embedder.
        training: items with references that task batches may draw (``task.train_path``; the harness knob
            ``real_share`` sets how many), apart from every meta-validation and transfer item.
        adapters_root: where new adapter folders go when ``inner.adapter_mutation_share > 0`` (default:
            ``adapters/`` next to the archive file, i.e. in the run dir for the default archive path).

    Attributes:
        stop_check: called with ``outer_generation``, ``harness_id``, ``inner_generation`` after each inner
            generation; raises to end the run there (``RunControl.inner_boundary``); None = never.
        operator_stats: the run's operator statistics, merged over every candidate so far.
        experience: solved training episodes offered as exemplars (families with ``experience``).
        operators: the operator registry each candidate's inner-loop toolbox is built on (default the
            built-in records; set ``DEFAULT_REGISTRY.added(record)`` to run with an operator of your own).

    Raises:
        ConfigError: adapter genes are on but the policy model is not a transformers backend.
    """

    stop_check: Callable[..., None] | None = None
    operators: OperatorRegistry = DEFAULT_REGISTRY

    def __init__(
        self, *, evaluator: RolloutEvaluator, mutator: Any, usage: RunUsage, family: TaskFamily,
        rec: RunRecorder, console: Console, timings: MutableMapping[str, float], cfg: Config, seeds: Seeds,
        selection: Sequence[Task], screen: Sequence[Task], forbidden: set[str],
        phrase_bank: PhraseBank | None = None, adapters_root: str | Path | None = None,
        training: Sequence[Task] = (),
    ) -> None:
        self.evaluator, self.mutator, self.usage, self.family = evaluator, mutator, usage, family
        self.rec, self.console, self.timings, self.cfg, self.seeds = rec, console, timings, cfg, seeds
        self.forbidden = forbidden
        self.training = tuple(training)
        self.inner_cfg = inner_config(cfg, family)
        self.phrase_bank = phrase_bank
        self.operator_stats = OperatorStats()
        self.experience = ExperiencePool()
        self.leads = LeadState(rec, seeds)
        self.screening = Screening(evaluator=evaluator, usage=usage, rec=rec, console=console, timings=timings,
                                   selection=selection, screen=screen, rule=ScoringRule.from_config(cfg.outer),
                                   on_scored=self.leads.add)
        self.style_library = StyleLibrary(mutator, self.inner_cfg, rec, seeds)
        self.adapter_backend = None
        if cfg.inner.adapter_mutation_share > 0:
            if not isinstance(family, SelfEvolving):
                raise ConfigError(f"config key 'inner.adapter_mutation_share': the {family.name!r} family gives no "
                                  "training chats (the SelfEvolving capability); set it to 0")
            backend = unwrap(evaluator.llm)  # under the usage meter and the call log
            self.adapter_backend = backend
            self.adapters_root = Path(adapters_root) if adapters_root is not None else (
                Path(rec.store.path).resolve().parent / "adapters")
            lora_workshop(backend, self.adapters_root, cfg, lambda policy: ())  # fail early on a bad setup

    def __call__(
        self, harness: Harness, population: Sequence[Policy], harness_id: str, outer_generation: int
    ) -> CandidateResult:
        """Run one harness candidate: task batch, lead, K inner generations, a race of its best policies.

        The inner loop gives ``inner.lead_offspring`` slots per generation to mutants of the *lead*, a
        parent drawn from the per-item Pareto front (:meth:`LeadState.choose <evotrainer.evolve.lead.LeadState.choose>`),
        rotating through the mutation kinds until each was tried on it. The candidate's fittest policies
        then race the incumbent (:meth:`Screening.race <evotrainer.run.screening.Screening.race>`), which gives
        the leader's race estimate; ``full_score`` is free when the leader ran every item.
        """
        tokens0 = self.usage.completion_tokens()
        tasks = self.draw_tasks(harness, harness_id, outer_generation)
        lead = self.leads.choose(population, self.screening, harness_id, outer_generation)
        result = self._inner(population, tasks, harness, harness_id, outer_generation, lead)
        reference = self.leads.reference(population, result.best) or result.best
        chosen = self.racers(result, population, reference)
        best, estimate = self.screening.race(chosen, reference, result.best, harness_id, outer_generation)
        start_max = finite(result.logbook[0].get("max")) if result.logbook else None  # the start population's best
        gain = None if start_max is None else result.best_fitness - start_max
        return CandidateResult(
            best=best, population=tuple(result.population), race_estimate=estimate,
            full_score=partial(self.screening.full_score, best, harness_id, outer_generation),
            inner_gain=gain, best_fitness=result.best_fitness, generated_tokens=self.usage.completion_tokens() - tokens0,
        )

    def draw_tasks(self, harness: Harness, harness_id: str, outer_generation: int) -> list[Task]:
        """A task batch of ``task.tasks_per_generation`` items (logged as a ``task_batch`` event): generated at
        ``harness.difficulty``, then ``round(real_share * n)`` training items (the harness knob ``real_share``,
        at most all of them) drawn without replacement from ``training``.

        Raises:
            EvoTrainerError: the batch shares a task with the meta-validation set.
        """
        rng = self.seeds.numpy("tasks/g0" if harness_id == "h0" else f"tasks/{harness_id}")
        tasks = task_batch(self.family, rng, harness, self.cfg.task.tasks_per_generation, self.training)
        leaked = [t.task_id for t in tasks if t.content_hash in self.forbidden]
        if leaked:  # generated tasks should never coincide with hand-written ones
            raise EvoTrainerError(f"task batch contains meta-validation items {leaked}")
        self.rec.emit(TaskBatchEvent(outer_generation=outer_generation, harness_id=harness_id,
                                     batch_id=batch_id_for(tasks), task_ids=tuple(t.task_id for t in tasks),
                                     content_hashes=tuple(t.content_hash for t in tasks)))
        return tasks

    def racers(self, result: InnerResult, population: Sequence[Policy], reference: Policy | None = None) -> list[Policy]:
        """The candidate's policies that race ``reference``: its fittest, then ``ScoringRule.racers - 1`` of its
        new genomes (``outer.screen_top_k``).

        Fitness on generated tasks and S_val disagree, so the lead's fittest child comes first among the new
        genomes (it is compared with its parent), then the fittest others. When the fittest policy *is* the
        reference (same genome), racing it would spend a slot on a copy of the incumbent, so the slot goes to
        the next new genome instead (the fittest races only when there is no new genome at all).
        """
        known = {p.genome_hash for p in population}
        fitness = result.fitness
        lead_ids = {p.id for p in result.lead_children}
        pool = {p.genome_hash: p for p in (*result.hall_of_fame, *result.population, *result.lead_children)}
        new = sorted((p for h, p in pool.items() if h not in known and p.id in fitness and h != result.best.genome_hash),
                     key=lambda p: -fitness[p.id])
        is_reference = reference is not None and result.best.genome_hash == reference.genome_hash
        head = [] if is_reference and new else [result.best]
        slots = max(self.screening.rule.racers - len(head), 0)
        lead_first = [p for p in new if p.id in lead_ids][: min(slots, 1)]
        return [*head, *lead_first, *[p for p in new if p not in lead_first][: slots - len(lead_first)]]

    def set_incumbent(self, policy: Policy, harness_id: str = "h0", outer_generation: int = 0) -> None:
        """Make ``policy`` the reference of later races (the outer loop calls this on every promotion);
        archived as an ``incumbent_reference`` event."""
        self.leads.set_incumbent(policy, harness_id, outer_generation)

    def _inner(
        self, population: Sequence[Policy], tasks: Sequence[Task], harness: Harness, hid: str, g: int,
        lead: Policy | None = None,
    ) -> InnerResult:
        """K inner generations under one harness candidate (its strategy knobs applied), archived as they go."""
        inner_cfg = self.inner_cfg.with_strategy(harness.strategy)  # this candidate's operator shares, temperature
        inner_gen = (g - 1) * self.cfg.inner.generations
        calls = iter(range(inner_gen, inner_gen + 10**6))
        rec, timings, console = self.rec, self.timings, self.console
        exemplars_of = self.family if isinstance(self.family, Exemplars) else None
        passing = None if self.adapter_backend is None else PassingSampleRecorder(
            tasks, self.family, threshold=self.cfg.inner.adapter_pass_threshold, forbidden=self.forbidden)

        def on_evaluations(evaluations) -> None:
            rec.fitness(evaluations, harness_id=hid, outer_generation=g, inner_generation=next(calls))
            if passing is not None:  # the Lamarckian adapter mutation learns from these
                passing.record(evaluations)
            if exemplars_of is not None:  # solved training episodes become exemplars of later batches
                for e in (e for e in evaluations if not e.cached):  # a cached one was seen when made
                    for t, out in zip(tasks, e.outputs, strict=False):
                        self.experience.add(t.size, exemplars_of.experience(t, out))

        def on_generation(report: GenerationReport) -> None:
            rec.policies([*report.intermediates, *report.children])
            for phase, sec in report.timings.items():
                timings[f"inner: {phase}"] = timings.get(f"inner: {phase}", 0.0) + sec
            rec.emit(PhaseEvent(name="inner_generation", fields={"harness_id": hid, "generation": report.generation,
                                                                 **report.timings}))
            rec.emit(InnerGenerationEvent(
                harness_id=hid, outer_generation=g, generation=report.generation,
                record={k: v for k, v in report.record.items()
                        if isinstance(v, (int, float, str)) and not k.startswith("t_")},
                children=tuple(c.id for c in report.children), rejected=report.rejected,
                skipped=report.skipped, mutator_error=report.mutator_error))
            if report.initial:
                return
            if self.stop_check is not None:  # a STOP file: end the run at this boundary
                self.stop_check(outer_generation=g, harness_id=hid, inner_generation=report.generation)

        feedback = FeedbackRecorder(tasks, forbidden=self.forbidden, reference_of=self.family.reference_answer
                                    if isinstance(self.family, SelfEvolving) else None)
        workshop = None
        if passing is not None:
            from evotrainer.adapters import SFTExample

            workshop = lora_workshop(self.adapter_backend, self.adapters_root, self.cfg,
                                     lambda policy: [SFTExample(chat) for chat in passing(policy)])
        max_words = inner_cfg.max_prompt_words // 3
        exemplars = exemplars_from_tasks(tasks, exemplars_of.exemplar if exemplars_of is not None else _no_exemplar,
                                         forbidden=self.forbidden, max_words=max_words)
        exemplars = tuple(dict.fromkeys(self.experience.retrieve(tasks, max_words=max_words) + exemplars))
        fitness = self.evaluator.fitness_function(
            tasks, harness.reward_weights, on_evaluations=on_evaluations, feedback=feedback)

        def evaluate(policies: Sequence[Policy]) -> list[float | None]:
            with task(f"  {hid}: evaluating {len(policies)} policies on {len(tasks)} tasks",
                      planned_requests(policies, tasks), console=console):
                return fitness(policies)

        toolbox = build_toolbox(
            inner_cfg, registry=self.operators, mutator=self.mutator, phrases=self.phrase_bank,
            feedback=feedback, styles=self.style_library.styles, exemplars=exemplars, adapters=workshop,
            seed_prompts=initial_population(population, inner_cfg, lead))
        result = run_inner_loop(
            population, toolbox, evaluate, inner_cfg, self.seeds.python(f"inner/{hid}"),
            start_generation=inner_gen, on_generation=on_generation, lead=lead,
            lead_tried=self.leads.kinds_tried(lead),
        )
        self.leads.note_tried(lead, result.lead_kinds)
        self.operator_stats = self.operator_stats.merged(result.operator_stats)
        rec.emit(OperatorStatsEvent(harness_id=hid, outer_generation=g, stats=result.operator_stats.to_dict()))
        self.style_library.after_candidate(self.operator_stats, hid, g)
        return result


def task_batch(family: TaskFamily, rng: np.random.Generator, harness: Harness, n: int,
               training: Sequence[Task] = ()) -> list[Task]:
    """``n`` tasks: ``n - k`` generated at ``harness.difficulty``, then ``k = min(len(training),
    round_half_up(real_share * n))`` items of ``training`` drawn without replacement (in file order), where
    ``real_share`` is the harness knob of that name (0 when the harness has none or ``training`` is empty).
    Every draw comes from ``rng``; with ``k = 0`` the batch is the generator's alone, as without training items."""
    share = float(harness.extras.get("real_share", 0.0)) if training else 0.0
    k = min(len(training), int(np.floor(share * n + 0.5)))
    tasks = list(family.generate(rng, harness.difficulty, n - k))
    return tasks + ([training[i] for i in sorted(rng.choice(len(training), size=k, replace=False))] if k else [])
