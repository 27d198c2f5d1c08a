"""Console output of an evolve run: the closing summary read from the archive, the transfer report, the operator
statistics (numbers and harnesses as :mod:`evotrainer.run.console_text` writes them)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from evotrainer.backends.usage import usage_lines
from evotrainer.browse.transfer_view import render_table as transfer_table
from evotrainer.genome import PREFILL_SECTION, render_system_prompt
from evotrainer.harness import Harness
from evotrainer.run.console_text import fmt, fmt_harness
from evotrainer.stats.generalisation import from_payload, render_table
from evotrainer.stats.transfer import read_report

__all__ = ["print_operator_stats", "print_summary", "print_transfer"]


def print_transfer(console: Console, r: Any) -> None:
    """The transfer report (:class:`~evotrainer.stats.transfer.TransferReport`; None: "transfer: not configured"): mean
    S_val per policy on the transfer items, the paired differences (95 % interval, W/L/T), then the verdict."""
    if r is None:
        console.print("transfer: not configured (task.transfer_path gives no items)", markup=False, highlight=False)
        return
    console.print(transfer_table(r))
    console.print(f"[{'green' if r.transfers else 'red'}]transfer: {escape(r.verdict)}[/]")


def print_summary(console: Console, store: Any, run_id: str, harness: Harness) -> None:
    """Print the closing summary of the finished run ``run_id`` from its open archive ``store``: the numbers of its
    ``summary`` event, the final best's archived prompt, its ``generalisation``, ``transfer`` and ``rollback`` events
    and its last ``usage`` and ``totals`` phase events. ``harness``: the best pair's applied harness (the start
    harness, ``h0``, has no candidate row to read it from)."""
    events = store.events(run_id)
    s = next(e.event for e in reversed(events) if e.kind == "summary")
    phases = {e.event.name: e.event.fields for e in events if e.kind == "phase"}  # the last of each name
    best = store.get_policy(run_id, s.best)
    console.rule("[bold]summary")
    console.print(f"run {run_id}; stopped by {s.stop_reason}: {s.stop_detail}")
    console.print(f"S_val (selection set: {s.selection_items} items, higher is better): generation-0 best "
                  f"{s.initial_best} {fmt(s.initial_s_val)} → final best {best.id} {fmt(s.best_s_val)} "
                  f"({s.best_s_val - s.initial_s_val:+.4f})")
    if best.operator == "seed":
        console.print("  note: the final best is an unmodified seed policy; no evolved policy was confidently "
                      "better than it on the same items (races and paired promotions), so the change (if any) "
                      "comes from selecting among seeds, not from variation.")
    console.print(f"final best on the held-out part ({s.heldout_items} items, never used to select): "
                  f"{fmt(s.heldout_s_val)}  (selection {fmt(s.best_s_val)})")
    for g in [from_payload(e.payload) for e in events if e.kind == "generalisation"][-1:]:  # the final best vs
        console.print(render_table(g))  # the best seed: paired difference per split, then the verdict
        style = "green" if g.held is True else "red" if g.held is False else "yellow"
        console.print(f"[{style}]generalisation: {escape(g.verdict)}[/]")
    print_transfer(console, read_report([e for e in events if e.kind == "transfer"])[0])
    console.print(f"incumbent S_val per outer generation: {', '.join(fmt(v) for v in s.s_val_curve)}")
    console.print("current S_val (the generation's best race estimate) per outer generation: "
                  + ", ".join(fmt(v) for v in s.current_curve))
    for r in (e.event for e in events if e.kind == "rollback"):
        console.print(f"rollback at outer {r.outer_generation}: {r.cause} → restored {r.restored_harness_id} "
                      f"(S_val {fmt(r.s_val)}); {r.detail}")
    console.print(f"best harness ({s.best_harness_id}): {fmt_harness(harness)}")
    console.print(f"evaluations: {s.candidates} harness candidates, "
                  f"{len(store.evaluations(run_id, kind='fitness'))} policy evaluations on task batches, "
                  f"{s.rollouts} rollouts, {s.generated_tokens} generated tokens")
    for line in usage_lines(dict(phases.get("usage", {}))):
        console.print(f"model usage: {line}", markup=False, highlight=False)
    console.print("timings: " + ", ".join(f"{k} {v:.0f}s" for k, v in phases.get("totals", {}).items()))
    console.print(f"archive: {store.path}")
    console.rule(f"best prompt ({best.id}, operator {best.operator}, generation {best.generation})")
    console.print(render_system_prompt(best.sections) or "(empty system prompt)", markup=False, highlight=False)
    prefill = best.section_dict.get(PREFILL_SECTION, "")
    if prefill.strip():
        console.print(f"answer prefill (starts the assistant turn): {prefill!r}", markup=False, highlight=False)
    if best.decoding:
        console.print("decoding genes: " + ", ".join(f"{k}={v:g}" for k, v in best.decoding), markup=False,
                      highlight=False)
    if best.adapter:
        console.print(f"LoRA adapter: {best.adapter}", markup=False, highlight=False)


def print_operator_stats(console: Console, stats: Any) -> None:
    """A table of operator success: children tried, children that beat their best parent, rate."""
    from rich.table import Table

    from evotrainer.search.operator_stats import format_operator_stats

    rows = format_operator_stats(stats)
    if not rows:
        return
    table = Table(title="operator statistics (child beats its best parent on the same batch)")
    for col in ("operator", "tried", "improved", "rate"):
        table.add_column(col, justify="left" if col == "operator" else "right")
    for op, tried, improved, rate in rows:
        table.add_row(op, str(tried), str(improved), "-" if rate is None else f"{rate:.2f}")
    console.print(table)
