"""Progress a user can see: done/total, rate and ETA of a long phase, on a terminal and in a log.

A long phase (generation 0, an inner evaluation, screening, a LoRA round) shows how far it got. A phase
opens a task; the code doing the work reports finished units::

    with progress.task("gen 0: scoring 14 seeds on 8 tasks", total=112, console=console):
        evaluator.evaluate(...)            # the backend calls progress.advance(len(chunk)) per chunk

- On a terminal: a transient rich bar (done/total, rate, ETA) that vanishes when the phase ends.
- In a log (stdout is a file or pipe): a plain line when the phase starts, then
  ``label: done/total unit (pct) in m:ss, rate unit/s, ETA m:ss`` every ``min_interval_s`` (30 s) while it runs,
  whether or not a unit finished meanwhile (a background heartbeat), and one final line.

Totals are planned units (generation requests: distinct policies x items). Requests served from the
fitness cache never reach the backend, so ``done`` may end below ``total``; the final line says so.
:func:`advance` is a no-op when no task counting that unit is open, so a backend may always call it.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from rich.console import Console

__all__ = ["Progress", "advance", "fmt_duration", "muted", "stdout_console", "task"]

LOG_WIDTH = 200  # columns of a non-terminal console: log lines are not wrapped at rich's default 80
_open: list[Progress] = []  # tasks open now, innermost last


def stdout_console() -> Console:
    """A rich Console on stdout: the terminal's width; in a file or pipe, :data:`LOG_WIDTH` columns (for
    tables) and printed text never wrapped (rich's default is 80 columns, wrapped)."""
    console = Console()
    return console if console.is_terminal else Console(width=LOG_WIDTH, soft_wrap=True)


def fmt_duration(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from one hour; ``–`` for an unknown (non-finite or negative) duration."""
    if not math.isfinite(seconds) or seconds < 0:
        return "–"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Reports one phase's progress (see the module docstring).

    Args:
        label: what the phase does, e.g. ``"gen 0: scoring 14 seeds on 8 tasks"``.
        total: planned units, >= 0; None when unknown (no percentage or ETA then).
        console: where to write (a rich Console); when None, ``stream`` is used.
        stream: a text stream for log lines when ``console`` is None (default: ``sys.stdout`` at creation).
        is_terminal: draw a bar (True) or write log lines (False); default: what ``console``/``stream`` is.
        min_interval_s: seconds between log lines, > 0 (default 30 s); no effect on a terminal.
        clock: monotonic seconds (injected by tests).
        unit: what is counted, plural (``"requests"``, ``"steps"``); :func:`advance` names it.
        heartbeat: in a log, also write a line every ``min_interval_s`` when no unit finished (a daemon
            thread); tests with an injected clock turn it off.
        summary: write the final line on a terminal too (a log always gets it).
    """

    def __init__(
        self, label: str, total: int | None, *, console: Console | None = None, stream: IO[str] | None = None,
        is_terminal: bool | None = None, min_interval_s: float = 30.0, clock: Callable[[], float] = time.monotonic,
        unit: str = "requests", heartbeat: bool = True, summary: bool = False,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.console = console
        self.stream = sys.stdout if stream is None and console is None else stream
        if is_terminal is None:
            is_terminal = console.is_terminal if console is not None else bool(
                getattr(self.stream, "isatty", lambda: False)())
        self.is_terminal, self.min_interval_s, self.clock = is_terminal, float(min_interval_s), clock
        self.heartbeat, self.summary = heartbeat and not is_terminal, summary
        self.done = 0
        self.started_at: float | None = None
        self._last_line_at = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None  # rich.progress.Progress while drawing on a terminal
        self._row: Any = None
        self._owns_bar = False

    # --- use ----------------------------------------------------------------------------------------

    def start(self, parent: Progress | None = None) -> Progress:
        """Start the clock and the display (a row in ``parent``'s bar when it draws on the same console)."""
        self.started_at = self._last_line_at = self.clock()
        if self.is_terminal:
            self._start_bar(parent)
        else:
            self._write(f"{self.label}: started" + ("" if self.total is None else f", {self.total} {self.unit}"))
            if self.heartbeat:
                self._thread = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
                self._thread.start()
        return self

    def advance(self, n: int = 1) -> None:
        """``n`` more units done; in a log, writes a line when ``min_interval_s`` passed since the last."""
        with self._lock:
            self.done += max(int(n), 0)
            if self._bar is not None:
                self._bar.update(self._row, completed=self.done, info=self._rate_eta(self.clock()))
            elif not self.is_terminal:
                self._maybe_line()

    def close(self, ok: bool = True) -> None:
        """Stop the display; write the final line (in a log, or on a terminal with ``summary``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._bar is not None:
                if self._owns_bar:
                    self._bar.stop()
                else:
                    self._bar.remove_task(self._row)
                self._bar = None
            if self.started_at is not None and (not self.is_terminal or self.summary):
                self._write(self.final_line(ok))

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.close(ok=exc_type is None)

    # --- text ---------------------------------------------------------------------------------------

    def line(self, now: float | None = None) -> str:
        """``label: done/total unit (pct) in m:ss, rate unit/s, ETA m:ss`` at ``now`` (default: the clock)."""
        now = self.clock() if now is None else now
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        elapsed = fmt_duration(now - (self.started_at if self.started_at is not None else now))
        return f"{self.label}: {count} {self.unit}{pct} in {elapsed}, {self._rate_eta(now)}"

    def final_line(self, ok: bool = True, now: float | None = None) -> str:
        """The closing line: units done, wall time, rate; why ``done`` ended below ``total``."""
        now = self.clock() if now is None else now
        elapsed = now - (self.started_at if self.started_at is not None else now)
        if not ok:
            of = f"/{self.total}" if self.total is not None else ""
            return f"{self.label}: stopped at {self.done}{of} {self.unit} after {fmt_duration(elapsed)}"
        if self.done == 0:  # nothing reported: all cached, or a backend that does not report
            return f"{self.label}: done in {fmt_duration(elapsed)}"
        rate = f", {self.done / elapsed:.2f} {self.unit}/s" if elapsed > 0 and self.done else ""
        text = f"{self.label}: {self.done} {self.unit} in {fmt_duration(elapsed)}{rate}"
        if self.total is not None and self.done < self.total:
            text += f" ({self.total - self.done} of {self.total} planned were not needed: cached)"
        return text

    def rate(self, now: float) -> float | None:
        """Units per second since the start; None before the first unit."""
        elapsed = now - (self.started_at if self.started_at is not None else now)
        return self.done / elapsed if self.done and elapsed > 0 else None

    def eta_s(self, now: float) -> float | None:
        """Seconds left at the mean rate so far, ``(total - done) / rate``; None when unknown."""
        r = self.rate(now)
        if r is None or self.total is None:
            return None
        return max(self.total - self.done, 0) / r

    # --- internals ----------------------------------------------------------------------------------

    def _rate_eta(self, now: float) -> str:
        r = self.rate(now)
        rate = "rate –" if r is None else f"{r:.2f} {self.unit}/s"
        if self.total is None:
            return rate
        eta = self.eta_s(now)
        return f"{rate}, ETA {fmt_duration(eta) if eta is not None else '–'}"

    def _maybe_line(self) -> None:
        """Write :meth:`line` when ``min_interval_s`` passed since the last line (caller holds the lock)."""
        now = self.clock()
        if now - self._last_line_at >= self.min_interval_s:
            self._last_line_at = now
            self._write(self.line(now))

    def _beat(self) -> None:
        """Heartbeat thread: a line whenever ``min_interval_s`` passes without one."""
        while True:
            with self._lock:
                wait = self.min_interval_s - (self.clock() - self._last_line_at)
                if wait <= 0:
                    self._maybe_line()
                    wait = self.min_interval_s
            if self._stop.wait(wait):
                return

    def _write(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _start_bar(self, parent: Progress | None) -> None:
        if parent is not None and parent._bar is not None and parent.console is self.console:
            self._bar, self._owns_bar = parent._bar, False
        else:
            self._bar, self._owns_bar = _rich_bar(self.console), True
            self._bar.start()
        self._row = self._bar.add_task(self.label, total=self.total, info=self._rate_eta(self.clock()))


def _rich_bar(console: Console | None) -> Any:
    """A transient rich progress bar: label, bar, done/total, elapsed, rate and ETA."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    return RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[info]}"), console=console, transient=True)


@contextmanager
def task(label: str, total: int | None, *, console: Console | None = None, unit: str = "requests",
         **options: Any) -> Iterator[Progress]:
    """Open a :class:`Progress` that :func:`advance` reports to, for the duration of the block.

    Args:
        label: what the phase does.
        total: planned units (an upper bound when some may come from a cache), or None.
        console: where to write (when None: where the enclosing task writes, else stdout; a bar on a terminal,
            lines in a log).
        unit: what :func:`advance` calls with ``unit=`` count here (``"requests"``: generation requests).
        options: further :class:`Progress` arguments (``min_interval_s``, ``clock``, ``summary``, ...).
    """
    parent = next((q for q in reversed(_open) if isinstance(q, Progress)), None)
    if console is None and "stream" not in options and parent is not None:  # a nested task writes where its parent does
        console = parent.console
        options["stream"] = parent.stream
    p = Progress(label, total, console=console, unit=unit, **options)
    p.start(parent)
    _open.append(p)
    ok = False
    try:
        yield p
        ok = True
    finally:
        _open.remove(p)
        p.close(ok=ok)


class _Muted:
    """Swallows :func:`advance` calls of one unit while open (see :func:`muted`)."""

    def __init__(self, unit: str) -> None:
        self.unit = unit

    def advance(self, n: int = 1) -> None:
        """Ignore ``n``."""


@contextmanager
def muted(unit: str = "requests") -> Iterator[None]:
    """Make :func:`advance` of ``unit`` a no-op inside the block.

    A multi-step rollout sends one generation request per episode and step; the phase counts episodes (its
    planned requests), so the rollout mutes the backend's per-call counts and reports each episode once,
    when it ends.
    """
    m = _Muted(unit)
    _open.append(m)  # type: ignore[arg-type]  # has .unit and .advance, all advance() needs
    try:
        yield
    finally:
        _open.remove(m)  # type: ignore[arg-type]


def advance(n: int = 1, unit: str = "requests") -> None:
    """Report ``n`` finished units of ``unit`` to the innermost open task counting it; no-op without one.

    The transformers backend calls ``advance(len(chunk))`` once per generated chunk of requests; the LoRA
    trainer calls ``advance(1, unit="steps")`` once per optimiser step.
    """
    for p in reversed(_open):
        if p.unit == unit:
            p.advance(n)
            return
