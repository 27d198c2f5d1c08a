"""Progress lines: at most one per interval, a final line, ETA arithmetic, terminal vs log, the task sink."""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from evotrainer import progress
from evotrainer.progress import Progress, fmt_duration


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _log(label: str = "scoring", total: int | None = 10, **kw) -> tuple[Progress, io.StringIO, FakeClock]:
    clock, out = FakeClock(), io.StringIO()
    p = Progress(label, total, stream=out, is_terminal=False, clock=clock, heartbeat=False, **kw)
    return p, out, clock


def _lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_log_lines_at_most_every_interval_and_a_final_line() -> None:
    p, out, clock = _log()
    with p:
        for t, n in [(10, 1), (29.9, 1), (30, 1), (45, 1), (59.9, 1), (60, 1), (200, 4)]:
            clock.t = 100 + t
            p.advance(n)
        clock.t = 250
    assert _lines(out) == [
        "scoring: started, 10 requests",
        "scoring: 3/10 requests (30%) in 0:30, 0.10 requests/s, ETA 1:10",
        "scoring: 6/10 requests (60%) in 1:00, 0.10 requests/s, ETA 0:40",
        "scoring: 10/10 requests (100%) in 3:20, 0.05 requests/s, ETA 0:00",
        "scoring: 10 requests in 2:30, 0.07 requests/s",
    ]


def test_eta_is_the_rest_at_the_mean_rate() -> None:
    p, _, clock = _log(total=10)
    p.start()
    assert p.rate(clock.t) is None and p.eta_s(clock.t) is None
    clock.t += 20
    p.advance(4)
    assert p.rate(clock.t) == pytest.approx(0.2)
    assert p.eta_s(clock.t) == pytest.approx(30.0)
    assert p.line() == "scoring: 4/10 requests (40%) in 0:20, 0.20 requests/s, ETA 0:30"


def test_no_line_before_the_first_unit_shows_unknowns() -> None:
    p, _, clock = _log(total=8)
    p.start()
    clock.t += 31
    assert p.line() == "scoring: 0/8 requests (0%) in 0:31, rate –, ETA –"


def test_unknown_total_shows_elapsed() -> None:
    p, _, clock = _log(total=None, unit="steps")
    p.start()
    clock.t += 65
    p.advance(13)
    assert p.line() == "scoring: 13 steps in 1:05, 0.20 steps/s"


def test_final_line_says_when_the_cache_served_part_of_the_total() -> None:
    p, out, clock = _log(total=12)
    with p:
        clock.t += 8
        p.advance(8)
    assert _lines(out)[-1] == ("scoring: 8 requests in 0:08, 1.00 requests/s "
                               "(4 of 12 planned were not needed: cached)")


def test_a_phase_with_nothing_reported_claims_nothing() -> None:
    p, out, clock = _log(total=6)
    with p:
        clock.t += 3
    assert _lines(out)[-1] == "scoring: done in 0:03"  # all cached, or a backend that does not report


def test_a_failing_phase_ends_with_stopped() -> None:
    p, out, clock = _log(total=10)
    with pytest.raises(RuntimeError), p:
        clock.t += 5
        p.advance(2)
        raise RuntimeError("boom")
    assert _lines(out)[-1] == "scoring: stopped at 2/10 requests after 0:05"


def test_terminal_draws_a_bar_and_writes_no_log_lines() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    clock = FakeClock()
    with Progress("gen 0", 4, console=console, clock=clock) as p:
        assert p.is_terminal and p._bar is not None
        clock.t += 2
        p.advance(2)
    text = buf.getvalue()
    assert "started" not in text and "requests in" not in text  # transient: nothing stays


def test_terminal_summary_line_when_asked() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    clock = FakeClock()
    with Progress("round 1 rollout", 4, console=console, clock=clock, summary=True) as p:
        clock.t += 8
        p.advance(4)
    assert "round 1 rollout: 4 requests in 0:08, 0.50 requests/s" in buf.getvalue()


def test_a_log_console_writes_unwrapped_lines() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=40)  # not a terminal
    label = "outer 1 cand 0: screening 3 policies on 2 items"  # longer than 40 columns
    with Progress(label, 6, console=console, clock=FakeClock(), heartbeat=False):
        pass
    assert buf.getvalue().splitlines()[0] == f"{label}: started, 6 requests"


def test_heartbeat_writes_a_line_without_any_unit_finishing() -> None:
    out = io.StringIO()
    with Progress("slow chunk", 16, stream=out, is_terminal=False, min_interval_s=0.02):
        deadline = time.monotonic() + 10
        while len(_lines(out)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = _lines(out)
    assert lines[1].startswith("slow chunk: 0/16 requests (0%) in 0:00, rate –, ETA –")
    assert "stopped" not in lines[-1]


def test_advance_without_a_task_is_a_no_op() -> None:
    progress.advance(5)
    progress.advance(1, unit="steps")


def test_task_routes_units_to_the_innermost_task_counting_them() -> None:
    clock, out = FakeClock(), io.StringIO()
    opts = dict(stream=out, is_terminal=False, clock=clock, heartbeat=False)
    with progress.task("round 1 train", 4, unit="steps", **opts) as train:
        with progress.task("round 1 dev", 2, **opts) as dev:
            progress.advance(2)
            progress.advance(1, unit="steps")
        progress.advance(3)  # requests with no requests task open: dropped
        progress.advance(1, unit="steps")
    assert (dev.done, train.done) == (2, 2)
    progress.advance(1)  # closed: no-op
    assert dev.done == 2


def test_fmt_duration() -> None:
    assert fmt_duration(0) == "0:00"
    assert fmt_duration(59.6) == "1:00"
    assert fmt_duration(3725) == "1:02:05"
    assert fmt_duration(float("inf")) == "–"
    assert fmt_duration(-1) == "–"


def test_stdout_console_is_wide_in_a_log() -> None:
    console = progress.stdout_console()  # pytest captures stdout: not a terminal
    assert not console.is_terminal and console.width == progress.LOG_WIDTH and console.soft_wrap
