"""Ray executor vs local executor on one fixed rollout workload (issue 16: the Ray speed-up on this machine).

The workload is a meta-validation score as a run computes it (``RolloutEvaluator.meta_evaluate``): the first
``--policies`` seed policies on the first ``--items`` items of the shipped validation set, greedy, the run's
default decoding. Each executor gets one untimed warm-up call, then ``--reps`` timed calls, each with a fresh
fitness cache and no prefix store across calls (``model.prefix_cache_mb=0``: prefixes are still shared inside
a call), so every call does the same work. Model loads (one per Ray worker) are timed apart.

    HF_HUB_OFFLINE=1 flock /tmp/evotrainer-heavy.lock .venv/bin/python benchmarks/ray_executor.py

prints the median wall time of each executor, the ratio local / ray (> 1: Ray is faster), and whether both
gave the same S_val per policy. Defaults: 4 policies x 8 items, 3 reps, local with 2 threads, Ray with 2
workers x 1 thread (a local Ray instance); ``--model PATH`` runs another model folder (e.g. a tiny one to
check the script).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from evotrainer.config import Config, ExecutorConfig, RayConfig
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.runtime import (
    build_family,
    build_llm,
    load_seed_population,
    load_validation,
    sampling_from,
)


def _measure(llm, family, policies, items, sampling, reps: int) -> tuple[list[float], list[float | None]]:
    """Wall seconds of each timed call, and the S_val per policy of the last one."""
    RolloutEvaluator(llm, family, sampling=sampling).meta_evaluate(policies[:1], items[:1])  # warm-up
    walls, values = [], []
    for _ in range(reps):
        evaluator = RolloutEvaluator(llm, family, sampling=sampling)  # fresh cache: the same work each time
        t0 = time.perf_counter()
        out = evaluator.meta_evaluate(policies, items)
        walls.append(time.perf_counter() - t0)
        values = [e.s_val for e in out]
    return walls, values


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", type=int, default=4)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per Ray worker")
    ap.add_argument("--local-threads", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the run's decoding.max_new_tokens")
    ap.add_argument("--model", default=None, help="a model folder (default: the embedded SmolLM2-135M)")
    args = ap.parse_args(argv)

    cfg = Config()
    if args.max_new_tokens:
        cfg.decoding.max_new_tokens = args.max_new_tokens
    family = build_family(cfg)
    policies = load_seed_population(cfg)[: args.policies]
    items = load_validation(cfg, family)[: args.items]
    sampling = sampling_from(cfg.decoding, seed=0)
    model = replace(cfg.model, path=args.model, prefix_cache_mb=0)
    print(f"workload: {len(policies)} policies x {len(items)} items, {sampling.max_new_tokens} new tokens, greedy, "
          f"{args.reps} timed reps")

    results = {}
    for label, executor, threads in (
        (f"local ({args.local_threads} threads)", None, args.local_threads),
        (f"ray ({args.workers} workers x {args.threads} thread(s))",
         ExecutorConfig(kind="ray", ray=RayConfig(workers=args.workers, threads=args.threads)), None),
    ):
        t0 = time.perf_counter()
        llm = build_llm(replace(model, threads=threads) if threads else model, executor=executor)
        load = time.perf_counter() - t0
        walls, values = _measure(llm, family, policies, items, sampling, args.reps)
        results[label] = (statistics.median(walls), values)
        print(f"{label}: load {load:.1f} s; calls {', '.join(f'{w:.1f}' for w in walls)} s; "
              f"median {statistics.median(walls):.1f} s", flush=True)
        if hasattr(llm, "close"):
            llm.close()
        del llm

    (local_s, local_v), (ray_s, ray_v) = results.values()
    print(f"speed-up local/ray: {local_s / ray_s:.2f}x (median {local_s:.1f} s vs {ray_s:.1f} s)")
    print(f"same S_val per policy: {local_v == ray_v} (local {local_v}, ray {ray_v})")


if __name__ == "__main__":
    main()
