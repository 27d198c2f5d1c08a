"""Showing a transfer report (:class:`~evotrainer.transfer.TransferReport`): plain cells for the HTML report
and the archive CLI, and a rich table for the console. Numbers only come from the report; the verdict and
ids are escaped by each caller's medium (rich markup here, HTML in ``archive/report.py``)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from evotrainer.generalisation import format_diff
from evotrainer.transfer import LABELS, TransferReport

__all__ = ["columns", "render_table", "table_rows"]


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
