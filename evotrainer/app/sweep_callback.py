"""A Hydra callback that keeps the sweep index (:mod:`evotrainer.sweep_index`) of a multirun up to date.

Configured in ``conf/config.yaml``::

    hydra:
      callbacks:
        sweep_index:
          _target_: evotrainer.app.sweep_callback.SweepIndexCallback

Hydra calls it (``hydra.experimental.callback.Callback``; hydra.cc/docs/experimental/callbacks) at
``on_multirun_start`` in the launching process (the index is created with the planned job count), and at
``on_job_start`` / ``on_job_end`` around each job, in the process that runs the job: the launching process
with the basic launcher, a worker process with the joblib launcher, which is why every update goes through
the file (under its lock) and the callback holds no state. ``on_job_end`` reads the job's
:class:`hydra.core.utils.JobReturn`: a failed job's exception gives the one-line error; a finished evolve
job's figures are read from its archive (the ``summary`` and ``generalisation`` events). The last job to end
(or ``on_multirun_end``) sets the sweep's status and end time: Hydra's basic sweeper re-raises the first
failed job's exception after its batch, so ``on_multirun_end`` is not called when a job failed.

A job killed by the OS (out of memory, joblib#812, hydra#3458) never reaches ``on_job_end``: each job's
process holds a lock on ``.job.lock`` in its folder while it runs, and the launching process one on
``.sweep.lock`` in the sweep folder, so readers of the index tell a dead job from a live one and report it
as ``killed`` (:func:`evotrainer.sweep_index.mark_dead`). :func:`launched_sweep` gives the launching process
the folder of the sweep it started, so the command line can close the index and report each failed job
when the sweep itself ends with an error.

A problem with the index (an unwritable folder, a held lock) is logged as a warning and never ends a job
or the sweep. Single runs (no ``-m``) are left alone.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import socket
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

import evotrainer.resolvers  # noqa: F401  (registers ${evotrainer_unique:} in a joblib worker too)
from evotrainer.events.kinds import SelfEvolveSummaryEvent, SummaryEvent
from evotrainer.sweep_index import (
    JOB_LOCK_NAME,
    SWEEP_LOCK_NAME,
    hold_lock,
    now_iso,
    planned_jobs,
    update_index,
)

__all__ = ["SweepIndexCallback", "error_line", "job_figures", "launched_sweep"]

log = logging.getLogger(__name__)
_MAX_ERROR_CHARS = 500
_held: dict[str, int] = {}  # lock file -> descriptor held by this process (the sweep's, the running job's)
_launched: list[Path] = []  # the sweep folder this process launched (on_multirun_start), at most one


def launched_sweep() -> Path | None:
    """The folder of the multirun this process launched (its ``on_multirun_start`` ran here), or None."""
    return _launched[-1] if _launched else None


def _hold(path: Path) -> bool:
    """Hold the lock at ``path`` until :func:`_release` or this process ends; False when it cannot."""
    if str(path) in _held:
        return True
    fd = hold_lock(path)
    if fd is None:
        log.warning("sweep index: no lock on %s (this filesystem may have no locks); a killed process is "
                    "then told by its pid", path)
        return False
    _held[str(path)] = fd
    return True


def _release(path: Path) -> None:
    fd = _held.pop(str(path), None)
    if fd is not None:
        os.close(fd)


def error_line(exc: BaseException) -> str:
    """One line for a failed job: ``"<ExceptionType>: <first line of the message>"``, at most 500 characters."""
    first = (str(exc).strip().splitlines() or [""])[0].strip()
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 1] + "…"


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def job_figures(archive_file: str | Path) -> dict[str, Any]:
    """A finished job's headline figures from its archive (read-only; the job's last run).

    Returns:
        dict with run_id, mode ("evolve" or "selfevolve"), s_val (the final best's S_val on the selection
        items), initial_s_val (the best seed's), heldout_s_val, heldout_diff ({"mean", "low", "high",
        "n"}: final best minus best seed on the held-out items, paired), held (True/False/None) and
        stop_reason, each None where the run has none; for selfevolve s_val is the final policy's
        validation score (that of the last round not reverted: a reverted round's score is its discarded
        adapter's; the baseline's when every round was reverted) and initial_s_val the baseline's. An empty
        dict when there is no archive.

    Raises:
        EvoTrainerError: the archive is unreadable or its generalisation event malformed.
    """
    from evotrainer.archive.store import open_archive
    from evotrainer.browse.views import run_generalisation

    if not Path(archive_file).is_file():
        return {}
    with open_archive(archive_file) as store:
        runs = store.list_runs()
        if not runs:
            return {}
        run_id = runs[-1].run_id
        summaries = store.events(run_id, kind="summary")
        s = summaries[-1].event if summaries else SummaryEvent()
        g = run_generalisation(store, run_id)
    co = s if isinstance(s, SummaryEvent) else SummaryEvent()
    mode = "selfevolve" if isinstance(s, SelfEvolveSummaryEvent) else "evolve"
    out: dict[str, Any] = {"run_id": run_id, "mode": mode,
                           "s_val": _number(co.best_s_val), "initial_s_val": _number(co.initial_s_val),
                           "heldout_s_val": _number(co.heldout_s_val), "heldout_diff": None, "held": None,
                           "stop_reason": co.stop_reason}
    if isinstance(s, SelfEvolveSummaryEvent):
        current = [val for _, status, _, val in s.rounds if status != "reverted"]
        out["s_val"] = _number(current[-1] if current else s.baseline_val)
        out["initial_s_val"] = _number(s.baseline_val)
    if g is not None:
        out["held"] = g.held
        if g.heldout is not None:
            d = g.heldout.diff
            out["heldout_diff"] = {"mean": d.mean, "low": d.low, "high": d.high, "n": d.n}
    return out


def _seconds(start: Any, end: str) -> float | None:
    try:
        return (_dt.datetime.fromisoformat(end) - _dt.datetime.fromisoformat(str(start))).total_seconds()
    except ValueError:
        return None


def _job_dir(config: DictConfig) -> Path:
    return Path(str(config.hydra.runtime.output_dir))


def _sweep_dir(config: DictConfig) -> Path:
    return Path(str(config.hydra.sweep.dir)).absolute()


def _folder(job_dir: Path, sweep_dir: Path) -> str:
    try:
        return str(job_dir.resolve().relative_to(sweep_dir.resolve()))
    except ValueError:  # a subdir outside the sweep folder (an absolute hydra.sweep.subdir)
        return str(job_dir)


def _is_multirun(config: DictConfig) -> bool:
    from hydra.types import RunMode

    return OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN


def _job(doc: dict[str, Any], num: int) -> dict[str, Any]:
    for job in doc["jobs"]:
        if job.get("num") == num:
            return job
    job = {"num": num}
    doc["jobs"].append(job)
    return job


def _close_if_done(doc: dict[str, Any], *, force: bool = False) -> None:
    """Set the sweep's status and end time once no job runs and every planned job has ended (or ``force``):
    ``failed`` when a job failed or was killed, else ``ok``."""
    statuses = [j.get("status") for j in doc["jobs"]]
    planned = doc.get("planned_jobs")
    done = "running" not in statuses and (force or (isinstance(planned, int) and len(statuses) >= planned))
    if done:
        doc["status"] = "failed" if {"failed", "killed"} & set(statuses) else "ok"
        doc["ended"] = now_iso()


class SweepIndexCallback(Callback):
    """Writes ``sweep_index.json`` in the sweep folder of a multirun (format: :mod:`evotrainer.sweep_index`).

    Stateless (each hook reads and rewrites the file under its lock), so it works in joblib's worker
    processes. Every hook swallows its own errors with a warning: the index never fails a job.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Create the index: the sweep's overrides, launcher and planned job count; hold the sweep's lock."""
        sweep_dir = _sweep_dir(config)
        _launched[:] = [sweep_dir]
        host, locked = socket.gethostname(), False
        try:
            sweep_dir.mkdir(parents=True, exist_ok=True)
            locked = _hold(sweep_dir / SWEEP_LOCK_NAME)
        except OSError as exc:
            log.warning("sweep index: %s", error_line(exc))

        def start(doc: dict[str, Any]) -> None:
            overrides = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task) or []]
            params = OmegaConf.select(config, "hydra.sweeper.params")
            params = OmegaConf.to_container(params) if params is not None else None
            counted = planned_jobs(overrides, params, OmegaConf.select(config, "hydra.sweeper.max_batch_size"))
            target = str(OmegaConf.select(config, "hydra.sweeper._target_") or "")
            doc.update(overrides=overrides, started=now_iso(), ended=None, status="running", host=host,
                       pid=os.getpid(), lock=locked,
                       launcher=str(OmegaConf.select(config, "hydra.launcher._target_") or "").rsplit(".", 1)[-1],
                       planned_jobs=counted[0] if counted and target.endswith("BasicSweeper") else None)

        self._update(config, start)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Record the job as running, with its folder, overrides, host and pid, after taking its lock."""
        if not _is_multirun(config):
            return
        sweep_dir, job_dir = _sweep_dir(config), _job_dir(config)
        try:
            job_dir.mkdir(parents=True, exist_ok=True)
            locked = _hold(job_dir / JOB_LOCK_NAME)
        except OSError as exc:
            log.warning("sweep index: %s", error_line(exc))
            locked = False

        def start(doc: dict[str, Any]) -> None:
            job = _job(doc, int(config.hydra.job.num))
            job.clear()
            job.update(num=int(config.hydra.job.num), folder=_folder(job_dir, sweep_dir),
                       overrides=[str(o) for o in OmegaConf.to_container(config.hydra.overrides.task) or []],
                       status="running", error=None, host=socket.gethostname(), pid=os.getpid(), lock=locked,
                       started=now_iso(), ended=None, seconds=None)

        self._update(config, start)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """Record how the job ended (``ok`` or ``failed`` with its error line) and its figures."""
        if not _is_multirun(config):
            return
        failed = job_return.status != JobStatus.COMPLETED
        result = job_return._return_value  # .return_value re-raises a failed job's exception
        figures: dict[str, Any] = {}
        if not failed:
            try:
                figures = job_figures(self._archive_file(config))
            except Exception as exc:  # an unreadable archive leaves the figures empty, never fails the job
                figures = {"note": f"figures unavailable: {error_line(exc)}"}

        def end(doc: dict[str, Any]) -> None:
            job = _job(doc, int(config.hydra.job.num))
            ended = now_iso()
            job.update(status="failed" if failed else "ok",
                       error=error_line(result) if failed and isinstance(result, BaseException) else None,
                       ended=ended, seconds=_seconds(job.get("started"), ended))
            job.setdefault("folder", _folder(_job_dir(config), _sweep_dir(config)))
            job.setdefault("overrides", [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task) or []])
            for key in ("mode", "run_id", "s_val", "initial_s_val", "heldout_s_val", "heldout_diff", "held",
                        "stop_reason"):
                job[key] = figures.get(key)
            if "note" in figures:
                job["note"] = figures["note"]
            _close_if_done(doc)

        self._update(config, end)
        _release(_job_dir(config) / JOB_LOCK_NAME)  # after the record says how it ended

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Close the index (reached only when no job failed: see the module docstring)."""
        self._update(config, lambda doc: _close_if_done(doc, force=True))
        _release(_sweep_dir(config) / SWEEP_LOCK_NAME)

    @staticmethod
    def _archive_file(config: DictConfig) -> Path:
        from evotrainer.archive.store import archive_path

        return archive_path(str(OmegaConf.select(config, "archive.path") or "archive.db"), _job_dir(config))

    @staticmethod
    def _update(config: DictConfig, change: Any) -> None:
        try:
            update_index(_sweep_dir(config), change)
        except Exception as exc:  # the index is a convenience: a problem with it never ends a job or the sweep
            log.warning("sweep index not updated: %s", error_line(exc))
