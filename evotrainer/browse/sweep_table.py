"""The jobs of a sweep side by side, from its ``sweep_index.json`` (``archive sweep <sweep dir>``).

One row per job of each sweep folder given: the overrides that set the job apart from the other jobs of
its sweep, its status (the one-line error of a failed job), the final best's S_val on the selection
items, the best seed's, and the held-out difference (final best minus best seed, paired) with its
interval, as the callback :class:`evotrainer.app.sweep_callback.SweepIndexCallback` recorded them. Index
text (overrides, errors) is printed terminal-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from evotrainer.browse.textsafe import clip, fmt, terminal_safe
from evotrainer.browse.transfer_view import diff_cell
from evotrainer.errors import ArchiveError
from evotrainer.sweep_index import INDEX_NAME, find_index, read_index

__all__ = ["index_jobs", "render_jobs", "sweep_status"]

_STATUS_STYLE = {"ok": "green", "failed": "red", "killed": "red", "running": "yellow"}
_MAX_INDEXES = 1000


def _distinct(overrides: Sequence[Sequence[str]]) -> list[list[str]]:
    """Each job's overrides less those every job of the sweep shares (all of them when only one job)."""
    if len(overrides) < 2:
        return [list(o) for o in overrides]
    shared = set(overrides[0]).intersection(*map(set, overrides[1:]))
    return [[o for o in job if o not in shared] for job in overrides]


def _indexes(folder: str | Path) -> list[Path]:
    """The sweep index of ``folder``, else every one below it (``archive/multirun/``), sorted, at most 1000."""
    own = find_index(folder)
    if own is not None:
        return [own]
    root = Path(folder)
    return sorted(root.rglob(INDEX_NAME))[:_MAX_INDEXES] if root.is_dir() else []


def index_jobs(folders: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every job listed by the sweep indexes at or below the given folders (folders without one are skipped).

    Returns:
        One dict per job, in sweep then job-number order: the index's job fields (see
        :mod:`evotrainer.sweep_index`) plus ``sweep`` (the sweep folder), ``sweep_status`` and
        ``distinct`` (the overrides not shared by every job of that sweep).

    Raises:
        ArchiveError: an index that is not readable JSON of a known version.
    """
    rows: list[dict[str, Any]] = []
    paths = [p for folder in folders for p in _indexes(folder)]
    for path in dict.fromkeys(paths):  # a sweep given twice is listed once
        folder = path.parent
        try:
            doc = read_index(path)
        except (OSError, ValueError) as exc:
            raise ArchiveError(f"{path}: unreadable sweep index ({exc})") from None
        jobs = [j for j in doc["jobs"] if isinstance(j, dict)]
        distinct = _distinct([[str(o) for o in j.get("overrides") or []] for j in jobs])
        for job, own in zip(jobs, distinct, strict=True):
            rows.append({**job, "sweep": str(folder), "sweep_status": doc.get("status"), "distinct": own})
    return rows


def sweep_status(folder: str | Path) -> dict[str, Any] | None:
    """The sweep-level fields of ``folder``'s index (status, planned_jobs, started, ended, launcher, error), or
    None. A sweep whose launching process died is ``killed`` (:func:`evotrainer.sweep_index.mark_dead`)."""
    path = find_index(folder)
    if path is None:
        return None
    doc = read_index(path)
    return {k: doc.get(k) for k in ("status", "planned_jobs", "started", "ended", "launcher", "error")}


def render_jobs(rows: Sequence[dict[str, Any]]) -> Table:
    """A rich table of :func:`index_jobs` rows: job, folder, overrides, status, final S_val, best seed
    S_val, held-out difference [95% CI of the run], held."""
    table = Table(title="jobs of the sweep (from sweep_index.json; S_val on the selection items, higher is "
                        "better; held-out difference = final best - best seed, paired)", title_justify="left")
    for col in ("job", "folder", "overrides", "status", "final S_val", "best seed S_val", "held-out diff",
                "held"):
        table.add_column(col, justify="right" if col in ("job", "final S_val", "best seed S_val") else "left",
                         overflow="fold" if col == "folder" else "ellipsis")
    held_words = {True: ("yes", "green"), False: ("no", "red")}
    several = len({r.get("sweep") for r in rows}) > 1
    for r in rows:
        status = str(r.get("status") or "?")
        folder = str(r.get("folder", ""))
        if several:  # name the sweep too: every sweep has a 0_seed0
            folder = f"{Path(str(r.get('sweep'))).name}/{folder}"
        cell = Text(status, style=_STATUS_STYLE.get(status, ""))
        if r.get("error"):
            cell.append(": " + clip(r["error"], 120))
        held, style = ("–", "")
        if r.get("status") == "ok" and isinstance(r.get("heldout_diff"), dict):
            held, style = held_words.get(r.get("held"), ("undecided", "yellow"))
        table.add_row(str(r.get("num", "?")), Text(terminal_safe(folder)),
                      Text(clip(" ".join(r.get("distinct") or r.get("overrides") or []), 80)), cell,
                      Text(fmt(r.get("s_val"))), Text(fmt(r.get("initial_s_val"))), diff_cell(r.get("heldout_diff")),
                      Text(held, style=style))
    return table
