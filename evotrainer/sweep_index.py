"""The sweep index: ``sweep_index.json`` in a Hydra multirun folder, one record per job.

A sweep of many jobs leaves many folders; this small file says which job ran with which overrides, how
it ended (the one-line error of a failed job) and its headline figures, so a sweep can be read (or
compared with ``python -m evotrainer.archive sweep <sweep dir>``) without opening every log. It is kept
by :class:`evotrainer.app.sweep_callback.SweepIndexCallback` (``hydra.callbacks`` in ``conf/config.yaml``).

Format (``version`` 1), a JSON object::

    {"version": 1, "sweep_dir": str, "started": ISO time, "ended": ISO time | null,
     "status": "running" | "ok" | "failed" | "killed", "planned_jobs": int | null, "launcher": str,
     "overrides": [the sweep's command-line overrides], "host": str, "pid": int (the launching process),
     "error": str | null (one line: why the sweep itself failed, when no job says it),
     "jobs": [{"num": int, "folder": str (relative to the sweep folder), "overrides": [str],
               "status": "running" | "ok" | "failed" | "killed", "error": str | null (one line),
               "host": str, "pid": int, "lock": bool (the job holds its lock file),
               "started": ISO time, "ended": ISO time | null, "seconds": float | null,
               "mode": str | null, "run_id": str | null,
               "s_val": the final best's S_val on the selection items, in [0, 1] | null,
               "initial_s_val": the best seed's S_val on the same items | null,
               "heldout_s_val": the final best on the held-out items | null,
               "heldout_diff": {"mean", "low", "high", "n"} final best minus best seed, paired | null,
               "held": true | false | null, "stop_reason": str | null}]}

Jobs are sorted by ``num``; figures are null where the job has none (a failed job, ``mode=evaluate``).

**A dead writer is told from a live one by its lock** (as the run lock of ``evotrainer/run/resume.py``): the
launching process holds an ``flock`` on ``.sweep.lock`` in the sweep folder, and each job's process holds
one on ``.job.lock`` in its job folder from ``on_job_start`` to ``on_job_end``. The kernel releases a lock
when its process dies, ``SIGKILL`` from the out-of-memory killer included (joblib#812, hydra#3458: the job
never reaches ``on_job_end``). :func:`read_index` therefore reports a ``running`` job whose lock is free as
``killed`` (and a ``running`` sweep whose launcher's lock is free as ``killed``), and :func:`update_index`
writes that down. Only records written on this host are judged (``host``; a lock on a shared filesystem
says nothing about another machine's processes); where no lock could be taken (``lock`` false), whether the
recorded ``pid`` still exists decides.

Writes are atomic (:func:`evotrainer.atomic.write_text_atomic`) and serialised by a
:class:`filelock.FileLock` on ``.sweep_index.lock`` beside it, since parallel jobs (joblib's worker
processes) update the file at the same time.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from evotrainer.atomic import write_text_atomic

__all__ = ["INDEX_NAME", "INDEX_VERSION", "JOB_LOCK_NAME", "KILLED_ERROR", "SWEEP_LOCK_NAME", "find_index",
           "hold_lock", "mark_dead", "now_iso", "planned_jobs", "read_index", "update_index"]

INDEX_NAME = "sweep_index.json"
"""File name of the index inside the sweep folder."""
INDEX_VERSION = 1
_LOCK_NAME = ".sweep_index.lock"
_LOCK_TIMEOUT_S = 60.0
SWEEP_LOCK_NAME = ".sweep.lock"
"""Lock file in the sweep folder, held by the launching process while the sweep runs."""
JOB_LOCK_NAME = ".job.lock"
"""Lock file in a job's folder, held by the job's process while the job runs."""
KILLED_ERROR = ("its process ended without reporting (killed by the OS, e.g. out of memory, by a signal, or "
                "with its sweep); see the end of its log")
"""The ``error`` of a job found dead (:func:`mark_dead`)."""


def _flock(fd: int) -> bool:
    """Take an exclusive non-blocking ``flock`` on ``fd``; False when another process holds it or the
    filesystem has no locks."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def hold_lock(path: str | Path) -> int | None:
    """Open ``path`` (created when missing) and hold an exclusive ``flock`` on it until the returned file
    descriptor is closed or this process ends; None when it cannot be taken (no locks on this filesystem,
    not POSIX, or another process holds it). The descriptor is not inherited by programs this process
    starts (PEP 446), so a child cannot keep a dead job looking alive."""
    try:
        fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    if _flock(fd):
        return fd
    os.close(fd)
    return None


def _lock_free(path: Path) -> bool | None:
    """True when no process holds ``path``'s lock (its holder died or ended), False when one does, None
    when unknown (no such file, or no locks here)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            import fcntl
        except ImportError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:  # ENOLCK / ENOSYS: this filesystem has no locks
            return None
        return True
    finally:
        os.close(fd)  # closing drops the shared lock taken just now


def _pid_gone(pid: object) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by another user
        return False
    return False


def _dead(record: dict[str, Any], lock: Path) -> bool:
    """Whether the process that wrote ``record`` (a job, or the sweep) is known to be dead."""
    if record.get("status") != "running" or record.get("host") != socket.gethostname():
        return False
    if record.get("lock"):
        return _lock_free(lock) is True
    return _pid_gone(record.get("pid"))


def mark_dead(doc: dict[str, Any], sweep_dir: str | Path) -> list[int]:
    """Mark, in place, every ``running`` job of ``doc`` whose process is dead as ``killed`` (error
    :data:`KILLED_ERROR`), and a ``running`` sweep whose launching process is dead as ``killed`` (ended
    now). Records of another host are left alone (module docstring).

    Returns:
        The numbers of the jobs marked just now.
    """
    folder = Path(sweep_dir)
    marked = []
    for job in doc["jobs"]:
        if isinstance(job, dict) and _dead(job, folder / str(job.get("folder", "")) / JOB_LOCK_NAME):
            job.update(status="killed", error=KILLED_ERROR)
            marked.append(job.get("num"))
    if _dead(doc, folder / SWEEP_LOCK_NAME):
        doc.update(status="killed", ended=now_iso())
    return marked


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second (``2026-12-01T12:00:00+00:00``)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _empty(sweep_dir: Path) -> dict[str, Any]:
    return {"version": INDEX_VERSION, "sweep_dir": str(sweep_dir), "started": now_iso(), "ended": None,
            "status": "running", "planned_jobs": None, "launcher": "", "overrides": [], "jobs": []}


def read_index(path: str | Path, *, check_live: bool = True) -> dict[str, Any]:
    """The index at ``path`` (the file, or the sweep folder holding it).

    With ``check_live`` (the default) a ``running`` job or sweep whose process is dead is reported as
    ``killed`` (:func:`mark_dead`; the file itself is not rewritten here).

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
    if check_live:
        mark_dead(doc, path.parent)
    return doc


def find_index(folder: str | Path) -> Path | None:
    """``folder/sweep_index.json`` when ``folder`` is a sweep folder holding one, else None."""
    path = Path(folder) / INDEX_NAME
    return path if path.is_file() else None


def update_index(sweep_dir: str | Path, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read the index of ``sweep_dir`` (a fresh one when absent or unreadable; dead jobs marked
    ``killed``, :func:`mark_dead`), apply ``change`` to it in place, sort the jobs by number, and write it
    back atomically, all under the index lock.

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
