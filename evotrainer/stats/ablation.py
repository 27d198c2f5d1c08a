"""The ablation study's table: arms × seeds at an equal rollout budget, pooled over seeds.

Does the outer loop earn its place? ``python -m evotrainer -m +study=ablation`` runs the same job under each
*arm* (``outer.candidate_source``: ``coevolve``, ``frozen_harness``, ``random_harness``; ``coevolve_strategy`` for
CMA-ES runs that also evolve the inner loop's strategy knobs, ``+study=ablation_strategy``; a peer optimiser such
as ``benchmarks/gepa_arm.py`` adds its own arm) for several seeds, each stopped by the same
``outer.budget.rollouts``. Each run ends with its final best and its best seed scored item by item on the
held-out part of the meta-validation set (and, with ``task.transfer_path``, on real items no selection
used). This module turns those per-item scores into one table:

- per arm, ``final best − best seed`` on the held-out items and on the transfer items (and final best −
  plain prompt on the transfer items);
- arm against arm, ``reference − other`` between the two arms' final bests on the same items, paired by seed
  (the reference is the first arm of :data:`ARMS` present: ``coevolve_strategy`` when the strategy study is tabled
  with the ablation study, else ``coevolve``: ``coevolve − frozen_harness``, ``coevolve − random_harness``,
  ``coevolve − gepa``); the best seed of a seed is the same in every product arm (generation 0 does not depend
  on the arm), so the two rows agree;
- per arm, the counted rollouts (:func:`evotrainer.archive.schema.budget_rollouts`) next to the budget, and
  the wall time, so that the equality of budgets is visible.

Every difference is pooled over seeds by a cluster bootstrap over items
(:func:`evotrainer.stats.bootstrap.cluster_difference`: each item's difference averaged over the seeds, items
resampled; Davison & Hinkley 1997, sec. 3.8): seeds of one study share their items, so treating seeds × items
as independent draws would give an interval too narrow by about sqrt(seeds). Wins / losses / ties count
(seed, item) pairs. The interval holds the seeds fixed: how sure the mean over these seeds is, given the items.

A peer arm that is not an EvoTrainer run writes its per-item scores as an *arm result* file
(:data:`ARM_RESULT_NAME`, :func:`write_arm_result`) in a folder the study table reads (``archive sweep``).
Pure apart from that file's reading and writing: records in, numbers out. S_val in [0, 1], higher is better.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.markup import escape
from rich.table import Table

from evotrainer.atomic import write_text_atomic
from evotrainer.errors import DataError
from evotrainer.stats.bootstrap import ClusterDifference, cluster_difference, finite, rng_for
from evotrainer.stats.generalisation import format_diff

__all__ = ["ARMS", "ARM_RESULT_NAME", "ARM_RESULT_VERSION", "ArmRun", "ItemScores", "StudyRow", "StudyTable",
           "read_arm_result", "render_study", "study_notes", "study_table", "to_payload", "write_arm_result"]

ARMS: tuple[str, ...] = ("coevolve_strategy", "coevolve", "frozen_harness", "random_harness", "gepa")
"""The study's arms in display order (an arm not listed follows, sorted); the first present is the reference."""
ARM_RESULT_NAME = "arm_result.json"
"""File name of a peer arm's result (:func:`write_arm_result`)."""
ARM_RESULT_VERSION = 1

_ROLES = ("best_seed", "final_best", "plain_prompt")
_ARM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a peer's arm name is printed: no markup, no control characters


@dataclass(frozen=True)
class ItemScores:
    """Per-item S_val of a run's policies on one item set (the held-out items, or the transfer items).

    Attributes:
        item_ids: task ids, shape (n,); runs of one study share them.
        roles: role -> per-item S_val in [0, 1], each shape (n,), in ``item_ids`` order; ``best_seed`` and
            ``final_best`` always, ``plain_prompt`` on transfer items when the run had one.
    """

    item_ids: tuple[str, ...]
    roles: Mapping[str, tuple[float, ...]]

    def diff(self, a: str, b: str) -> np.ndarray | None:
        """``roles[a] − roles[b]``, shape (n,), or None when a role is missing."""
        if a not in self.roles or b not in self.roles:
            return None
        return np.asarray(self.roles[a], dtype=float) - np.asarray(self.roles[b], dtype=float)


@dataclass(frozen=True)
class ArmRun:
    """One finished run of one arm.

    Attributes:
        arm: the arm's name (``outer.candidate_source`` of an EvoTrainer run, or the peer's, e.g. ``gepa``).
        seed: the run's root seed (pairs runs of different arms).
        run_id: the run's id (an archive's run id, or the peer's own).
        source: where it was read (an ``archive.db`` or an :data:`ARM_RESULT_NAME` file).
        rollouts: policy rollouts it spent toward the budget (:func:`~evotrainer.archive.schema.budget_rollouts`).
        budget: its ``outer.budget.rollouts``, or None (no rollout budget).
        seconds: its wall time, or None when unknown.
        heldout: the best seed and the final best on the held-out items, or None.
        transfer: the best seed, the final best (and the plain prompt) on the transfer items, or None.
    """

    arm: str
    seed: int
    run_id: str
    source: str
    rollouts: int
    budget: int | None = None
    seconds: float | None = None
    heldout: ItemScores | None = None
    transfer: ItemScores | None = None


@dataclass(frozen=True)
class StudyRow:
    """One row of the study table.

    Attributes:
        kind: "arm" (``arm``'s final best − its best seed) or "versus" (``arm``'s final best − ``other``'s).
        arm, other: the arms compared (``other`` None for an "arm" row).
        label: e.g. "coevolve: final best − best seed", "coevolve − frozen_harness".
        seeds: the seeds pooled.
        heldout, transfer: the pooled differences on the held-out and the transfer items (None: no items).
        transfer_plain: final best − plain prompt on the transfer items ("arm" rows), or None.
        rollouts, budgets, seconds: per pooled run, in ``seeds`` order ("arm" rows; empty for "versus").
    """

    kind: str
    arm: str
    other: str | None
    label: str
    seeds: tuple[int, ...]
    heldout: ClusterDifference | None
    transfer: ClusterDifference | None
    transfer_plain: ClusterDifference | None = None
    rollouts: tuple[int, ...] = ()
    budgets: tuple[int | None, ...] = ()
    seconds: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class StudyTable:
    """The study: ``arms`` in display order, ``rows`` (the arms, then each arm against the reference),
    ``budgets_equal`` (every run had the same ``outer.budget.rollouts``, not None), ``duplicates`` (sources left
    out: a second run of the same arm and seed), ``level`` (interval coverage), ``runs`` (runs tabled)."""

    arms: tuple[str, ...]
    rows: tuple[StudyRow, ...]
    budgets_equal: bool
    duplicates: tuple[str, ...] = ()
    level: float = 0.95
    runs: int = 0


def _arm_order(arms: Sequence[str]) -> tuple[str, ...]:
    known = [a for a in ARMS if a in arms]
    return (*known, *sorted(a for a in set(arms) if a not in ARMS))


def _pool(parts: Sequence[tuple[Sequence[str], np.ndarray]], seed: int, labels: Sequence[str], level: float,
          n_resamples: int) -> ClusterDifference | None:
    return cluster_difference(parts, rng=rng_for(seed, "ablation", *labels), level=level, n_resamples=n_resamples)


def _aligned(a: ItemScores, b: ItemScores) -> tuple[list[str], np.ndarray] | None:
    """Items both runs scored (in ``a``'s order) and ``a.final_best − b.final_best`` on them, or None."""
    if "final_best" not in a.roles or "final_best" not in b.roles:
        return None
    where = {item: i for i, item in enumerate(b.item_ids)}
    common = [(i, where[item]) for i, item in enumerate(a.item_ids) if item in where]
    if not common:
        return None
    va, vb = np.asarray(a.roles["final_best"], dtype=float), np.asarray(b.roles["final_best"], dtype=float)
    return [a.item_ids[i] for i, _ in common], np.asarray([va[i] - vb[j] for i, j in common])  # (n_common,)


def _arm_row(arm: str, own: Sequence[ArmRun], seed: int, *, level: float, n_resamples: int) -> StudyRow:
    """``arm``'s final best − best seed (and − plain prompt on transfer items), pooled over its runs."""
    def split(items: str, a: str, b: str) -> ClusterDifference | None:
        parts = [(sc.item_ids, d) for r in own if (sc := getattr(r, items)) is not None
                 and (d := sc.diff(a, b)) is not None]
        return _pool(parts, seed, (arm, items, a, b), level, n_resamples)

    return StudyRow("arm", arm, None, f"{arm}: final best − best seed", tuple(r.seed for r in own),
                    split("heldout", "final_best", "best_seed"), split("transfer", "final_best", "best_seed"),
                    split("transfer", "final_best", "plain_prompt"), tuple(r.rollouts for r in own),
                    tuple(r.budget for r in own), tuple(r.seconds for r in own))


def study_table(runs: Sequence[ArmRun], *, seed: int = 0, level: float = 0.95, n_resamples: int = 2000) -> StudyTable:
    """The study table of ``runs`` (module docstring).

    Args:
        runs: finished runs of any arms and seeds; a second run of the same (arm, seed) is left out (listed in
            ``duplicates``), the first one kept.
        seed: bootstrap seed; each cell's generator is ``rng_for(seed, "ablation", <row>, <items>)``.
        level: interval coverage in (0, 1); n_resamples: bootstrap resamples, >= 1.
    """
    by_arm: dict[str, dict[int, ArmRun]] = {}
    duplicates: list[str] = []
    for r in runs:
        slot = by_arm.setdefault(r.arm, {})
        if r.seed in slot:
            duplicates.append(r.source)
            continue
        slot[r.seed] = r
    arms = _arm_order(list(by_arm))
    rows = [_arm_row(arm, [by_arm[arm][s] for s in sorted(by_arm[arm])], seed, level=level, n_resamples=n_resamples)
            for arm in arms]
    if arms:
        ref = arms[0]
        for other in arms[1:]:
            seeds = sorted(set(by_arm[ref]) & set(by_arm[other]))
            cells: dict[str, ClusterDifference | None] = {}
            for items in ("heldout", "transfer"):
                parts = []
                for s in seeds:
                    a, b = getattr(by_arm[ref][s], items), getattr(by_arm[other][s], items)
                    if a is not None and b is not None and (al := _aligned(a, b)) is not None:
                        parts.append(al)
                cells[items] = _pool(parts, seed, (ref, other, items), level, n_resamples)
            rows.append(StudyRow("versus", ref, other, f"{ref} − {other}", tuple(seeds), cells["heldout"],
                                 cells["transfer"]))
    budgets = {r.budget for arm in by_arm.values() for r in arm.values()}
    return StudyTable(arms, tuple(rows), len(budgets) == 1 and None not in budgets, tuple(duplicates), float(level),
                      sum(len(v) for v in by_arm.values()))


# --- display ---------------------------------------------------------------------------------------------


def _cell(c: ClusterDifference | None) -> str:
    if c is None:
        return "–"
    text = escape(format_diff(c.diff))
    return f"[green]{text}[/]" if c.diff.low > 0 else f"[red]{text}[/]" if c.diff.high < 0 else text


def _wlt(c: ClusterDifference | None) -> str:
    return "–" if c is None else f"{c.wins}/{c.losses}/{c.ties}"


def _spread(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "–"
    mean, low, high = (format(float(x), fmt) for x in (np.mean(values), min(values), max(values)))
    return mean if low == high else f"{mean} ({low}–{high})"


def _rollouts(row: StudyRow) -> str:
    if row.kind != "arm":
        return "–"
    budgets = sorted({b for b in row.budgets if b is not None})
    tail = "" if not budgets else " / " + ",".join(f"{b:,}" for b in budgets)
    return _spread([float(r) for r in row.rollouts], ",.0f") + tail


def _minutes(row: StudyRow) -> str:
    known = [s / 60 for s in row.seconds if s is not None]
    return f"{np.mean(known):.1f}" if row.kind == "arm" and known else "–"


def _seeds(table: StudyTable) -> str:
    """``seeds 0,1,2`` when every row pooled the same seeds, else each row's seeds."""
    sets = {r.seeds for r in table.rows}
    if len(sets) == 1:
        return "seeds " + ",".join(map(str, next(iter(sets))))
    return "seeds " + "; ".join(f"{r.label}: {','.join(map(str, r.seeds)) or 'none'}" for r in table.rows)


def render_study(table: StudyTable) -> Table:
    """A rich table of ``table``: one row per arm (its final best − its best seed), then one per arm against the
    reference (their final bests); intervals above 0 green, below 0 red; rollouts as ``mean (min–max) / budget``,
    mean wall time in minutes. About 160 columns wide."""
    pct = f"{round(table.level * 100)}% CI"
    t = Table(title=f"ablation study: {table.runs} run(s) of {len(table.arms)} arm(s), {_seeds(table)}; an arm row is "
                    "its final best − its best seed, an a − b row the two arms' final bests (S_val, higher is "
                    "better; pooled over seeds by a cluster bootstrap over items)", title_justify="left")
    cols = ("arm / arm − arm", f"held-out Δ [{pct}]", "W/L/T", f"transfer Δ [{pct}]", "W/L/T",
            "transfer: final best − plain prompt", "rollouts / budget", "wall min")
    for i, col in enumerate(cols):
        t.add_column(escape(col), justify="left" if i == 0 else "right", no_wrap=i != 5)
    for row in table.rows:
        t.add_row(escape(row.arm if row.kind == "arm" else row.label), _cell(row.heldout), _wlt(row.heldout),
                  _cell(row.transfer), _wlt(row.transfer), _cell(row.transfer_plain), _rollouts(row), _minutes(row))
    return t


def study_notes(table: StudyTable) -> list[str]:
    """Plain sentences under the table: whether the budgets were equal, and the runs left out."""
    arm_rows = [r for r in table.rows if r.kind == "arm"]
    budgets = sorted({b for r in arm_rows for b in r.budgets if b is not None})
    if table.budgets_equal:
        used = [n for r in arm_rows for n in r.rollouts]
        lines = [f"equal budgets: every run stopped by outer.budget.rollouts={budgets[0]:,} (checked before each "
                 f"harness candidate, so a run ends at the first candidate boundary past it; counted "
                 f"{min(used):,}–{max(used):,} over all runs)"]
    else:
        lines = ["budgets NOT equal: " + ", ".join(
            f"{r.arm} {sorted({'none' if b is None else f'{b:,}' for b in r.budgets})}" for r in arm_rows)
            + " (outer.budget.rollouts)"]
    lines += [f"left out (a second run of the same arm and seed): {s}" for s in table.duplicates]
    return lines


def _diff_payload(c: ClusterDifference | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {**asdict(c.diff), "runs": c.runs, "pairs": c.pairs, "wins": c.wins, "losses": c.losses, "ties": c.ties}


def to_payload(table: StudyTable) -> dict[str, Any]:
    """JSON-ready dict of ``table`` (``archive sweep --json``: ``study``)."""
    return {"arms": list(table.arms), "budgets_equal": table.budgets_equal, "level": table.level,
            "runs": table.runs, "duplicates": list(table.duplicates), "notes": study_notes(table),
            "rows": [{"kind": r.kind, "arm": r.arm, "other": r.other, "label": r.label, "seeds": list(r.seeds),
                      "heldout": _diff_payload(r.heldout), "transfer": _diff_payload(r.transfer),
                      "transfer_plain": _diff_payload(r.transfer_plain), "rollouts": list(r.rollouts),
                      "budgets": list(r.budgets), "seconds": list(r.seconds)} for r in table.rows]}


# --- a peer arm's result file ------------------------------------------------------------------------------


def _scores_payload(s: ItemScores | None) -> dict[str, Any] | None:
    return None if s is None else {"item_ids": list(s.item_ids), "roles": {k: list(v) for k, v in s.roles.items()}}


def write_arm_result(folder: str | Path, run: ArmRun, extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``run`` as ``folder/arm_result.json`` (atomic), where ``archive sweep`` finds it.

    Args:
        folder: the arm's output folder (created when missing), e.g. inside the study's sweep folder.
        run: the run; ``source`` is not stored (the file is the source).
        extra: more JSON-ready facts kept under ``"extra"`` (the peer's settings, its best prompt, ...).

    Returns:
        The file written.
    """
    doc = {"version": ARM_RESULT_VERSION, "arm": run.arm, "seed": run.seed, "run_id": run.run_id,
           "rollouts": run.rollouts, "budget": run.budget, "seconds": run.seconds,
           "heldout": _scores_payload(run.heldout), "transfer": _scores_payload(run.transfer),
           "extra": dict(extra or {})}
    path = Path(folder) / ARM_RESULT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n")


def _scores_from(d: Any, where: str) -> ItemScores | None:
    if d is None:
        return None
    if not isinstance(d, dict) or not isinstance(d.get("item_ids"), list) or not isinstance(d.get("roles"), dict):
        raise DataError(f"{where}: expected {{'item_ids': [...], 'roles': {{role: [...]}}}}")
    ids = tuple(str(x) for x in d["item_ids"])
    roles: dict[str, tuple[float, ...]] = {}
    for role, values in d["roles"].items():
        ok = (role in _ROLES and isinstance(values, list) and len(values) == len(ids)
              and all(finite(v) is not None for v in values))
        if not ok:
            raise DataError(f"{where}.roles.{role}: expected one of {_ROLES} with {len(ids)} finite scores")
        roles[role] = tuple(float(v) for v in values)
    if "final_best" not in roles or "best_seed" not in roles:
        raise DataError(f"{where}.roles: final_best and best_seed are required")
    return ItemScores(ids, roles)


def read_arm_result(path: str | Path) -> ArmRun:
    """The :class:`ArmRun` in an :data:`ARM_RESULT_NAME` file (its ``source`` is the path).

    Raises:
        DataError: unreadable, not JSON, a newer version, or a field of the wrong type (named).
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: unreadable arm result ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), int) or doc["version"] > ARM_RESULT_VERSION:
        raise DataError(f"{path}: not an arm result of version <= {ARM_RESULT_VERSION}")

    def field_of(key: str, kind: type | tuple[type, ...], optional: bool = False) -> Any:
        value = doc.get(key)
        if (value is None and optional) or (isinstance(value, kind) and not isinstance(value, bool)):
            return value
        raise DataError(f"{path}: field {key!r}: expected {getattr(kind, '__name__', kind)}, got {value!r}")

    seconds = field_of("seconds", (int, float), optional=True)
    arm = field_of("arm", str)
    if not _ARM_NAME.fullmatch(arm):
        raise DataError(f"{path}: field 'arm': expected a name of letters, digits, '_', '-' or '.', got {arm!r}")
    return ArmRun(arm, int(field_of("seed", int)), str(field_of("run_id", str)), str(path),
                  int(field_of("rollouts", int)), field_of("budget", int, optional=True),
                  None if seconds is None else float(seconds), _scores_from(doc.get("heldout"), f"{path}: heldout"),
                  _scores_from(doc.get("transfer"), f"{path}: transfer"))
