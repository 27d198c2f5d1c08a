"""The run's HTML report, rewritten while the run goes, so a long run can be watched in a browser.

A co-evolution run writes ``report.html`` beside its ``archive.db`` (where ``archive report`` writes it
by default) after generation 0, after each outer generation and at the end. Each write is atomic
(:func:`~evotrainer.browse.report.write_report`), so reloading the page never shows half a file. A
report that cannot be built or written never ends the run: the failure is logged as a warning.

Every refresh, written or failed, is archived as a ``phase`` event named ``report`` (payload: the outer
generation, the seconds it took, and the error when it failed). ``phase`` events carry wall-clock
timings, so the deterministic dump of a run leaves them out, and they are written whatever happens, so a
resumed run replays the same sequence of events.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from evotrainer.archive.recorder import RunRecorder
from evotrainer.events.kinds import PhaseEvent

__all__ = ["REPORT_NAME", "LiveReport"]

REPORT_NAME = "report.html"
"""File name of a run's report, beside its archive (the ``archive report`` default too)."""

log = logging.getLogger(__name__)


class LiveReport:
    """Rewrites one run's HTML report from its archive.

    Args:
        rec: the run's archive writer; the report reads the rows through its store.
        path: the HTML file to (re)write, usually ``<run dir>/report.html``.
        enabled: False = :meth:`refresh` does nothing and archives nothing (``archive.live_report``).
    """

    def __init__(self, rec: RunRecorder, path: str | Path, *, enabled: bool = True) -> None:
        self.rec = rec
        self.path = Path(path)
        self.enabled = enabled
        self.writes = 0  # reports written so far
        self.failures = 0  # refreshes that failed (logged, never raised)

    def refresh(self, outer_generation: int | None) -> Path | None:
        """Rebuild and rewrite the report now.

        Args:
            outer_generation: the generation just finished (0 = generation 0; None = the run's end).

        Returns:
            The path written, or None when disabled or when building or writing failed (a warning is
            logged; the run goes on).
        """
        if not self.enabled:
            return None
        from evotrainer.browse.report import write_report  # plotly: loaded on the first refresh only

        t0 = time.perf_counter()
        error: str | None = None
        try:
            write_report(self.rec.store, self.rec.run_id, self.path)
        except Exception as exc:  # a report bug or a full disk must not end a long run
            error = f"{type(exc).__name__}: {exc}"
            self.failures += 1
            log.warning("could not refresh the report %s (the run goes on): %s", self.path, error)
        else:
            self.writes += 1
        self.rec.emit(PhaseEvent(name="report", fields={
            "outer_generation": outer_generation, "seconds": time.perf_counter() - t0, "path": str(self.path),
            "error": error}))
        return None if error else self.path
