"""Console output of an evolve run: number and harness formatting, the closing summary."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from evotrainer.backends.usage import usage_lines
from evotrainer.browse.transfer_view import render_table as transfer_table
from evotrainer.genome import PREFILL_SECTION, render_system_prompt
from evotrainer.harness import Harness
from evotrainer.stats.generalisation import render_table

__all__ = ["fmt", "fmt_harness", "print_generalisation", "print_operator_stats", "print_summary",
           "print_transfer"]


def fmt(x: float | None) -> str:
    """``x`` with 4 decimals, or "n/a"."""
    return "n/a" if x is None else f"{x:.4f}"


def fmt_harness(h: Harness) -> str:
    """``[knob=value ... | w: component=weight ...]``, then ``| strategy: key=value ...`` when the harness has
    strategy knobs; markup-escaped."""
    knobs = " ".join(f"{k}={v:.3g}" for k, v in {**h.difficulty, **h.extras}.items())
    weights = " ".join(f"{k}={v:.2f}" for k, v in h.reward_weights.items())
    strategy = " ".join(f"{k}={v:.3g}" for k, v in h.strategy.items())
    return escape(f"[{knobs} | w: {weights}" + (f" | strategy: {strategy}]" if strategy else "]"))


def print_generalisation(console: Console, g: Any) -> None:
    """The final best vs the best seed (:class:`~evotrainer.stats.generalisation.Generalisation`): a table of
    the paired difference per split (95 % interval, wins/losses/ties), then the verdict sentence."""
    console.print(render_table(g))
    style = "green" if g.held is True else "red" if g.held is False else "yellow"
    console.print(f"[{style}]generalisation: {escape(g.verdict)}[/]")


def print_transfer(console: Console, r: Any) -> None:
    """The transfer report (:class:`~evotrainer.stats.transfer.TransferReport`; None: "transfer: not configured"): mean
    S_val per policy on the transfer items, the paired differences (95 % interval, W/L/T), then the verdict."""
    if r is None:
        console.print("transfer: not configured (task.transfer_path gives no items)", markup=False, highlight=False)
        return
    console.print(transfer_table(r))
    console.print(f"[{'green' if r.transfers else 'red'}]transfer: {escape(r.verdict)}[/]")


def print_summary(console: Console, s: Any, incumbent: Any) -> None:
    """Print an :class:`~evotrainer.evolve.coevolution.EvolveSummary` and its incumbent pair.

    When ``s.generalisation`` (a :class:`~evotrainer.stats.generalisation.Generalisation`) is set, the
    comparison of the final best with the best seed follows the held-out line, then the transfer report
    (``s.transfer``, :func:`print_transfer`).
    """
    console.rule("[bold]summary")
    console.print(f"run {s.run_id}; stopped by {s.stop_reason}: {s.stop_detail}")
    console.print(f"S_val (selection set: {s.selection_items} items, higher is better): generation-0 best "
                  f"{s.initial_best.id} {s.initial_s_val:.4f} → final best {s.best.id} {s.best_s_val:.4f} "
                  f"({s.best_s_val - s.initial_s_val:+.4f})")
    if s.best.operator == "seed":
        console.print("  note: the final best is an unmodified seed policy; no evolved policy was confidently "
                      "better than it on the same items (races and paired promotions), so the change (if any) "
                      "comes from selecting among seeds, not from variation.")
    console.print(f"final best on the held-out part ({s.heldout_items} items, never used to select): "
                  f"{fmt(s.heldout_s_val)}  (selection {s.best_s_val:.4f})")
    g = getattr(s, "generalisation", None)
    if g is not None:
        print_generalisation(console, g)
    print_transfer(console, getattr(s, "transfer", None))
    console.print(f"incumbent S_val per outer generation: {', '.join(f'{v:.4f}' for v in s.s_val_curve)}")
    console.print("current S_val (the generation's best race estimate) per outer generation: "
                  + ", ".join(fmt(v) for v in s.current_curve))
    for r in s.rollbacks:
        console.print(f"rollback at outer {r['outer_generation']}: {r['cause']} → restored "
                      f"{r['restored_harness_id']} (S_val {r['s_val']:.4f}); {r['detail']}")
    console.print(f"best harness (outer gen {incumbent.outer_generation}, {incumbent.harness_id}): "
                  f"{fmt_harness(incumbent.harness)}")
    console.print(f"evaluations: {s.candidates} harness candidates, {s.policy_evaluations} policy evaluations "
                  f"on task batches, {s.rollouts} rollouts, {s.generated_tokens} generated tokens")
    for line in usage_lines(getattr(s, "usage", None) or {}):
        console.print(f"model usage: {line}", markup=False, highlight=False)
    console.print("timings: " + ", ".join(f"{k} {v:.0f}s" for k, v in s.timings.items()))
    console.print(f"archive: {s.archive}")
    console.rule(f"best prompt ({s.best.id}, operator {s.best.operator}, generation {s.best.generation})")
    console.print(render_system_prompt(s.best.sections) or "(empty system prompt)", markup=False, highlight=False)
    prefill = s.best.section_dict.get(PREFILL_SECTION, "")
    if prefill.strip():
        console.print(f"answer prefill (starts the assistant turn): {prefill!r}", markup=False, highlight=False)
    if s.best.decoding:
        console.print("decoding genes: " + ", ".join(f"{k}={v:g}" for k, v in s.best.decoding), markup=False,
                      highlight=False)
    if s.best.adapter:
        console.print(f"LoRA adapter: {s.best.adapter}", markup=False, highlight=False)


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
