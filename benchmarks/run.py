"""EvoTrainer benchmark suite (issue 14): every figure from one run, a table on stdout, JSON for comparing commits.

    make bench                                   # = python -m benchmarks.run
    python -m benchmarks.run --quick             # small workloads: a first look in a few minutes
    python -m benchmarks.run --only generation,prefix --repeats 5

Timings are the median of --repeats runs (each run's value is printed too); figures 5-7 split one run
of a loop into phases and are not repeated. The model loads once (its load time is in the header).
Progress goes to stderr; the report to stdout; the JSON to benchmarks/results/<commit>-<time>.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import textwrap
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from benchmarks.fig_adapters import adapters_figure
from benchmarks.fig_busy import busy_figure
from benchmarks.fig_generation import generation_figure, prefix_figure
from benchmarks.fig_loops import cache_figure, phases_figure, selfevolve_figure
from benchmarks.fig_roofline import roofline_figure
from benchmarks.report import (
    Figure,
    check_targets,
    git_revision,
    render,
    result_path,
    to_payload,
    write_results,
)
from benchmarks.workloads import Bench

__all__ = ["FIGURES", "main"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

FIGURES: dict[str, tuple[Callable[[Bench], Figure], str]] = {
    "generation": (generation_figure, "generated tokens/s, one request per generate call vs batches of 8 and 16 "
                   "(same requests: a seed policy on 16 generated meetings of ~200 words, 16 new tokens), and the "
                   "ratio"),
    "prefix": (prefix_figure, "a population generation (8 seed policies x 3 validation transcripts, one generate "
               "call): today's per-pair prefill with the policy as system prompt, vs shared-prefix reuse with the "
               "policy first (system_first) and with the transcript first (transcript_first); wall time, ratio to "
               "today, prompt tokens, prefix tokens reused (backend.stats)"),
    "roofline": (roofline_figure, "the machine's GEMM peak (torch.mm 4096^3, bf16 and fp32) and read bandwidth "
                 "(sum over 512 MiB), then the model's prefill (one forward over 4 x 512 tokens: tokens/s, FLOP/s "
                 "as a share of the peak of its dtype) and decode time per step at batch 1 and 8 as a share of "
                 "read bandwidth / weight bytes; names the model, dtype and engine"),
    "adapters": (adapters_figure, "12 requests (4 generated meetings x 3 random LoRA adapters): one mixed generate "
                 "call (per-row adapters) vs one call per adapter, with the base model as reference"),
    "cache": (cache_figure, "(policy, task) pairs one harness candidate of the default experiment asked for vs "
              "rollouts actually sent to the model (the rest: fitness-cache hits and duplicate genomes)"),
    "phases": (phases_figure, "the same candidate split by phase: each inner generation's select, vary (mutator "
               "model / other operators), evaluate (rollout / scoring), then screening (shares its run with cache)"),
    "selfevolve": (selfevolve_figure, "the smoke experiment's self-evolution round split into pool, generate, "
                   "judge, train (LoRA) and evaluate (dev, meta-validation)"),
    "busy": (busy_figure, "figure 2's population generation (the backend's defaults) in a fresh process while a "
             "helper process spins on one core, vs its quiet time: busy / quiet ratio"),
}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    epilog = "figures (--only takes these names):\n" + "\n".join(
        textwrap.fill(desc, 100, initial_indent=f"  {n}. {key:<11} ", subsequent_indent=" " * 17)
        for n, (key, (_, desc)) in enumerate(FIGURES.items(), start=1))
    epilog += ("\n\nThen the targets of issue 14 with the measured value and met / not met (never asserted in "
               "tests).\nDefault settings take about 10 minutes on a quiet 2-core CPU; --quick about 3.")
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0],
                                 epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="runs per timing; the median is reported (default 3)")
    ap.add_argument("--quick", action="store_true", help="small workloads (a smoke test of the suite, not figures "
                    "to compare)")
    ap.add_argument("--only", default="", help="comma-separated figure names to run (default: all)")
    ap.add_argument("--threads", default="all", help="torch threads of the in-process figures: 'all' (every core "
                    "this process may use; default), 'auto' (a run's own choice from the free cores) or a number")
    ap.add_argument("--out", default=str(RESULTS), help="folder of the JSON results (default benchmarks/results)")
    ap.add_argument("--no-json", action="store_true", help="print only, write no JSON file")
    args = ap.parse_args(argv)
    args.names = [n.strip() for n in args.only.split(",") if n.strip()] or list(FIGURES)
    unknown = [n for n in args.names if n not in FIGURES]
    if unknown:
        ap.error(f"unknown figure(s) {unknown}; choose from {', '.join(FIGURES)}")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    return args


def _threads(value: str) -> int | None:
    if value == "auto":
        return None
    if value == "all":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(int(value), 1)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected figures, print the report, write the JSON; returns the exit status (0)."""
    args = _parse(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if load0 > 0.5:
        log(f"warning: load average {load0:.2f} at start: other processes use the CPU; figures will be slower")
    bench = Bench(repeats=args.repeats, quick=args.quick, threads=_threads(args.threads), log=log)
    figures: list[Figure] = []
    t_start, started = time.perf_counter(), datetime.now()
    for n, name in enumerate(args.names, start=1):
        fn, _ = FIGURES[name]
        log(f"[{n}/{len(args.names)}] {name} ({time.perf_counter() - t_start:.0f} s elapsed)")
        t0 = time.perf_counter()
        try:
            fig = fn(bench)
        except Exception as exc:  # one broken figure must not hide the others
            traceback.print_exc(file=sys.stderr)
            fig = Figure(name, FIGURES[name][1], skipped=f"failed: {type(exc).__name__}: {exc}")
        fig.seconds = fig.seconds or time.perf_counter() - t0
        figures.append(fig)

    import torch
    import transformers

    sha, dirty = git_revision(ROOT)
    metrics = {k: v for f in figures for k, v in f.metrics.items()}
    results = check_targets(metrics)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    meta = {
        "commit": sha, "dirty": dirty, "started": started.isoformat(timespec="seconds"),
        "command": " ".join(["python -m benchmarks.run", *(argv if argv is not None else sys.argv[1:])]),
        "repeats": args.repeats, "quick": args.quick, "figures": args.names, "cpu": _cpu_name(), "cores": cores,
        "threads": bench.threads, "load_average_at_start": load0, "model_load_seconds": bench.load_seconds,
        "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""), "suite_seconds": time.perf_counter() - t_start,
        "model": getattr(bench._backend, "name", None),  # e.g. "hf:<file> (bfloat16)"; None when not loaded
    }
    header = [
        f"EvoTrainer benchmarks: commit {sha}{' (uncommitted changes)' if dirty else ''}, {meta['started']}, "
        f"{meta['command']}",
        f"machine: {cores} cores ({meta['cpu'] or 'unknown CPU'}), load average {load0:.2f} at start; torch "
        f"{torch.__version__}, transformers {transformers.__version__}, {bench.threads} threads, "
        f"OMP_WAIT_POLICY={meta['omp_wait_policy'] or 'unset'}",
        f"model {meta['model'] or '-'}, load: "
        f"{'not loaded' if bench.load_seconds is None else f'{bench.load_seconds:.1f} s'}; suite: "
        f"{meta['suite_seconds']:.0f} s; timings are medians of {args.repeats} run(s)"
        f"{'; QUICK workloads (not comparable)' if args.quick else ''}",
    ]
    print(render(figures, results, header), end="")
    if not args.no_json:
        path = write_results(result_path(args.out, sha + ("-dirty" if dirty else ""), started),
                             to_payload(meta, figures, results))
        print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
