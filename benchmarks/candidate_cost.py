"""Issue 25's cost targets from a finished (or running) evolve run's archive: seconds per harness candidate,
generation 0, and how many candidates the run tried.

    python -m benchmarks.candidate_cost archive/runs/<run folder>          # or the archive.db itself
    python -m benchmarks.candidate_cost RUN_DIR --run-id run-s0-...        # when the archive holds several runs
    python -m benchmarks.candidate_cost RUN_DIR --json                     # the figures as one JSON object

Read from the archive's events (their ``created_at`` stamps, milliseconds), so no model is needed and a run
still going can be read (the archive is opened read-only):

- **generation 0**: from the ``setup`` event (the model is loaded by then) to the first event of the first
  harness candidate: the seeds on the training batch, their screening, the best seed on the whole selection
  set and the S_val probes;
- **a harness candidate**: from its ``task_batch`` event (its first) to its last event (its race, promotion
  or incumbent), split into the inner loop (to its last ``inner_generation`` phase), the race (to its ``race``
  event) and the whole-set scoring of a promising leader (to its ``promotion`` event);
- **the end**: from the last candidate's end to the ``summary`` event (held-out items, transfer report).

Targets of issue 25, printed never asserted: median candidate <= 60 s, generation 0 <= 300 s, >= 24 candidates
within 45 minutes of the run's start, and a CMA-ES population no smaller than pycma's default
``4 + floor(3 ln n)`` for the ``n`` harness parameters searched (the run's config and ``setup`` event).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

__all__ = ["candidate_costs", "main", "pycma_default_popsize"]

TARGET_CANDIDATE_S, TARGET_GEN0_S, TARGET_CANDIDATES, TARGET_RUN_S = 60.0, 300.0, 24, 45 * 60.0


def pycma_default_popsize(dim: int) -> int:
    """pycma's default population for ``dim`` parameters: ``4 + floor(3 ln dim)`` (``cma.CMAOptions`` ``popsize``)."""
    return 4 + int(math.floor(3 * math.log(max(dim, 1))))


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def candidate_costs(events: Sequence[Any], config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The figures of the module docstring from a run's events (``EventRow``-like: ``kind``, ``payload``,
    ``created_at``), in insertion order. Seconds are wall seconds; None where the run has not got there."""
    setup = next((e for e in events if e.kind == "setup"), None)
    t0 = _t(events[0].created_at) if events else None
    spans: dict[str, dict[str, float]] = {}
    for e in events:
        hid = e.payload.get("harness_id") if isinstance(e.payload, dict) else None
        if not hid or hid == "h0" or not str(hid).startswith("g"):
            continue
        t = _t(e.created_at)
        if hid not in spans and e.kind != "task_batch":
            continue  # a candidate starts with its task batch (a stop check names the next one, never run)
        span = spans.setdefault(hid, {"start": t})
        span["end"] = t
        if e.kind == "phase" and e.payload.get("name") == "inner_generation":
            span["inner"] = t
        elif e.kind == "race":
            span["race"] = t
            span["race_evaluations"] = float(e.payload.get("evaluations") or 0)
        elif e.kind == "promotion":
            span["promotion"] = t
    for e in events:  # a phase event's harness id sits in its fields
        if e.kind == "phase" and e.payload.get("name") == "inner_generation":
            hid = (e.payload.get("fields") or {}).get("harness_id")
            if hid in spans:
                spans[hid]["inner"] = max(spans[hid].get("inner", 0.0), _t(e.created_at))
    rows = []
    for hid, s in spans.items():
        inner_end = s.get("inner", s["start"])
        race_end = s.get("race", s["end"])
        rows.append({"harness_id": hid, "seconds": s["end"] - s["start"], "inner_s": inner_end - s["start"],
                     "race_s": max(race_end - inner_end, 0.0),
                     "promotion_s": (s["promotion"] - race_end) if "promotion" in s else 0.0,
                     "race_evaluations": int(s.get("race_evaluations", 0)), "ended_at": s["end"] - (t0 or 0.0)})
    first = min((s["start"] for s in spans.values()), default=None)
    gen0 = (first - _t(setup.created_at)) if (setup is not None and first is not None) else None
    summary = next((e for e in events if e.kind == "summary"), None)
    last_end = max((s["end"] for s in spans.values()), default=None)
    end_s = (_t(summary.created_at) - last_end) if (summary is not None and last_end is not None) else None
    names = (setup.payload.get("harness_names") if setup is not None else None) or []
    popsize = ((config or {}).get("outer") or {}).get("popsize")
    within = sum(1 for r in rows if r["ended_at"] <= TARGET_RUN_S)
    seconds = [r["seconds"] for r in rows]
    return {
        "candidates": rows, "count": len(rows), "within_45_min": within,
        "median_s": statistics.median(seconds) if seconds else None,
        "inner_median_s": statistics.median(r["inner_s"] for r in rows) if rows else None,
        "race_median_s": statistics.median(r["race_s"] for r in rows) if rows else None,
        "generation0_s": gen0, "end_s": end_s,
        "run_s": (_t(summary.created_at) - t0) if (summary is not None and t0 is not None) else None,
        "dimension": len(names), "popsize": popsize,
        "pycma_default_popsize": pycma_default_popsize(len(names)) if names else None,
    }


def _status(ok: bool | None) -> str:
    return "NOT MEASURED" if ok is None else ("MET" if ok else "NOT MET")


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f} s"


def report(c: dict[str, Any]) -> list[str]:
    """The printed table and targets of :func:`candidate_costs`'s figures."""
    lines = [f"{'candidate':>9} {'total':>8} {'inner':>8} {'race':>8} {'whole set':>9} {'race items':>10}"]
    for r in c["candidates"]:
        lines.append(f"{r['harness_id']:>9} {r['seconds']:7.0f}s {r['inner_s']:7.0f}s {r['race_s']:7.0f}s "
                     f"{r['promotion_s']:8.0f}s {r['race_evaluations']:>10}")
    lines += [
        f"generation 0: {_fmt(c['generation0_s'])}; candidates: {c['count']} (median {_fmt(c['median_s'])}: inner "
        f"{_fmt(c['inner_median_s'])}, race {_fmt(c['race_median_s'])}); end (held-out, transfer): {_fmt(c['end_s'])}; "
        f"run {_fmt(c['run_s'])}",
        "targets (issue 25):",
        f"  median candidate <= {TARGET_CANDIDATE_S:.0f} s: {_fmt(c['median_s'])} "
        f"{_status(None if c['median_s'] is None else c['median_s'] <= TARGET_CANDIDATE_S)}",
        f"  generation 0 <= {TARGET_GEN0_S:.0f} s: {_fmt(c['generation0_s'])} "
        f"{_status(None if c['generation0_s'] is None else c['generation0_s'] <= TARGET_GEN0_S)}",
        f"  >= {TARGET_CANDIDATES} candidates within 45 min: {c['within_45_min']} "
        f"{_status(c['within_45_min'] >= TARGET_CANDIDATES if c['count'] else None)}",
        f"  CMA-ES popsize >= pycma default for {c['dimension']} parameters ({c['pycma_default_popsize']}): "
        f"{c['popsize']} {_status(None if c['popsize'] is None or c['pycma_default_popsize'] is None else c['popsize'] >= c['pycma_default_popsize'])}",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    from evotrainer.archive.locate import resolve_archive
    from evotrainer.archive.store import open_archive

    ap = argparse.ArgumentParser(prog="python -m benchmarks.candidate_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a run folder or its archive.db")
    ap.add_argument("--run-id", help="the run to read (default: the archive's only or latest run)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    with open_archive(resolve_archive(args.run)) as store:
        runs = store.list_runs()
        if not runs:
            print(f"no run in {args.run}", file=sys.stderr)
            return 1
        run = next((r for r in runs if r.run_id == args.run_id), None) if args.run_id else runs[-1]
        if run is None:
            print(f"no run {args.run_id!r} in {args.run} (runs: {', '.join(r.run_id for r in runs)})", file=sys.stderr)
            return 1
        figures = candidate_costs(store.events(run.run_id), run.config)
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print(f"run {run.run_id}")
        print("\n".join(report(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
