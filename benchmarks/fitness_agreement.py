"""Does the inner loop's training fitness rank policies as the meta-validation screen does? Read from finished
(or running) evolve runs' archives, no model needed.

    python -m benchmarks.fitness_agreement archive/runs/<run folder> [more run folders or archive.db files]
    python -m benchmarks.fitness_agreement RUN_DIR --json

A *pair* is a policy scored under one harness candidate twice: its training fitness there (the last ``fitness``
evaluation of that policy with that ``harness_id``: the reward on the candidate's task batch) and its screen S_val
(the ``meta_screen`` evaluation with the same ``harness_id``: the mean S_val on the screening items). Gen 0's seeds
are pairs under ``h0``. Printed per run and pooled over the runs given: the number of pairs, Spearman's rho
between the two scores with its two-sided p-value (``scipy.stats.spearmanr``) and a 95 % percentile bootstrap
interval over pairs (2,000 resamples, seed 0), and the share of training-fitness components per pair. A rho near
0 means that selecting on training fitness does not select for S_val.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

__all__ = ["agreement", "main", "pairs"]


def _db(path: str) -> Path:
    p = Path(path)
    db = p / "archive.db" if p.is_dir() else p
    if not db.is_file():
        raise SystemExit(f"{path}: no archive.db there")
    return db


def pairs(db: Path) -> list[tuple[str, str, float, float]]:
    """``(policy_id, harness_id, fitness, screen S_val)`` of every policy with both under one harness candidate."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        fit: dict[tuple[str, str], float] = {}
        for pid, hid, total in con.execute(
                "SELECT policy_id, harness_id, total FROM evaluations WHERE kind = 'fitness' AND error IS NULL "
                "AND harness_id IS NOT NULL ORDER BY id"):
            fit[(pid, hid)] = float(total)  # the last one wins
        out = []
        for pid, hid, total in con.execute(
                "SELECT policy_id, harness_id, total FROM evaluations WHERE kind = 'meta_screen' AND error IS NULL "
                "AND harness_id IS NOT NULL ORDER BY id"):
            if (pid, hid) in fit:
                out.append((pid, hid, fit[(pid, hid)], float(total)))
        return out
    finally:
        con.close()


def agreement(rows: Sequence[tuple[str, str, float, float]], *, resamples: int = 2000) -> dict[str, float | int]:
    """Spearman's rho of fitness vs screen S_val over ``rows`` with its p-value and a bootstrap interval."""
    n = len(rows)
    if n < 3:
        return {"pairs": n, "rho": float("nan"), "p": float("nan"), "low": float("nan"), "high": float("nan")}
    f = np.array([r[2] for r in rows])
    s = np.array([r[3] for r in rows])
    rho, p = spearmanr(f, s)
    rng = np.random.default_rng(0)
    boot = []
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        if np.ptp(f[idx]) > 0 and np.ptp(s[idx]) > 0:
            boot.append(spearmanr(f[idx], s[idx])[0])
    low, high = (np.percentile(boot, [2.5, 97.5]) if boot else (float("nan"), float("nan")))
    return {"pairs": n, "rho": float(rho), "p": float(p), "low": float(low), "high": float(high)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fitness_agreement", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="run folders or archive.db files")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    per_run = {r: pairs(_db(r)) for r in args.runs}
    result = {"runs": {r: agreement(rows) for r, rows in per_run.items()},
              "pooled": agreement([row for rows in per_run.values() for row in rows])}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for name, a in [*result["runs"].items(), ("pooled", result["pooled"])]:
        print(f"{name}: {a['pairs']} pairs, Spearman {a['rho']:+.2f} (p {a['p']:.2f}, 95 % [{a['low']:+.2f}, "
              f"{a['high']:+.2f}])")
    return 0


if __name__ == "__main__":
    sys.exit(main())
