"""``mode=evaluate``: score every seed policy on the meta-validation set and print a ranked table."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evotrainer.config import Config
from evotrainer.rollout import MetaEvaluation, RolloutEvaluator
from evotrainer.runtime import build_family, build_llm, load_seed_population, load_validation, sampling_from

__all__ = ["bootstrap_interval", "render_table", "run_evaluate"]

log = logging.getLogger(__name__)


def bootstrap_interval(
    values: Sequence[float], *, rng: np.random.Generator, n_resamples: int = 2000, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over items (Efron & Tibshirani 1993, ch. 13).

    Args:
        values: per-item scores, shape (n,), each in [0, 1].
        rng: explicit generator (reproducible intervals).
        n_resamples: bootstrap resamples.
        level: coverage in (0, 1).

    Returns:
        (low, high) of the mean; (v, v) for a single item.
    """
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        v = float(arr.mean()) if arr.size else 0.0
        return v, v
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    means = arr[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def render_table(results: Sequence[MetaEvaluation], *, title: str, seed: int = 0) -> Table:
    """A ranked rich table: rank, policy, S_val with 95% bootstrap interval, parts, tokens, seconds."""
    rng = np.random.default_rng(seed)
    table = Table(title=title)
    for col in ("rank", "policy", "S_val", "95% CI", "ROUGE-L", "action F1", "degenerate", "tokens", "seconds"):
        table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=col == "policy")
    ranked = sorted(results, key=lambda r: -(r.s_val if r.s_val is not None else -1.0))
    for rank, r in enumerate(ranked, 1):
        per_item = [v if v is not None else 0.0 for v in r.per_item]
        lo, hi = bootstrap_interval(per_item, rng=rng)
        parts = r.parts
        table.add_row(
            str(rank), escape(r.policy_id),
            "failed" if r.s_val is None else f"{r.s_val:.4f}",
            f"[{lo:.3f}, {hi:.3f}]",
            f"{parts.get('rouge_l', float('nan')):.4f}",
            f"{parts['action_f1']:.4f}" if "action_f1" in parts else "-",
            f"{parts.get('degenerate', 0.0):.2f}",
            str(r.generated_tokens), f"{r.seconds:.1f}",
        )
    return table


def run_evaluate(cfg: Config) -> list[MetaEvaluation]:
    """Score the seed population (``evaluation.policies`` subset) on ``task.validation_path``.

    All policies × items go to the backend in one batched call. Prints the ranked table and the
    throughput; returns the evaluations (unsorted, population order).
    """
    console = Console() if sys.stdout.isatty() else Console(width=160)  # logs keep whole columns
    family = build_family(cfg)
    items = load_validation(cfg, family)
    population = load_seed_population(cfg)
    console.print(f"[bold]evaluate[/]: {len(population)} policies × {len(items)} items "
                  f"from {cfg.task.validation_path} (max {cfg.decoding.max_new_tokens} new tokens)")
    t0 = time.perf_counter()
    llm = build_llm(cfg.model, progress=True)
    load_s = time.perf_counter() - t0
    evaluator = RolloutEvaluator(llm, family, sampling=sampling_from(cfg.decoding, seed=cfg.seed))
    t0 = time.perf_counter()
    results = evaluator.meta_evaluate(population, items)
    wall = time.perf_counter() - t0
    console.print(render_table(results, title=f"S_val on {len(items)} items (higher is better)", seed=cfg.seed))
    tokens = sum(r.generated_tokens for r in results)
    n_gen = len(population) * len(items)
    console.print(
        f"model load {load_s:.1f} s; generation+scoring {wall:.1f} s for {n_gen} outputs: "
        f"{wall / max(n_gen, 1):.2f} s per output, {wall / max(len(items), 1):.1f} s per item "
        f"(all policies), {tokens / max(wall, 1e-9):.1f} generated tokens/s"
    )
    best = max(results, key=lambda r: r.s_val if r.s_val is not None else -1.0)
    if cfg.evaluation.show_best_output and best.outputs:
        console.rule(f"best policy {best.policy_id}: output on {items[0].task_id}")
        console.print(best.outputs[0], markup=False, highlight=False)
    return results
