"""Showing a transfer report (:class:`~evotrainer.stats.transfer.TransferReport`): plain cells for the HTML report
and the archive CLI, and a rich table for the console. Numbers only come from the report; the verdict and
ids are escaped by each caller's medium (rich markup here, HTML in ``browse/report.py``). Also the sweep's
cells and its pooled transfer block (``archive sweep``; :mod:`evotrainer.stats.transfer_pool`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from evotrainer.browse.textsafe import terminal_safe
from evotrainer.stats.generalisation import format_diff
from evotrainer.stats.transfer import LABELS, TransferReport

__all__ = ["columns", "diff_cell", "print_pooled", "render_table", "run_cell", "table_rows"]


def table_rows(r: TransferReport) -> list[tuple[tuple[str, str, str, str], str]]:
    """Plain-text rows ``((row, policy, S_val or difference [CI], W/L/T), tone)``: one per policy (its mean),
    then one per comparison; tone "ok" (interval above 0), "bad" (below 0) or ""."""
    rows = [((LABELS.get(role, role), pid, f"{m:.4f}", ""), "")
            for role, pid, m in zip(r.roles, r.policy_ids, r.means, strict=True)]
    for c in r.comparisons:
        tone = "ok" if c.diff.low > 0 else "bad" if c.diff.high < 0 else ""
        rows.append(((c.label, "", format_diff(c.diff), f"{c.wins}/{c.losses}/{c.ties}"), tone))
    return rows


def columns(r: TransferReport) -> tuple[str, str, str, str]:
    """Column headers matching :func:`table_rows`."""
    return ("policy / comparison", "id", f"mean S_val / difference [{round(r.level * 100)}% CI]", "wins/losses/ties")


def render_table(r: TransferReport, caption: str | None = None) -> Table:
    """A rich table of ``r`` (text markup-escaped; intervals above 0 green, below 0 red), ``caption`` below it."""
    table = Table(title=f"transfer: {len(r.item_ids)} items no selection used (paired bootstrap over items; higher is better)", title_justify="left", caption=None if caption is None else escape(caption),
                  caption_justify="left")
    for i, col in enumerate(columns(r)):
        table.add_column(escape(col), justify="left" if i < 2 else "right")
    for cells, tone in table_rows(r):
        out = [escape(x) for x in cells]
        if tone:
            out[2] = f"[{'green' if tone == 'ok' else 'red'}]{out[2]}[/]"
        table.add_row(*out)
    return table


# --- sweeps (``archive sweep``) -------------------------------------------------------------------------


def diff_cell(d: Any) -> Text:
    """``+0.0136 [-0.001, +0.028]`` from a dict with numbers mean/low/high (green above 0, red below), "–" for
    anything else; a dict with ``n == 1`` shows its mean and "(one item: no interval)", unstyled."""
    if not isinstance(d, Mapping) or not all(isinstance(d.get(k), (int, float)) for k in ("mean", "low", "high")):
        return Text("–")
    if d.get("n") == 1:  # one item: its bootstrap bounds equal its mean, which is no interval
        return Text(f"{d['mean']:+.4f} (one item: no interval)")
    text = f"{d['mean']:+.4f} [{d['low']:+.3f}, {d['high']:+.3f}]"
    return Text(text, style="green" if d["low"] > 0 else "red" if d["high"] < 0 else "")


def run_cell(cell: Mapping[str, Any] | None) -> Text:
    """One run's transfer verdict (``transfer_pool.read_run``'s cell): yes, no, n/a (no event) or unreadable."""
    if cell is None:
        return Text("n/a")
    t = cell["transfers"]
    return Text("unreadable", style="yellow") if t is None else Text("yes", "green") if t else Text("no", "red")


def print_pooled(console: Console, summary: Mapping[str, Any]) -> None:
    """The sweep's pooled transfer block: a table (one row per pair), the verdict, and the runs not pooled.

    Args:
        console: where to print.
        summary: :func:`evotrainer.browse.views.sweep_summary`'s dict (``pooled_transfer``, ``runs``, ``level``).
    """
    p, pct = summary.get("pooled_transfer"), f"{round(summary['level'] * 100)}%"
    if p is None:
        console.print(Text("transfer: n/a (no run holds a transfer event)", style="yellow"))
        return
    table = Table(title=f"transfer pooled over {p['runs']} run(s), {p['items']} items (cluster bootstrap by item, "
                        f"{pct}; higher is better)", title_justify="left")
    for col in ("comparison", "runs", "items", f"difference [{pct} CI]", "wins/losses/ties (run × item)"):
        table.add_column(col, justify="left" if col == "comparison" else "right")
    for c in p["comparisons"]:
        table.add_row(escape(c["label"]), str(c["runs"]), str(c["n"]), diff_cell(c),
                      f"{c['wins']}/{c['losses']}/{c['ties']}")
    console.print(table)
    console.print(Text(terminal_safe(f"transfer: {p['verdict']}"), style="green" if p["transfers"] else "red"))
    left = [r for r in summary["runs"] if r.get("transfer") is None or r["transfer"]["transfers"] is None]
    if left:
        console.print(Text(terminal_safe("not pooled (no transfer event, or unreadable): " + ", ".join(
            f"{r['run_id']} ({r['job']})" if r.get("job") else r["run_id"] for r in left)), style="yellow"))
