"""Figures 5-7: the loops themselves on the suite's model: fitness-cache savings, one harness candidate of
the default experiment split by phase, and one self-evolution round of the smoke experiment split by phase.

Figures 5 and 6 share one run (:func:`candidate_run`): the real :class:`~evotrainer.evolve.llm_objective.LLMObjective`
of ``+experiment=meeting_minutes``, set up as ``coevolution.run_evolve`` sets it up, called once on the
first ``inner.population_size`` seeds under the initial harness. That call is the unit an outer generation
repeats ``outer.popsize`` times: task batch, ``inner.generations`` inner generations (select, vary,
evaluate), screening. Its sizes are reduced (labelled in the output) so the suite stays within minutes.
Phases are read from what the run archives (``phase`` events in SQLite) plus wrappers that time the model
calls inside each phase.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks.report import Figure
from benchmarks.workloads import Bench

__all__ = ["SMOKE_SELFEVOLVE", "cache_figure", "candidate_run", "compose_config", "phases_figure",
           "selfevolve_figure"]

CANDIDATE_OVERRIDES = ("decoding.max_new_tokens=32", "outer.screen_size=4")
"""Reductions of the default experiment for figures 5-6 (default: 128 new tokens, 8 screening items)."""
QUICK_CANDIDATE_OVERRIDES = ("decoding.max_new_tokens=8", "outer.screen_size=2", "outer.screen_top_k=2",
                             "inner.generations=1", "inner.population_size=4", "task.tasks_per_generation=1",
                             "inner.use_embedder=false", "inner.style_evolution_every=0")
SMOKE_SELFEVOLVE = ("mode=selfevolve", "selfevolve.pass_threshold=0.0")
"""Figure 7 runs ``+experiment=smoke mode=selfevolve`` (one tiny round) with every sample passing the judge, so
that the round trains (at the smoke round's 48 new tokens hardly any sample passes 0.7, and a round without
passing samples skips training and evaluation)."""


def compose_config(experiment: str, overrides: Sequence[str] = ()) -> Any:
    """The typed :class:`~evotrainer.config.Config` of ``+experiment=<experiment>`` with ``overrides``,
    composed by Hydra from ``conf/`` as ``python -m evotrainer`` composes it."""
    from hydra import compose, initialize_config_dir

    from evotrainer.config import PACKAGE_DATA, register_configs, to_config

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3", job_name="bench"):
        return to_config(compose("config", overrides=[f"+experiment={experiment}", *overrides]))


class _TimedLLM:
    """Passes ``generate`` through to ``llm`` and logs each call as ``(start, seconds, requests)`` in ``calls``
    (``start``: ``time.perf_counter()``)."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self.calls: list[tuple[float, float, int]] = []

    @property
    def seconds(self) -> float:
        return sum(s for _, s, _ in self.calls)

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        t0 = time.perf_counter()
        out = self._llm.generate(requests)
        self.calls.append((t0, time.perf_counter() - t0, len(requests)))
        return out

    def __getattr__(self, item: str) -> Any:
        return getattr(self._llm, item)


def _instrument(evaluator: Any, name: str, llm: _TimedLLM, log: list[dict[str, Any]]) -> None:
    """Wrap ``evaluator.<name>`` so each call logs its wall seconds, the model's seconds inside it and
    the (policy, task) pairs it was asked for."""
    inner: Callable[..., Any] = getattr(evaluator, name)

    def wrapped(policies: Sequence[Any], tasks: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        t0, g0, r0 = time.perf_counter(), llm.seconds, evaluator.rollouts
        out = inner(policies, tasks, *args, **kwargs)
        t1 = time.perf_counter()
        log.append({"call": name, "start": t0, "end": t1, "seconds": t1 - t0, "model_seconds": llm.seconds - g0,
                    "pairs": len(policies) * len(tasks), "sent": evaluator.rollouts - r0})
        return out

    setattr(evaluator, name, wrapped)


@dataclass
class CandidateRun:
    """What :func:`candidate_run` measured (see the module docstring)."""

    overrides: tuple[str, ...]
    sizes: dict[str, Any]
    seconds: float
    setup_seconds: float
    calls: list[dict[str, Any]]
    mutator_calls: list[tuple[float, float, int]]
    generations: list[dict[str, Any]]
    cache_hits: int
    cache_misses: int
    rollouts: int


def candidate_run(bench: Bench) -> CandidateRun:
    """One harness candidate of the (reduced) default experiment on the suite's model; memoised."""
    if "candidate" in bench.memo:
        return bench.memo["candidate"]
    from rich.console import Console

    from evotrainer.archive import ArchiveStore
    from evotrainer.archive.recorder import RunRecorder
    from evotrainer.backends.usage import RunUsage
    from evotrainer.evolve.llm_objective import LLMObjective
    from evotrainer.harness import space_from_specs
    from evotrainer.rollout import RolloutEvaluator
    from evotrainer.run.runtime import (
        build_family,
        load_seed_population,
        load_validation,
        sampling_from,
        task_settings,
    )
    from evotrainer.run.validation_split import screening_subset, split_validation
    from evotrainer.search.phrases import PhraseBank
    from evotrainer.seeding import Seeds

    overrides = QUICK_CANDIDATE_OVERRIDES if bench.quick else CANDIDATE_OVERRIDES
    backend = bench.backend
    t_setup = time.perf_counter()
    cfg = compose_config("meeting_minutes", overrides)
    seeds = Seeds(cfg.seed)
    family = build_family(cfg)
    val_items = load_validation(cfg, family)
    selection, _ = split_validation(val_items, cfg.outer.heldout_share)
    screen = screening_subset(selection, cfg.outer.screen_size)
    population = load_seed_population(cfg)[: cfg.inner.population_size]
    o = cfg.outer
    ts = task_settings(cfg, family)
    space = space_from_specs(ts.space, family.spec.difficulty_bounds, ts.difficulty, ts.reward_weights,
                             knobs=o.knobs, evolve_reward_weights=o.evolve_reward_weights,
                             reward_logit_bounds=tuple(o.reward_weight_bounds), extras=o.extras,
                             strategy=o.strategy)
    bank = None
    if cfg.inner.use_embedder:
        from evotrainer.backends.embedder import MiniLMEmbedder

        bank = PhraseBank(MiniLMEmbedder())
        bank.add_policies(population)
    usage = RunUsage()
    meter = usage.wrap(backend, "model")
    roll, mutator = _TimedLLM(meter), _TimedLLM(meter)
    evaluator = RolloutEvaluator(roll, family, sampling=sampling_from(cfg.decoding, seed=seeds.int("decoding")))
    calls: list[dict[str, Any]] = []
    _instrument(evaluator, "evaluate", roll, calls)
    _instrument(evaluator, "meta_evaluate", roll, calls)
    with tempfile.TemporaryDirectory(prefix="evotrainer-bench-") as tmp:
        store = ArchiveStore(Path(tmp) / "archive.db")
        rec = RunRecorder(store, "bench")
        rec.start(cfg.seed, {"benchmark": list(overrides)})
        rec.policies(population)
        objective = LLMObjective(
            evaluator=evaluator, mutator=mutator, usage=usage, family=family, rec=rec, console=Console(quiet=True),
            timings={}, cfg=cfg, seeds=seeds, selection=selection, screen=screen,
            forbidden={t.content_hash for t in val_items}, phrase_bank=bank)
        objective.set_incumbent(population[0])
        harness = space.decode(space.initial_vector())
        setup = time.perf_counter() - t_setup
        bench.log("  running one harness candidate of the default experiment ...")
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            objective(harness, population, "g1c0", 1)
        seconds = time.perf_counter() - t0
        phases = [e.payload for e in store.events("bench", kind="phase") if e.payload.get("name") == "inner_generation"]
        store.close()
    sizes = {"population": len(population), "inner_generations": cfg.inner.generations,
             "tasks_per_generation": cfg.task.tasks_per_generation, "max_new_tokens": cfg.decoding.max_new_tokens,
             "screen_items": len(screen), "screen_top_k": cfg.outer.screen_top_k, "embedder": cfg.inner.use_embedder,
             "popsize": cfg.outer.popsize}
    run = CandidateRun(tuple(overrides), sizes, seconds, setup, calls, mutator.calls, phases,
                       evaluator.cache.hits, evaluator.cache.misses, evaluator.rollouts)
    bench.memo["candidate"] = run
    return run


def _workload(run: CandidateRun) -> str:
    z = run.sizes
    return (f"one harness candidate of +experiment=meeting_minutes (the unit an outer generation repeats "
            f"{z['popsize']} times): {z['population']} seed policies, {z['inner_generations']} inner generation(s) "
            f"on {z['tasks_per_generation']} generated meetings, screening of up to {z['screen_top_k']} policies on "
            f"{z['screen_items']} validation items, max_new_tokens {z['max_new_tokens']}; reduced from the default "
            f"by: {' '.join(run.overrides)}; one run (phase splits are not repeated)")


def cache_figure(bench: Bench) -> Figure:
    """Rollouts the fitness cache (and in-call de-duplication of identical genomes) avoided."""
    run = candidate_run(bench)
    fig = Figure("cache", "fitness-cache savings in one harness candidate of the default experiment",
                 workload=_workload(run))
    asked = sum(c["pairs"] for c in run.calls)
    sent = sum(c["sent"] for c in run.calls)
    inner = [c for c in run.calls if c["call"] == "evaluate"]
    fig.add("(policy, task) pairs asked for", asked, "", note=f"{sum(c['pairs'] for c in inner)} by the inner loop, "
            f"{asked - sum(c['pairs'] for c in inner)} by screening")
    fig.add("rollouts sent to the model", sent)
    fig.add("rollouts avoided (cache hit or duplicate genome)", asked - sent, "",
            note=f"{(asked - sent) / asked:.0%} of the pairs" if asked else "")
    per_gen = run.sizes["population"] * run.sizes["tasks_per_generation"]
    kept = sum(per_gen - c["pairs"] for c in inner[1:])
    fig.add("not asked for: survivors already scored", kept, "",
            note="pairs of inner generations 1.. the loop skipped itself (its fitness map, not the cache)")
    fig.add("cache lookups: hits / misses", run.cache_hits, f"/ {run.cache_misses}",
            note="rollout, reward and meta-score lookups together")
    fig.metrics["cache.avoided"] = float(asked - sent)
    fig.metrics["cache.avoided_share"] = (asked - sent) / asked if asked else None
    fig.data.update(calls=run.calls, cache_hits=run.cache_hits, cache_misses=run.cache_misses)
    fig.seconds = run.seconds + run.setup_seconds
    return fig


def phases_figure(bench: Bench) -> Figure:
    """One harness candidate split into its inner generations' select / vary / evaluate and screening."""
    run = candidate_run(bench)
    fig = Figure("phases", "inner generations and one outer-generation candidate of the default experiment, "
                 "by phase", workload=_workload(run))
    evaluations = [c for c in run.calls if c["call"] == "evaluate"]
    screenings = [c for c in run.calls if c["call"] == "meta_evaluate"]

    def mutator_between(start: float, end: float) -> tuple[float, int]:
        calls = [(s, n) for t, s, n in run.mutator_calls if start <= t < end]
        return sum(s for s, _ in calls), sum(n for _, n in calls)

    accounted = 0.0
    fig.add("setup (config, data, embedder, archive)", run.setup_seconds, "s", note="not part of the candidate")
    for k, (gen, ev) in enumerate(zip(run.generations, evaluations, strict=False)):
        label = "inner gen 0 (incoming population)" if k == 0 else f"inner gen {k}"
        if k > 0:
            vary = float(gen.get("vary", 0.0))
            m_seconds, m_requests = mutator_between(evaluations[k - 1]["end"], ev["start"])
            fig.add(f"{label}: select", gen.get("select", 0.0), "s")
            fig.add(f"{label}: vary, mutator model", m_seconds, "s", note=f"{m_requests} mutator request(s)")
            fig.add(f"{label}: vary, other operators", max(vary - m_seconds, 0.0), "s",
                    note="crossover, phrase bank, novelty checks")
            accounted += float(gen.get("select", 0.0)) + vary
        fig.add(f"{label}: evaluate, rollout", ev["model_seconds"], "s",
                note=f"{ev['sent']} of {ev['pairs']} pairs generated")
        fig.add(f"{label}: evaluate, scoring", ev["seconds"] - ev["model_seconds"], "s", note="rewards, caching")
        accounted += ev["seconds"]
    if evaluations:
        style, _ = mutator_between(evaluations[-1]["end"], screenings[0]["start"] if screenings else float("inf"))
        fig.add("style-library mutation (mutator model)", style, "s")
        accounted += style
    for c in screenings:
        fig.add("screening: rollout", c["model_seconds"], "s", note=f"{c['sent']} of {c['pairs']} pairs generated")
        fig.add("screening: scoring", c["seconds"] - c["model_seconds"], "s")
        accounted += c["seconds"]
    fig.add("other (task batch, archive writes)", max(run.seconds - accounted, 0.0), "s")
    fig.add("candidate total", run.seconds, "s",
            note=f"an outer generation: {run.sizes['popsize']} candidates + a promoted one's whole-set score")
    fig.metrics["phases.candidate_seconds"] = run.seconds
    fig.data.update(generations=run.generations, calls=run.calls, mutator_calls=run.mutator_calls, sizes=run.sizes)
    fig.seconds = run.seconds
    return fig


def selfevolve_figure(bench: Bench) -> Figure:
    """One round of ``+experiment=smoke mode=selfevolve`` split into its phases (from the archived round)."""
    from rich.console import Console

    import evotrainer.selfevolve.run as se_run

    backend = bench.backend
    cfg = compose_config("smoke", SMOKE_SELFEVOLVE)
    fig = Figure("selfevolve", "a self-evolution round by phase (generate / judge / train / evaluate)")
    s = cfg.selfevolve
    fig.workload = (f"+experiment=smoke mode=selfevolve: {s.rounds} round, pool of {s.seed_tasks}+"
                    f"{s.new_tasks_per_round} tasks x {s.samples_per_task} samples, {s.judge_repeats} judge grade(s) "
                    f"each, {s.lora.steps} LoRA steps (batch {s.lora.batch_size}), dev {s.dev_size} tasks, "
                    f"{s.val_limit} validation items, pass_threshold {s.pass_threshold} (every sample trains); "
                    f"the suite's loaded model is reused (no second load); one run")
    bench.log("  running the smoke self-evolution round ...")
    with tempfile.TemporaryDirectory(prefix="evotrainer-bench-") as tmp, \
            mock.patch.object(se_run, "build_llm", lambda *args, **kwargs: backend):
        t0 = time.perf_counter()
        summary = se_run.run_selfevolve(cfg, run_dir=tmp, console=Console(file=io.StringIO()))
        seconds = time.perf_counter() - t0
        backend.unload_adapters()
    timings = dict(summary.rounds[0].timings) if summary.rounds else {}
    names = {"pool": "pool (new tasks, de-duplication)", "rollout": "generate (policy rollouts)",
             "judge": "judge (rule reward + model grades)", "train": "train (LoRA SFT)",
             "dev": "evaluate: dev set", "meta-val": "evaluate: meta-validation"}
    for key, value in timings.items():
        fig.add(names.get(key, key), value, "s")
    fig.add("round total", sum(timings.values()), "s",
            note=f"round status: {', '.join(r.status for r in summary.rounds) or 'none'}")
    fig.add("whole run (embedder load, baseline scoring, round)", seconds, "s")
    fig.metrics["selfevolve.round_seconds"] = sum(timings.values()) if timings else None
    fig.data.update(timings=timings, run_seconds=seconds, status=[r.status for r in summary.rounds])
    return fig
