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

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from evotrainer.archive.locate import find_archives, resolve_archive
from evotrainer.archive.store import checkpoint_archive, open_archive
from evotrainer.browse import cli_sweep, selfevolve_view, transfer_view, views, yardstick_view
from evotrainer.browse.cli_common import (
    ArchiveArg,
    JsonOpt,
    PolicyArg,
    RunOpt,
    emit_json,
    friendly,
    kv_table,
    make_console,
    new_app,
    open_store,
)
from evotrainer.browse.diff import diff_policies
from evotrainer.browse.textsafe import clip, fmt, terminal_safe
from evotrainer.browse.tree import lineage_tree
from evotrainer.errors import ArchiveError, EvoTrainerError
from evotrainer.events.kinds import TrajectoriesEvent
from evotrainer.stats import transfer
from evotrainer.stats.generalisation import render_table, to_payload

__all__ = ["COMMANDS", "app", "main", "register"]

# the shared helpers (cli_common) under the names the commands below use
_console, _emit_json, _f, _friendly, _kv_table, _open = make_console, emit_json, fmt, friendly, kv_table, open_store


# --- runs / show ----------------------------------------------------------------------------------


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


@_friendly
def show(archive: ArchiveArg, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """A run: config summary, best S_val, budget used (evaluations, rollouts, tokens), stop reason, yardstick;
    for a self-evolution run (mode=selfevolve) its rounds, baseline and final scores, pool and samples."""
    with _open(archive) as store:
        info = views.pick_run(store, run)
        if selfevolve_view.is_selfevolve(store, info):
            se = selfevolve_view.selfevolve_overview(store, info)
            if as_json:
                _emit_json(se)
            else:
                selfevolve_view.print_overview(_console(), se)
            return
        ov = views.run_overview(store, info)
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


@_friendly
def harness(archive: ArchiveArg, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """The harness trajectory: every CMA-ES candidate per outer generation with its values, the race's estimate
    of its best policy's S_val (incumbent's mean + paired difference: it can fall below 0) and the whole-set S_val.
    A self-evolution run lists the training-harness candidates of its outer loop (``selfevolve.outer_loop``); without
    one it has no harness: it says so and shows the rounds (--json: [])."""
    with _open(archive) as store:
        info = views.pick_run(store, run)
        se = selfevolve_view.round_rows(store, info.run_id) if selfevolve_view.is_selfevolve(store, info) else None
        rows = views.harness_trajectory(store, info.run_id)
    if as_json:
        _emit_json(rows)
        return
    if se is not None and not rows:
        _console().print(Text(selfevolve_view.NO_HARNESS), selfevolve_view.rounds_table(se))
        return
    t = Table(title="harness candidates (higher is better)", title_justify="left")
    for col in ("outer", "cand", "status", "race estimate (can be < 0)", "S_val (whole set)", "best policy"):
        t.add_column(col, min_width=min(len(col), 6))
    t.add_column("knobs (difficulty, extras, strategy)")
    t.add_column("reward weights")
    for r in rows:
        knobs = "  ".join(f"{k}={v:.3g}" for k, v in r["params"].items() if not k.startswith("w:"))
        weights = "  ".join(f"{k[2:]}={v:.2f}" for k, v in r["params"].items() if k.startswith("w:"))
        t.add_row(str(r["outer_generation"]), str(r["index"]), Text(terminal_safe(r["status"])),
                  _f(r["race_estimate"]), _f(r["s_val"]), Text(_f(r["best_policy_id"])),
                  Text(terminal_safe(knobs)), Text(terminal_safe(weights)))
    _console().print(t if rows else Text("no harness candidates yet"))


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
    from evotrainer.browse.policy_export import export_policy

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


@_friendly
def trajectories(
    archive: ArchiveArg,
    run: RunOpt = None,
    policy: Annotated[str | None, typer.Option("--policy", "-p", help="only this policy id (or unique prefix)")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="JSONL file to write (default: standard output)")] = None,
) -> None:
    """Export the archived multi-step episodes (a tool_agent run) as JSONL: one line per episode with the
    policy, the batch, the evaluation kind (fitness / meta_screen / meta_val / race ...), the messages, tool
    calls, observations, per-step rewards and the first wrong step. For a self-evolution run: one line per
    judged sample with its round, policy, pool task (input, reference, difficulty), output, judge score,
    rule reward and components, model grades, and whether it passed."""
    from evotrainer.atomic import write_text_atomic

    with _open(archive) as store:
        info = views.pick_run(store, run)
        rid = info.run_id
        pid = views.resolve_policy(store, rid, policy).id if policy else None
        se = selfevolve_view.is_selfevolve(store, info)
        lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in selfevolve_view.sample_lines(store, rid, pid)] \
            if se else []
        for stored in [] if se else store.events(rid, "trajectories"):
            ev = stored.event
            if not isinstance(ev, TrajectoriesEvent) or (pid is not None and ev.policy_id != pid):
                continue
            for traj in ev.trajectories:
                row = {"policy_id": ev.policy_id, "batch_id": ev.batch_id, "kind": ev.evaluation_kind,
                       "harness_id": ev.harness_id, **(traj if isinstance(traj, dict) else {"text": traj})}
                lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    if not lines:
        raise typer.BadParameter("no judged samples archived in this self-evolution run yet" if se else
                                 "no archived trajectories in this run (only multi-step families such as "
                                 "task=tool_agent, and self-evolution runs, archive them)", param_hint="ARCHIVE")
    if out is None:
        sys.stdout.write("".join(lines))
        return
    if out.is_dir():
        raise typer.BadParameter(f"{out} is a folder; give a file name, e.g. {out / 'trajectories.jsonl'}",
                                 param_hint="--out")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, "".join(lines))
    _console().print(Text(f"{len(lines)} {'samples' if se else 'trajectories'} -> {terminal_safe(str(out))}"))


@_friendly
def report(
    archive: ArchiveArg,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", show_default=False,
        help="HTML file to write (default: report.html in the run folder, beside archive.db)")] = None,
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a self-contained HTML report (plots, lineage graph with clickable prompts) into the run folder;
    for a self-evolution run: its rounds (dev and val score per round), pool and judged samples.

    It goes to RUN_DIR/report.html, beside archive.db, unless --out names another file (needed for a read-only run).
    """
    from evotrainer.browse.report import build_report, write_report
    from evotrainer.browse.selfevolve_report import build_selfevolve_report

    path = resolve_archive(archive)
    target = out if out is not None else path.parent / "report.html"
    with open_archive(path, read_only=True) as store:
        info = views.pick_run(store, run)
        rid, se = info.run_id, selfevolve_view.is_selfevolve(store, info)
        try:
            written = write_report(store, rid, target, build=build_selfevolve_report if se else build_report)
        except ArchiveError as exc:
            if out is not None:
                raise
            raise ArchiveError(f"{exc}; pass --out FILE to write the report elsewhere") from None
    if as_json:
        _emit_json({"report": str(written), "run_id": rid})
        return
    _console().print(Text(f"report written: {terminal_safe(written)}"))


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


COMMANDS = (runs, show, policy, lineage, diff, best, harness, rollbacks, export, trajectories, report, checkpoint)
"""This module's commands, in the order ``--help`` lists them."""


def register(app: typer.Typer) -> None:
    """Add :data:`COMMANDS` to ``app``."""
    for command in COMMANDS:
        app.command()(command)


app = new_app()
"""The ``evotrainer-archive`` app: every command module registered on it, this one's commands first."""
register(app)
cli_sweep.register(app)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status (0 ok, 2 error)."""
    try:
        app(args=argv, prog_name="evotrainer-archive", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
