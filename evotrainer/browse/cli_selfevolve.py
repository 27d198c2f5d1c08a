"""The tables ``show`` and ``harness`` print for a self-evolution run (``mode=selfevolve``): the run's facts and
its rounds, from :mod:`evotrainer.browse.selfevolve_view`. Model-written text goes through
:func:`~evotrainer.browse.textsafe.terminal_safe` like everywhere in the CLI."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evotrainer.browse.cli_common import kv_table
from evotrainer.browse.selfevolve_view import overview_facts
from evotrainer.browse.textsafe import clip, fmt, terminal_safe

__all__ = ["print_overview", "rounds_table"]


def rounds_table(rounds: list[dict[str, Any]]) -> Table | Text:
    """One row per round: status, curriculum, tasks and pass rate, judge score, dev score (start -> end),
    val score (S_val of the candidate), training steps and last loss, adapter folder; a note when none yet."""
    if not rounds:
        return Text("no self-evolution round archived yet")
    t = Table(title="self-evolution rounds (scores in [0, 1], higher is better)", title_justify="left")
    for col in ("round", "status", "curriculum", "tasks", "passed", "mean judge", "dev score", "val S_val",
                "steps", "last loss", "adapter", "note"):
        t.add_column(col, min_width=min(len(col), 6))
    for r in rounds:
        t.add_row(str(r["round"]), Text(terminal_safe(r["status"]), style="green" if r["status"] == "kept" else
                                        "yellow"),
                  Text(terminal_safe(r["curriculum"])), str(r["pool_size"]),
                  f"{r['n_kept']}/{r['n_samples']} ({r['pass_rate']:.0%})", fmt(r["mean_score"], 3),
                  f"{fmt(r['prev_dev_score'], 3)} -> {fmt(r['dev_score'], 3)}", fmt(r["val_score"], 3),
                  fmt(r["steps"]), fmt(r["final_loss"], 3), Text(fmt(r["adapter_path"])),
                  Text(clip(r["note"] or "", 60)))
    return t


def print_overview(console: Console, ov: dict[str, Any]) -> None:
    """``show`` of a self-evolution run: its facts, its rounds, and the pool and samples counted."""
    console.print(kv_table(f"self-evolution run {terminal_safe(ov['run_id'])}", overview_facts(ov)))
    console.print(rounds_table(ov["rounds"]))
    console.print(Text("every judged sample with its task: `trajectories`; plots and the pool: `report`"))
