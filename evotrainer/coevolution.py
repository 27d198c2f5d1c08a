"""The two loops together: an outer CMA-ES over the harness, an inner DEAP loop over policies.

Read top to bottom (:func:`run_evolve`):

1. set up: root seed → named RNG streams; task family, meta-validation set (and its fixed
   screening subset), seed population, policy model (+ mutator), harness space, CMA-ES, archive;
2. generation 0: score the seeds on one batch under the initial harness, keep the best
   ``inner.population_size``; the best of them, scored on the whole meta-validation set, is the
   first incumbent;
3. each outer generation: ask CMA-ES for harness candidates; for each, draw a task batch at its
   difficulty, run ``inner.generations`` inner generations from the current population under its
   reward weights, and screen the best policy on the fixed screening subset; tell CMA-ES the
   screening scores; if the best candidate beats the incumbent on the screening items, score it
   on the whole set, and it becomes the incumbent if it beats it there too; the run continues
   from the best candidate's population;
4. summary: the incumbent's prompt, S_val of the generation-0 best versus the final best.

Meta-validation items never enter a task batch or inner fitness: batches are generated, and a
batch sharing a transcript with the validation set is an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape

from evotrainer.archive import ArchiveStore, HarnessCandidateRow, archive_path
from evotrainer.archive.recorder import RunRecorder
from evotrainer.config import Config
from evotrainer.errors import EvoTrainerError
from evotrainer.harness import CMASearch, Harness, build_default_space
from evotrainer.rollout import MetaEvaluation, RolloutEvaluator, batch_id_for
from evotrainer.runtime import build_family, build_llm, load_seed_population, load_validation, sampling_from
from evotrainer.search.genome import Policy, render_system_prompt
from evotrainer.search.inner_loop import GenerationReport, InnerResult, run_inner_loop
from evotrainer.search.toolbox import InnerLoopConfig
from evotrainer.seeding import Seeds
from evotrainer.tasks.base import MeetingTask, TaskFamily

__all__ = ["EvolveSummary", "run_evolve", "screening_subset"]

log = logging.getLogger(__name__)
INTEGER_KNOBS = ("length", "speakers", "topics", "action_items")


@dataclass
class Incumbent:
    """The best (harness, population, policy) so far, by S_val on the whole meta-validation set."""

    policy: Policy
    s_val: float
    harness: Harness
    population: tuple[Policy, ...]
    outer_generation: int


@dataclass
class EvolveSummary:
    """What :func:`run_evolve` returns (and prints)."""

    run_id: str
    archive: Path
    initial_best: Policy
    initial_s_val: float
    best: Policy
    best_s_val: float
    rollouts: int
    policy_evaluations: int
    timings: dict[str, float] = field(default_factory=dict)
    s_val_curve: list[float] = field(default_factory=list)


def screening_subset(items: Sequence[MeetingTask], k: int) -> list[MeetingTask]:
    """A fixed subset of ``k`` items stratified by transcript length (evenly spaced ranks).

    Deterministic: depends only on the items, so every candidate is screened on the same items.
    """
    if k >= len(items):
        return list(items)
    ranked = sorted(items, key=lambda t: (len(t.transcript.split()), t.task_id))
    picks = np.linspace(0, len(ranked) - 1, k).round().astype(int)
    return [ranked[i] for i in sorted(set(picks.tolist()))]


def _draw_tasks(
    family: TaskFamily, rng: np.random.Generator, harness: Harness, n: int, forbidden: set[str]
) -> list[MeetingTask]:
    tasks = family.generate(rng, harness.difficulty, n)
    leaked = [t.task_id for t in tasks if t.content_hash in forbidden]
    if leaked:  # generated transcripts should never coincide with hand-written ones
        raise EvoTrainerError(f"task batch contains meta-validation transcripts {leaked}")
    return tasks


def _inner_config(cfg: Config) -> InnerLoopConfig:
    i = cfg.inner
    return InnerLoopConfig(
        population_size=i.population_size, elites=i.elites, tournament_size=i.tournament_size,
        cx_prob=i.cx_prob, mut_prob=i.mut_prob, llm_mutation_share=i.llm_mutation_share,
        max_prompt_words=i.max_prompt_words, hall_of_fame_size=i.hall_of_fame_size,
    )


def _run_id(cfg: Config, config_dict: dict) -> str:
    blob = json.dumps(config_dict, sort_keys=True, default=str).encode()
    return f"run-s{cfg.seed}-{hashlib.sha256(blob).hexdigest()[:10]}"


def run_evolve(cfg: Config, *, run_dir: str | Path, config_dict: dict | None = None) -> EvolveSummary:
    """Run the co-evolution described in the module docstring; returns and prints the summary."""
    console = Console()
    timings: dict[str, float] = defaultdict(float)
    config_dict = config_dict if config_dict is not None else asdict(cfg)
    seeds = Seeds(cfg.seed)

    # ---- 1. set up ------------------------------------------------------------------------------
    family = build_family(cfg)
    val_items = load_validation(cfg, family)
    screen_items = screening_subset(val_items, cfg.outer.screen_size)
    forbidden = {t.content_hash for t in val_items}
    population = load_seed_population(cfg)
    inner_cfg = _inner_config(cfg)

    t0 = time.perf_counter()
    llm = build_llm(cfg.model, progress=True)
    mutator = llm if cfg.mutator is None else build_llm(cfg.mutator, progress=True, role="mutator")
    timings["model load"] = time.perf_counter() - t0
    evaluator = RolloutEvaluator(llm, family, sampling=sampling_from(cfg.decoding, seed=seeds.int("decoding")))

    space = build_default_space(
        family.difficulty_bounds, asdict(cfg.task.difficulty), cfg.task.reward_weights,
        knobs=list(cfg.outer.knobs) or None, reward_logit_bounds=tuple(cfg.outer.reward_weight_bounds),
        integer_knobs=INTEGER_KNOBS,
    )
    search = CMASearch(space.dim, space.initial_vector(), cfg.outer.sigma0, cfg.outer.popsize, seed=seeds.int("cma"))

    run_id = _run_id(cfg, config_dict)
    db_path = archive_path(cfg.archive.path, run_dir)
    store = ArchiveStore(db_path)
    rec = RunRecorder(store, run_id)
    rec.start(cfg.seed, config_dict)
    rec.policies(population)
    rec.event("setup", validation_items=len(val_items), screen_items=[t.task_id for t in screen_items],
              harness_names=list(space.names), population=[p.id for p in population])
    console.print(f"[bold]evolve[/] run {run_id}: {len(population)} seed policies, {len(val_items)} "
                  f"meta-validation items ({len(screen_items)} screen), harness of {space.dim} params, "
                  f"archive {db_path}")

    # ---- 2. generation 0 ------------------------------------------------------------------------
    harness0 = space.decode(space.initial_vector())
    tasks0 = _draw_tasks(family, seeds.numpy("tasks/g0"), harness0, cfg.task.tasks_per_generation, forbidden)
    rec.event("task_batch", outer_generation=0, harness_id="h0", batch_id=batch_id_for(tasks0), task_ids=[t.task_id for t in tasks0],
              content_hashes=[t.content_hash for t in tasks0])
    t0 = time.perf_counter()
    evals0 = evaluator.evaluate(population, tasks0, harness0.reward_weights)
    timings["inner: evaluate"] += time.perf_counter() - t0
    rec.fitness(evals0, harness_id="h0", outer_generation=0, inner_generation=0)
    scored = [(e.fitness, i) for i, e in enumerate(evals0) if e.fitness is not None]
    if not scored:
        raise EvoTrainerError("generation 0: every seed policy failed evaluation (see the archive events)")
    keep = [population[i] for _, i in sorted(scored, key=lambda s: (-s[0], s[1]))[: cfg.inner.population_size]]
    initial_best = keep[0]
    t0 = time.perf_counter()
    meta0 = evaluator.meta_evaluate([initial_best], val_items)[0]
    timings["meta-validation"] += time.perf_counter() - t0
    rec.meta(meta0, kind="meta_val", harness_id="h0", outer_generation=0)
    initial_s_val = meta0.s_val or 0.0
    incumbent = Incumbent(initial_best, initial_s_val, harness0, tuple(keep), 0)
    rec.event("incumbent", outer_generation=0, policy_id=initial_best.id, s_val=initial_s_val, harness_id="h0")
    console.print(f"gen 0: best seed {initial_best.id} fitness {max(s for s, _ in scored):.4f}, "
                  f"S_val {initial_s_val:.4f} ± {meta0.stderr or 0:.4f} (whole set)")
    screen_idx = [i for i, t in enumerate(val_items) if any(t is s for s in screen_items)]
    incumbent_screen = _subset_mean(meta0, screen_idx)
    population_now: tuple[Policy, ...] = tuple(keep)
    s_val_curve = [initial_s_val]
    inner_gen = 0

    # ---- 3. outer generations -------------------------------------------------------------------
    for g in range(1, cfg.outer.generations + 1):
        t_outer = time.perf_counter()
        xs = search.ask()
        results: list[tuple[Harness, InnerResult, MetaEvaluation]] = []
        for j, x in enumerate(xs):
            harness = space.decode(x)
            hid = f"g{g}c{j}"
            tasks = _draw_tasks(family, seeds.numpy(f"tasks/{hid}"), harness, cfg.task.tasks_per_generation, forbidden)
            rec.event("task_batch", outer_generation=g, harness_id=hid, batch_id=batch_id_for(tasks), task_ids=[t.task_id for t in tasks],
                      content_hashes=[t.content_hash for t in tasks])
            result = _inner(evaluator, mutator, rec, console, timings, population_now, tasks, harness, hid, g,
                            inner_gen, cfg, inner_cfg, seeds)
            t0 = time.perf_counter()
            screen = evaluator.meta_evaluate([result.best], screen_items)[0]
            timings["meta-validation"] += time.perf_counter() - t0
            rec.meta(screen, kind="meta_screen", harness_id=hid, outer_generation=g)
            results.append((harness, result, screen))
            console.print(f"  outer {g} cand {j}: {_fmt_harness(harness)} → best {result.best.id} "
                          f"fitness {result.best_fitness:.4f}, screen S_val {_fmt(screen.s_val)}")
        inner_gen += cfg.inner.generations

        scores = [r[2].s_val if r[2].s_val is not None else float("nan") for r in results]
        if all(s is None for s in (r[2].s_val for r in results)):
            rec.event("outer_skipped", outer_generation=g, reason="every screening evaluation failed")
            console.print(f"outer {g}: every screening evaluation failed; not told to CMA-ES")
            continue
        search.tell(xs, scores)
        best_j = int(np.nanargmax(scores))
        b_harness, b_result, b_screen = results[best_j]
        # Only a candidate that beats the incumbent on the screening items earns a whole-set score.
        full: MetaEvaluation | None = None
        if b_screen.s_val is not None and b_screen.s_val > incumbent_screen:
            t0 = time.perf_counter()
            full = evaluator.meta_evaluate([b_result.best], val_items)[0]
            timings["meta-validation"] += time.perf_counter() - t0
            rec.meta(full, kind="meta_val", harness_id=f"g{g}c{best_j}", outer_generation=g)
        for j, (harness, result, screen) in enumerate(results):
            rec.candidate(HarnessCandidateRow(
                harness_id=f"g{g}c{j}", outer_generation=g, index=j, vector=[float(v) for v in harness.vector],
                values=harness.as_dict(), s_val=full.s_val if (j == best_j and full) else None,
                screen_s_val=screen.s_val, best_policy_id=result.best.id,
                status="best" if j == best_j else "evaluated",
            ))
        improved = full is not None and full.s_val is not None and full.s_val > incumbent.s_val
        if improved:
            incumbent = Incumbent(b_result.best, float(full.s_val), b_harness, b_result.population, g)
            incumbent_screen = _subset_mean(full, screen_idx)
            rec.event("incumbent", outer_generation=g, policy_id=b_result.best.id, s_val=incumbent.s_val,
                      harness_id=f"g{g}c{best_j}")
        population_now = b_result.population
        s_val_curve.append(incumbent.s_val)
        seconds = time.perf_counter() - t_outer
        rec.event("phase", name="outer_generation", outer_generation=g, seconds=seconds)
        verdict = (f"whole-set S_val {_fmt(full.s_val)}" if full is not None
                   else f"screen {_fmt(b_screen.s_val)} <= incumbent's {incumbent_screen:.4f}, not promoted")
        console.print(f"[bold]outer {g}/{cfg.outer.generations}[/]: best candidate {best_j}: {verdict}; incumbent {incumbent.policy.id} S_val {incumbent.s_val:.4f}"
                      f"{' [green](new)[/]' if improved else ''}; CMA sigma {search.sigma:.3f}; {seconds:.0f} s")

    # ---- 4. summary -----------------------------------------------------------------------------
    summary = EvolveSummary(
        run_id=run_id, archive=db_path, initial_best=initial_best, initial_s_val=initial_s_val,
        best=incumbent.policy, best_s_val=incumbent.s_val, rollouts=evaluator.rollouts,
        policy_evaluations=len(store.evaluations(run_id, kind="fitness")), timings=dict(timings),
        s_val_curve=s_val_curve,
    )
    rec.event("summary", initial_best=initial_best.id, initial_s_val=initial_s_val, best=incumbent.policy.id,
              best_s_val=incumbent.s_val, rollouts=evaluator.rollouts, s_val_curve=s_val_curve,
              stop_reason="outer.generations reached")
    rec.event("phase", name="totals", **{k.replace(" ", "_").replace(":", ""): v for k, v in timings.items()})
    store.close()
    _print_summary(console, summary, incumbent)
    return summary


def _inner(
    evaluator: RolloutEvaluator, mutator, rec: RunRecorder, console: Console, timings: dict[str, float],
    population: Sequence[Policy], tasks: Sequence[MeetingTask], harness: Harness, hid: str, g: int,
    inner_gen: int, cfg: Config, inner_cfg: InnerLoopConfig, seeds: Seeds,
) -> InnerResult:
    """K inner generations under one harness candidate, archived as they go."""
    calls = iter(range(inner_gen, inner_gen + 10**6))

    def on_evaluations(evaluations) -> None:
        rec.fitness(evaluations, harness_id=hid, outer_generation=g, inner_generation=next(calls))

    def on_generation(report: GenerationReport) -> None:
        rec.policies(report.children)
        for phase, sec in report.timings.items():
            timings[f"inner: {phase}"] += sec
        rec.event("phase", name="inner_generation", harness_id=hid, generation=report.generation, **report.timings)
        rec.event("inner_generation", harness_id=hid, outer_generation=g, generation=report.generation,
                  record={k: v for k, v in report.record.items()
                          if isinstance(v, (int, float, str)) and not k.startswith("t_")},
                  children=[c.id for c in report.children], rejected=report.rejected, skipped=report.skipped,
                  mutator_error=report.mutator_error)
        if report.initial:
            return
        r = report.record
        console.print(
            f"    gen {report.generation}: max {_fmt(r.get('max'))} mean {_fmt(r.get('mean'))} "
            f"| {len(report.children)} children, {report.rejected} rejected"
            f"{' | SKIPPED (all evaluations failed)' if report.skipped else ''} | "
            + " ".join(f"{k} {v:.1f}s" for k, v in report.timings.items())
        )

    evaluate = evaluator.fitness_function(tasks, harness.reward_weights, on_evaluations=on_evaluations)
    return run_inner_loop(
        population, generations=cfg.inner.generations, evaluate=evaluate, mutator=mutator, cfg=inner_cfg,
        rng=seeds.python(f"inner/{hid}"), start_generation=inner_gen, on_generation=on_generation,
    )


def _subset_mean(evaluation: MetaEvaluation, indices: Sequence[int]) -> float:
    """Mean of a whole-set evaluation's per-item values over ``indices`` (failed items count 0)."""
    vals = [evaluation.per_item[i] or 0.0 for i in indices]
    return float(np.mean(vals)) if vals else 0.0


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _fmt_harness(h: Harness) -> str:
    knobs = " ".join(f"{k}={v:.3g}" for k, v in h.difficulty.items())
    weights = " ".join(f"{k}={v:.2f}" for k, v in h.reward_weights.items())
    return escape(f"[{knobs} | w: {weights}]")


def _print_summary(console: Console, s: EvolveSummary, inc: Incumbent) -> None:
    console.rule("[bold]summary")
    console.print(f"run {s.run_id}")
    console.print(f"S_val (whole meta-validation set, higher is better): generation-0 best "
                  f"{s.initial_best.id} {s.initial_s_val:.4f} → final best {s.best.id} {s.best_s_val:.4f} "
                  f"({s.best_s_val - s.initial_s_val:+.4f})")
    console.print(f"incumbent S_val per outer generation: {', '.join(f'{v:.4f}' for v in s.s_val_curve)}")
    console.print(f"best harness (outer gen {inc.outer_generation}): {_fmt_harness(inc.harness)}")
    console.print(f"evaluations: {s.policy_evaluations} policy evaluations on task batches, "
                  f"{s.rollouts} rollouts (model calls for policies)")
    console.print("timings: " + ", ".join(f"{k} {v:.0f}s" for k, v in s.timings.items()))
    console.print(f"archive: {s.archive}")
    console.rule(f"best prompt ({s.best.id}, operator {s.best.operator}, generation {s.best.generation})")
    console.print(render_system_prompt(s.best.sections) or "(empty system prompt)", markup=False, highlight=False)
