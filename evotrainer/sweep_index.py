"""The sweep index: ``sweep_index.json`` in a Hydra multirun folder, one record per job.

A sweep of many jobs leaves many folders; this small file says which job ran with which overrides, how
it ended (the one-line error of a failed job) and its headline figures, so a sweep can be read (or
compared with ``python -m evotrainer.archive sweep <sweep dir>``) without opening every log. It is kept
by :class:`evotrainer.sweep_callback.SweepIndexCallback` (``hydra.callbacks`` in ``conf/config.yaml``).

Format (``version`` 1), a JSON object::

    {"version": 1, "sweep_dir": str, "started": ISO time, "ended": ISO time | null,
     "status": "running" | "ok" | "failed", "planned_jobs": int | null, "launcher": str,
     "overrides": [the sweep's command-line overrides],
     "jobs": [{"num": int, "folder": str (relative to the sweep folder), "overrides": [str],
               "status": "running" | "ok" | "failed", "error": str | null (one line),
               "started": ISO time, "ended": ISO time | null, "seconds": float | null,
               "mode": str | null, "run_id": str | null,
               "s_val": the final best's S_val on the selection items, in [0, 1] | null,
               "initial_s_val": the best seed's S_val on the same items | null,
               "heldout_s_val": the final best on the held-out items | null,
               "heldout_diff": {"mean", "low", "high", "n"} final best minus best seed, paired | null,
               "held": true | false | null, "stop_reason": str | null}]}

Jobs are sorted by ``num``; figures are null where the job has none (a failed job, ``mode=evaluate``).
Writes are atomic (:func:`evotrainer.atomic.write_text_atomic`) and serialised by a
:class:`filelock.FileLock` on ``.sweep_index.lock`` beside it, since parallel jobs (joblib's worker
processes) update the file at the same time.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from evotrainer.atomic import write_text_atomic

__all__ = [
    "INDEX_NAME",
    "INDEX_VERSION",
    "find_index",
    "now_iso",
    "planned_jobs",
    "read_index",
    "update_index",
]

INDEX_NAME = "sweep_index.json"
"""File name of the index inside the sweep folder."""
INDEX_VERSION = 1
_LOCK_NAME = ".sweep_index.lock"
_LOCK_TIMEOUT_S = 60.0


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second (``2026-12-01T12:00:00+00:00``)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _empty(sweep_dir: Path) -> dict[str, Any]:
    return {"version": INDEX_VERSION, "sweep_dir": str(sweep_dir), "started": now_iso(), "ended": None,
            "status": "running", "planned_jobs": None, "launcher": "", "overrides": [], "jobs": []}


def read_index(path: str | Path) -> dict[str, Any]:
    """The index at ``path`` (the file, or the sweep folder holding it).

    Raises:
        OSError: no such file.
        ValueError: not a JSON object of a known version (``json.JSONDecodeError`` is a ValueError).
    """
    path = Path(path)
    if path.is_dir():
        path = path / INDEX_NAME
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ValueError(f"{path}: not a sweep index (expected an object with a 'jobs' list)")
    version = doc.get("version")
    if not isinstance(version, int) or version > INDEX_VERSION:
        raise ValueError(f"{path}: sweep index version {version!r} is newer than {INDEX_VERSION}")
    return doc


def find_index(folder: str | Path) -> Path | None:
    """``folder/sweep_index.json`` when ``folder`` is a sweep folder holding one, else None."""
    path = Path(folder) / INDEX_NAME
    return path if path.is_file() else None


def update_index(sweep_dir: str | Path, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read the index of ``sweep_dir`` (a fresh one when absent or unreadable), apply ``change`` to it in
    place, sort the jobs by number, and write it back atomically, all under the index lock.

    Args:
        sweep_dir: the sweep folder (created when missing).
        change: edits the index dict in place (see the module docstring for the fields).

    Returns:
        The index as written.

    Raises:
        OSError: the folder is not writable, or ``filelock.Timeout`` (a TimeoutError) when another
            process held the lock for over 60 s.
    """
    folder = Path(sweep_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / INDEX_NAME
    with FileLock(str(folder / _LOCK_NAME), timeout=_LOCK_TIMEOUT_S):
        try:
            doc = read_index(path)
        except (OSError, ValueError):
            doc = _empty(folder)
        change(doc)
        doc["jobs"].sort(key=lambda j: j.get("num", -1) if isinstance(j.get("num"), int) else -1)
        write_text_atomic(path, json.dumps(doc, indent=1, default=str) + "\n")
    return doc


def planned_jobs(overrides: Sequence[str], params: Mapping[str, Any] | None = None,
                 max_batch_size: int | None = None) -> tuple[int, int] | None:
    """(jobs in the sweep, jobs per batch) as Hydra's basic sweeper splits them, or None when unknown.

    Counts with :meth:`hydra._internal.core_plugins.basic_sweeper.BasicSweeper.split_arguments` (the
    sweeper's own split: the product of every discrete sweep's choices), on ``hydra.sweeper.params``
    followed by the command-line overrides, as ``BasicSweeper.sweep`` does.

    Args:
        overrides: the sweep's command-line overrides (``hydra.overrides.task``), e.g. ``["seed=0,1,2"]``.
        params: ``hydra.sweeper.params`` (key -> sweep string), or None.
        max_batch_size: ``hydra.sweeper.max_batch_size`` (None: one batch of every job).

    Returns:
        None when the overrides do not parse without a config loader (a ``glob`` sweep) or hold a sweep
        the basic sweeper cannot enumerate.
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [f"{k}={v}" for k, v in (params or {}).items()] + [str(o) for o in overrides]
    try:
        parsed = OverridesParser.create().parse_overrides(args)
        batches = BasicSweeper.split_arguments(parsed, max_batch_size)
    except Exception:  # hydra raises several types for what it cannot enumerate; the count is then unknown
        return None
    total = sum(len(b) for b in batches)
    return total, max((len(b) for b in batches), default=0)
