"""``evotrainer-archive sweep``: several seeds or settings side by side, pooled; ``sensitivity``: which harness
knobs moved the candidates' scores over those runs (commands of :mod:`evotrainer.browse.cli`, which calls
:func:`register`)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from evotrainer.archive.locate import find_archives
from evotrainer.browse import sensitivity_view, study_view, transfer_view, views, weights_view
from evotrainer.browse.cli_common import JsonOpt, emit_json, friendly, make_console
from evotrainer.browse.sweep_table import index_jobs, render_jobs, sweep_status
from evotrainer.browse.textsafe import clip, terminal_safe
from evotrainer.errors import ArchiveError
from evotrainer.stats import ablation
from evotrainer.stats import sensitivity as stats_sensitivity

__all__ = ["COMMANDS", "register", "sensitivity", "sweep"]


_diff_cell = transfer_view.diff_cell
_HELD = {True: ("yes", "green"), False: ("no", "red"), None: ("undecided", "yellow")}


@friendly
def sweep(
    paths: Annotated[list[Path], typer.Argument(help="Hydra multirun folders (a sweep_index.json in one gives a "
                                                     "row per job) or any folders holding archive.db files")],
    seed: Annotated[int, typer.Option(help="seed of the pooled bootstrap")] = 0,
    level: Annotated[float, typer.Option(min=0.5, max=0.999, help="coverage of the pooled interval")] = 0.95,
    html: Annotated[Path | None, typer.Option(
        "--html", help="also write the ablation study's table and figure to this HTML file")] = None,
    items: Annotated[str | None, typer.Option(
        "--items", help="also pool the held-out and selection differences on the items whose task id matches this "
                        "shell pattern alone, e.g. 'elitr-*' for the items of one source")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Several seeds or settings: each job side by side, each run's final best vs best seed, and the
    held-out difference and the transfer report pooled over runs.

    A sweep folder with a ``sweep_index.json`` first gets one row per job (overrides that differ, status
    or error, final and best-seed S_val, held-out difference). The pooled intervals are cluster bootstraps
    over items (runs of one sweep share the held-out and the transfer items); runs without a generalisation
    event are listed as skipped, runs without a transfer event as transfer n/a. When the runs' items come from
    more than one source (task-id prefix: ``mv-``, ``elitr-``, ...), a table pools the differences per source.

    An ablation study (runs of more than one arm: ``outer.candidate_source``, ``coevolve_strategy`` for runs with
    ``outer.strategy``; or peer arms' ``arm_result.json`` files, e.g. ``benchmarks/gepa_arm.py``) ends with the
    study table (:mod:`evotrainer.stats.ablation`): per arm, final best − best seed, and arm against arm, pooled
    over seeds, with the rollouts and wall time per arm.

    Weight-training runs (``mode=selfevolve``, ``mode=distill``) get their own table: each run's adapter against
    the same prompt without it on the transfer items, and that difference pooled over the runs (bootstrap over the
    items' groups, e.g. the documents windows are cut from).

    With ``--json`` the exit status is 0 whenever a sweep index was found, even before any job finished
    (``runs`` is then empty and ``jobs`` carries each job's status); 2 when there is neither a run to
    summarise nor a sweep index.
    """
    jobs = index_jobs(paths)
    study_runs, study, study_skipped = study_view.load_study(paths, seed=seed, level=level, html=html)

    def in_a_sweep(path: Path) -> bool:  # a sweep index in the folder, or jobs of indexes below it
        return (sweep_status(path) is not None
                or any(Path(j["sweep"]).resolve().is_relative_to(path.resolve()) for j in jobs))

    locations = []
    for path in paths:
        try:
            locations += find_archives(path)
        except ArchiveError:
            if not in_a_sweep(path) and not any(r.source.startswith(str(path)) for r in study_runs):
                raise  # (a sweep whose jobs all failed or still run has no archive, but its index lists them)
    summary = views.sweep_summary(locations, seed=seed, level=level, items=items)
    summary["jobs"] = jobs
    summary["study"] = None if study is None else {**ablation.to_payload(study), "skipped": study_skipped}
    if as_json:
        emit_json(summary)
        if not summary["runs"] and summary["adapters"] is None and not any(in_a_sweep(p) for p in paths):
            raise typer.Exit(2)
        return
    console = make_console()
    if jobs:
        console.print(render_jobs(jobs))
        for folder in dict.fromkeys(j["sweep"] for j in jobs):
            if (st := sweep_status(folder)) is not None:
                n = sum(j["sweep"] == folder for j in jobs)
                console.print(Text(terminal_safe(
                    f"sweep {folder}: {st['status']}, {n} of {st['planned_jobs'] or '?'} jobs listed, "
                    f"{st['launcher'] or 'launcher ?'}, {st['started']} to {st['ended'] or '(not ended)'}"
                    + (f"; {st['error']}" if st.get("error") else ""))))
    pct = f"{round(level * 100)}%"
    if summary["runs"]:
        t = Table(title=f"final best vs best seed per run (paired differences, {pct} intervals; higher is better)",
                  title_justify="left")
        for col in ("job", "run", "seed", "best seed", "final best", "selection diff", "held-out diff",
                    "held-out W/L/T", "held", "transfer"):
            t.add_column(col)
        for r in summary["runs"]:
            h = r["heldout"]
            held, style = _HELD[r["held"]]
            t.add_row(Text(terminal_safe(r["job"])), Text(terminal_safe(r["run_id"])), str(r["seed"]),
                      Text(terminal_safe(r["baseline_id"])), Text(terminal_safe(r["best_id"])),
                      _diff_cell(r["selection"]), _diff_cell(h),
                      "–" if h is None else f"{h['wins']}/{h['losses']}/{h['ties']}", Text(held, style=style),
                      transfer_view.run_cell(r["transfer"]))
        console.print(t)
    if len(summary["dtypes"]) > 1:
        formats = ", ".join(f"{d}: {n} run{'s' if n > 1 else ''}" for d, n in sorted(summary["dtypes"].items()))
        console.print(Text(terminal_safe(
            f"the runs computed in more than one number format ({formats}; model.dtype): greedy outputs part at "
            "near-ties between formats, so runs of one seed in two formats are not repeats; pool runs of one "
            "format"), style="yellow"))
    for s in summary["skipped"]:
        console.print(Text(f"skipped {terminal_safe(s['archive'])}"
                           + (f" run {terminal_safe(s['run_id'])}" if s["run_id"] else "")
                           + f": {clip(s['reason'], 200)}", style="yellow"))
    adapters = summary["adapters"]
    if not summary["runs"] and study is None and adapters is None:
        where = ", ".join(str(p) for p in paths)
        raise ArchiveError(f"{where}: no run holds a generalisation event or a trained adapter's comparison; "
                           "nothing to summarise")
    pooled = [(summary["pooled"], "", "sweep", f"cluster bootstrap by item, {pct}")]
    if (sub := summary["pooled_items"]) is not None:
        where = f"items matching {sub['pattern']!r}"
        pooled.append((sub, f" on {where},", where, pct))
    for splits, on, verdict, how in pooled:
        if on and splits["heldout"] is None and splits["selection"] is None:
            console.print(Text(terminal_safe(f"no run recorded {verdict}"), style="yellow"))
        for split, label in (("selection", "selection"), ("heldout", "held-out")):
            if (p := splits[split]) is not None:
                console.print(Text(terminal_safe(f"pooled {label} difference{on} over {p['runs']} run(s), {p['n']} "
                                                 f"items ({how}): ")) + _diff_cell(p))
        if (p := splits["heldout"]) is not None:
            console.print(Text(terminal_safe(f"{verdict}: {p['verdict']}"), style=_HELD[p["held"]][1]))
    if by_source := summary["pooled_by_source"]:
        t = Table(title=f"pooled differences by item source (task id up to its first '-'; {pct} intervals): "
                        "a gain pooled over a mixed set can hide a loss on one source", title_justify="left")
        for col in ("source", "selection items", "selection diff", "held-out items", "held-out diff"):
            t.add_column(col)
        for src, splits in by_source.items():
            sel, held = splits["selection"], splits["heldout"]
            t.add_row(Text(terminal_safe(src)), "0" if sel is None else str(sel["n"]), _diff_cell(sel),
                      "0" if held is None else str(held["n"]), _diff_cell(held))
        console.print(t)
    if summary["runs"]:
        transfer_view.print_pooled(console, summary)
    weights_view.print_adapters(console, adapters, level)
    if study is not None:
        study_view.print_study(console, study, study_skipped)
        if html is not None:
            console.print(Text(f"study report written: {terminal_safe(str(html))}"))


@friendly
def sensitivity(
    paths: Annotated[list[Path], typer.Argument(help="folders (or archive.db files) whose runs' harness candidates "
                                                     "to pool, e.g. a study's multirun folder")],
    level: Annotated[float, typer.Option(min=0.5, max=0.999, help="coverage of the bootstrap interval")] = 0.95,
    resamples: Annotated[int, typer.Option(min=100, help="bootstrap resamples")] = 2000,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Which harness knobs moved the candidates' scores: per knob, Spearman's rho between its value and the
    candidate's race estimate (centred on its run's median), with a bootstrap interval, pooled over every run
    below PATHS (:mod:`evotrainer.stats.sensitivity`). A lead for choosing the outer loop's knobs, not a causal
    estimate: one CMA-ES run's candidates are not independent draws."""
    points, skipped = sensitivity_view.load_points(paths)
    rows = stats_sensitivity.sensitivity(points, level=level, resamples=resamples, seed=seed)
    runs = len({p.run for p in points})
    if as_json:
        emit_json({"candidates": len(points), "runs": runs, "skipped": skipped, "level": level,
                   "knobs": [{**asdict(r), "excludes_zero": r.excludes_zero} for r in rows]})
        return
    if not points:
        where = ", ".join(str(p) for p in paths)
        raise ArchiveError(f"{where}: no harness candidate with a race estimate; nothing to correlate")
    pct = f"{round(level * 100)}%"
    t = Table(title=f"harness sensitivity: {len(points)} candidates of {runs} run(s) ({skipped} without a score left "
                    f"out); Spearman rho of knob value vs run-centred race estimate, {pct} bootstrap interval",
              title_justify="left")
    for col in ("knob", "n", "rho", "interval", "IQR of the knob"):
        t.add_column(col)
    for r in rows:
        if r.rho is None:
            t.add_row(Text(terminal_safe(r.knob)), str(r.n), "–", "did not vary", f"{r.spread:g}")
            continue
        interval = "–" if r.low is None else f"[{r.low:+.2f}, {r.high:+.2f}]"
        t.add_row(Text(terminal_safe(r.knob)), str(r.n), f"{r.rho:+.2f}",
                  Text(interval, style="bold" if r.excludes_zero else ""), f"{r.spread:.3g}")
    make_console().print(t)


COMMANDS = (sweep, sensitivity)
"""This module's commands, in the order ``--help`` lists them."""


def register(app: typer.Typer) -> None:
    """Add :data:`COMMANDS` to ``app``."""
    for command in COMMANDS:
        app.command()(command)
