"""Stop decisions at generation boundaries: the budget, a ``STOP`` file, and on resume the stored run's.

The outer loop asks :meth:`RunControl.check` before each harness candidate (the budget limits and the
``STOP`` file) and the inner loop asks :meth:`RunControl.inner_boundary` after each inner generation (the
``STOP`` file only). The seconds budget looks ahead: a candidate starts only when the seconds left cover
the median candidate of this process so far (the seconds between two checks, measured past any replay);
before the first such measurement, only the seconds spent count. A decision to stop is archived as a
``stop`` event (``key``, ``detail``, where), and the run then ends the usual way: the candidates already
scored are told and promoted, the final best is compared with the best seed, and the summary is printed and
archived with the reason.

While a resumed run replays (:class:`~evotrainer.archive.replay_store.ReplayingStore`), decisions follow the
stored run: it stops at a boundary exactly when the next stored event is that boundary's ``stop`` event.
Past the replay, the seconds budget counts the earlier processes' time (``elapsed_before_s``) plus this
process's own, so a run bound by ``outer.budget.seconds`` may stop at another candidate than an
uninterrupted run would (the replay itself takes time); generation, token and evaluation limits are exact.

The ``STOP`` file follows GEPA's ``FileStopper`` (gepa ``utils/stop_condition.py``: the run stops once a
given file exists): create it in the run folder (``touch <run dir>/STOP``) to end the run cleanly at the next
boundary. It is left in place; remove it before starting another run in that folder.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from evotrainer.events.kinds import StopEvent, from_payload
from evotrainer.harness.stopping import BudgetLimits, StopReason, Usage, budget_stop

__all__ = ["STOP_FILE", "RunControl", "StopRequested"]

STOP_FILE = "STOP"
"""Name of the stop file in the run folder."""


class StopRequested(Exception):  # noqa: N818 (a request, not an error)
    """Raised at an inner-generation boundary to end the run; the outer loop turns it into its stop reason."""

    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason.detail)
        self.reason = reason


class RunControl:
    """Where a run decides to stop (module docstring).

    Args:
        rec: the run's archive writer (``stop`` events).
        limits: ``outer.budget.*``.
        stop_file: the ``STOP`` path to watch, or None.
        elapsed_before_s: wall-clock seconds spent by the earlier processes of a resumed run, >= 0.
        replay: the resumed run's replaying store, or None.
        cost: the run's model-call cost so far in US dollars (``outer.budget.usd``), or None (no cost).
        prompt_tokens: the prompt tokens the run's model calls read so far (``outer.budget.prompt_tokens``),
            or None (not counted: 0).
    """

    def __init__(self, rec: Any, limits: BudgetLimits, *, stop_file: str | Path | None = None,
                 elapsed_before_s: float = 0.0, replay: Any = None, cost: Callable[[], float] | None = None,
                 prompt_tokens: Callable[[], int] | None = None) -> None:
        self.rec = rec
        self.cost = cost
        self.prompt_tokens = prompt_tokens
        self.limits = limits
        self.stop_file = None if stop_file is None else Path(stop_file)
        self.elapsed_before_s = float(elapsed_before_s)
        self.replay = replay
        self.candidate_seconds: list[float] = []
        """Seconds between consecutive live checks of this process (one harness candidate each)."""
        self._last_check_s: float | None = None

    def _stored(self) -> tuple[bool, StopReason | None]:
        """``(replaying, the stored run's decision here)``."""
        if self.replay is None or not self.replay.replaying:
            return False, None
        nxt = self.replay.next_stored_event()
        if nxt is not None and nxt[0] == "stop":
            stop = cast(StopEvent, from_payload("stop", nxt[1]))
            return True, StopReason(str(stop.key), str(stop.detail))
        return True, None

    def _file(self) -> StopReason | None:
        if self.stop_file is not None and self.stop_file.exists():
            return StopReason("stop_file", f"{self.stop_file} found")
        return None

    def _record(self, reason: StopReason | None, where: dict[str, Any]) -> StopReason | None:
        if reason is not None:
            self.rec.emit(StopEvent(key=reason.key, detail=reason.detail, where=where))
        return reason

    def check(self, usage: Usage, **where: Any) -> StopReason | None:
        """The reason to stop before the next harness candidate (budget first, then the STOP file), or None.

        Args:
            usage: this process's usage since it started (seconds, generated tokens, candidates; the
                seconds of consecutive calls measure the candidates for the look-ahead); the
                rollouts are the recorder's count of the rows it archived (``RunRecorder.rollouts``), the
                same count a reader of the archive gets (``archive.schema.budget_rollouts``).
            where: boundary fields for the ``stop`` event (``outer_generation``, ``harness_id``).
        """
        replaying, stored = self._stored()
        if replaying:
            self._last_check_s = None
            return self._record(stored, where)
        if self._last_check_s is not None:
            self.candidate_seconds.append(max(0.0, usage.seconds - self._last_check_s))
        self._last_check_s = usage.seconds
        ahead = statistics.median(self.candidate_seconds) if self.candidate_seconds else 0.0
        basis = f"median of {len(self.candidate_seconds)} candidate(s) so far"
        total = Usage(usage.seconds + self.elapsed_before_s, usage.tokens, usage.evaluations,
                      int(getattr(self.rec, "rollouts", usage.rollouts)),
                      self.cost() if self.cost is not None else usage.usd,
                      self.prompt_tokens() if self.prompt_tokens is not None else usage.prompt_tokens,
                      usage.train_tokens)
        return self._record(budget_stop(total, self.limits, seconds_ahead=ahead, ahead_basis=basis)
                            or self._file(), where)

    def inner_boundary(self, **where: Any) -> None:
        """After an inner generation: raises :class:`StopRequested` when the STOP file exists (or, replaying,
        when the stored run stopped here)."""
        replaying, stored = self._stored()
        reason = self._record(stored if replaying else self._file(), where)
        if reason is not None:
            raise StopRequested(reason)
