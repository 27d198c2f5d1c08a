"""Test-only: kill this process at a chosen point, so that resume tests can use a real ``SIGKILL``.

Inert unless the environment variable ``EVOTRAINER_TEST_KILL_AT`` is set (never set it outside tests). Its
value is ``<point>:<n>[+<calls>]``: once the ``n``-th occurrence of ``point`` has been reached, the process
sends itself ``SIGKILL``, immediately (``+0``, the default) or at the start of the ``calls``-th real LLM
call after it (a call :class:`~evotrainer.backends.call_log.LoggedLLM` sends to the model, i.e. in the
middle of an evaluation whose answers are not yet logged).

Points: ``event:<kind>`` after an archive event of that kind is committed, ``evaluation:<kind>`` after an
evaluation row of that kind (``fitness``, ``meta_screen``, ...) is committed, and ``llm_call`` at the start
of a real LLM call. Example: ``EVOTRAINER_TEST_KILL_AT=event:task_batch:2+1`` kills the run in its first
inner evaluation of the first harness candidate (the second task batch; the first is generation 0's).
"""

from __future__ import annotations

import os
import signal

__all__ = ["reached"]

_ENV = "EVOTRAINER_TEST_KILL_AT"
_counts: dict[str, int] = {}
_armed: list[int] = []  # real LLM calls still to start before the kill, once the point was reached


def reached(point: str, times: int = 1) -> None:
    """Note that ``point`` was reached ``times`` times (e.g. rows of one batch); may kill the process."""
    spec = os.environ.get(_ENV)
    if not spec:
        return
    target, _, calls = spec.partition("+")
    name, _, n = target.rpartition(":")
    if point == "llm_call" and _armed:
        _armed[0] -= 1
        if _armed[0] <= 0:
            os.kill(os.getpid(), signal.SIGKILL)
        return
    if point != name or _armed:
        return
    before = _counts.get(point, 0)
    _counts[point] = before + times
    if before < int(n) <= before + times:
        if int(calls or 0) <= 0:
            os.kill(os.getpid(), signal.SIGKILL)
        _armed.append(int(calls))
