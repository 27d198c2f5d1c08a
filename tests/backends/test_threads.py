"""Compute threads from the cores actually free: pure choice, own-load and busy-core estimates, override."""

from __future__ import annotations

import logging

import pytest

from evotrainer.backends import threads
from evotrainer.backends.threads import Machine, apply_threads, choose_threads, own_load
from evotrainer.errors import ConfigError


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        (Machine(cores=2, load=0.1), 2),  # quiet
        (Machine(cores=2, load=1.0), 1),  # one core busy with another process
        (Machine(cores=2, load=0.6), 1),  # 0.6 rounds to one busy core
        (Machine(cores=2, load=0.4), 2),
        (Machine(cores=2, load=0.5), 1),  # half up, not banker's rounding
        (Machine(cores=2, load=6.0), 1),  # overloaded: never below 1
        (Machine(cores=2, load=1.3, own=0.9), 2),  # our own startup work is not another process
        (Machine(cores=16, load=0.0, jobs=4), 4),  # a quiet sweep of 4 parallel jobs
        (Machine(cores=16, load=12.0, jobs=4), 4),  # three siblings running: not counted twice
        (Machine(cores=16, load=14.0, jobs=4), 2),
        (Machine(cores=2, load=0.0, jobs=10), 1),  # more jobs than cores
        (Machine(cores=1, load=0.0), 1),
        (Machine(cores=2, load=1.9, busy=0.05), 2),  # a job that just ended still weighs on the load average
        (Machine(cores=2, load=1.0, busy=1.0), 1),  # a sustained competitor: both counts see it
        (Machine(cores=2, load=0.1, busy=1.0), 2),  # a momentary burst: the load average does not count it
    ],
)
def test_choose_threads(machine: Machine, expected: int) -> None:
    assert choose_threads(machine) == expected


def test_own_load_is_small_at_startup_and_bounded_later() -> None:
    assert own_load(0.0, 5.0) == 0.0
    assert own_load(3.0, 0.0) == 0.0
    assert own_load(3.0, 4.0) < 0.1  # a few seconds of imports
    assert own_load(120.0, 60.0) == pytest.approx(2.0 * (1 - 2.718281828 ** -1), rel=1e-6)  # 2 threads for 1 min
    assert own_load(7200.0, 3600.0) == pytest.approx(2.0, rel=1e-6)  # converges to the threads running


def test_sample_busy_cores_reads_proc_stat(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([(100, 400), (250, 600)])  # 150 busy ticks of 200 over the window
    monkeypatch.setattr(threads, "_cpu_jiffies", lambda: next(ticks))
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    busy = threads.sample_busy_cores(0.5, sleep=lambda s: None)
    assert busy is not None and 1.4 < busy <= 1.5  # 0.75 x 2 cores, minus our own (tiny) CPU time
    monkeypatch.setattr(threads, "_cpu_jiffies", lambda: None)
    assert threads.sample_busy_cores(0.5, sleep=lambda s: None) is None


def test_sweep_jobs_outside_hydra_is_one() -> None:
    assert threads.sweep_jobs(8) == 1


class _FakeTorch:
    def __init__(self) -> None:
        self.threads: list[int] = []
        self.interop_calls = 0

    def set_num_threads(self, n: int) -> None:
        self.threads.append(n)

    def set_num_interop_threads(self, n: int) -> None:
        self.interop_calls += 1
        if self.interop_calls > 1:
            raise RuntimeError("cannot set number of interop threads after parallel work has started")


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> _FakeTorch:
    import sys

    fake = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(threads, "_chosen", None)
    return fake


def test_apply_threads_auto_is_chosen_once_and_logged(fake_torch: _FakeTorch, caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    with caplog.at_level(logging.INFO, logger="evotrainer.backends.threads"):
        assert apply_threads(None, Machine(cores=2, load=1.2)) == 1
        assert apply_threads(None, Machine(cores=2, load=0.0)) == 1  # the process keeps its first choice
    assert fake_torch.threads == [1, 1]
    assert fake_torch.interop_calls == 2  # the second call's RuntimeError is swallowed
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["compute threads: 1 (of 2 cores, load 1.20, 1 parallel job; set model.threads to override)"]


def test_apply_threads_logs_the_sample(fake_torch: _FakeTorch, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="evotrainer.backends.threads"):
        assert apply_threads(None, Machine(cores=2, load=1.91, busy=0.02)) == 2
    assert "load 1.91, busy now 0.02, 1 parallel job" in caplog.records[0].getMessage()


def test_apply_threads_override_wins(fake_torch: _FakeTorch) -> None:
    assert apply_threads(3, Machine(cores=2, load=5.0)) == 3
    assert fake_torch.threads == [3]
    with pytest.raises(ConfigError, match="model.threads"):
        apply_threads(0)


def test_an_automatic_count_after_an_explicit_one_keeps_it(fake_torch: _FakeTorch) -> None:
    # model.threads=1, mutator.threads=null on a quiet machine: torch's pool is per process, so the mutator's
    # automatic count must not raise it to the free cores (the run recorded 2 with model.threads=1 before)
    assert apply_threads(1, Machine(cores=2, load=0.0)) == 1
    assert apply_threads(None, Machine(cores=2, load=0.0)) == 1
    assert fake_torch.threads == [1, 1]
