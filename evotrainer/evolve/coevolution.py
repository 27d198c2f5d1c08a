"""The two loops together: an outer CMA-ES over the harness, an inner DEAP loop over policies.

Read top to bottom: :func:`run_evolve` sets up and wires the real model into the outer loop
(:mod:`evotrainer.run.outer_loop`: what is damped, how candidates are scored and promoted).

1. set up: root seed → named RNG streams; task family; meta-validation set split into a *selection*
   part and a fixed *held-out* part (``outer.heldout_share``, stratified by length; see
   ``run.validation_split``), a fixed screening subset of the selection part; seed population, policy
   model (+ mutator), both metered for generated tokens; harness space named in config
   (``outer.space``, ``outer.knobs``, ``outer.extras``, ``outer.strategy``, ``outer.evolve_reward_weights``);
   CMA-ES with a sigma floor; archive;
2. generation 0: score the seeds on one batch under the initial harness, keep the best
   ``inner.population_size``; with ``outer.seed_screen`` every seed is also scored on the screening
   items and the best of them leads the population; that leader, scored on the whole selection set, is
   the first incumbent (so the run starts from the best seed known on meta-validation, and an evolved
   policy has to beat it) and the first archived (harness, population) pair; it is also the objective's
   first *lead*, whose mutants fill ``inner.lead_offspring`` slots of every inner generation (the lead
   moves to any policy that screens better);
3. :func:`~evotrainer.run.outer_loop.run_outer_loop`, per outer generation: ask CMA-ES for proposals;
   for each proposal ``x`` apply the *damped* harness ``a + damping * (x - a)``, run the objective (task batch, inner
   generations, race against the incumbent as of now); flag reward hacking; promote at once; then tell
   CMA-ES; check rollback and stopping (an ablation arm swaps CMA-ES for a frozen or random harness,
   ``outer.candidate_source``, ``harness/candidates.py``; ``outer.budget.rollouts`` stops every arm at the
   same archived rollout count);
4. the final best (the best archived pair) is scored once on the held-out part; the transfer report
   (``stats/transfer.py``: final best, best seed and a plain prompt on ``task.transfer_path``); summary.

``report.html`` beside the archive is rewritten after generation 0, after each outer generation and at the
end (``browse/live_report.py``; ``archive.live_report``), and generation 0's cost is estimated after its
first call, with a warning when it alone would use most of ``outer.budget.seconds`` (``budget_check.py``).

Meta-validation items never enter a task batch or inner fitness: batches are generated, and a batch
sharing an input with the validation set is an error. Held-out items are never used to select.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from evotrainer.archive import archive_path
from evotrainer.archive.recorder import RunRecorder
from evotrainer.backends.threads import COMPUTE_PHASE, threads_in_use
from evotrainer.backends.usage import RunUsage, describe_backend
from evotrainer.browse.live_report import REPORT_NAME, LiveReport
from evotrainer.config import Config, resolve_roles
from evotrainer.errors import EvoTrainerError
from evotrainer.events.kinds import (
    GeneralisationEvent,
    OperatorStatsEvent,
    PhaseEvent,
    SetupEvent,
    SummaryEvent,
    YardstickEvent,
)
from evotrainer.evolve.budget_check import check_gen0_budget
from evotrainer.evolve.console_view import ConsoleView
from evotrainer.evolve.llm_objective import LLMObjective, inner_config
from evotrainer.evolve.report import print_operator_stats, print_summary
from evotrainer.genome import Policy
from evotrainer.harness import space_from_specs, yardstick
from evotrainer.harness.candidates import candidate_source
from evotrainer.harness.objective import CandidateResult, FullScore
from evotrainer.harness.rollback import ArchivedPair
from evotrainer.progress import stdout_console, task
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.gene_support import check_policy_backend
from evotrainer.run.outer_loop import run_outer_loop
from evotrainer.run.resume import ResumePlan, RunFiles, run_config
from evotrainer.run.runtime import (
    build_family,
    build_llm,
    load_seed_population,
    load_training,
    load_transfer,
    load_validation,
    sampling_from,
    task_settings,
)
from evotrainer.run.screening import planned_requests
from evotrainer.run.validation_split import screening_subset, split_validation
from evotrainer.search.phrases import PhraseBank
from evotrainer.seeding import Seeds
from evotrainer.stats.generalisation import Generalisation, compare, to_payload
from evotrainer.stats.transfer import score_transfer
from evotrainer.tracking import open_tracker

__all__ = ["CandidateResult", "FullScore", "run_evolve", "screening_subset"]

log = logging.getLogger(__name__)


def _run_id(cfg: Config, config_dict: dict) -> str:
    blob = json.dumps(config_dict, sort_keys=True, default=str).encode()
    return f"run-s{cfg.seed}-{hashlib.sha256(blob).hexdigest()[:10]}"


def run_evolve(cfg: Config, *, run_dir: str | Path, config_dict: dict | None = None,
               resume: ResumePlan | None = None) -> SummaryEvent:
    """Run the co-evolution described in the module docstring; returns the archived ``summary`` event, whose
    numbers the console's closing summary prints (:func:`~evotrainer.evolve.report.print_summary`).

    ``resume``: continue that killed run by deterministic replay (``evotrainer/run/resume.py``). Every LLM call
    goes through the run's call log (``llm_calls.db`` beside the archive) so that any run can be resumed,
    except with adapter genes. A ``STOP`` file in ``run_dir`` ends the run at the next generation boundary.
    Whatever the run opened (archive, call log and lock, tracker, Ray workers) is closed when it ends, also
    when it fails (a failed job of a multirun must not hold them for the next job in the same process).
    """
    with contextlib.ExitStack() as stack:
        return _evolve(cfg, run_dir, config_dict, resume, stack)


def _evolve(cfg: Config, run_dir: str | Path, config_dict: dict | None, resume: ResumePlan | None,
            stack: contextlib.ExitStack) -> SummaryEvent:
    t_run = time.perf_counter()
    console = stdout_console()
    timings: dict[str, float] = {}
    cfg = resolve_roles(replace(cfg))  # a Config built in code gets the roles to_config gives the command line
    config_dict = run_config(config_dict if config_dict is not None else asdict(cfg))
    files = RunFiles.open(cfg, run_dir, resume)
    stack.callback(files.close)
    seeds = Seeds(cfg.seed)
    tracker = open_tracker(cfg.tracking, run_dir, resumed=resume is not None)  # None unless tracking.* is on; fails here if a package is missing
    if tracker is not None:
        stack.callback(tracker.close, False)  # no-op after the summary event closed it

    # ---- 1. set up ------------------------------------------------------------------------------
    family = build_family(cfg)
    val_items = load_validation(cfg, family)
    transfer_items = load_transfer(cfg, family, val_items)  # real items no selection uses; [] when none
    train_items = load_training(cfg, family, val_items, transfer_items)  # drawn by the knob real_share; [] when none
    selection, heldout = split_validation(val_items, cfg.outer.heldout_share)
    screen_items = screening_subset(selection, cfg.outer.screen_size)
    seed_items = (screen_items if cfg.outer.seed_screen_size is None
                  else screening_subset(selection, cfg.outer.seed_screen_size))
    population = load_seed_population(cfg)

    o = cfg.outer
    settings = task_settings(cfg, family)
    space = space_from_specs(
        settings.space, family.spec.difficulty_bounds, settings.difficulty, settings.reward_weights, knobs=o.knobs,
        evolve_reward_weights=o.evolve_reward_weights, reward_logit_bounds=tuple(o.reward_weight_bounds),
        extras=o.extras, strategy=o.strategy,
    )
    search = candidate_source(o.candidate_source, x0=space.initial_vector(), sigma0=o.sigma0, popsize=o.popsize,
                              cma_seed=seeds.int("cma"), rng=seeds.numpy("random_harness"),
                              sigma_floor=o.sigma_floor)
    inner_config(cfg).validate(generations=cfg.inner.generations)  # fail before any model loads

    t0 = time.perf_counter()
    usage = RunUsage()  # prompt and completion tokens and cost per role (the summary, outer.budget.usd)
    policy_llm = build_llm(cfg.model, executor=cfg.executor)
    stack.callback(getattr(policy_llm, "close", lambda: None))  # Ray workers, server connections end with the run
    llm = usage.wrap(files.logged(policy_llm, cfg.model), "model", cfg.model)  # calls logged
    if cfg.mutator == cfg.model:
        mutator = llm
    else:
        mutator_llm = build_llm(cfg.mutator, role="mutator")
        stack.callback(getattr(mutator_llm, "close", lambda: None))
        mutator = usage.wrap(files.logged(mutator_llm, cfg.mutator), "mutator", cfg.mutator)
    timings["model load"] = time.perf_counter() - t0
    check_policy_backend(policy_llm, cfg, population, inner_config(cfg).genes)  # every gene works, or stop here
    evaluator = RolloutEvaluator(llm, family, sampling=sampling_from(cfg.decoding, seed=seeds.int("decoding")))

    run_id = resume.run_id if resume is not None else _run_id(cfg, config_dict)
    db_path = archive_path(cfg.archive.path, run_dir)
    store = files.archive(db_path, run_id)
    stack.callback(store.close)
    rec = RunRecorder(store, run_id, tracker=tracker,
                      episodes=family.spec.multi_step,
                      subscribers=[ConsoleView(console)])  # inner generations, races, style changes
    rec.start(cfg.seed, config_dict)
    rec.policies(population)
    if any(m.backend == "openai" for m in (cfg.model, cfg.mutator)):  # what each server was found to accept
        rec.emit(PhaseEvent(name="backend", fields={m.role: describe_backend(m) for m in usage.meters}))
    probes = yardstick.probe_values(family, val_items)  # S_val's own hacking check (harness/yardstick.py)
    rec.emit(SetupEvent(validation_items=len(val_items), selection_items=tuple(t.task_id for t in selection),
                        heldout_items=tuple(t.task_id for t in heldout),
                        screen_items=tuple(t.task_id for t in screen_items), harness_names=tuple(space.names),
                        population=tuple(p.id for p in population),
                        probes=(setup_probes := yardstick.check(probes)).as_dict() if probes else None))
    console.print(f"[bold]evolve[/] run {run_id}: {len(population)} seed policies, {len(val_items)} "
                  f"meta-validation items ({len(selection)} selection of which {len(screen_items)} screen, "
                  f"{len(heldout)} held out), harness of {space.dim} params ({', '.join(space.names)}), "
                  f"model {escape(policy_llm.name)}, archive {escape(str(db_path))}")
    rec.emit(PhaseEvent(name=COMPUTE_PHASE, fields=threads_in_use(policy_llm)))  # a resume reuses the count
    for line in setup_probes.lines() if probes else ():
        console.print(line if setup_probes.ok else f"[red]{line}[/]", highlight=False)
    objective = LLMObjective(
        evaluator=evaluator, mutator=mutator, usage=usage, family=family, rec=rec, console=console, timings=timings,
        cfg=cfg, seeds=seeds, selection=selection, screen=screen_items,
        forbidden={t.content_hash for t in val_items}, phrase_bank=_phrase_bank(cfg, population),
        training=train_items,
    )
    live = LiveReport(rec, db_path.parent / REPORT_NAME, enabled=cfg.archive.live_report)
    if live.enabled:
        console.print(f"report (rewritten after each outer generation): {live.path}", markup=False, highlight=False)
    control = files.control(rec, o, cost=usage.cost_usd, prompt_tokens=usage.prompt_tokens)
    objective.stop_check = control.inner_boundary

    # ---- 2. generation 0 ------------------------------------------------------------------------
    harness0 = space.decode(space.initial_vector())
    tasks0 = objective.draw_tasks(harness0, "h0", 0)
    t0, calls0 = time.perf_counter(), usage.requests()
    with task(f"gen 0: scoring {len(population)} seeds on {len(tasks0)} tasks", planned_requests(population, tasks0),
              console=console):
        evals0 = evaluator.evaluate(population, tasks0, harness0.reward_weights)
    timings["inner: evaluate"] = time.perf_counter() - t0
    rec.fitness(evals0, harness_id="h0", outer_generation=0, inner_generation=0)
    scored = [(e.fitness, i) for i, e in enumerate(evals0) if e.fitness is not None]
    if not scored:
        raise EvoTrainerError("generation 0: every seed policy failed evaluation (see the archive events)")
    check_gen0_budget(rec, o.budget.seconds, elapsed=time.perf_counter() - t_run,
                      batch_seconds=timings["inner: evaluate"], seeds=population, tasks=tasks0, selection=selection,
                      screen_items=seed_items,
                      screened=[population[i] for _, i in scored] if o.seed_screen and len(population) > 1 else [],
                      batch_calls=usage.requests() - calls0)
    keep = [population[i] for _, i in sorted(scored, key=lambda s: (-s[0], s[1]))[: cfg.inner.population_size]]
    if o.seed_screen and len(population) > 1:
        keep = _screened_start(population, keep, scored, seed_items, objective, console)
    start = CandidateResult(best=keep[0], population=tuple(keep), race_estimate=None,
                            full_score=lambda: objective.screening.full_score(keep[0], "h0", 0),
                            best_fitness=max(s for s, _ in scored), generated_tokens=usage.completion_tokens())

    # ---- 3. outer generations -------------------------------------------------------------------
    def after_generation(g: int) -> None:
        if g == 0 and probes:  # the probes against the best seed's outputs on the selection items
            _probe_gen0(probes, val_items, selection, objective, keep[0], rec, console)
        rec.emit(PhaseEvent(name="usage", fields={"outer_generation": g, **usage.as_dict()}))
        live.refresh(g)

    out = run_outer_loop(objective, start, harness0, space, search, o, rec, console=console, started_at=t_run,
                         control=control, after_generation=after_generation)

    # ---- 4. generalisation: the final best vs the best seed, selection and held-out items, summary ----
    inc = out.incumbent
    gen = _generalisation(objective, keep[0], inc, heldout, rec, cfg.seed)
    score_transfer(objective.screening, rec, inc.best, keep[0], cfg.task.plain_prompt, transfer_items,
                   seed=cfg.seed, outer_generation=inc.outer_generation)
    heldout_s_val = (gen.heldout.best_mean if gen is not None and gen.heldout is not None else None)
    summary = SummaryEvent(
        initial_best=keep[0].id, initial_s_val=out.s_val_curve[0], best=inc.best.id, best_s_val=inc.s_val,
        best_harness_id=inc.harness_id, heldout_s_val=heldout_s_val, selection_items=len(selection),
        heldout_items=len(heldout), rollouts=evaluator.rollouts, s_val_curve=tuple(out.s_val_curve),
        current_curve=tuple(out.current_curve), rollbacks=len(out.rollbacks), stop_reason=out.stop.key,
        stop_detail=out.stop.detail, candidates=out.usage.evaluations, generated_tokens=usage.completion_tokens(),
        archive=tuple((p.harness_id, p.s_val) for p in out.pairs))
    rec.emit(summary)
    rec.emit(PhaseEvent(name="usage", fields={"outer_generation": None, **usage.as_dict()}))
    if any(m.backend == "openai" for m in (cfg.model, cfg.mutator)):  # the fields each server was sent, in all
        rec.emit(PhaseEvent(name="backend", fields={m.role: describe_backend(m) for m in usage.meters}))
    steps = {k.replace(" ", "_").replace(":", ""): v for k, v in timings.items()}
    rec.emit(PhaseEvent(name="totals", fields={"seconds": time.perf_counter() - t_run, **steps}))
    rec.emit(OperatorStatsEvent(harness_id=None, outer_generation=None, stats=objective.operator_stats.to_dict()))
    live.refresh(None)  # the final report: generalisation and summary included
    print_summary(console, store, run_id, inc.harness)  # what the archive holds
    print_operator_stats(console, objective.operator_stats)
    stack.close()  # archive (checkpointed), call log, lock, Ray workers
    return summary


def _generalisation(objective: LLMObjective, baseline: Policy, inc: ArchivedPair, heldout: Sequence[Any],
                    rec: RunRecorder, seed: int) -> Generalisation | None:
    """The final best vs the best seed (the first incumbent), paired on the selection items and on the
    held-out items (both scored there in one batched call, archived as ``meta_heldout``); archived as a
    ``generalisation`` event and returned for the summary. None when a selection vector is missing."""
    screening = objective.screening
    sel_a, sel_b = screening.vector(baseline), screening.vector(inc.best)
    held_vals = None
    if heldout:
        policies = [baseline] if baseline.genome_hash == inc.best.genome_hash else [baseline, inc.best]
        evals = screening.meta_many(policies, heldout, "meta_heldout", None, inc.outer_generation)
        held_vals = (list(evals[0].per_item), list(evals[-1].per_item))
    if sel_a is None or sel_b is None:
        return None
    gen = compare(baseline.id, inc.best.id, (sel_a, sel_b), held_vals, seed=seed,
                  selection_ids=[t.task_id for t in screening.order],
                  heldout_ids=[t.task_id for t in heldout] if heldout else None)
    rec.emit(GeneralisationEvent(**to_payload(gen)))
    return gen


def _probe_gen0(probes: dict, val_items: Sequence[Any], selection: Sequence[Any], objective: LLMObjective,
                best_seed: Policy, rec: RunRecorder, console: Console) -> None:
    """Check and print the S_val probes against the best seed's outputs; archived as a ``yardstick`` event."""
    chosen = {id(t) for t in selection}
    report = yardstick.check(probes, objective.screening.vector(best_seed), best_seed.id,
                             keep=[id(t) in chosen for t in val_items])
    rec.emit(YardstickEvent(**report.as_dict()))
    for line in report.lines():
        console.print(line if report.ok else f"[red]{line}[/]", highlight=False)


def _screened_start(
    population: Sequence[Policy], keep: list[Policy], scored: Sequence[tuple[float, int]],
    screen_items: Sequence[Any], objective: LLMObjective, console: Console,
) -> list[Policy]:
    """Every seed that scored on the training batch, screened on the screening items (one batched call).

    The best seed by screening S_val (ties: the earlier seed) leads the starting population (and becomes
    the first incumbent once scored on the whole selection set); the rest of ``keep`` follows it.
    Archived as ``meta_screen`` scores of harness ``h0``.
    """
    candidates = [population[i] for _, i in scored]
    screened = objective.screening.meta_many(candidates, screen_items, "meta_screen", "h0", 0)
    values = [e.s_val if e.s_val is not None else -math.inf for e in screened]
    best = candidates[max(range(len(candidates)), key=lambda i: (values[i], -i))]
    console.print(f"gen 0: {len(candidates)} seeds screened on {len(screen_items)} items; best {best.id} "
                  f"({max(values):.4f})", markup=False, highlight=False)
    return [best, *[p for p in keep if p.id != best.id]][: len(keep)]


def _phrase_bank(cfg: Config, population: Sequence[Policy]) -> PhraseBank | None:
    """The run's phrase bank (MiniLM embeddings of every prompt sentence seen), or None when disabled."""
    if not cfg.inner.use_embedder:
        return None
    from evotrainer.backends.embedder import shared_embedder

    bank = PhraseBank(shared_embedder())
    bank.add_policies(population)
    return bank
