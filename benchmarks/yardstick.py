"""Issue 24's yardstick targets: does S_val (mm-5) score meeting content, and do seed rankings transfer?

    python -m benchmarks.yardstick --override model.threads=2   # ~1,800 rollouts: 1.5-3 hours on 2 cores
    python -m benchmarks.yardstick --quick              # 2 seeds x 4 items: checks that the script works
    python -m benchmarks.yardstick --from-json benchmarks/results/yardstick-<commit>-<time>.json

Figure 1, probes: on the main job's selection items (``+experiment=meeting_minutes``, held-out split
removed), the mean S_val of the reference minutes, the ``--policy`` seed's minutes and the probes of
:mod:`evotrainer.tasks.meeting_minutes.probes` (baseline: the lead lines; skeleton; wrong item: another meeting's reference), under the
old metric (mm-4: 0 if degenerate, else the mean of ROUGE-Lsum and action-item F1 when the item has action
items) and the new (mm-5, ``meta_score().value``), each as a share of the policy's. Targets: skeleton <= 10 %
and wrong meeting <= 25 % of the policy's S_val.

Figure 2, ranking agreement: every seed of ``populations/meeting_minutes.yaml`` on ``--items`` selection items
(round-robin by source: hand-written and QMSum alternate) and on as many unseen real windows (the shipped
transfer set, then the QMSum windows of non-validation meetings, ``make_qmsum_validation.py --rest``; round-
robin by domain). Spearman between the seeds' mean S_val on selection and on unseen items, and split-half
Spearman (even vs odd item positions) within each set: when a set's halves disagree, selection and unseen
cannot agree either. Target: Spearman >= 0.5 over 14 seeds on >= 60 items per set (NOT MEASURED with fewer).

Time: about 1,800 rollouts (the policy on the 79 selection items and the 13 other seeds on 60 of them, then the
14 seeds on 60 unseen windows). Measured at d389750 on the 2-core machine with other work beside it: 11 s per
rollout seed-major (each chunk one seed, every long transcript prefilled once per seed), 2.3-6 s item-major (the
seeds of one item share a chunk and its transcript-first prefix), so 1.5-3 hours; run it on a quiet machine with
``--override model.threads=2``. --quick: 16 rollouts, a few minutes with model loading. --from-json: scoring
only, a minute or two.

Rollouts are checkpointed per chunk of 48 to ``benchmarks/results/yardstick-rollouts.jsonl`` (``--checkpoint``,
git-ignored): a killed benchmark rerun with the same command rolls out only what is missing.

The JSON (``benchmarks/results/yardstick-<commit>-<time>.json``) keeps every output text, so ``--from-json``
recomputes every figure under the metric of the checked-out commit without the model. Windows longer than
``model.max_context`` have the middle of the transcript cut by the backend, as in a run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.report import git_revision, result_path, write_results

__all__ = ["main", "old_value", "round_robin", "spearman", "status"]

ROOT = Path(__file__).resolve().parent.parent
QMSUM = ROOT.parent / "shared" / "data" / "qmsum_meetings.jsonl"
ROWS = ("reference", "policy", "baseline", "skeleton", "wrong_item")
METRICS = ("mm-4", "mm-5")
TARGET_ITEMS, TARGET_SEEDS, TARGET_RHO = 60, 14, 0.5


def old_value(parts: dict[str, float]) -> float:
    """mm-4's S_val from mm-5's ``parts``: 0 if degenerate, else mean(rouge_lsum, action_f1 when present)."""
    if parts.get("degenerate"):
        return 0.0
    used = [parts["rouge_lsum"], *([parts["action_f1"]] if "action_f1" in parts else [])]
    return sum(used) / len(used)


def round_robin(items: Sequence[Any], key: Any) -> list[Any]:
    """``items`` interleaved by ``key(item)`` (groups in order of first appearance, order kept within)."""
    groups: dict[Any, list[Any]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    out = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        out += [g[i] for g in groups.values() if i < len(g)]
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho of two equal-length sequences; None with fewer than 3 values or a constant one."""
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(spearmanr(a, b).statistic)


def status(value: float | None, ok: bool, measured: bool = True) -> str:
    return "NOT MEASURED" if value is None or not measured else ("MET" if ok else "NOT MET")


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.yardstick", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="secretary_markdown",
                    help="seed id of the probe table's policy row (default: the main job's start seed)")
    ap.add_argument("--items", type=int, help=f"items per set (default {TARGET_ITEMS}; --quick: 4)")
    ap.add_argument("--quick", action="store_true",
                    help="2 seeds (the policy and one other); the probe table uses the ranking's items only")
    ap.add_argument("--qmsum", default=str(QMSUM), help="the 152-window QMSum extract (for the rest windows)")
    ap.add_argument("--from-json", help="recompute every figure from a saved JSON's outputs (no model)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="folder of the JSON")
    ap.add_argument("--no-json", action="store_true", help="print only")
    ap.add_argument("--checkpoint", default=str(ROOT / "benchmarks" / "results" / "yardstick-rollouts.jsonl"),
                    help="JSONL of finished rollouts, appended per chunk; a rerun skips them (keyed by prompt "
                         "and sampling, so a changed prompt rolls out again)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a Hydra override of the main job's config, repeatable (e.g. model.threads=2: the thread "
                         "count otherwise follows the machine's load at start)")
    ap.add_argument("--no-checkpoint", action="store_true", help="neither read nor write the checkpoint")
    args = ap.parse_args(argv)
    if args.items is None:
        args.items = 4 if args.quick else TARGET_ITEMS
    if args.items < 1:
        ap.error("--items must be >= 1")
    return args


def _config(overrides: Sequence[str] = ()) -> Any:
    from hydra import compose, initialize_config_dir

    from evotrainer.config import PACKAGE_DATA, register_configs, to_config

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        return to_config(compose(config_name="config", overrides=["+experiment=meeting_minutes", *overrides]))


def _rest(cfg: Any, family: Any, qmsum: str) -> list[Any]:
    """scripts/make_qmsum_validation.py's ``--rest`` windows (its split checked against the shipped transfer
    set, so they are meetings no selection uses)."""
    from evotrainer.config import PACKAGE_DATA

    spec = importlib.util.spec_from_file_location("_mqv", ROOT / "scripts" / "make_qmsum_validation.py")
    mqv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mqv)
    rows = [json.loads(line) for line in Path(qmsum).read_text(encoding="utf-8").splitlines() if line.strip()]
    _, transfer, rest = mqv.build(rows)
    shipped = family.load_validation(PACKAGE_DATA / cfg.task.transfer_path)
    if [r["id"] for r in transfer] != [t.task_id for t in shipped]:
        raise SystemExit(f"{qmsum}: its transfer split differs from the shipped {cfg.task.transfer_path}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rest.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rest), encoding="utf-8")
        return family.load_validation(path)


def _items(cfg: Any, family: Any, qmsum: str) -> tuple[list[Any], list[Any]]:
    """(the main job's selection items, unseen windows: transfer then rest, round-robin by domain)."""
    from evotrainer.run.runtime import load_transfer, load_validation
    from evotrainer.run.validation_split import split_validation

    items = load_validation(cfg, family)
    selection, _ = split_validation(items, cfg.outer.heldout_share)
    unseen = load_transfer(cfg, family, items) + _rest(cfg, family, qmsum)
    return selection, round_robin(unseen, lambda t: t.meta.get("domain", t.source))


def _seeds(cfg: Any) -> dict[str, Any]:
    from evotrainer.config import PACKAGE_DATA
    from evotrainer.genome import load_population

    return {p.id: p for p in load_population(Path(PACKAGE_DATA) / cfg.evaluation.population_path)}


def _plan(args: argparse.Namespace, seeds: list[str], selection: list[Any], unseen: list[Any]) -> dict:
    """Which seeds and item ids each figure reads (saved in the JSON for --from-json)."""
    if args.policy not in seeds:
        raise SystemExit(f"--policy {args.policy!r} is not a seed; choose from {', '.join(seeds)}")
    if args.quick:
        seeds = [args.policy, next(s for s in seeds if s != args.policy)]
    sel = [t.task_id for t in round_robin(selection, lambda t: t.source)[:args.items]]
    return {"policy": args.policy, "seeds": seeds, "selection": sel,
            "unseen": [t.task_id for t in unseen[:args.items]],
            "probe": sel if args.quick else [t.task_id for t in selection]}


def _request_key(req: Any) -> str:
    """A request's checkpoint key: SHA-1 of its messages and decoding params (a prompt or decoding change misses)."""
    import hashlib

    return hashlib.sha1(repr((req.messages, req.params)).encode("utf-8")).hexdigest()


def _load_checkpoint(path: Path) -> dict[str, str]:
    """Outputs already rolled out, by request key (a torn last line, from a kill mid-write, is skipped)."""
    done: dict[str, str] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[row["key"]] = row["output"]
    return done


def _roll_out(cfg: Any, family: Any, plan: dict, by_id: dict[str, Any], log: Any, checkpoint: Path | None,
              chunk: int = 48) -> list[dict]:
    """Every (seed, item) output the plan needs, rolled out in batched chunks of ``chunk`` requests.

    Each chunk's outputs are appended to ``checkpoint`` (JSONL) as they finish, so a killed benchmark goes
    on where it stopped: requests whose key (:func:`_request_key`) is already there are not rolled out again.
    """
    from evotrainer.rollout import sampling_for
    from evotrainer.run.runtime import build_llm, sampling_from
    from evotrainer.tasks.base import RolloutRequest

    seeds, base = _seeds(cfg), sampling_from(cfg.decoding)
    others = [s for s in plan["seeds"] if s != plan["policy"]]
    phases = {"selection": [(plan["policy"], t) for t in plan["probe"]]
              + [(s, t) for s in others for t in plan["selection"]],
              "unseen": [(s, t) for s in plan["seeds"] for t in plan["unseen"]]}
    # Item-major order: the seeds reading one transcript share a chunk, so the backend's prefix sharing
    # (transcript-first layout) computes each transcript's key/value states once, not once per seed.
    first = {t: i for i, t in enumerate(dict.fromkeys(t for pairs in phases.values() for _, t in pairs))}
    phases = {phase: sorted(pairs, key=lambda p: first[p[1]]) for phase, pairs in phases.items()}
    done = _load_checkpoint(checkpoint) if checkpoint is not None else {}
    reqs = {phase: [RolloutRequest(tuple(family.build_messages(seeds[s].sections, by_id[t])),
                                   sampling_for(seeds[s], base), None, tuple(seeds[s].sections), by_id[t], s)
                    for s, t in pairs] for phase, pairs in phases.items()}
    keys = {phase: [_request_key(r) for r in rs] for phase, rs in reqs.items()}
    todo = sum(k not in done for ks in keys.values() for k in ks)
    n = sum(map(len, phases.values()))
    log(f"{n} rollouts, {n - todo} of them in the checkpoint {checkpoint}; {todo} to go")
    llm = build_llm(cfg.model, progress=True) if todo else None
    out = []
    for phase, pairs in phases.items():
        t0, ran = time.perf_counter(), 0
        missing = [i for i, k in enumerate(keys[phase]) if k not in done]
        log(f"{phase}: {len(pairs)} rollouts, {len(missing)} to go")
        for c in range(0, len(missing), chunk):
            idx = missing[c:c + chunk]
            gens = family.roll_out(llm, [reqs[phase][i] for i in idx])
            lines = []
            for i, g in zip(idx, gens, strict=True):
                done[keys[phase][i]] = g.text
                lines.append(json.dumps({"key": keys[phase][i], "policy": pairs[i][0], "item": pairs[i][1],
                                         "output": g.text}, ensure_ascii=False) + "\n")
            if checkpoint is not None:
                with checkpoint.open("a", encoding="utf-8") as fh:
                    fh.write("".join(lines))
            ran += len(idx)
            took = time.perf_counter() - t0
            log(f"{phase}: {ran}/{len(missing)} in {took:.0f} s ({took / ran:.1f} s per rollout)")
        out += [{"policy": s, "item": t, "set": phase, "output": done[k]}
                for (s, t), k in zip(pairs, keys[phase], strict=True)]
    return out


class _Scorer:
    """mm-5's ``meta_score`` memoised per (text, item id); :meth:`value` gives either metric."""

    def __init__(self, family: Any) -> None:
        self.family, self.memo = family, {}

    def prepare(self, texts: Sequence[str], items: Sequence[Any]) -> None:
        self.family.prepare_meta(list(texts), list(items))

    def value(self, text: str, item: Any, metric: str) -> float:
        key = (text, item.task_id)
        if key not in self.memo:
            self.memo[key] = self.family.meta_score(text, item)
        ms = self.memo[key]
        return ms.value if metric == "mm-5" else old_value(ms.parts)


def probe_figure(scorer: _Scorer, items: list[Any], policy: str, outputs: dict) -> dict[str, Any]:
    """Figure 1: per metric, each row's mean S_val, its share of the policy's, the harness' rule check."""
    from evotrainer.harness import yardstick

    scorer.prepare([outputs[policy, t.task_id] for t in items], items)
    fig: dict[str, Any] = {"items": len(items), "policy_id": policy}
    for metric in METRICS:
        values = yardstick.probe_values(scorer.family, items, lambda o, t, m=metric: scorer.value(o, t, m))
        pol = [scorer.value(outputs[policy, t.task_id], t, metric) for t in items]
        report = yardstick.check(values, pol, policy)
        means = {"policy": report.policy, **{n: _mean(v) for n, v in values.items()}}
        shares = {n: m / report.policy if report.policy and m is not None else None for n, m in means.items()}
        fig[metric] = {"means": means, "shares": shares, "check": report.as_dict()}
    return fig


def ranking_figure(scorer: _Scorer, plan: dict, by_id: dict[str, Any], outputs: dict) -> dict[str, Any]:
    """Figure 2: per metric, each seed's mean on each set, Spearman across sets and between split halves."""
    seeds = plan["seeds"]
    sets = {name: [by_id[t] for t in plan[name]] for name in ("selection", "unseen")}
    for items in sets.values():
        scorer.prepare([outputs[s, t.task_id] for s in seeds for t in items], items)
    fig: dict[str, Any] = {"seeds": seeds, "items": {k: len(v) for k, v in sets.items()}}
    for metric in METRICS:
        per = {k: {s: [scorer.value(outputs[s, t.task_id], t, metric) for t in items] for s in seeds}
               for k, items in sets.items()}
        means = {k: [_mean(per[k][s]) for s in seeds] for k in sets}
        half = {k: [[_mean(per[k][s][h::2]) for s in seeds] for h in (0, 1)] for k in sets}
        halves = {k: spearman(*half[k]) for k in sets}
        fig[metric] = {"means": means, "spearman": spearman(means["selection"], means["unseen"]),
                       "split_half": halves}
    return fig


def targets(probes: dict[str, Any], rank: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 24's targets per metric (``metric`` and ``measured`` keys as in benchmarks.run's JSON)."""
    full = len(rank["seeds"]) >= TARGET_SEEDS and min(rank["items"].values()) >= TARGET_ITEMS
    out = []
    for metric in METRICS:
        for name, limit in (("skeleton", 0.10), ("wrong_item", 0.25)):
            v = probes[metric]["shares"].get(name)
            out.append({"metric": f"yardstick.{name}_share.{metric}", "measured": v,
                        "target": f"<= {limit:.0%}", "status": status(v, v is not None and v <= limit)})
        rho = rank[metric]["spearman"]
        out.append({"metric": f"yardstick.spearman.{metric}", "measured": rho, "target": f">= {TARGET_RHO}",
                    "status": status(rho, rho is not None and rho >= TARGET_RHO, full)})
    return out


def _f(v: float | None, fmt: str = ".4f") -> str:
    return "-" if v is None else format(v, fmt)


def render(probes: dict[str, Any], rank: dict[str, Any], tgts: list[dict[str, Any]]) -> list[str]:
    """The report's lines: figure 1, figure 2, the targets."""
    lines = [f"1. S_val probes on {probes['items']} selection items (mean; share of the policy's)",
             f"   {'':<34}{'mm-4 (old)':>18}{'mm-5 (new)':>18}"]
    for row in ROWS:
        label = f"policy {probes['policy_id']}" if row == "policy" else row
        lines.append(f"   {label:<34}" + "".join(
            f"{_f(probes[m]['means'].get(row)):>10}{_f(probes[m]['shares'].get(row), '7.1%'):>8}"
            for m in METRICS))
    for m in METRICS:
        fails = probes[m]["check"]["failures"]
        lines.append(f"   {m} yardstick rules: " + ("ok" if not fails else "FAILED: " + "; ".join(fails)))
    n = rank["items"]
    lines += [f"2. Ranking: {len(rank['seeds'])} seeds; {n['selection']} selection, {n['unseen']} unseen",
              f"   {'seed':<34}{'sel mm-4':>10}{'uns mm-4':>10}{'sel mm-5':>10}{'uns mm-5':>10}"]
    for i, seed in enumerate(rank["seeds"]):
        lines.append(f"   {seed:<34}" + "".join(
            f"{_f(rank[m]['means'][k][i]):>10}" for m in METRICS for k in ("selection", "unseen")))
    for m in METRICS:
        r, half = rank[m], rank[m]["split_half"]
        lines.append(f"   {m}: Spearman selection vs unseen {_f(r['spearman'], '+.3f')}; split halves: "
                     f"selection {_f(half['selection'], '+.3f')}, unseen {_f(half['unseen'], '+.3f')}")
    lines.append("Targets (issue 24)")
    lines += [f"   {t['metric']:<38}{_f(t['measured'], '.3f'):>8}  {t['target']:<7} {t['status']}"
              for t in tgts]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Roll out (or read --from-json), score, print the report, write the JSON; returns 0."""
    args = _parse(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    from evotrainer.run.runtime import build_family

    started, t0 = datetime.now(), time.perf_counter()
    cfg = _config(args.override)
    family = build_family(cfg)
    selection, unseen = _items(cfg, family, args.qmsum)
    by_id = {t.task_id: t for t in [*selection, *unseen]}
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        plan, rows = saved["plan"], saved["outputs"]
    else:
        plan = _plan(args, list(_seeds(cfg)), selection, unseen)
        checkpoint = None if args.no_checkpoint else Path(args.checkpoint)
        if checkpoint is not None:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
        rows = _roll_out(cfg, family, plan, by_id, log, checkpoint)
    outputs = {(r["policy"], r["item"]): r["output"] for r in rows}
    log(f"scoring {len(rows)} outputs and the probes")
    scorer = _Scorer(family)
    probes = probe_figure(scorer, [by_id[t] for t in plan["probe"]], plan["policy"], outputs)
    rank = ranking_figure(scorer, plan, by_id, outputs)
    tgts = targets(probes, rank)
    print("\n".join(render(probes, rank, tgts)))
    if not args.no_json:
        sha, dirty = git_revision(ROOT)
        command = " ".join(["python -m benchmarks.yardstick", *(sys.argv[1:] if argv is None else argv)])
        meta = {"commit": sha, "dirty": dirty, "started": started.isoformat(timespec="seconds"),
                "command": command, "scorer": family.spec.scorer_version, "from_json": args.from_json,
                "seconds": time.perf_counter() - t0}
        path = result_path(args.out, f"yardstick-{sha}{'-dirty' if dirty else ''}", started)
        write_results(path, {"meta": meta, "plan": plan, "probes": probes, "ranking": rank, "targets": tgts,
                             "outputs": rows})
        print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
