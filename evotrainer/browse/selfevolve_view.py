"""What the archive CLI and the report show of a self-evolution run (``mode=selfevolve``): its rounds, its task
pool and its judged samples, as JSON-ready dicts read from the ``selfevolve_*`` tables
(:mod:`evotrainer.archive.selfevolve_store`) and the run's ``setup`` / ``summary`` events
(:mod:`evotrainer.events.selfevolve`), and the console tables ``show`` and ``harness`` print of it (model-written
text through :func:`~evotrainer.browse.textsafe.terminal_safe`).

A self-evolution run trains one policy's LoRA adapter round by round; it has no harness candidates, no outer
generations and no races, so ``show``, ``harness``, ``trajectories`` and ``report`` switch to these views when
:func:`is_selfevolve` says so. Scores are higher-is-better: judge scores, pass rates and dev scores in [0, 1];
the val score is the meta-validation S_val of the round's candidate in [0, 1].
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evotrainer.archive.schema import RunInfo
from evotrainer.archive.store import ArchiveStore
from evotrainer.browse.cli_common import kv_table
from evotrainer.browse.textsafe import clip, fmt, terminal_safe
from evotrainer.browse.views import RUNNING_OR_CRASHED
from evotrainer.events.selfevolve import SelfEvolveSetupEvent, SelfEvolveSummaryEvent, SelfEvolveTransferEvent

__all__ = ["MODE", "NO_HARNESS", "is_selfevolve", "overview_facts", "print_overview", "round_rows", "rounds_table",
           "grades_text", "sample_lines", "selfevolve_overview", "transfer_line"]

MODE = "selfevolve"
"""``config["mode"]`` (and the ``mode`` of the setup / summary events) of a self-evolution run."""

NO_HARNESS = ("a self-evolution run (mode=selfevolve) has no harness: it trains one policy's adapter in rounds, "
              "shown below (also by `show`)")
"""What ``harness`` says of a self-evolution run."""


def is_selfevolve(store: ArchiveStore, run: RunInfo) -> bool:
    """True when ``run`` is a self-evolution run: its config says ``mode: selfevolve``, its setup or summary
    event is the self-evolution variant, or it has archived rounds (an archive made without the config key)."""
    if isinstance(run.config, dict) and run.config.get("mode") == MODE:
        return True
    if any(e.payload.get("mode") == MODE for e in store.events(run.run_id) if e.kind in ("setup", "summary")):
        return True
    return bool(store.selfevolve_rounds(run.run_id))


def round_rows(store: ArchiveStore, run_id: str) -> list[dict[str, Any]]:
    """Every archived round of ``run_id`` as a dict, in round order.

    Returns:
        rows with the fields of :class:`~evotrainer.archive.schema.RoundRow` (round, policy_id, status,
        difficulty, next_difficulty, curriculum, config, pool_size, n_added, n_duplicates, n_samples,
        n_kept, pass_rate, mean_score, losses, candidate_id, adapter_path, train, dev_score,
        prev_dev_score, val_score, timings, note, grades_requested, grades_parsed), plus ``steps`` (training
        steps, or None), ``final_loss`` (the last training loss, or None), ``parse_rate`` (grades parsed / asked
        for in [0, 1], None when none was asked or the archive predates the counts) and ``tokens_per_second``
        (training throughput, tokens read per second of optimiser steps, or None).
    """
    out = []
    for r in store.selfevolve_rounds(run_id):
        row = asdict(r)
        row["losses"] = list(r.losses)
        row["steps"] = r.train.get("steps") if isinstance(r.train, dict) else None
        row["final_loss"] = r.losses[-1] if r.losses else None
        row["parse_rate"] = r.parse_rate
        row["tokens_per_second"] = r.train.get("tokens_per_second") if isinstance(r.train, dict) else None
        out.append(row)
    return out


def transfer_line(store: ArchiveStore, run_id: str) -> str | None:
    """The verdict line of the run's last ``selfevolve_transfer`` event (the base model vs the final adapter on
    the transfer items), or None when the run has none."""
    events = [e.event for e in store.events(run_id) if e.kind == SelfEvolveTransferEvent.kind]
    last = events[-1] if events and isinstance(events[-1], SelfEvolveTransferEvent) else None
    return None if last is None else last.verdict


def selfevolve_overview(store: ArchiveStore, run: RunInfo) -> dict[str, Any]:
    """``show`` of a self-evolution run.

    Returns:
        dict with run_id, mode ("selfevolve"), seed, created_at, code_version, status ("finished" once the
        summary event is archived, else "running or crashed (no summary event)"), last_event_at, config (the
        whole run config), policy (the policy trained, from the setup event), dev_tasks / val_items /
        seed_tasks (counts), baseline_dev, baseline_val, final_policy, final_adapter (relative to the run
        folder), generated_tokens (from the summary event, None before it), rounds (:func:`round_rows`),
        rounds_kept, pool (tasks in all, seed, real and generated), samples (judged in all, passed), grades
        (model-judge grades asked for and parsed over the rounds that counted them), transfer (the base model vs
        the final adapter on the transfer items, one line, None without it).
    """
    rid = run.run_id
    events = store.events(rid)
    setups = [e.event for e in events if e.kind == "setup" and e.payload.get("mode") == MODE]
    summaries = [e.event for e in events if e.kind == "summary" and e.payload.get("mode") == MODE]
    setup = setups[-1] if setups and isinstance(setups[-1], SelfEvolveSetupEvent) else SelfEvolveSetupEvent()
    summary = summaries[-1] if summaries and isinstance(summaries[-1], SelfEvolveSummaryEvent) else None
    rounds = round_rows(store, rid)
    pool = store.selfevolve_pool(rid)
    samples = store.selfevolve_samples(rid)
    return {
        "run_id": rid,
        "mode": MODE,
        "seed": run.seed,
        "created_at": run.created_at,
        "code_version": run.code_version,
        "status": "finished" if summary is not None else RUNNING_OR_CRASHED,
        "last_event_at": events[-1].created_at if events else None,
        "config": run.config,
        "policy": setup.policy,
        "dev_tasks": len(setup.dev_tasks),
        "val_items": len(setup.val_items),
        "seed_tasks": len(setup.seed_tasks),
        "baseline_dev": None if summary is None else summary.baseline_dev,
        "baseline_val": None if summary is None else summary.baseline_val,
        "final_policy": None if summary is None else summary.final_policy,
        "final_adapter": None if summary is None else summary.final_adapter,
        "generated_tokens": None if summary is None else summary.generated_tokens,
        "rounds": rounds,
        "rounds_kept": sum(r["status"] == "kept" for r in rounds),
        "pool": {"tasks": len(pool), "seed": sum(p.source == "seed" for p in pool),
                 "real": sum(p.source == "real" for p in pool),
                 "generated": sum(p.source not in ("seed", "real") for p in pool)},
        "samples": {"judged": len(samples), "passed": sum(s.passed for s in samples)},
        "grades": {"requested": sum(r["grades_requested"] or 0 for r in rounds),
                   "parsed": sum(r["grades_parsed"] or 0 for r in rounds)},
        "transfer": transfer_line(store, rid),
    }


def overview_facts(ov: dict[str, Any]) -> list[tuple[str, Any]]:
    """The (label, value) facts of a :func:`selfevolve_overview`, in display order, shared by ``show`` and the
    HTML report (values raw: each caller escapes and formats them)."""
    return [
        ("status", ov["status"]), ("seed", ov["seed"]), ("created", ov["created_at"]),
        ("last event", ov["last_event_at"]), ("code", ov["code_version"]), ("policy trained", ov["policy"]),
        ("dev tasks / val items", f"{ov['dev_tasks']} / {ov['val_items']}"),
        ("baseline dev score", ov["baseline_dev"]), ("baseline val S_val", ov["baseline_val"]),
        ("final policy", ov["final_policy"]), ("final adapter", ov["final_adapter"]),
        ("rounds (kept)", f"{len(ov['rounds'])} ({ov['rounds_kept']})"),
        ("pool tasks (seed + real + generated)",
         f"{ov['pool']['tasks']} ({ov['pool']['seed']} + {ov['pool']['real']} + {ov['pool']['generated']})"),
        ("samples judged (passed)", f"{ov['samples']['judged']} ({ov['samples']['passed']})"),
        ("judge grades parsed", grades_text(ov["grades"]["requested"], ov["grades"]["parsed"])),
        ("generated tokens", ov["generated_tokens"]),
        ("transfer: final adapter − base", ov["transfer"]),
    ]


def grades_text(requested: int | None, parsed: int | None) -> str:
    """``"27/36 (75%)"``: model-judge grades parsed of those asked for; "–" when none was asked (or counted: an
    archive before schema version 5)."""
    return f"{parsed}/{requested} ({parsed / requested:.0%})" if requested and parsed is not None else "–"


def sample_lines(store: ArchiveStore, run_id: str, policy_id: str | None = None) -> list[dict[str, Any]]:
    """``trajectories`` of a self-evolution run: one dict per judged sample, with the pool task it answers.

    Args:
        policy_id: keep only the samples of rounds that started from this policy (None: all).

    Returns:
        rows in archive order: kind ("selfevolve_sample"), round, policy_id (the policy that sampled it: the
        round's start policy, None while the round has no row yet), task_id, sample_index, task_source
        ("seed" / "generated"), task_round (the round that added the task), difficulty, task_input,
        reference ("" when none), output (the policy's answer, untrusted text), score (judge score in [0, 1]),
        rule (rule reward in [0, 1]), components, grades (model grades per repeat, None = unparsed), model
        (mean grade / 10, or None), degenerate (the guard's reason, or None), passed, error.
    """
    started = {r.round: r.policy_id for r in store.selfevolve_rounds(run_id)}
    tasks = {p.task_id: p for p in store.selfevolve_pool(run_id)}
    out = []
    for s in store.selfevolve_samples(run_id):
        pid = started.get(s.round)
        if policy_id is not None and pid != policy_id:
            continue
        task = tasks.get(s.task_id)
        out.append({
            "kind": "selfevolve_sample", "round": s.round, "policy_id": pid, "task_id": s.task_id,
            "sample_index": s.index, "task_source": None if task is None else task.source,
            "task_round": None if task is None else task.round,
            "difficulty": None if task is None else dict(task.difficulty),
            "task_input": None if task is None else task.task_input,
            "reference": None if task is None else task.reference, "output": s.output, "score": s.score,
            "rule": s.rule, "components": dict(s.components), "grades": list(s.grades), "model": s.model,
            "degenerate": s.degenerate, "passed": s.passed, "error": s.error,
        })
    return out


def rounds_table(rounds: list[dict[str, Any]]) -> Table | Text:
    """One row per round: status, curriculum, tasks and pass rate, judge score, dev score (start -> end),
    val score (S_val of the candidate), model-judge grades parsed, training steps (with the training tokens/s)
    and last loss, adapter folder; a note when none yet."""
    if not rounds:
        return Text("no self-evolution round archived yet")
    t = Table(title="self-evolution rounds (scores in [0, 1], higher is better)", title_justify="left")
    for col in ("round", "status", "curriculum", "tasks", "passed", "mean judge", "grades parsed", "dev score",
                "val S_val", "steps (tok/s)", "last loss", "adapter", "note"):
        t.add_column(col, min_width=min(len(col), 6),
                     no_wrap=col in ("passed", "grades parsed", "dev score", "steps (tok/s)", "adapter"))
    for r in rounds:
        rate = r["tokens_per_second"]
        steps = fmt(r["steps"]) + (f" ({rate:.0f})" if isinstance(rate, int | float) else "")
        t.add_row(str(r["round"]), Text(terminal_safe(r["status"]), style="green" if r["status"] == "kept" else
                                        "yellow"),
                  Text(terminal_safe(r["curriculum"])), str(r["pool_size"]),
                  f"{r['n_kept']}/{r['n_samples']} ({r['pass_rate']:.0%})", fmt(r["mean_score"], 3),
                  grades_text(r["grades_requested"], r["grades_parsed"]),
                  f"{fmt(r['prev_dev_score'], 3)} -> {fmt(r['dev_score'], 3)}", fmt(r["val_score"], 3),
                  steps, fmt(r["final_loss"], 3), Text(fmt(r["adapter_path"])), Text(clip(r["note"] or "", 60)))
    return t


def print_overview(console: Console, ov: dict[str, Any]) -> None:
    """``show`` of a self-evolution run: its facts, its rounds, and the pool and samples counted."""
    console.print(kv_table(f"self-evolution run {terminal_safe(ov['run_id'])}", overview_facts(ov)))
    console.print(rounds_table(ov["rounds"]))
    console.print(Text("every judged sample with its task: `trajectories`; plots and the pool: `report`"))
