"""The ablation study read from disk (``archive sweep``, the study's end of sweep): arms, budgets, per-item scores.

Every finished ``mode=evolve`` run below the given folders becomes an :class:`~evotrainer.stats.ablation.ArmRun`: its arm
is its config's ``outer.candidate_source`` (``coevolve`` for runs made before the key existed; :func:`arm_name`), with
``_strategy`` appended when the run evolved strategy knobs (``outer.strategy``), its budget
``outer.budget.rollouts``, its rollouts the sum of :func:`~evotrainer.archive.schema.budget_rollouts` over its
evaluation rows (the count its own stopping rule used), its wall time the ``totals`` phase plus the time a resume
carried over from earlier processes, and its per-item scores the ``generalisation`` event (held-out items) and the
``transfer`` event. Peer arms come from their
:data:`~evotrainer.stats.ablation.ARM_RESULT_NAME` files. :func:`write_study_report` writes the table and its figure
as a self-contained HTML page (plotly, as the run report; text escaped).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots
from rich.console import Console
from rich.text import Text

from evotrainer.archive.locate import find_archives
from evotrainer.archive.replay_store import RESUME_MARKER
from evotrainer.archive.schema import budget_rollouts
from evotrainer.archive.store import open_archive
from evotrainer.browse.page import esc, page_head, plot_div, write_page
from evotrainer.browse.page import table as html_table
from evotrainer.browse.textsafe import clip, terminal_safe
from evotrainer.browse.views import run_generalisation
from evotrainer.errors import ArchiveError, EvoTrainerError
from evotrainer.events.kinds import PhaseEvent
from evotrainer.stats.ablation import (
    ARM_RESULT_NAME,
    ArmRun,
    ItemScores,
    StudyRow,
    StudyTable,
    read_arm_result,
    render_study,
    study_notes,
    study_table,
)
from evotrainer.stats.generalisation import format_diff
from evotrainer.stats.transfer import read_report

__all__ = ["STUDY_REPORT_NAME", "arm_name", "arm_runs", "is_study", "load_study", "print_study", "study_html",
           "write_study_report"]

STUDY_REPORT_NAME = "study_report.html"
"""File the study writes into its sweep folder at the end."""
_MAX_RESULTS = 10_000


def _config(config: dict[str, Any], *keys: str) -> Any:
    node: Any = config
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def arm_name(config: dict[str, Any]) -> str:
    """A run's arm in the study table, from its archived config: ``outer.candidate_source`` (``coevolve`` when the
    key is missing), plus ``_strategy`` when ``outer.strategy`` names any knob, so that ``coevolve`` runs with and
    without strategy knobs pool as two arms (``coevolve_strategy`` and ``coevolve``)."""
    source = str(_config(config, "outer", "candidate_source") or "coevolve")
    return f"{source}_strategy" if _config(config, "outer", "strategy") else source


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _seconds(store: Any, run_id: str) -> float | None:
    """The run's wall time over all its processes: the last process's ``totals`` plus the time its latest
    ``resume`` marker carried over from the earlier processes (``elapsed_before_s``); None without ``totals``."""
    phases = [e.event for e in store.events(run_id, kind="phase") if isinstance(e.event, PhaseEvent)]
    totals = [p for p in phases if p.name == "totals"]
    value = _number(totals[-1].fields.get("seconds")) if totals else None
    resumes = [p for p in phases if p.name == RESUME_MARKER]
    before = _number(resumes[-1].fields.get("elapsed_before_s")) if resumes else None
    return None if value is None else value + (before or 0.0)


def _archive_runs(path: Path, skipped: list[dict[str, Any]]) -> list[ArmRun]:
    out: list[ArmRun] = []
    with open_archive(path) as store:
        for run in store.list_runs():
            g = run_generalisation(store, run.run_id)
            if g is None:
                skipped.append({"source": str(path), "run_id": run.run_id,
                                "reason": "no generalisation event (still running, crashed, or not mode=evolve)"})
                continue
            heldout = None
            if g.heldout is not None and g.heldout.baseline:
                c = g.heldout
                ids = c.item_ids if len(c.item_ids) == len(c.baseline) else tuple(f"#{i}" for i in range(c.n))
                heldout = ItemScores(tuple(ids), {"best_seed": c.baseline, "final_best": c.best})
            report, _ = read_report(store.events(run.run_id, kind="transfer"))
            transfer = None if report is None else ItemScores(
                report.item_ids, dict(zip(report.roles, report.values, strict=True)))
            budget = _config(run.config, "outer", "budget", "rollouts")
            out.append(ArmRun(
                arm=arm_name(run.config), seed=run.seed,
                run_id=run.run_id, source=str(path),
                rollouts=sum(budget_rollouts(e) for e in store.evaluations(run.run_id)),
                budget=budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
                seconds=_seconds(store, run.run_id), heldout=heldout, transfer=transfer))
    return out


def _result_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root] if root.name == ARM_RESULT_NAME else []
    return sorted(root.rglob(ARM_RESULT_NAME))[:_MAX_RESULTS] if root.is_dir() else []


def arm_runs(paths: Iterable[str | Path]) -> tuple[list[ArmRun], list[dict[str, Any]]]:
    """Every finished run below ``paths``: EvoTrainer archives and peer arm results (module docstring).

    Returns:
        (runs, skipped): the runs, a run id seen twice counted once; skipped runs and files as
        ``{"source", "run_id", "reason"}``.
    """
    runs: list[ArmRun] = []
    skipped: list[dict[str, Any]] = []
    for root in map(Path, paths):
        try:
            locations = find_archives(root)
        except ArchiveError:
            locations = []  # a folder of peer results only, or none
        for loc in locations:
            try:
                runs += _archive_runs(loc.path, skipped)
            except EvoTrainerError as exc:
                skipped.append({"source": str(loc.path), "run_id": None, "reason": str(exc)})
        for path in _result_files(root):
            try:
                runs.append(read_arm_result(path))
            except EvoTrainerError as exc:
                skipped.append({"source": str(path), "run_id": None, "reason": str(exc)})
    seen: dict[str, str] = {}
    unique: list[ArmRun] = []
    for r in runs:
        if r.run_id in seen:
            skipped.append({"source": r.source, "run_id": r.run_id, "reason": f"same run id as {seen[r.run_id]}"})
            continue
        seen[r.run_id] = r.source
        unique.append(r)
    return unique, skipped


def load_study(paths: Sequence[str | Path], *, seed: int = 0, level: float = 0.95, html: str | Path | None = None,
               ) -> tuple[list[ArmRun], StudyTable | None, list[dict[str, Any]]]:
    """(runs, study table or None when they are not a study, skipped) of ``paths``; with ``html``, the study
    report written there too.

    Raises:
        ArchiveError: ``html`` given but the runs are not a study, or the file cannot be written.
    """
    runs, skipped = arm_runs(paths)
    study = study_table(runs, seed=seed, level=level) if is_study(runs) else None
    if html is not None:
        if study is None:
            raise ArchiveError(f"{', '.join(map(str, paths))}: no ablation study here (runs of one arm only); "
                               "nothing to write to --html")
        write_study_report(study, html, [str(p) for p in paths])
    return runs, study, skipped


def print_study(console: Console, study: StudyTable, skipped: Sequence[dict[str, Any]] = ()) -> None:
    """The study's table (:func:`~evotrainer.stats.ablation.render_study`), its notes and what was skipped."""
    console.print(render_study(study))
    for line in study_notes(study):
        console.print(Text(terminal_safe(line), style="" if study.budgets_equal else "yellow"))
    for s in skipped:
        console.print(Text(terminal_safe(f"study: skipped {s['source']}: {clip(str(s['reason']), 200)}"),
                           style="yellow"))


def is_study(runs: Sequence[ArmRun]) -> bool:
    """Whether ``runs`` make an ablation study: more than one arm, or any arm other than ``coevolve``."""
    return bool({r.arm for r in runs} - {"coevolve"}) or len({r.arm for r in runs}) > 1


# --- the HTML page -----------------------------------------------------------------------------------------


def _html_cell(c: Any) -> str:
    if c is None:
        return "–"
    cls = "ok" if c.diff.low > 0 else "bad" if c.diff.high < 0 else ""
    text = esc(format_diff(c.diff))
    return f"<span class='{cls}'>{text}</span>" if cls else text


def _figure(table: StudyTable) -> go.Figure:
    """Left: each row's pooled difference with its interval, held-out and transfer items; right: rollouts per
    arm (mean, min–max bars) against the budget (dashed)."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.65, 0.35], horizontal_spacing=0.18,
                        subplot_titles=("pooled difference [interval] (S_val; > 0: the first one scores higher)",
                                        "rollouts per arm (budget dashed)"))
    labels = [esc(r.label) for r in table.rows][::-1]
    for name, attr, color, shift in (("held-out items", "heldout", "#1f77b4", 0.12),
                                     ("transfer items", "transfer", "#ff7f0e", -0.12)):
        rows = [(i, getattr(r, attr)) for i, r in enumerate(table.rows[::-1]) if getattr(r, attr) is not None]
        fig.add_trace(go.Scatter(
            x=[c.diff.mean for _, c in rows], y=[i + shift for i, _ in rows], mode="markers", name=name,
            marker={"color": color, "size": 9},
            error_x={"type": "data", "symmetric": False, "array": [c.diff.high - c.diff.mean for _, c in rows],
                     "arrayminus": [c.diff.mean - c.diff.low for _, c in rows]},
            hovertext=[f"{labels[i]}: {esc(format_diff(c.diff))}, W/L/T {c.wins}/{c.losses}/{c.ties}"
                       for i, c in rows], hoverinfo="text"), row=1, col=1)
    fig.add_vline(x=0, line_dash="dot", line_color="#888", row=1, col=1)
    fig.update_yaxes(tickvals=list(range(len(labels))), ticktext=labels, row=1, col=1)
    arm_rows: list[StudyRow] = [r for r in table.rows if r.kind == "arm"]
    means = [sum(r.rollouts) / len(r.rollouts) if r.rollouts else 0.0 for r in arm_rows]
    fig.add_trace(go.Bar(
        x=[esc(r.arm) for r in arm_rows], y=means, name="rollouts", marker_color="#2ca02c", showlegend=False,
        error_y={"type": "data", "symmetric": False,
                 "array": [max(r.rollouts, default=0) - m for r, m in zip(arm_rows, means, strict=True)],
                 "arrayminus": [m - min(r.rollouts, default=0) for r, m in zip(arm_rows, means, strict=True)]}),
        row=1, col=2)
    for b in sorted({b for r in arm_rows for b in r.budgets if b is not None}):
        fig.add_hline(y=b, line_dash="dash", line_color="#d62728", row=1, col=2)
    return fig


def study_html(table: StudyTable, sources: Sequence[str] = ()) -> str:
    """The study as one self-contained HTML page: the table (as ``archive sweep`` prints it), the notes, the figure."""
    pct = f"{round(table.level * 100)}% CI"
    rows = []
    for r in table.rows:
        rollouts = "–" if r.kind != "arm" else esc(", ".join(f"{n:,}" for n in r.rollouts))
        budgets = "–" if r.kind != "arm" else esc(", ".join("none" if b is None else f"{b:,}" for b in r.budgets))
        mins = "–" if r.kind != "arm" else esc(", ".join("?" if s is None else f"{s / 60:.1f}" for s in r.seconds))
        rows.append([esc(r.label), esc(",".join(map(str, r.seeds)) or "–"), _html_cell(r.heldout),
                     esc(_wlt(r.heldout)), _html_cell(r.transfer), esc(_wlt(r.transfer)), _html_cell(r.transfer_plain),
                     rollouts, budgets, mins])
    headers = ["comparison", "seeds", f"held-out Δ [{pct}]", "W/L/T", f"transfer Δ [{pct}]", "W/L/T",
               "transfer: final best − plain", "rollouts per seed", "budget", "wall time per seed (min)"]
    notes = "".join(f"<p class='note'>{esc(line)}</p>" for line in study_notes(table))
    where = "".join(f"<li>{esc(s)}</li>" for s in sources)
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return f"""{page_head("EvoTrainer ablation study")}
<h1>EvoTrainer ablation study</h1>
<p class="note">Report generated {esc(generated)} · {table.runs} run(s) · differences in S_val, higher is better,
pooled over seeds by a cluster bootstrap over items (each item's difference averaged over the seeds, items
resampled) · an arm row is that arm's final best − its best seed; an arm − arm row compares the two arms' final
bests on the same items, seed by seed.</p>
{html_table(headers, rows)}{notes}
<h2 id="study-plot">Pooled differences and rollouts</h2>{plot_div(_figure(table), "study-plot", 460)}
<details><summary>sources</summary><ul>{where}</ul></details>
</body></html>
"""


def _wlt(c: Any) -> str:
    return "–" if c is None else f"{c.wins}/{c.losses}/{c.ties}"


def write_study_report(table: StudyTable, out: str | Path, sources: Sequence[str] = ()) -> Path:
    """Write :func:`study_html` to ``out`` atomically (parent folders created; :func:`~evotrainer.browse.page.write_page`).

    Raises:
        ArchiveError: the file cannot be written.
    """
    return write_page(out, study_html(table, sources), "study report")
