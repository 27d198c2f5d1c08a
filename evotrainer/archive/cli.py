"""``python -m evotrainer.archive <command> ARCHIVE ...`` (or ``evotrainer-archive``): browse a run's lineage archive.

Commands: ``runs``, ``show``, ``policy``, ``lineage``, ``diff``, ``best``, ``harness``, ``rollbacks``,
``export``, ``report``, ``sweep``, ``checkpoint``. Tables for people, ``--json`` for scripts. ARCHIVE is an ``archive.db``
or a folder holding exactly one (``runs`` and ``sweep`` accept any folder and read every archive below
it, e.g. a Hydra multirun sweep). The run defaults to the last run in the file; a policy to the best one (highest
meta-validation S_val); policy ids may be given by a unique prefix.

Archives are opened read-only (no lock held, nothing written beside them), so a run that is still going,
or an archive on a read-only mount, can be browsed. ``checkpoint`` alone writes to the archive (it folds
``archive.db-wal`` into ``archive.db``); ``report`` and ``export`` write their own files. Errors print one
line and exit with status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import contextvars
import functools
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evotrainer import ablation, transfer, transfer_view
from evotrainer.archive import study_view, views, yardstick_view
from evotrainer.archive.diff import diff_policies
from evotrainer.archive.locate import find_archives, resolve_archive
from evotrainer.archive.store import ArchiveStore, checkpoint_archive, open_archive
from evotrainer.archive.sweep_table import index_jobs, render_jobs, sweep_status
from evotrainer.archive.textsafe import clip, dumps, terminal_safe
from evotrainer.archive.tree import lineage_tree
from evotrainer.errors import ArchiveError, EvoTrainerError
from evotrainer.events import TrajectoriesEvent
from evotrainer.generalisation import render_table, to_payload

__all__ = ["app", "main"]

app = typer.Typer(
    name="evotrainer-archive",
    help="Browse an EvoTrainer lineage archive (read-only): runs, policies, lineage, diffs, report; "
    "`checkpoint` folds a killed run's archive.db-wal into archive.db.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

F = TypeVar("F", bound=Callable[..., Any])

ArchiveArg = Annotated[Path, typer.Argument(help="archive.db file, or a run folder holding one", show_default=False)]
RunOpt = Annotated[str | None, typer.Option("--run", "-r", help="run id (default: the last run in the file)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON for scripts instead of tables")]
PolicyArg = Annotated[str | None, typer.Argument(help="policy id or unique prefix (default: best by S_val)")]

_PIPE_WIDTH = 160
_DEBUG: contextvars.ContextVar[bool] = contextvars.ContextVar("evotrainer_archive_debug", default=False)
_EXPECTED = (EvoTrainerError, sqlite3.Error, OSError, json.JSONDecodeError)


def _console() -> Console:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:  # piped to a file or pager: wide tables rather than 80 columns
        console.width = max(console.width, _PIPE_WIDTH)
    return console


def _friendly(func: F) -> F:
    """Turn expected failures (bad archive, unknown id, unwritable folder) into one line and exit 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except _EXPECTED as exc:
            if _DEBUG.get():
                raise
            msg = " ".join(terminal_safe(str(exc) or type(exc).__name__).split())
            print(f"error: {msg}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="show full tracebacks on errors")] = False,
) -> None:
    _DEBUG.set(debug)


def _open(archive: Path) -> ArchiveStore:
    return open_archive(resolve_archive(archive), read_only=True)


def _emit_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj) + "\n")


def _f(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return terminal_safe(x)


def _kv_table(title: str, rows: list[tuple[str, Any]]) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    for k, v in rows:
        t.add_row(Text(k), Text(_f(v)))
    return t


# --- runs / show ----------------------------------------------------------------------------------


@app.command()
@_friendly
def runs(
    path: Annotated[Path, typer.Argument(help="archive.db, a run folder, or a multirun folder to search")],
    as_json: JsonOpt = False,
) -> None:
    """List the runs of one archive, or of every archive.db under a folder (Hydra multirun jobs grouped)."""
    locations = find_archives(path)
    rows: list[dict[str, Any]] = []
    for loc in locations:
        base = {"archive": str(loc.path), "group": str(loc.group) if loc.group else None, "job": loc.job,
                "overrides": list(loc.overrides)}
        try:
            with open_archive(loc.path) as store:
                for run in store.list_runs():
                    ov = views.run_overview(store, run)
                    rows.append({**base, **{k: ov[k] for k in ("run_id", "seed", "created_at", "status",
                                                               "stop_reason", "best_s_val", "best_policy_id",
                                                               "policies", "outer_generations",
                                                               "last_event_at")}, "error": None})
        except EvoTrainerError as exc:
            if len(locations) == 1:
                raise
            rows.append({**base, "run_id": None, "error": str(exc)})
    if as_json:
        _emit_json(rows)
        return
    console = _console()
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    for group, members in groups.items():
        title = f"multirun {group}" if group else "runs"
        t = Table(title=terminal_safe(title), title_justify="left")
        for col in ("job", "run", "seed", "status", "best S_val", "policies", "outer gens"):
            t.add_column(col, min_width=min(len(col), 6))
        t.add_column("overrides")
        t.add_column("archive", overflow="fold")
        for r in members:
            if r["error"]:
                t.add_row(Text(r["job"]), Text("error", style="red"), "", Text(clip(r["error"], 80)), "", "", "",
                          "", Text(terminal_safe(r["archive"])))
                continue
            t.add_row(Text(r["job"]), Text(terminal_safe(r["run_id"])), str(r["seed"]),
                      Text(r["status"], style="green" if r["status"] == "finished" else "yellow"),
                      _f(r["best_s_val"]), str(r["policies"]), str(r["outer_generations"]),
                      Text(clip(" ".join(r["overrides"]), 50)), Text(terminal_safe(r["archive"])))
        console.print(t)
    if rows and all(r["error"] for r in rows):
        raise typer.Exit(2)


@app.command()
@_friendly
def show(archive: ArchiveArg, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """A run: config summary, best S_val, budget used (evaluations, rollouts, tokens), stop reason, yardstick."""
    with _open(archive) as store:
        ov = views.run_overview(store, views.pick_run(store, run))
        try:
            g = views.run_generalisation(store, ov["run_id"])
        except ArchiveError:
            g = None
        races = views.race_summary(store, ov["run_id"])
        tr, _ = transfer.read_report(store.events(ov["run_id"], kind="transfer"))  # unreadable: not shown
        ys = yardstick_view.read_yardstick(store, ov["run_id"])
    if as_json:
        _emit_json({**ov, "racing": races, "generalisation": None if g is None else to_payload(g),
                    "transfer": None if tr is None else transfer.to_event(tr).to_payload(), "yardstick": ys.payload()})
        return
    b = ov["budget"]
    console = _console()
    console.print(_kv_table(f"run {terminal_safe(ov['run_id'])}", [
        ("status", ov["status"]), ("stop reason", ov["stop_reason"]), ("stop detail", ov["stop_detail"]),
        ("held-out S_val", ov["heldout_s_val"]), ("seed", ov["seed"]),
        ("created", ov["created_at"]), ("last event", ov["last_event_at"]), ("code", ov["code_version"]),
        ("best policy", ov["best_policy_id"]), ("best S_val", ov["best_s_val"]),
        ("initial policy", ov["initial_policy_id"]), ("initial S_val", ov["initial_s_val"]),
        ("policies archived", ov["policies"]), ("outer generations", ov["outer_generations"]),
        ("rollbacks", ov["rollbacks"]),
    ]))
    t = Table(title="budget used", title_justify="left")
    for col in ("kind", "evaluations", "computed", "failed", "rollouts", "generated tokens", "seconds"):
        t.add_column(col, justify="right" if col != "kind" else "left")
    for kind, k in [*b["by_kind"].items(), ("total", b)]:
        t.add_row(kind, str(k["evaluations"]), str(k["computed"]), str(k["failed"]), str(k["rollouts"]),
                  str(k["generated_tokens"]), f"{k['seconds']:.0f}")
    console.print(t)
    console.print(_kv_table("config", list(ov["config"].items())))
    if races["races"]:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(races["by_status"].items()))
        console.print(_kv_table("racing (candidates' policies vs the incumbent)", [
            ("races", races["races"]), ("policies raced", f"{races['entries']} ({statuses})"),
            ("item evaluations", races["evaluations"]),
            ("promotion decisions", f"{races['promotions']}, {races['promoted']} promoted (paired lower bound > 0)"),
        ]))
    if g is not None:
        console.print(render_table(g), Text(f"generalisation: {terminal_safe(g.verdict)}"))
    if tr is not None:
        console.print(transfer_view.render_table(tr, caption=f"transfer: {terminal_safe(tr.verdict)}"))
    yardstick_view.print_yardstick(console, ys)


# --- policies -------------------------------------------------------------------------------------


@app.command()
@_friendly
def policy(archive: ArchiveArg, policy_id: PolicyArg = None, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """A policy: genome sections, scores by kind and component, parents, children, operator, generation."""
    with _open(archive) as store:
        rid = views.pick_run(store, run).run_id
        detail = views.policy_detail(store, rid, views.resolve_policy(store, rid, policy_id))
    if as_json:
        _emit_json(detail)
        return
    console = _console()
    console.print(_kv_table(f"policy {terminal_safe(detail['id'])}", [
        ("operator", detail["operator"]), ("generation", detail["generation"]),
        ("parents", ", ".join(detail["parent_ids"]) or "(seed)"), ("root seed", detail["root_id"]),
        ("children", ", ".join(detail["children"]) or "–"), ("adapter", detail["adapter"]),
        ("decoding genes", ", ".join(f"{k}={v}" for k, v in detail["decoding"].items()) or "–"),
    ]))
    t = Table(title="scores (higher is better)", title_justify="left")
    for col in ("kind", "n", "failed", "best", "mean", "components (mean)"):
        t.add_column(col)
    for kind, s in detail["scores"].items():
        comps = "  ".join(f"{k} {_f(v, 3)}" for k, v in s["components"].items())
        t.add_row(kind, str(s["n"]), str(s["failed"]), _f(s["best"]), _f(s["mean"]), Text(terminal_safe(comps)))
    console.print(t)
    for sec in detail["sections"]:
        console.rule(Text(f"section {terminal_safe(sec['name'])}"), align="left")
        console.print(Text(terminal_safe(sec["text"])))


@app.command()
@_friendly
def lineage(archive: ArchiveArg, policy_id: PolicyArg = None, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """The ancestry of a policy as a tree, back to the seed prompts (both parents of a crossover)."""
    with _open(archive) as store:
        rid = views.pick_run(store, run).run_id
        graph = views.lineage_graph(store, rid, views.resolve_policy(store, rid, policy_id).id)
    if as_json:
        _emit_json(graph)
        return
    console = _console()
    console.print(lineage_tree(graph))
    verdict = "reaches the seeds" if graph["reaches_seeds"] else "does NOT reach the seeds on every path"
    console.print(Text(f"{len(graph['nodes'])} nodes; {verdict}: {', '.join(graph['seeds']) or '–'}"))


@app.command()
@_friendly
def diff(
    archive: ArchiveArg,
    a: Annotated[str, typer.Argument(help="first policy (id, unique prefix or 'best')")],
    b: Annotated[str, typer.Argument(help="second policy")],
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Word-level diff of two policies' prompts, section by section ([-removed-] {+added+})."""
    with _open(archive) as store:
        rid = views.pick_run(store, run).run_id
        d = diff_policies(views.resolve_policy(store, rid, a), views.resolve_policy(store, rid, b))
    if as_json:
        _emit_json(d)
        return
    console = _console()
    console.print(Text(f"diff {d['a']} → {d['b']}: {d['changed']} section(s) differ", style="bold"))
    for sec in d["sections"]:
        console.rule(Text(f"{terminal_safe(sec['name'])} ({sec['status']})"), align="left")
        out = Text()
        for op in sec["ops"]:
            pieces = [(op["a"], "", "", "")] if op["op"] == "equal" else \
                [(op["a"], "[-", "-]", "red strike"), (op["b"], "{+", "+}", "green")]
            for text, left, right, style in pieces:
                if not text:
                    continue
                if out.plain and not out.plain.endswith("\n"):
                    out.append(" ")
                out.append(f"{left}{terminal_safe(text)}{right}", style=style or None)
        console.print(out)
    for gene in ("decoding", "adapter"):
        if d[gene] is not None:
            console.print(Text(f"{gene}: {terminal_safe(d[gene]['a'])} → {terminal_safe(d[gene]['b'])}"))


@app.command()
@_friendly
def best(
    archive: ArchiveArg,
    n: Annotated[int, typer.Option("-n", min=1, help="how many policies")] = 10,
    by: Annotated[str, typer.Option(help="rank by this evaluation kind: meta_val, meta_screen or fitness")] = "meta_val",
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The top-N policies by their best score of one kind (default: meta-validation S_val)."""
    if by not in ("meta_val", "meta_screen", "fitness", "meta_heldout"):
        raise typer.BadParameter(f"--by must be meta_val, meta_screen, fitness or meta_heldout, got {by!r}")
    with _open(archive) as store:
        rows = views.best_policies(store, views.pick_run(store, run).run_id, n, by)
    if as_json:
        _emit_json(rows)
        return
    t = Table(title=f"best policies by {by} (higher is better)", title_justify="left")
    others = [k for k in ("meta_val", "fitness") if k != by]
    for col in ("#", "policy", by, *others, "operator", "gen", "root"):
        t.add_column(col, min_width=len(col))
    t.add_column("prompt", no_wrap=True, overflow="ellipsis", max_width=40)
    for r in rows:
        t.add_row(str(r["rank"]), Text(terminal_safe(r["policy_id"])), _f(r["score"]), *[_f(r[k]) for k in others],
                  Text(terminal_safe(r["operator"])), str(r["generation"]),
                  Text(terminal_safe(r["root_id"])), Text(clip(r["prompt_start"], 80)))
    _console().print(t)


@app.command()
@_friendly
def harness(archive: ArchiveArg, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """The harness trajectory: every CMA-ES candidate per outer generation with its values and scores."""
    with _open(archive) as store:
        rows = views.harness_trajectory(store, views.pick_run(store, run).run_id)
    if as_json:
        _emit_json(rows)
        return
    t = Table(title="harness candidates (S_val higher is better)", title_justify="left")
    for col in ("outer", "cand", "status", "screen S_val", "S_val", "best policy"):
        t.add_column(col, min_width=min(len(col), 6))
    t.add_column("difficulty")
    t.add_column("reward weights")
    for r in rows:
        knobs = "  ".join(f"{k}={v:.3g}" for k, v in r["params"].items() if not k.startswith("w:"))
        weights = "  ".join(f"{k[2:]}={v:.2f}" for k, v in r["params"].items() if k.startswith("w:"))
        t.add_row(str(r["outer_generation"]), str(r["index"]), Text(terminal_safe(r["status"])),
                  _f(r["screen_s_val"]), _f(r["s_val"]), Text(_f(r["best_policy_id"])),
                  Text(terminal_safe(knobs)), Text(terminal_safe(weights)))
    _console().print(t if rows else Text("no harness candidates yet"))


@app.command()
@_friendly
def rollbacks(archive: ArchiveArg, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """Rollback events (the engine returning to the best archived harness and population)."""
    with _open(archive) as store:
        rows = views.rollbacks(store, views.pick_run(store, run).run_id)
    if as_json:
        _emit_json(rows)
        return
    if not rows:
        _console().print("no rollback events")
        return
    t = Table(title="rollback events", title_justify="left")
    for col in ("id", "time", "outer gen", "details"):
        t.add_column(col)
    for r in rows:
        details = {k: v for k, v in r.items() if k not in ("id", "created_at", "outer_generation")}
        t.add_row(str(r["id"]), r["created_at"], _f(r.get("outer_generation")),
                  Text(clip(json.dumps(details, ensure_ascii=False, default=str), 100)))
    _console().print(t)


@app.command()
@_friendly
def export(
    archive: ArchiveArg,
    policy_id: PolicyArg = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="folder to write (created when missing)")] = Path("export"),
    force: Annotated[bool, typer.Option("--force", help="write into a non-empty folder")] = False,
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export a policy to a folder: prompt.md (the system prompt) and policy.json (genome, scores, lineage)."""
    from evotrainer.archive.policy_export import export_policy

    with _open(archive) as store:
        rid = views.pick_run(store, run).run_id
        result = export_policy(store, rid, views.resolve_policy(store, rid, policy_id), out, force=force)
    if as_json:
        _emit_json(result)
        return
    names = ", ".join(Path(f).name for f in result.get("files", ())) or "prompt.md, policy.json"
    _console().print(Text(f"exported {result['policy_id']} to {terminal_safe(result['folder'])}: {names}"))
    if result["adapter"]:
        _console().print(Text("the folder loads with PeftModel.from_pretrained(base_model, folder)"))


@app.command()
@_friendly
def trajectories(
    archive: ArchiveArg,
    run: RunOpt = None,
    policy: Annotated[str | None, typer.Option("--policy", "-p", help="only this policy id (or unique prefix)")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="JSONL file to write (default: standard output)")] = None,
) -> None:
    """Export the archived multi-step episodes (a tool_agent run) as JSONL: one line per episode with the
    policy, the batch, the evaluation kind (fitness / meta_screen / meta_val / race ...), the messages, tool
    calls, observations, per-step rewards and the first wrong step."""
    from evotrainer.atomic import write_text_atomic

    with _open(archive) as store:
        rid = views.pick_run(store, run).run_id
        pid = views.resolve_policy(store, rid, policy).id if policy else None
        lines = []
        for stored in store.events(rid, "trajectories"):
            ev = stored.event
            if not isinstance(ev, TrajectoriesEvent) or (pid is not None and ev.policy_id != pid):
                continue
            for traj in ev.trajectories:
                row = {"policy_id": ev.policy_id, "batch_id": ev.batch_id, "kind": ev.evaluation_kind,
                       "harness_id": ev.harness_id, **(traj if isinstance(traj, dict) else {"text": traj})}
                lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    if not lines:
        raise typer.BadParameter("no archived trajectories in this run (only multi-step families such as "
                                 "task=tool_agent archive them)", param_hint="ARCHIVE")
    if out is None:
        sys.stdout.write("".join(lines))
        return
    if out.is_dir():
        raise typer.BadParameter(f"{out} is a folder; give a file name, e.g. {out / 'trajectories.jsonl'}",
                                 param_hint="--out")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, "".join(lines))
    _console().print(Text(f"{len(lines)} trajectories -> {terminal_safe(str(out))}"))


@app.command()
@_friendly
def report(
    archive: ArchiveArg,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", show_default=False,
        help="HTML file to write (default: report.html in the run folder, beside archive.db)")] = None,
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a self-contained HTML report (plots, lineage graph with clickable prompts) into the run folder.

    It goes to RUN_DIR/report.html, beside archive.db, unless --out names another file (needed for a read-only run).
    """
    from evotrainer.archive.report import write_report

    path = resolve_archive(archive)
    target = out if out is not None else path.parent / "report.html"
    with open_archive(path, read_only=True) as store:
        rid = views.pick_run(store, run).run_id
        try:
            written = write_report(store, rid, target)
        except ArchiveError as exc:
            if out is not None:
                raise
            raise ArchiveError(f"{exc}; pass --out FILE to write the report elsewhere") from None
    if as_json:
        _emit_json({"report": str(written), "run_id": rid})
        return
    _console().print(Text(f"report written: {terminal_safe(written)}"))


@app.command()
@_friendly
def checkpoint(
    archive: ArchiveArg,
    as_json: JsonOpt = False,
) -> None:
    """Fold archive.db-wal into archive.db (SQLite wal_checkpoint(TRUNCATE)), so archive.db alone holds every row.

    Run it where the run was written (a writable folder), after the run ended or was killed.
    """
    path = resolve_archive(archive)
    folded = checkpoint_archive(path)
    if as_json:
        _emit_json({"archive": str(path), "wal_bytes": folded})
        return
    msg = (f"{path}: no WAL to fold in" if folded == 0
           else f"{path}: {folded} bytes of WAL folded in; {path.name} alone now holds every row")
    _console().print(Text(terminal_safe(msg)))


# --- sweeps ---------------------------------------------------------------------------------------


_diff_cell = transfer_view.diff_cell
_HELD = {True: ("yes", "green"), False: ("no", "red"), None: ("undecided", "yellow")}


@app.command()
@_friendly
def sweep(
    paths: Annotated[list[Path], typer.Argument(help="Hydra multirun folders (a sweep_index.json in one gives a "
                                                     "row per job) or any folders holding archive.db files")],
    seed: Annotated[int, typer.Option(help="seed of the pooled bootstrap")] = 0,
    level: Annotated[float, typer.Option(min=0.5, max=0.999, help="coverage of the pooled interval")] = 0.95,
    html: Annotated[Path | None, typer.Option(
        "--html", help="also write the ablation study's table and figure to this HTML file")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Several seeds or settings: each job side by side, each run's final best vs best seed, and the
    held-out difference and the transfer report pooled over runs.

    A sweep folder with a ``sweep_index.json`` first gets one row per job (overrides that differ, status
    or error, final and best-seed S_val, held-out difference). The pooled intervals are cluster bootstraps
    over items (runs of one sweep share the held-out and the transfer items); runs without a generalisation
    event are listed as skipped, runs without a transfer event as transfer n/a.

    An ablation study (runs of more than one ``outer.candidate_source`` arm, or peer arms' ``arm_result.json``
    files, e.g. ``benchmarks/gepa_arm.py``) ends with the study table (:mod:`evotrainer.ablation`): per arm,
    final best − best seed, and arm against arm, pooled over seeds, with the rollouts and wall time per arm.

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
    summary = views.sweep_summary(locations, seed=seed, level=level)
    summary["jobs"] = jobs
    summary["study"] = None if study is None else {**ablation.to_payload(study), "skipped": study_skipped}
    if as_json:
        _emit_json(summary)
        if not summary["runs"] and not any(in_a_sweep(p) for p in paths):
            raise typer.Exit(2)
        return
    console = _console()
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
    for s in summary["skipped"]:
        console.print(Text(f"skipped {terminal_safe(s['archive'])}"
                           + (f" run {terminal_safe(s['run_id'])}" if s["run_id"] else "")
                           + f": {clip(s['reason'], 200)}", style="yellow"))
    if not summary["runs"] and study is None:
        where = ", ".join(str(p) for p in paths)
        raise ArchiveError(f"{where}: no run holds a generalisation event; nothing to summarise")
    for split, label in (("selection", "selection"), ("heldout", "held-out")):
        p = summary["pooled"][split]
        if p is not None:
            console.print(Text(f"pooled {label} difference over {p['runs']} run(s), {p['n']} items "
                               f"(cluster bootstrap by item, {pct}): ") + _diff_cell(p))
    p = summary["pooled"]["heldout"]
    if p is not None:
        console.print(Text(f"sweep: {p['verdict']}", style=_HELD[p["held"]][1]))
    transfer_view.print_pooled(console, summary)
    if study is not None:
        study_view.print_study(console, study, study_skipped)
        if html is not None:
            console.print(Text(f"study report written: {terminal_safe(str(html))}"))


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status (0 ok, 2 error)."""
    try:
        app(args=argv, prog_name="evotrainer-archive", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
