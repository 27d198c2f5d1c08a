"""Windowed vs cut minutes on whole meetings (issue 29): the same seed policy, the same items, two ways to read
a transcript longer than the context, compared item by item.

Runs ``python -m evotrainer mode=evaluate`` twice on a long-meeting file (``task.long.mode=window``, then
``task.long.mode=cut``), each in its own process so that its wall time, CPU time and peak resident memory
(``getrusage`` of the child) are its own, then pairs the two ``evaluate.json`` files by item:

- S_val (the family's meta score, mm-5), ROUGE-Lsum against the whole reference and ``late_coverage`` (recall of
  the reference content aligned to the transcript's last third), each as ``window - cut`` with a paired
  percentile bootstrap interval over items (:func:`evotrainer.stats.bootstrap.paired_difference`) and
  wins / losses / ties;
- per mode: how items were read (whole / windowed into N / cut with the share of words seen), the mean words of
  the final answer (a longer merge budget writes longer minutes, which the content score can reward), seconds and
  CPU seconds per meeting, peak RSS.

The parts are recomputed from the outputs each run stored (``items[].outputs``) with the family's own
``meta_score``, so ``--from`` recomputes every figure from two earlier result files without the model.

    python -m benchmarks.long_meetings --data ../shared/data/elitr_long.jsonl --policy terse
    python -m benchmarks.long_meetings --data ../shared/data/elitr_long.jsonl --limit 3   # a quick check
    python -m benchmarks.long_meetings --policy terse task.options.long.merge_max_new_tokens=256  # a longer merge
    python -m benchmarks.long_meetings --from window.json cut.json                        # rescore, no model

The ELITR meetings are CC BY-NC-SA: the result files hold model outputs on them, so they stay outside the
repository (``--out``, default ``/tmp/evotrainer-long``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evotrainer.stats.bootstrap import paired_difference, rng_for
from evotrainer.tasks.meeting_minutes.data import load_tasks
from evotrainer.tasks.meeting_minutes.metric import meta_score

MODES = ("window", "cut")
PARTS = ("s_val", "rouge_lsum", "late_coverage")


def run_mode(mode: str, data: Path, policy: str, out: Path, limit: int | None, extra: Sequence[str]) -> dict[str, Any]:
    """One ``mode=evaluate`` run in a child process; returns its result file and measured resources."""
    run_dir = out / f"run_{mode}"
    cmd = [sys.executable, "-m", "evotrainer", "+experiment=meeting_minutes_long", "mode=evaluate",
           f"evaluate.dataset={data}", f"evaluate.policies=[{policy}]", f"task.long.mode={mode}",
           f"evaluate.results=long_{mode}", f"hydra.run.dir={run_dir}", *extra]
    if limit is not None:
        cmd.append(f"evaluate.limit={limit}")
    t0 = time.perf_counter()
    with (out / f"run_{mode}.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own resource usage
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run failed (exit {proc.returncode}); see {out / f'run_{mode}.log'}")
    return {"json": str(run_dir / f"long_{mode}.json"), "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_gib": usage.ru_maxrss / 2**20}  # ru_maxrss: KiB on Linux


def item_parts(result: dict[str, Any], data: Path) -> dict[str, dict[str, float | str]]:
    """Item id -> S_val (as the run scored it), ROUGE-Lsum and late coverage (rescored from its output),
    and how the item was read."""
    tasks = {t.task_id: t for t in load_tasks(data)}
    label = result["policies"][0]["label"]
    out: dict[str, dict[str, float | str]] = {}
    for item in result["items"]:
        task = tasks[item["id"]]
        score = meta_score(item["outputs"][label], task)
        if abs(score.value - float(item["scores"][label])) > 1e-6:
            raise SystemExit(f"{item['id']}: rescored S_val {score.value:.6f} != stored {item['scores'][label]:.6f} "
                             "(another scorer version?)")
        parts = score.parts
        out[item["id"]] = {"s_val": float(item["scores"][label]), "rouge_lsum": float(parts.get("rouge_lsum", 0.0)),
                           "late_coverage": float(parts.get("late_coverage", 0.0)),
                           "handling": item["handling"][label], "words": float(item["size"]),
                           "answer_words": float(len(item["outputs"][label].split()))}
    return out


def compare(window: dict[str, Any], cut: dict[str, Any], data: Path, seed: int = 0) -> dict[str, Any]:
    """The paired table of the module docstring (``window - cut``), as a dict."""
    a, b = item_parts(cut, data), item_parts(window, data)
    ids = sorted(set(a) & set(b))
    rows = {}
    for part in PARTS:
        xa, xb = [float(a[i][part]) for i in ids], [float(b[i][part]) for i in ids]
        d = paired_difference(xa, xb, rng=rng_for(seed, "long", part))
        diff = np.asarray(xb) - np.asarray(xa)
        rows[part] = {"cut": statistics.fmean(xa), "window": statistics.fmean(xb), "diff": d.mean, "low": d.low,
                      "high": d.high, "wins": int((diff > 1e-12).sum()), "losses": int((diff < -1e-12).sum()),
                      "ties": int((np.abs(diff) <= 1e-12).sum())}
    seen = [float(str(a[i]["handling"]).rsplit(":", 1)[1]) for i in ids if str(a[i]["handling"]).startswith("cut:")]
    windows = [int(str(b[i]["handling"]).split(":")[1]) for i in ids if str(b[i]["handling"]).startswith("windowed")]
    return {"n": len(ids), "rows": rows, "cut_share_seen_median": statistics.median(seen) if seen else None,
            "cut_items": len(seen), "windows_median": statistics.median(windows) if windows else None,
            "windowed_items": len(windows), "words_median": statistics.median(float(a[i]["words"]) for i in ids),
            "answer_words": {"cut": statistics.fmean(float(a[i]["answer_words"]) for i in ids) if ids else 0.0,
                             "window": statistics.fmean(float(b[i]["answer_words"]) for i in ids) if ids else 0.0}}


def render(table: dict[str, Any], runs: dict[str, dict[str, Any]]) -> str:
    """Markdown: the paired rows, then each mode's cost."""
    lines = [f"{table['n']} meetings (median {table['words_median']:,.0f} words); cut: {table['cut_items']} cut, "
             f"median share of words seen {table['cut_share_seen_median'] or 0:.0%}; window: {table['windowed_items']} "
             f"windowed, median {table['windows_median'] or 0:g} windows", "",
             "| measure | cut | window | window - cut [95% CI] | W/L/T |", "|---|---|---|---|---|"]
    for part, r in table["rows"].items():
        lines.append(f"| {part} | {r['cut']:.4f} | {r['window']:.4f} | {r['diff']:+.4f} [{r['low']:+.4f}, "
                     f"{r['high']:+.4f}] | {r['wins']}/{r['losses']}/{r['ties']} |")
    words = table.get("answer_words")
    if words:
        lines.append(f"| words per answer (mean) | {words['cut']:.0f} | {words['window']:.0f} | | |")
    if runs:
        lines += ["", "| mode | wall s | s per meeting | CPU s per meeting | peak RSS GiB |", "|---|---|---|---|---|"]
        for mode, r in runs.items():
            n = max(table["n"], 1)
            lines.append(f"| {mode} | {r['wall_s']:,.0f} | {r['wall_s'] / n:,.1f} | {r['cpu_s'] / n:,.1f} | "
                         f"{r['peak_rss_gib']:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.long_meetings", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/elitr_long.jsonl"),
                    help="long meetings (.jsonl with transcript and reference_minutes); default %(default)s")
    ap.add_argument("--policy", default="terse", help="seed policy of populations/meeting_minutes_long.yaml")
    ap.add_argument("--limit", type=int, default=None, help="first N meetings only (a quick check)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/evotrainer-long"), help="run folders and results")
    ap.add_argument("--from", dest="from_", nargs=2, type=Path, metavar=("WINDOW_JSON", "CUT_JSON"),
                    help="compare two earlier evaluate result files instead of running the model")
    ap.add_argument("--runs", type=Path, default=None, help="with --from: a runs.json of measured resources")
    ap.add_argument("overrides", nargs="*", help="extra config overrides for both runs, e.g. model.threads=2")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        ap.error(f"--data: file not found: {args.data}")
    runs: dict[str, dict[str, Any]] = {}
    if args.from_:
        paths = dict(zip(MODES, args.from_, strict=True))
        if args.runs is not None:
            runs = json.loads(args.runs.read_text())
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        for mode in MODES:
            print(f"running {mode} ...", file=sys.stderr, flush=True)
            runs[mode] = run_mode(mode, args.data.resolve(), args.policy, args.out, args.limit, args.overrides)
        (args.out / "runs.json").write_text(json.dumps(runs, indent=1))
        paths = {m: Path(r["json"]) for m, r in runs.items()}
    results = {m: json.loads(Path(p).read_text()) for m, p in paths.items()}
    table = compare(results["window"], results["cut"], args.data)
    print(render(table, runs))
    if not args.from_:
        (args.out / "table.json").write_text(json.dumps({"table": table, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
