"""Pure helpers of the benchmark suite: figure records, medians, the issue's targets, the table and JSON.

Nothing here loads a model or times anything, so ``tests/benchmark_scripts/test_report.py`` can check it
quickly.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "TARGETS",
    "Figure",
    "Row",
    "Target",
    "TargetResult",
    "check_targets",
    "format_value",
    "git_revision",
    "median",
    "render",
    "result_path",
    "to_payload",
    "write_results",
]


def median(values: Iterable[float]) -> float:
    """The median of ``values`` (the mean of the two middle ones for an even count).

    Raises:
        ValueError: no values.
    """
    values = list(values)
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


@dataclass(frozen=True)
class Row:
    """One printed figure value.

    Attributes:
        label: what it is, e.g. "batch 16".
        value: the reported number (the median of ``runs`` for timings); None when it could not be measured.
        unit: e.g. "tok/s", "s", "x" (a ratio), "%".
        runs: every repeat's value, in run order (empty for a single count or a derived value).
        note: a short remark printed after the value.
    """

    label: str
    value: float | int | None
    unit: str = ""
    runs: tuple[float, ...] = ()
    note: str = ""


@dataclass
class Figure:
    """The result of one benchmark.

    Attributes:
        key: the name ``--only`` selects it by, e.g. "generation".
        title: one line saying what it measures.
        workload: what was run (sizes, tokens, repeats), printed under the title.
        rows: the printed values.
        metrics: named numbers the targets read (e.g. ``"generation.speedup"``).
        data: anything else worth keeping in the JSON (token counts, backend stats, per-phase seconds).
        skipped: why it did not run (e.g. "not available in this commit: ..."); None when it ran.
        seconds: wall time of the whole figure, setup included.
    """

    key: str
    title: str
    workload: str = ""
    rows: list[Row] = field(default_factory=list)
    metrics: dict[str, float | None] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    seconds: float = 0.0

    def add(self, label: str, value: float | int | None, unit: str = "", runs: Sequence[float] = (),
            note: str = "") -> None:
        """Append a :class:`Row` (an int value stays an int: a count, printed in full)."""
        value = value if value is None or isinstance(value, int) else float(value)
        self.rows.append(Row(label, value, unit, tuple(float(r) for r in runs), note))


@dataclass(frozen=True)
class Target:
    """One target of issue 14 ("Targets (printed by the suite, never asserted in tests)").

    Attributes:
        name: the target as the issue states it.
        metric: the :attr:`Figure.metrics` key holding the measured value; "" when the suite cannot
            measure it (it needs a full run).
        threshold: the bound.
        at_least: True when met means ``measured >= threshold``; False for ``measured <= threshold``.
        unit: printed after the numbers ("x" for ratios, "" for fractions shown as %).
        how: for an unmeasured target, how to measure it.
    """

    name: str
    metric: str
    threshold: float
    at_least: bool = True
    unit: str = "x"
    how: str = ""


TARGETS: tuple[Target, ...] = (
    Target("population generation (8 policies x 3 transcripts) >= 3x faster than today's per-pair path",
           "prefix.speedup", 3.0),
    Target("batched vs sequential generation >= 6x (tokens/s)", "generation.speedup", 6.0),
    Target("prefill >= 50% of the measured GEMM peak of the model's dtype (issue 39)", "roofline.prefill_fraction",
           0.5, unit="%"),
    Target("decode, batch 1: >= 50% of read bandwidth / weight bytes steps/s (issue 39)",
           "roofline.decode_fraction", 0.5, unit="%"),
    Target("decode, batch 8: >= 50% of read bandwidth / weight bytes steps/s (issue 39)",
           "roofline.decode_fraction_batch8", 0.5, unit="%"),
    Target("one core busy: <= 2.5x the quiet wall time", "busy.ratio", 2.5, at_least=False),
    Target("smoke experiment under 60 s (quiet 2-core machine)", "", 60.0, at_least=False, unit="s",
           how="time make run ARGS='+experiment=smoke' (a full run; not part of the suite)"),
    Target("default main job: its harness candidates in <= 15 min, or >= 3x as many in its budget", "", 15.0,
           at_least=False, unit="min", how="make run (the default experiment; about 45 minutes today)"),
)
"""The issue's targets in the order it lists them; the busy target is measured on the suite's own
workload (figure ``busy``), not on the smoke experiment the issue names."""


@dataclass(frozen=True)
class TargetResult:
    """A target with its measured value and verdict ("met", "not met" or "not measured")."""

    target: Target
    measured: float | None
    status: str


def check_targets(metrics: Mapping[str, float | None], targets: Sequence[Target] = TARGETS) -> list[TargetResult]:
    """Each target's verdict on ``metrics`` (the union of every figure's :attr:`Figure.metrics`).

    A missing, None or non-finite metric is "not measured"; so is every target without a metric.
    """
    out: list[TargetResult] = []
    for t in targets:
        value = metrics.get(t.metric) if t.metric else None
        if value is None or not math.isfinite(value):
            out.append(TargetResult(t, None, "not measured"))
            continue
        met = value >= t.threshold if t.at_least else value <= t.threshold
        out.append(TargetResult(t, float(value), "met" if met else "not met"))
    return out


def format_value(value: float | None, unit: str = "") -> str:
    """``value`` with about 3 significant digits (ints in full below 1e6) and its unit; "n/a" for None.

    ``unit="%"`` multiplies a fraction by 100; ``"x"`` is written right after the number ("2.17x"); seconds
    below 0.1 are shown in ms.
    """
    if value is None or not math.isfinite(value):
        return "n/a"
    if unit == "%":
        return f"{100 * value:.1f} %"
    if unit == "s" and 0 < abs(value) < 0.1:
        return f"{1e3 * value:.2g} ms"
    mag = abs(value)
    if isinstance(value, int) or mag >= 1e6:
        text = f"{value:.3g}" if mag >= 1e6 else str(value)
    elif mag >= 100:
        text = f"{value:.0f}"
    elif mag >= 10:
        text = f"{value:.1f}"
    elif mag >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    if not unit:
        return text
    return f"{text}x" if unit == "x" else f"{text} {unit}"


def _runs_text(row: Row) -> str:
    if len(row.runs) < 2:
        return ""
    return "runs " + ", ".join(format_value(r, "" if row.unit == "x" else row.unit).split(" ")[0] for r in row.runs)


def render(figures: Sequence[Figure], results: Sequence[TargetResult], header: Sequence[str] = ()) -> str:
    """The suite's report as plain text: a header, one block per figure, then the targets.

    Each block has the figure's title, its workload and one line per row: label, value (the median of
    the runs for timings) and the individual runs.
    """
    lines = [*header, ""]
    width = max([len(r.label) for f in figures for r in f.rows] + [24])
    for n, fig in enumerate(figures, start=1):
        lines.append(f"[{n}] {fig.key}: {fig.title}")
        if fig.workload:
            lines.append(f"    workload: {fig.workload}")
        if fig.skipped:
            lines.append(f"    skipped: {fig.skipped}")
        for row in fig.rows:
            value = format_value(row.value, row.unit)
            extra = "  ".join(x for x in (_runs_text(row), row.note) if x)
            lines.append(f"    {row.label:<{width}}  {value:>14}  {extra}".rstrip())
        lines.append(f"    ({fig.seconds:.0f} s)" if not fig.skipped else "")
        lines.append("")
    lines.append("Targets (issues 14 and 39; printed, never asserted)")
    for r in results:
        t = r.target
        space = "" if t.unit == "x" else " "
        limit = f"{100 * t.threshold:g} %" if t.unit == "%" else f"{t.threshold:g}{space}{t.unit}"
        bound = f"{'>=' if t.at_least else '<='} {limit}"
        measured = format_value(r.measured, t.unit) if r.measured is not None else (t.how or "-")
        lines.append(f"  {r.status.upper():<13} {t.name}")
        lines.append(f"  {'':<13} measured {measured}; target {bound}")
    return "\n".join(lines) + "\n"


def git_revision(root: str | Path) -> tuple[str, bool]:
    """``(short commit sha, working tree has uncommitted changes)`` of the repository at ``root``;
    ``("unknown", False)`` outside git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=30).stdout

    try:
        sha = git("rev-parse", "--short", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.SubprocessError):
        return "unknown", False
    return sha or "unknown", dirty


def result_path(folder: str | Path, sha: str, when: datetime) -> Path:
    """``<folder>/<sha>-<YYYYmmdd-HHMMSS>.json``: one file per run, sortable by time within a commit."""
    return Path(folder) / f"{sha}-{when:%Y%m%d-%H%M%S}.json"


def _finite(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (strict JSON has no NaN or Infinity)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def to_payload(meta: Mapping[str, Any], figures: Sequence[Figure], results: Sequence[TargetResult]) -> dict[str, Any]:
    """The JSON document of one suite run: ``meta`` (commit, machine, arguments), figures, targets."""
    return _finite({
        "meta": dict(meta),
        "figures": [asdict(f) for f in figures],
        "targets": [{"name": r.target.name, "metric": r.target.metric, "threshold": r.target.threshold,
                     "at_least": r.target.at_least, "measured": r.measured, "status": r.status} for r in results],
    })


def write_results(path: str | Path, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` as indented strict JSON to ``path`` (parent folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(payload), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path
