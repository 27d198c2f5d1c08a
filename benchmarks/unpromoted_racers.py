"""Were the ablation study's best *unpromoted* racers real gains? Re-score them against each run's incumbent (issue 25).

In the first ``+study=ablation`` sweep no run promoted anything over its best seed: a race on 12 selection items
needs a lead of about +0.032 (docs/outer_loop_budget.md, "What the ablation study showed"). This script asks
whether the racers that lost the race were better anyway, on items no selection used:

1. for every job folder ``SWEEP/<k>_<arm>_seed<S>/archive.db`` (``gepa_seed*`` folders are skipped) it reads the
   last run's ``setup`` event (its ``heldout_items``), the *incumbent* (the final best: the ``generalisation``
   event's ``best_id``, else the last ``meta_heldout`` row) and the *racer*: the policy with the highest
   ``meta_val`` total (S_val on the whole selection set) other than the incumbent; a run may have none;
2. it scores racer and incumbent on the run's held-out items (from ``task.validation_path`` and
   ``task.validation_extra``) and on its transfer items (``task.transfer_path``, first ``task.transfer_limit``),
   with the run's *stored* config (model, decoding, task family and metric): the product's evaluator
   (:class:`evotrainer.rollout.RolloutEvaluator`, as ``mode=evaluate`` and the run's own held-out report use it),
   one batched pass per group of runs that share the scoring config and the held-out items; it checks that the
   incumbent's re-scored held-out mean equals the archived ``meta_heldout`` total (and its transfer mean the
   ``meta_transfer`` one), and warns when not;
3. it prints ``racer − incumbent`` per run, per arm and over all runs, on the held-out and the transfer items:
   mean paired difference (S_val units in [-1, 1], higher: the racer scores higher), a percentile bootstrap
   interval over items and wins/losses/ties over (run, item) pairs. Runs are pooled by the study table's cluster
   bootstrap by item (:func:`evotrainer.stats.bootstrap.cluster_difference`; Davison & Hinkley 1997, sec. 3.8):
   each item's difference is averaged over the runs that scored it and items are resampled. Runs without a racer
   are listed and left out of the pools.

    python -m benchmarks.unpromoted_racers archive/multirun/<sweep>/ --threads 2
    python -m benchmarks.unpromoted_racers archive/multirun/<sweep>/ --plan     # what would be scored; no model
    python -m benchmarks.unpromoted_racers archive/multirun/<sweep>/ --json     # the JSON document on stdout

The sweep folder is only read. ``--out`` (default ``/tmp/evotrainer-unpromoted-racers``) receives
``unpromoted_racers.json`` and ``unpromoted_racers_items.csv`` (every per-item score); its cost is in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from omegaconf import OmegaConf
from rich.console import Console

from evotrainer.archive.store import DEFAULT_ARCHIVE_NAME, open_archive
from evotrainer.atomic import write_text_atomic
from evotrainer.browse.sweep_views import run_generalisation
from evotrainer.browse.views import pick_run
from evotrainer.config import Config, to_config
from evotrainer.errors import DataError, EvoTrainerError
from evotrainer.events.kinds import SetupEvent
from evotrainer.flat_keys import migrate_config
from evotrainer.genome import Policy
from evotrainer.progress import LOG_WIDTH, task
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.gene_support import check_policy_backend
from evotrainer.run.runtime import build_family, build_llm, load_transfer, load_validation, sampling_from
from evotrainer.stats.ablation import ItemScores
from evotrainer.stats.bootstrap import cluster_difference, rng_for
from evotrainer.stats.generalisation import format_diff

__all__ = ["RacerRun", "RunPlan", "compare_racers", "main", "plan_runs", "render", "run", "score_runs"]

DEFAULT_OUT = Path("/tmp/evotrainer-unpromoted-racers")
RESULT_NAME = "unpromoted_racers.json"
ITEMS_NAME = "unpromoted_racers_items.csv"
PARTS = ("heldout", "transfer")
_PART_TITLES = {"heldout": "held-out", "transfer": "transfer"}
_JOB = re.compile(r"^(\d+)_(.+)_seed(\d+)$")  # a study job folder (conf/study/ablation.yaml's hydra.sweep.subdir)
_MATCH_TOL = 1e-6  # S_val units: a re-scored mean within this of the archived total "matches"


@dataclass(frozen=True)
class RunPlan:
    """What one study run asks to be scored (step 1 of the module docstring).

    Attributes:
        job: the job folder's name, e.g. ``0_coevolve_seed0``.
        arm: the run's ``outer.candidate_source`` (``coevolve`` when the stored config lacks it).
        seed: the run's root seed.
        archive: its ``archive.db``.
        run_id: the run read (the file's last).
        config: the run's stored config (nested mappings, moved keys in their new place).
        heldout_ids: the ``setup`` event's held-out task ids, in the run's order.
        incumbent: the final best.
        racer: the best other policy on the whole selection set, or None (no other ``meta_val`` row).
        incumbent_val, racer_val: their archived ``meta_val`` totals (S_val in [0, 1]), None when absent.
        archived_heldout: the incumbent's archived ``meta_heldout`` total, None when absent.
        archived_transfer: the incumbent's archived ``meta_transfer`` total, None when absent.
    """

    job: str
    arm: str
    seed: int
    archive: str
    run_id: str
    config: Mapping[str, Any]
    heldout_ids: tuple[str, ...]
    incumbent: Policy
    racer: Policy | None
    incumbent_val: float | None
    racer_val: float | None
    archived_heldout: float | None
    archived_transfer: float | None


@dataclass(frozen=True)
class RacerRun:
    """One run's racer and incumbent re-scored (step 2).

    Attributes:
        plan: the run's plan.
        heldout: per-item S_val of roles ``incumbent`` and ``racer`` on the held-out items, each shape (n,).
        transfer: the same on the transfer items, or None when the run has no ``task.transfer_path``.
        checks: one sentence per comparison of a re-scored incumbent mean with its archived total.
        mismatches: how many of ``checks`` did not match (|difference| > 1e-6).
    """

    plan: RunPlan
    heldout: ItemScores
    transfer: ItemScores | None
    checks: tuple[str, ...]
    mismatches: int


def _totals(rows: Sequence[Any], policy_id: str) -> float | None:
    got = [r.total for r in rows if r.policy_id == policy_id]
    return float(got[-1]) if got else None


def _plan_one(path: Path, job: str) -> RunPlan | str:
    """The plan of one job's archive, or the reason it is skipped."""
    with open_archive(path, read_only=True) as store:
        run = pick_run(store)
        setups = [e.event for e in store.events(run.run_id, kind="setup") if isinstance(e.event, SetupEvent)]
        if not setups or not setups[-1].heldout_items:
            return "no setup event with held-out items (not a finished mode=evolve run with outer.heldout_share > 0)"
        held_rows = store.evaluations(run.run_id, kind="meta_heldout")
        gen = run_generalisation(store, run.run_id)
        if gen is None or not held_rows:
            return "no generalisation event or meta_heldout row (still running, crashed, or older code)"
        incumbent_id = gen.best_id
        selection = len(setups[-1].selection_items)
        val_rows = [r for r in store.evaluations(run.run_id, kind="meta_val")
                    if not selection or r.n_tasks == selection]  # whole-selection-set scores only
        others = [r for r in val_rows if r.policy_id != incumbent_id]
        best = max(others, key=lambda r: r.total) if others else None
        config = migrate_config(run.config)
        arm = (config.get("outer") or {}).get("candidate_source") or "coevolve"
        return RunPlan(
            job=job, arm=str(arm), seed=run.seed, archive=str(path), run_id=run.run_id, config=config,
            heldout_ids=tuple(setups[-1].heldout_items), incumbent=store.get_policy(run.run_id, incumbent_id),
            racer=None if best is None else store.get_policy(run.run_id, best.policy_id),
            incumbent_val=_totals(val_rows, incumbent_id), racer_val=None if best is None else float(best.total),
            archived_heldout=_totals(held_rows, incumbent_id),
            archived_transfer=_totals(store.evaluations(run.run_id, kind="meta_transfer"), incumbent_id))


def plan_runs(sweep: str | Path) -> tuple[list[RunPlan], list[dict[str, str]]]:
    """Step 1 for every study job folder of ``sweep`` (``<k>_<arm>_seed<S>/archive.db``), by job number.

    Returns:
        (plans, skipped): skipped jobs as ``{"job", "reason"}`` (unfinished runs, unreadable archives).

    Raises:
        DataError: ``sweep`` is not a folder, or holds no study job folder.
    """
    root = Path(sweep)
    if not root.is_dir():
        raise DataError(f"{root}: not a sweep folder")
    jobs = sorted((int(m.group(1)), p.name) for p in root.iterdir()
                   if p.is_dir() and (m := _JOB.match(p.name)) and not p.name.startswith("gepa_seed")
                   and (p / DEFAULT_ARCHIVE_NAME).is_file())
    if not jobs:
        raise DataError(f"{root}: no study job folder <k>_<arm>_seed<S>/{DEFAULT_ARCHIVE_NAME}")
    plans: list[RunPlan] = []
    skipped: list[dict[str, str]] = []
    for _, job in jobs:
        try:
            got = _plan_one(root / job / DEFAULT_ARCHIVE_NAME, job)
        except EvoTrainerError as exc:
            got = str(exc)
        if isinstance(got, str):
            skipped.append({"job": job, "reason": got})
        else:
            plans.append(got)
    return plans, skipped


def _group_key(plan: RunPlan) -> str:
    """Runs with equal keys are scored in one pass: same model (threads aside), decoding, task and held-out items."""
    model = {k: v for k, v in dict(plan.config.get("model") or {}).items() if k != "threads"}
    return json.dumps({"model": model, "decoding": plan.config.get("decoding"), "task": plan.config.get("task"),
                       "executor": plan.config.get("executor"), "heldout": plan.heldout_ids},
                      sort_keys=True, default=str)


def _config(plan: RunPlan, threads: int | None) -> Config:
    cfg = to_config(OmegaConf.create(dict(plan.config)))
    if threads is not None:
        cfg.model = replace(cfg.model, threads=threads)
    return cfg


def _check(what: str, plan: RunPlan, rescored: float, archived: float | None) -> tuple[str, bool]:
    if archived is None:
        return f"{plan.job}: incumbent {plan.incumbent.id} {what} {rescored:.5f} (no archived total to compare)", True
    ok = abs(rescored - archived) <= _MATCH_TOL
    verb = "=" if ok else "!="
    return (f"{plan.job}: incumbent {plan.incumbent.id} {what} re-scored {rescored:.5f} {verb} archived "
            f"{archived:.5f}", ok)


def _score_group(plans: Sequence[RunPlan], threads: int | None, log: Any) -> list[RacerRun]:
    """Step 2 for runs that share a group key: load items and model once, one batched rollout."""
    cfg = _config(plans[0], threads)
    family = build_family(cfg)
    val = load_validation(cfg, family)
    by_id = {t.task_id: t for t in val}
    missing = [i for i in plans[0].heldout_ids if i not in by_id]
    if missing:
        raise DataError(f"{plans[0].archive}: held-out item(s) {missing[:3]} are not in the run's validation files "
                        "any more (task.validation_path / task.validation_extra changed)")
    heldout = [by_id[i] for i in plans[0].heldout_ids]
    transfer = load_transfer(cfg, family, val)
    policies = list({p.id: p for plan in plans for p in (plan.incumbent, plan.racer) if p is not None}.values())
    if cfg.decoding.temperature > 0:
        log.write(f"warning: decoding.temperature={cfg.decoding.temperature}: sampled outputs, so re-scores need not "
                  "equal the archived totals\n")
    log.write(f"scoring {len(policies)} policies x {len(heldout)} held-out + {len(transfer)} transfer items "
              f"({len(plans)} run(s): {', '.join(p.job for p in plans)})\n")
    llm = build_llm(cfg.model, executor=cfg.executor)
    try:
        check_policy_backend(llm, cfg, policies)
        evaluator = RolloutEvaluator(llm, family, sampling=sampling_from(cfg.decoding, seed=cfg.seed))
        items = [*heldout, *transfer]
        with task(f"unpromoted racers: {len(policies)} policies on {len(items)} items",
                  len({p.genome_hash for p in policies}) * len(items), console=Console(file=log, width=LOG_WIDTH)):
            evals = evaluator.meta_evaluate(policies, items)  # progress lines go to ``log``, never to stdout
    finally:
        getattr(llm, "close", lambda: None)()
    values = {p.id: tuple(0.0 if v is None else float(v) for v in ev.per_item)  # a failed item counts 0.0
              for p, ev in zip(policies, evals, strict=True)}
    n = len(heldout)
    held_ids, transfer_ids = tuple(t.task_id for t in heldout), tuple(t.task_id for t in transfer)
    out: list[RacerRun] = []
    for plan in plans:
        inc = values[plan.incumbent.id]
        roles_h = {"incumbent": inc[:n]}
        roles_t = {"incumbent": inc[n:]}
        if plan.racer is not None:
            roles_h["racer"], roles_t["racer"] = values[plan.racer.id][:n], values[plan.racer.id][n:]
        checks = [_check("held-out mean", plan, sum(inc[:n]) / n, plan.archived_heldout)]
        if transfer:
            checks.append(_check("transfer mean", plan, sum(inc[n:]) / len(transfer), plan.archived_transfer))
        out.append(RacerRun(plan, ItemScores(held_ids, roles_h),
                            ItemScores(transfer_ids, roles_t) if transfer else None,
                            tuple(c for c, _ in checks), sum(not ok for _, ok in checks)))
    return out


def score_runs(plans: Sequence[RunPlan], *, threads: int | None = None, log: Any = None) -> list[RacerRun]:
    """Step 2 for every plan: one model load and one batched rollout per group (:func:`_group_key`), plans order kept.

    Args:
        plans: from :func:`plan_runs`.
        threads: ``model.threads`` for the rollouts (None: each run's stored value).
        log: where progress and warnings go (a text stream; default stderr).

    Raises:
        ConfigError, DataError, ModelError: a stored config the current code rejects, changed data, no model.
    """
    log = log or sys.stderr
    groups: dict[str, list[RunPlan]] = {}
    for plan in plans:
        groups.setdefault(_group_key(plan), []).append(plan)
    done = {r.plan.job: r for group in groups.values() for r in _score_group(group, threads, log)}
    return [done[p.job] for p in plans]


def _row(scope: str, label: str, part: str, runs: Sequence[RacerRun], *, seed: int, level: float,
         n_resamples: int) -> dict[str, Any] | None:
    pairs = []
    for r in runs:
        scores = r.heldout if part == "heldout" else r.transfer
        d = None if scores is None else scores.diff("racer", "incumbent")
        if d is not None:
            pairs.append((scores.item_ids, d))
    pooled = cluster_difference(pairs, rng=rng_for(seed, "unpromoted_racers", scope, label, part), level=level,
                                n_resamples=n_resamples)
    if pooled is None:
        return None
    d = pooled.diff
    return {"scope": scope, "label": label, "part": part, "runs": pooled.runs, "n": d.n, "mean": d.mean,
            "low": d.low, "high": d.high, "wins": pooled.wins, "losses": pooled.losses, "ties": pooled.ties}


def compare_racers(runs: Sequence[RacerRun], *, seed: int = 0, level: float = 0.95,
                   n_resamples: int = 2000) -> list[dict[str, Any]]:
    """Step 3: ``racer − incumbent`` per run, per arm and over all runs, on each part (module docstring).

    Args:
        runs: the re-scored runs; those without a racer add no row and join no pool.
        seed: bootstrap seed; each row's generator is ``rng_for(seed, "unpromoted_racers", scope, label, part)``.
        level: interval coverage in (0, 1); n_resamples: bootstrap resamples, >= 1.

    Returns:
        Rows ``{"scope": "run" | "arm" | "all", "label", "part": "heldout" | "transfer", "runs", "n" (distinct
        items), "mean", "low", "high" (S_val units), "wins", "losses", "ties" ((run, item) pairs)}``, part by
        part: runs in order, then arms in first-seen order, then all runs.
    """
    raced = [r for r in runs if r.plan.racer is not None]
    arms = list(dict.fromkeys(r.plan.arm for r in raced))
    kw = {"seed": seed, "level": level, "n_resamples": n_resamples}
    rows: list[dict[str, Any]] = []
    for part in PARTS:
        scopes = [("run", r.plan.job, [r]) for r in raced]
        scopes += [("arm", arm, [r for r in raced if r.plan.arm == arm]) for arm in arms]
        scopes += [("all", "all runs", raced)] if raced else []
        rows += [row for scope, label, members in scopes if (row := _row(scope, label, part, members, **kw))]
    return rows


def _run_doc(r: RacerRun) -> dict[str, Any]:
    p = r.plan
    return {"job": p.job, "arm": p.arm, "seed": p.seed, "run_id": p.run_id, "archive": p.archive,
            "incumbent": p.incumbent.id, "racer": None if p.racer is None else p.racer.id,
            "incumbent_val": p.incumbent_val, "racer_val": p.racer_val, "archived_heldout": p.archived_heldout,
            "archived_transfer": p.archived_transfer, "checks": list(r.checks), "mismatches": r.mismatches,
            **{part: None if s is None else {"item_ids": list(s.item_ids), **{k: list(v) for k, v in s.roles.items()}}
               for part, s in (("heldout", r.heldout), ("transfer", r.transfer))}}


def _plan_line(p: RunPlan) -> str:
    val = "" if p.incumbent_val is None else f", selection S_val {p.incumbent_val:.4f}"
    head = f"{p.job} ({p.arm}, seed {p.seed}): incumbent {p.incumbent.id}{val}"
    if p.racer is None:
        return f"{head}; no racer (no other policy was scored on the whole selection set)"
    return f"{head}; racer {p.racer.id}, selection S_val {p.racer_val:.4f}"


def render(doc: Mapping[str, Any]) -> str:
    """The plain-text report of a result document (:func:`main`'s JSON): plans, checks, one line per row."""
    lines = [f"unpromoted racers of {doc['sweep']}: {doc['n_runs']} run(s), {doc['n_racers']} with a racer; "
             "racer − incumbent, "
             f"{round(doc['level'] * 100)} % percentile bootstrap over items ({doc['resamples']} resamples; runs "
             "pooled by a cluster bootstrap by item), W/L/T over (run, item) pairs"]
    lines += [f"  {line}" for line in doc["plans"]]
    lines += [f"skipped {s['job']}: {s['reason']}" for s in doc["skipped"]]
    if not doc["scored"]:
        return "\n".join(lines)
    bad = sum(r["mismatches"] for r in doc["runs"])
    checks = [c for r in doc["runs"] for c in r["checks"]]
    if bad:
        lines += [f"warning: {c}" for c in checks if "!=" in c]
    lines.append(f"check: the incumbent's re-scored means equal the archived totals in {len(checks) - bad} of "
                 f"{len(checks)} comparisons" + ("" if not bad else " (see the warnings)"))
    width = max([len(r["label"]) for r in doc["rows"]] + [10])
    for r in doc["rows"]:
        label = r["label"] if r["scope"] != "arm" else f"arm {r['label']}"
        lines.append(f"{_PART_TITLES[r['part']]:9s} {label:{width + 4}s} runs={r['runs']} n={r['n']:2d} "
                     f"diff {format_diff(SimpleNamespace(**r))} W/L/T {r['wins']}/{r['losses']}/{r['ties']}")
    if not doc["rows"]:
        lines.append("no run has a racer: nothing to compare")
    return "\n".join(lines)


def _items_csv(runs: Sequence[RacerRun]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["job", "arm", "seed", "part", "item_id", "role", "policy_id", "score"])
    for r in runs:
        ids = {"incumbent": r.plan.incumbent.id, "racer": r.plan.racer.id if r.plan.racer else ""}
        for part, s in (("heldout", r.heldout), ("transfer", r.transfer)):
            for role, values in ({} if s is None else s.roles).items():
                for item, v in zip(s.item_ids, values, strict=True):
                    w.writerow([r.plan.job, r.plan.arm, r.plan.seed, part, item, role, ids[role], repr(v)])
    return buf.getvalue()


def run(sweep: str | Path, *, out: str | Path = DEFAULT_OUT, threads: int | None = None, seed: int = 0,
        level: float = 0.95, n_resamples: int = 2000, plan_only: bool = False, log: Any = None) -> dict[str, Any]:
    """Steps 1-3 (module docstring); writes the JSON and the per-item CSV under ``out`` (not with ``plan_only``).

    Returns:
        The result document: ``sweep``, ``plans`` (one line per run), ``skipped``, ``runs`` (per run: ids, archived
        totals, checks, per-item scores), ``rows`` (:func:`compare_racers`), ``seed``, ``level``, ``resamples``.
    """
    plans, skipped = plan_runs(sweep)
    doc: dict[str, Any] = {"sweep": str(sweep), "plans": [_plan_line(p) for p in plans], "skipped": skipped,
                           "n_runs": len(plans), "n_racers": sum(p.racer is not None for p in plans),
                           "scored": False, "runs": [], "rows": [], "seed": seed, "level": level,
                           "resamples": n_resamples}
    if plan_only or not plans:
        return doc
    runs = score_runs(plans, threads=threads, log=log)
    doc["scored"], doc["runs"] = True, [_run_doc(r) for r in runs]
    doc["rows"] = compare_racers(runs, seed=seed, level=level, n_resamples=n_resamples)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / RESULT_NAME, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    write_text_atomic(folder / ITEMS_NAME, _items_csv(runs))
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (module docstring); returns the exit status (1 when a re-score did not match the archive)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.unpromoted_racers", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", help="a +study=ablation sweep folder (read only)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help=f"result folder (default {DEFAULT_OUT})")
    ap.add_argument("--threads", type=int, default=None, help="model.threads for the rollouts (default: the run's)")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    ap.add_argument("--level", type=float, default=0.95, help="interval coverage in (0, 1)")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    ap.add_argument("--plan", action="store_true", help="print what would be scored and stop (no model)")
    ap.add_argument("--json", action="store_true", help="print the result document as JSON instead of the table")
    args = ap.parse_args(argv)
    if not 0 < args.level < 1 or args.resamples < 1 or (args.threads is not None and args.threads < 1):
        ap.error("--level must be in (0, 1), --resamples and --threads >= 1")
    doc = run(args.sweep, out=args.out, threads=args.threads, seed=args.seed, level=args.level,
              n_resamples=args.resamples, plan_only=args.plan)
    print(json.dumps(doc, indent=1, allow_nan=False) if args.json else render(doc))
    if not args.json and not args.plan and doc["runs"]:
        print(f"results: {Path(args.out) / RESULT_NAME} (+ {ITEMS_NAME})")
    return 1 if any(r["mismatches"] for r in doc["runs"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
