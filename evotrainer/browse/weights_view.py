"""``archive sweep`` for weight-training runs: each self-evolution or distillation run's adapter against the same
prompt without it on the transfer items, and that difference pooled over the runs
(:mod:`evotrainer.stats.adapter_pool`).

Read-only. A self-evolution run's comparison is its ``selfevolve_transfer`` event; a distillation run's is its
result file (``<distill.results>.json``) beside the archive, matched by run id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evotrainer.archive.schema import RunInfo
from evotrainer.archive.store import ArchiveStore
from evotrainer.browse.textsafe import terminal_safe
from evotrainer.browse.transfer_view import diff_cell
from evotrainer.events.selfevolve import SelfEvolveTransferEvent
from evotrainer.stats.adapter_pool import AdapterRun, from_distill, pool_adapters

__all__ = ["WEIGHT_MODES", "adapter_summary", "print_adapters", "read_adapter_run"]

WEIGHT_MODES = ("selfevolve", "distill")
"""Run modes whose result is a trained adapter compared with its prompt alone."""


def read_adapter_run(store: ArchiveStore, run: RunInfo) -> tuple[AdapterRun | None, str | None]:
    """``(run, None)`` for a weight-training run with its comparison; ``(None, why)`` for one without (unfinished,
    ``selfevolve.transfer_limit=0``, a result file missing or malformed); ``(None, None)`` for any other run."""
    mode = run.config.get("mode")
    if mode == "selfevolve":
        events = [e.event for e in store.events(run.run_id, kind="selfevolve_transfer")]
        events = [e for e in events if isinstance(e, SelfEvolveTransferEvent)]
        if not events:
            return None, "self-evolution run without a transfer comparison (not finished, or transfer_limit 0)"
        e = events[-1]
        try:
            return AdapterRun(run.run_id, "selfevolve", run.seed, str(e.base_policy), str(e.final_policy),
                              tuple(e.item_ids), tuple(e.groups), tuple(map(float, e.base_values)),
                              tuple(map(float, e.final_values))), None
        except (TypeError, ValueError) as exc:
            return None, f"selfevolve_transfer event is malformed ({exc})"
    if mode == "distill":
        stem = (run.config.get("distill") or {}).get("results") or "distill"
        path = Path(store.path).parent / f"{stem}.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return None, f"distillation run without a readable result file {path} ({type(exc).__name__})"
        if not isinstance(doc, Mapping) or doc.get("run_id") != run.run_id:
            return None, f"{path} is another run's result file"
        try:
            return from_distill(doc), None
        except ValueError as exc:
            return None, f"{path}: {exc}"
    return None, None


def adapter_summary(runs: Sequence[AdapterRun], sources: Sequence[Mapping[str, Any]], *, seed: int,
                    level: float) -> dict[str, Any] | None:
    """Per-run rows (``sources``: each run's archive/job cells, same order) and the pooled ``adapter − base``;
    None without runs. Each row's difference is that run alone through the same cluster bootstrap."""
    if not runs:
        return None
    rows = []
    for r, where in zip(runs, sources, strict=True):
        one = pool_adapters([r], seed=seed, level=level)
        rows.append({**where, "run_id": r.run_id, "mode": r.mode, "seed": r.seed, "base_id": r.base_id,
                     "adapter_id": r.adapter_id, "items": len(r.item_ids),
                     "base_mean": None if one is None else one.base_mean,
                     "adapter_mean": None if one is None else one.adapter_mean, "diff": _payload(one)})
    return {"runs": rows, "pooled": _payload(pool_adapters(runs, seed=seed, level=level))}


def _payload(p: Any) -> dict[str, Any] | None:
    return None if p is None else {**asdict(p), "n": p.n}


def print_adapters(console: Console, adapters: Mapping[str, Any] | None, level: float) -> None:
    """The weight-training block of ``archive sweep``: a row per run, then the pooled line (nothing without runs)."""
    if not adapters:
        return
    pct = f"{round(level * 100)}%"
    t = Table(title=f"weight training: adapter − the same prompt without it, on the transfer items (bootstrap over "
                    f"groups, {pct}; higher is better)", title_justify="left")
    for col in ("job", "run", "mode", "seed", "prompt", "base", "adapter", "adapter − base", "W/L/T"):
        t.add_column(col)
    for r in adapters["runs"]:
        d = r["diff"] or {}
        t.add_row(Text(terminal_safe(r.get("job") or "")), Text(terminal_safe(r["run_id"])), r["mode"], str(r["seed"]),
                  Text(terminal_safe(r["base_id"])), _mean(r["base_mean"]), _mean(r["adapter_mean"]), diff_cell(d),
                  f"{d.get('wins', 0)}/{d.get('losses', 0)}/{d.get('ties', 0)}")
    console.print(t)
    p = adapters["pooled"]
    if p is not None:
        console.print(Text(terminal_safe(f"weight training: base {p['base_mean']:.4f}, adapter {p['adapter_mean']:.4f}; "
                                         f"{p['verdict']}"), style="green" if p["helps"] else ""))


def _mean(x: float | None) -> str:
    return "–" if x is None else f"{x:.4f}"
