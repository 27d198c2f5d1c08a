"""How ``python -m evotrainer`` ends on an error: one line per bad key or failed job, no traceback.

Hydra reports errors itself, in several lines: a bad override value gives "Error merging override ..." and
OmegaConf's ``full_key`` / ``reference_type`` block, and a multirun whose jobs failed ends with "Error
executing job with overrides: [...]" and the first failed job's traceback (its basic sweeper re-raises that
job's exception after the batch, ``hydra/_internal/core_plugins/basic_sweeper.py``). Setting
``HYDRA_FULL_ERROR=1`` makes Hydra's ``run_and_report`` re-raise instead of printing
(``hydra/_internal/utils.py``), so :func:`report` can say it once:

- a bad key or value, from Hydra's composition: ``error: config key 'outer.race.futility': Value 'abc' of
  type 'str' could not be converted to Float (Error merging override outer.race.futility=abc)``, status 2;
- a multirun with failed or killed jobs: ``error: job 1 (seed=1): ConfigError: config key ...`` for each,
  read from the sweep index (:mod:`evotrainer.sweep_index`, which is closed as ``failed`` here), then one
  line with the counts and the sweep folder, status 1;
- anything else in a multirun: its type and first line, status 1; in a single run (a bug) the traceback.

A failed job's traceback, when it was not an :class:`~evotrainer.errors.EvoTrainerError`, is in that job's
log file. ``debug=true`` on the command line (or ``HYDRA_FULL_ERROR=1`` set by the user) leaves every error
to Python: the full traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from evotrainer.errors import EvoTrainerError
from evotrainer.flat_keys import moved_key

__all__ = ["JOB_BANNER", "config_error_line", "hidden_job_banner", "is_multirun", "report", "wants_traceback"]

JOB_BANNER = "Error executing job with overrides: "
"""What Hydra's ``JobReturn.return_value`` writes to stderr before re-raising a failed job's exception
(``hydra/core/utils.py``); :func:`hidden_job_banner` drops it, :func:`report` says more in its place."""

_TRUE = ("true", "yes", "on", "1")


def _last_value(argv: Sequence[str], key: str) -> str | None:
    values = [a.partition("=")[2] for a in argv if a.startswith(f"{key}=")]
    return values[-1].strip().strip("'\"") if values else None


def wants_traceback(argv: Sequence[str]) -> bool:
    """Whether errors go to Python unchanged: ``debug=true`` among the overrides, or ``HYDRA_FULL_ERROR=1``
    in the environment (set by the user before :func:`report`'s caller sets it)."""
    debug = _last_value(argv, "debug")
    return (debug is not None and debug.lower() in _TRUE) or os.environ.get("HYDRA_FULL_ERROR") == "1"


def is_multirun(argv: Sequence[str]) -> bool:
    """Whether the command line starts a Hydra multirun (``-m``, ``--multirun``, ``hydra.mode=MULTIRUN``)."""
    return bool({"-m", "--multirun"} & set(argv)) or _last_value(argv, "hydra.mode") == "MULTIRUN"


class _WithoutBanner:
    """A text stream that forwards everything to ``stream`` except a write starting with :data:`JOB_BANNER`."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith(JOB_BANNER):
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def hidden_job_banner() -> Iterator[None]:
    """``sys.stderr`` without Hydra's :data:`JOB_BANNER` line while the block runs."""
    saved = sys.stderr
    sys.stderr = _WithoutBanner(saved)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stderr = saved


_DETAIL = ("full_key:", "reference_type=", "object_type=")  # OmegaConf's detail lines: the key says it all


def _summary(exc: BaseException) -> str:
    """The first paragraph of ``exc``'s message on one line, OmegaConf's detail lines left out, and the
    choices of a missing config group (Hydra lists them tab-indented under "Available options in ...:")
    appended."""
    first, _, rest = str(exc).strip().partition("\n\n")
    text = " ".join(line.strip() for line in first.splitlines() if line.strip() and not line.strip().startswith(_DETAIL))
    if rest.startswith("Available options"):
        options = []
        for line in rest.splitlines()[1:]:
            if not line.startswith("\t"):
                break
            options.append(line.strip())
        text += f" (available: {', '.join(options)})"
    return text


def config_error_line(exc: BaseException) -> str | None:
    """One line for a Hydra or OmegaConf configuration error (a bad override, key, value or config group),
    naming the key when OmegaConf gives it (``full_key``), and its new place when the key moved
    (:func:`evotrainer.flat_keys.moved_key`: a YAML file still using an old spelling); None when ``exc`` is not
    such an error."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if not isinstance(exc, HydraException | OmegaConfBaseException):
        return None
    chain = [e for e in (exc, exc.__cause__) if e is not None]
    key = next((str(k) for e in chain if (k := getattr(e, "full_key", None))), None)
    parts = [p for p in dict.fromkeys(_summary(e) for e in chain) if p]
    if key is None:
        return "; ".join(parts) or type(exc).__name__
    cause = parts[-1] if parts else type(exc).__name__
    rest = [p for p in parts if p != cause]
    moved = moved_key(key)
    hint = f"; it moved to {moved}" if moved else ""
    return f"config key '{key}': {cause}" + (f" ({'; '.join(rest)})" if rest else "") + hint


def _close_sweep(sweep_dir: Path, error: str) -> None:
    """Close the sweep's index as ``failed`` (its dead jobs marked ``killed``), with the sweep-level error."""
    from evotrainer.sweep_index import now_iso, update_index

    def close(doc: dict[str, Any]) -> None:
        doc.update(status="failed", ended=now_iso())
        if not any(j.get("status") in ("failed", "killed") for j in doc["jobs"] if isinstance(j, dict)):
            doc["error"] = error  # the sweep failed around its jobs (a composition error, its launcher)

    with contextlib.suppress(Exception):  # the index is a convenience; the lines printed still say what failed
        update_index(sweep_dir, close)


def _job_lines(sweep_dir: Path) -> tuple[list[str], str] | None:
    """One line per failed or killed job of the sweep's index and a closing count, or None without jobs."""
    from evotrainer.browse.sweep_table import index_jobs, sweep_status
    from evotrainer.sweep_index import find_index

    if find_index(sweep_dir) is None:
        return None
    try:
        jobs = index_jobs([sweep_dir])
        planned = (sweep_status(sweep_dir) or {}).get("planned_jobs")
    except Exception:  # noqa: BLE001 - an unreadable index: the caller falls back to the exception
        return None
    bad = [j for j in jobs if j.get("status") in ("failed", "killed")]
    if not bad:
        return None
    lines = []
    for j in bad:
        where = " ".join(str(o) for o in j.get("distinct") or [])
        error = str(j.get("error") or "").replace("\n", " ")
        error = f"killed: {error}" if j.get("status") == "killed" else error or "failed"
        lines.append(f"error: job {j.get('num', '?')}" + (f" ({where})" if where else "") + f": {error}")
    missing = planned - len(jobs) if isinstance(planned, int) and planned > len(jobs) else 0
    count = f"{len(bad)} of {planned if isinstance(planned, int) else len(jobs)} jobs failed"
    count += f", {missing} not started" if missing else ""
    return lines, f"({count}; sweep folder {sweep_dir}; each job's log has its details; debug=true shows " \
                  "the traceback)"


def report(exc: BaseException, *, multirun: bool, sweep_dir: Path | None) -> int:
    """Print what ``exc`` (the error that ended the command) means, in the fewest lines (module docstring),
    to stderr; return the exit status (2 for a bad key or value, 1 otherwise).

    Args:
        exc: the exception Hydra re-raised (``HYDRA_FULL_ERROR=1``).
        multirun: the command ran a multirun (``-m``).
        sweep_dir: the folder of the sweep this process launched (its index), or None.
    """
    from evotrainer.app.sweep_callback import error_line

    config_line = config_error_line(exc)
    if isinstance(exc, EvoTrainerError):
        line = f"error: {exc}"
    else:
        line = f"error: {config_line}" if config_line else f"error: {error_line(exc)}"
    if sweep_dir is not None:
        _close_sweep(sweep_dir, line.removeprefix("error: "))
        jobs = _job_lines(sweep_dir)
        if jobs is not None:
            for job_line in jobs[0]:
                print(job_line, file=sys.stderr)
            print(jobs[1], file=sys.stderr)
            return 1
    if config_line is None and not isinstance(exc, EvoTrainerError) and not multirun:
        traceback.print_exception(exc)  # a bug in a single run: its traceback is what helps
        return 1
    print(line, file=sys.stderr)
    print("(run with debug=true for the full traceback)", file=sys.stderr)
    return 2 if config_line is not None or isinstance(exc, EvoTrainerError) else 1
