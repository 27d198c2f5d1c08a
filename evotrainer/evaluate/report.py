"""Results of ``mode=evaluate``: per-policy summaries, the generalisation comparison, tables and files.

:func:`summarise` and :func:`compare` are pure (scores in, records out); the ``render_*`` functions
build rich tables; :func:`write_results` writes ``<stem>.json`` (everything, outputs included),
``<stem>_items.csv`` (one row per policy x item) and ``<stem>_groups.csv`` (one row per policy x
group) into the run folder.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from evotrainer.errors import DataError
from evotrainer.input_handling import InputHandling, handling_summary
from evotrainer.rollout import MetaEvaluation
from evotrainer.run.policy_refs import PolicyRef
from evotrainer.stats.bootstrap import (
    GroupScore,
    PairedDifference,
    bootstrap_interval,
    group_scores,
    item_values,
    paired_difference,
    rng_for,
)
from evotrainer.tasks.base import Datasets

__all__ = ["Comparison", "ComparisonRow", "PolicyResult", "compare", "item_handling", "item_strata",
           "render_comparison", "render_handling", "render_groups", "shown_kinds", "summarise",
           "write_results"]

STRATA: tuple[str, ...] = ("source", "domain", "length")
"""Stratum kinds an evaluation groups items by, in report order (:meth:`~evotrainer.tasks.base.Datasets.strata`)."""


@dataclass(frozen=True)
class PolicyResult:
    """One policy's results on a dataset.

    Attributes:
        ref: the resolved reference (label, kind, policy).
        evaluation: the rollout's meta evaluation (S_val, parts, outputs, tokens, seconds).
        values: per-item scores in item order, each in [0, 1] (a failed item counts 0.0).
        low: bootstrap interval of the mean, low end.
        high: high end.
        groups: per-stratum means (kinds "source", "domain", "length").
    """

    ref: PolicyRef
    evaluation: MetaEvaluation
    values: tuple[float, ...]
    low: float
    high: float
    groups: tuple[GroupScore, ...]

    @property
    def label(self) -> str:
        return self.ref.label

    @property
    def mean(self) -> float:
        """Mean over items with failures as 0.0 (-1.0 when every item failed, so it ranks last)."""
        return self.evaluation.s_val if self.evaluation.s_val is not None else -1.0


@dataclass(frozen=True)
class ComparisonRow:
    """One stratum of the generalisation table: base vs other on the same items."""

    kind: str
    group: str
    n: int
    base: tuple[float, float, float]  # mean, low, high
    other: tuple[float, float, float]
    diff: PairedDifference  # other - base


@dataclass(frozen=True)
class Comparison:
    """Best seed (by this dataset's score) vs another policy, overall and per stratum."""

    base: str
    other: str
    rows: tuple[ComparisonRow, ...]


def item_strata(items: Sequence[Any], family: Any = None) -> list[dict[str, str]]:
    """Stratum labels per item (keys from :data:`STRATA`): ``family.strata(task)`` for a family with the datasets
    capability (:class:`~evotrainer.tasks.base.Datasets`), else the item's source alone."""
    if isinstance(family, Datasets):
        return [dict(family.strata(t)) for t in items]
    return [{"source": t.source, "domain": "", "length": ""} for t in items]


def _order(items: Sequence[Any], strata: Sequence[Mapping[str, str]]) -> dict[str, list[str]]:
    """Length groups from the smallest items to the largest (mean ``Task.size`` of a group's items)."""
    sizes: dict[str, list[int]] = {}
    for t, s in zip(items, strata, strict=True):
        sizes.setdefault(s.get("length", ""), []).append(t.size)
    return {"length": sorted(sizes, key=lambda g: (sum(sizes[g]) / len(sizes[g]), g))}


def shown_kinds(strata: Sequence[Mapping[str, str]]) -> tuple[str, ...]:
    """Stratum kinds worth a table: source and length always; domain when >= 2 domains are labelled and
    they group items (fewer domains than labelled items: one domain per item, as in the shipped set, gives
    one-item rows, which are noise)."""
    labelled = [s.get("domain", "") for s in strata if s.get("domain", "")]
    domains = set(labelled)
    return tuple(k for k in STRATA if k != "domain" or 2 <= len(domains) < len(labelled))


def summarise(
    refs: Sequence[PolicyRef], evaluations: Sequence[MetaEvaluation], items: Sequence[Any], *,
    seed: int = 0, n_resamples: int = 2000, level: float = 0.95, strata: Sequence[Mapping[str, str]] | None = None,
) -> list[PolicyResult]:
    """Per-policy overall interval and per-stratum means (order of ``refs``); ``strata``: labels per item
    (default :func:`item_strata`).

    Raises:
        ValueError: ``refs`` and ``evaluations`` differ in length.
    """
    if len(refs) != len(evaluations):
        raise ValueError(f"summarise: {len(refs)} policies, {len(evaluations)} evaluations")
    strata = list(strata) if strata is not None else item_strata(items)
    kinds, order = shown_kinds(strata), _order(items, strata)
    out = []
    for ref, ev in zip(refs, evaluations, strict=True):
        values = item_values(ev.per_item if len(ev.per_item) == len(items) else [None] * len(items))
        lo, hi = bootstrap_interval(values, rng=rng_for(seed, ref.label, "all"), n_resamples=n_resamples, level=level)
        groups = group_scores(values, strata, kinds=kinds, order=order, seed=seed, name=ref.label,
                              n_resamples=n_resamples, level=level)
        out.append(PolicyResult(ref, ev, values, lo, hi, tuple(groups)))
    return out


def compare(base: PolicyResult, other: PolicyResult, items: Sequence[Any], *, seed: int = 0,
            n_resamples: int = 2000, level: float = 0.95,
            strata: Sequence[Mapping[str, str]] | None = None) -> Comparison:
    """``other`` vs ``base`` on the same items: both means with intervals and the paired difference.

    Rows: "all", then each group of each shown stratum kind (same order as :func:`summarise`).
    """
    strata = list(strata) if strata is not None else item_strata(items)
    groups: list[tuple[str, str, list[int]]] = [("all", "all", list(range(len(items))))]
    for g in group_scores([0.0] * len(items), strata, kinds=shown_kinds(strata), order=_order(items, strata),
                             n_resamples=1):
        groups.append((g.kind, g.group, [i for i, s in enumerate(strata) if s.get(g.kind) == g.group]))
    rows = []
    for kind, group, idx in groups:
        a = [base.values[i] for i in idx]
        b = [other.values[i] for i in idx]
        stats = []
        for label, vals in ((base.label, a), (other.label, b)):
            lo, hi = bootstrap_interval(vals, rng=rng_for(seed, label, kind, group), n_resamples=n_resamples,
                                        level=level)
            stats.append((sum(vals) / len(vals), lo, hi))
        diff = paired_difference(a, b, rng=rng_for(seed, base.label, other.label, kind, group),
                                 n_resamples=n_resamples, level=level)
        rows.append(ComparisonRow(kind, group, len(idx), stats[0], stats[1], diff))
    return Comparison(base.label, other.label, tuple(rows))


def item_handling(result: PolicyResult, n: int) -> list[str]:
    """The policy's handling code per item (``whole`` where its rollout failed or did not say), length ``n``."""
    codes = list(result.evaluation.handling)
    return codes if len(codes) == n else ["whole"] * n


# --- tables ---------------------------------------------------------------------------------------

def render_handling(results: Sequence[PolicyResult], items: Sequence[Any], *, title: str) -> Table | None:
    """Per item: its size and how the model read it (``whole``, ``windowed into N``, ``cut: S% of words seen``);
    where policies differ, each distinct way with the number of policies. None when every item was read whole
    by every policy (nothing to report)."""
    per_policy = [item_handling(r, len(items)) for r in results]
    if all(InputHandling.parse(c).how == "whole" for codes in per_policy for c in codes):
        return None
    table = Table(title=title)
    for col in ("item", "words", "read as"):
        table.add_column(col, justify="right" if col == "words" else "left", no_wrap=col == "item")
    for k, task in enumerate(items):
        labels: dict[str, int] = {}
        for codes in per_policy:
            label = InputHandling.parse(codes[k]).label()
            labels[label] = labels.get(label, 0) + 1
        shown = next(iter(labels)) if len(labels) == 1 else "; ".join(f"{lab} ({n} policies)" for lab, n in labels.items())
        cut = any(InputHandling.parse(codes[k]).lost_words for codes in per_policy)
        table.add_row(escape(task.task_id), str(task.size), f"[yellow]{escape(shown)}[/]" if cut else escape(shown))
    return table


def render_groups(results: Sequence[PolicyResult], kind: str, *, title: str) -> Table:
    """Policies (ranked by overall score) x groups of one stratum kind; cells are mean scores, the
    best of each column in bold."""
    ranked = sorted(results, key=lambda r: -r.mean)
    cols: dict[str, int] = {}
    for r in ranked:
        for g in r.groups:
            if g.kind == kind:
                cols.setdefault(g.group, g.n)
    table = Table(title=title)
    table.add_column("policy", no_wrap=True)
    table.add_column("all", justify="right")
    for group, n in cols.items():
        table.add_column(f"{escape(group)}\n(n={n})", justify="right")
    best = {g: max((x.mean for r in ranked for x in r.groups if x.kind == kind and x.group == g), default=0.0)
            for g in cols}
    for r in ranked:
        cells = {g.group: g.mean for g in r.groups if g.kind == kind}
        row = [escape(r.label), "failed" if r.evaluation.s_val is None else f"{r.mean:.4f}"]
        for g in cols:
            v = cells.get(g)
            row.append("-" if v is None else (f"[bold]{v:.4f}[/]" if v == best[g] else f"{v:.4f}"))
        table.add_row(*row)
    return table


def render_comparison(comp: Comparison, *, level: float = 0.95) -> Table:
    """The generalisation table: stratum, n, base and other with intervals, paired difference."""
    pct = f"{round(level * 100)}%"
    table = Table(title=f"generalisation: {escape(comp.other)} vs best seed {escape(comp.base)} "
                        f"(paired bootstrap over items, {pct} intervals; higher is better)")
    for col in ("stratum", "group", "n", f"best seed: {comp.base}", comp.other, "difference (other - seed)",
                "P(other better)"):
        table.add_column(escape(col), justify="left" if col in ("stratum", "group") else "right")
    for row in comp.rows:
        d = row.diff
        sign = "green" if d.low > 0 else "red" if d.high < 0 else ""
        diff = f"{d.mean:+.4f} [{d.low:+.3f}, {d.high:+.3f}]"
        table.add_row(row.kind, escape(row.group), str(row.n),
                      f"{row.base[0]:.4f} [{row.base[1]:.3f}, {row.base[2]:.3f}]",
                      f"{row.other[0]:.4f} [{row.other[1]:.3f}, {row.other[2]:.3f}]",
                      f"[{sign}]{diff}[/]" if sign else diff, f"{d.share_b_better:.2f}")
    return table


# --- files ----------------------------------------------------------------------------------------

def _policy_doc(r: PolicyResult) -> dict[str, Any]:
    ev = r.evaluation
    return {
        "label": r.label, "ref": r.ref.ref, "kind": r.ref.kind, "policy_id": r.ref.policy.id,
        "genome_hash": ev.genome_hash, "s_val": ev.s_val, "interval": [r.low, r.high], "stderr": ev.stderr,
        "parts": dict(ev.parts), "generated_tokens": ev.generated_tokens, "seconds": ev.seconds, "error": ev.error,
        "groups": [asdict(g) for g in r.groups],
        "handling": handling_summary(r.evaluation.handling),
    }


def write_results(
    folder: str | Path, stem: str, *, header: Mapping[str, Any], results: Sequence[PolicyResult],
    items: Sequence[Any], comparison: Comparison | None, strata: Sequence[Mapping[str, str]] | None = None,
) -> list[Path]:
    """Write ``<stem>.json``, ``<stem>_items.csv`` and ``<stem>_groups.csv`` into ``folder``.

    Args:
        folder: the run folder (created when missing).
        stem: file name stem (no folder part).
        header: run facts for the JSON (dataset, format, seed, bootstrap settings, metric ...).
        results: per-policy results.
        items: the dataset items, in the order the results' per-item values follow.
        comparison: the generalisation comparison, or None.

    Returns:
        The three paths written.

    Raises:
        DataError: the folder cannot be written.
    """
    out = Path(folder)
    strata = list(strata) if strata is not None else item_strata(items)
    handlings = [item_handling(r, len(items)) for r in results]
    item_rows = []
    for k, (task, lab) in enumerate(zip(items, strata, strict=True)):
        item_rows.append({
            "id": task.task_id, **lab, "size": task.size,
            "scores": {r.label: r.values[k] for r in results},
            "handling": {r.label: handlings[j][k] for j, r in enumerate(results)},
            "outputs": {r.label: (r.evaluation.outputs[k] if k < len(r.evaluation.outputs) else "") for r in results},
        })
    doc = {**header, "n_items": len(items), "policies": [_policy_doc(r) for r in results],
           "comparison": None if comparison is None else {
               "base": comparison.base, "other": comparison.other,
               "rows": [{"kind": c.kind, "group": c.group, "n": c.n, "base": list(c.base), "other": list(c.other),
                         "difference": asdict(c.diff)} for c in comparison.rows]},
           "items": item_rows}
    paths = [out / f"{stem}.json", out / f"{stem}_items.csv", out / f"{stem}_groups.csv"]
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths[0].write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        with paths[1].open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["policy", "policy_id", "item_id", "source", "domain", "length", "size", "score", "handling",
                        "share_seen"])
            for r, codes in zip(results, handlings, strict=True):
                for row, value, code in zip(item_rows, r.values, codes, strict=True):
                    seen = InputHandling.parse(code).share_seen
                    w.writerow([r.label, r.ref.policy.id, row["id"], row["source"], row["domain"], row["length"],
                                row["size"], f"{value:.6f}", code, "" if seen is None else f"{seen:.3f}"])
        with paths[2].open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["policy", "policy_id", "kind", "group", "n", "mean", "low", "high"])
            for r in results:
                w.writerow([r.label, r.ref.policy.id, "all", "all", len(items), f"{max(r.mean, 0.0):.6f}",
                            f"{r.low:.6f}", f"{r.high:.6f}"])
                for g in r.groups:
                    w.writerow([r.label, r.ref.policy.id, g.kind, g.group, g.n, f"{g.mean:.6f}", f"{g.low:.6f}",
                                f"{g.high:.6f}"])
    except OSError as exc:
        raise DataError(f"{out}: cannot write the evaluation results ({exc})") from None
    return paths
