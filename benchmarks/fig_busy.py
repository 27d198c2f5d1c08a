"""Figure 8: figure 2's population generation with one core kept busy by another process, against quiet.

The suite starts a spinning helper (``python -c 'while True: pass'``), waits a few seconds, then starts a
fresh worker process (``python -m benchmarks.fig_busy --child ...``) that loads the model as a run does
(``runtime.build_llm``: the thread count is the run's own choice, made with the helper already running)
and times the workload; then it stops both. The workload is figure 2's population generation (8 policies x
3 transcripts) with the backend's defaults, the work a run's evaluations do; its quiet time is figure 2's in
this run, or measured here when figure 2 was not selected. A worker that takes far longer than the quiet
time is stopped and reported as "timed out".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.fig_generation import PrefixSizes
from benchmarks.report import Figure, median
from benchmarks.workloads import (
    Bench,
    build_requests,
    decoding,
    default_layout,
    family_for,
    timed_generate,
)

__all__ = ["busy_figure", "busy_workloads", "spinning"]

SPIN = "while True: pass"
_LABELS = {"population": "population generation (fig. 2)"}


def busy_workloads(bench: Bench) -> dict[str, list[float]]:
    """Wall seconds of each workload, ``bench.repeats`` runs each (after one small warm-up call)."""
    backend = bench.backend
    p = PrefixSizes.for_bench(bench)
    reqs = build_requests(family_for(None), bench.population(p.policies), bench.transcripts(p.transcripts),
                          decoding(p.max_new_tokens))
    backend.generate(reqs[:1])  # warm-up
    return {"population": [timed_generate(backend, reqs).seconds for _ in range(bench.repeats)]}


@contextlib.contextmanager
def spinning() -> Iterator[subprocess.Popen]:
    """A helper process spinning on one core for the duration of the block (stopped by its pid after)."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _quiet(bench: Bench) -> dict[str, float]:
    """Median quiet seconds per workload: from figure 2 when it ran, else measured now."""
    population = bench.memo.get("prefix.default")
    if population:
        return {"population": population[1]}
    bench.log("  quiet reference (figure 2 was not run) ...")
    return {k: median(v) for k, v in busy_workloads(bench).items()}


def busy_figure(bench: Bench, warmup_s: float = 5.0, slack: float = 5.0) -> Figure:
    """Busy / quiet wall-time ratio of figure 2's population generation.

    Args:
        bench: the suite's settings and model.
        warmup_s: seconds the helper spins before the worker starts.
        slack: the worker is stopped after ``120 s (its model load) + slack x`` the quiet time of all its runs.
    """
    quiet = _quiet(bench)
    p = PrefixSizes.for_bench(bench)
    fig = Figure("busy", "the same workload with one core busy (spinning helper process) vs quiet")
    fig.workload = (f"{_LABELS['population']}: {p.policies} policies x {p.transcripts} validation transcripts, "
                    f"max_new_tokens {p.max_new_tokens}, the backend's defaults ({default_layout()} layout); a fresh "
                    f"worker process loads the model after the helper spun {warmup_s:.0f} s (threads: the run's "
                    f"automatic choice); median of {bench.repeats}")
    spec = {"quick": bench.quick, "repeats": bench.repeats}
    timeout = 120.0 + slack * bench.repeats * sum(quiet.values())
    with spinning():
        time.sleep(warmup_s)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        bench.log(f"  busy worker (load {load:.2f}, timeout {timeout:.0f} s) ...")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-m", "benchmarks.fig_busy", "--child", json.dumps(spec)],
                                  capture_output=True, text=True, timeout=timeout,
                                  cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            result = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
            error = None if result else f"worker failed (exit {proc.returncode}): {proc.stderr[-500:]}"
        except subprocess.TimeoutExpired:
            result, error = None, f"timed out after {timeout:.0f} s (more than {slack:.0f}x the quiet time)"
        wall = time.perf_counter() - t0
    fig.data.update(quiet_seconds=quiet, load_at_start=load, worker_seconds=wall, worker=result, error=error)
    if result is None:
        for key in quiet:
            fig.add(f"{_LABELS[key]}: busy / quiet", None, "x", note=error or "")
        fig.metrics["busy.ratio"] = float("inf") if error and "timed out" in error else None
        return fig
    fig.add("worker: compute threads chosen", result["threads"], "", note=f"load average {load:.2f} at its start")
    fig.add("worker: model load (busy)", result["load_seconds"], "s")
    ratios = []
    for key, runs in result["runs"].items():
        busy = median(runs)
        fig.add(f"{_LABELS[key]}: quiet", quiet[key], "s")
        fig.add(f"{_LABELS[key]}: busy", busy, "s", runs)
        fig.add(f"{_LABELS[key]}: busy / quiet", busy / quiet[key], "x")
        ratios.append(busy / quiet[key])
    fig.metrics["busy.ratio"] = max(ratios)
    return fig


def _child(spec: dict[str, Any]) -> None:
    """The worker: load the model as a run does, time the workloads, print one JSON line."""
    bench = Bench(repeats=int(spec["repeats"]), quick=bool(spec["quick"]), threads=None,
                  log=lambda msg: print(msg, file=sys.stderr))
    runs = busy_workloads(bench)
    print(json.dumps({"threads": bench.threads, "load_seconds": bench.load_seconds, "runs": runs}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="worker of the suite's busy figure (started by benchmarks.run)")
    ap.add_argument("--child", required=True, help="JSON: {quick, repeats}")
    _child(json.loads(ap.parse_args().child))
