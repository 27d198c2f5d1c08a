"""The budget check before generation 0: the estimate's arithmetic, and the warning on a real tiny run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.config import Config
from evotrainer.evolve.budget_check import WARN_SHARE, estimate_gen0
from evotrainer.evolve.coevolution import run_evolve
from tests.archive._dump import dump_deterministic


def test_estimate_adds_the_remaining_requests_at_the_measured_rate() -> None:
    est = estimate_gen0(elapsed=30.0, batch_seconds=20.0, batch_requests=40, batch_words=8000,
                        remaining_requests=100, remaining_words=20000, budget=200.0)
    assert est.per_request == pytest.approx(0.5) and est.length_factor == 1.0
    assert est.seconds == pytest.approx(30.0 + 0.5 * 100)
    assert est.share == pytest.approx(80.0 / 200.0) and not est.warn


def test_estimate_scales_up_for_longer_transcripts_never_down() -> None:
    longer = estimate_gen0(elapsed=0.0, batch_seconds=10.0, batch_requests=10, batch_words=1000,
                           remaining_requests=10, remaining_words=3000, budget=40.0)
    assert longer.length_factor == pytest.approx(3.0) and longer.seconds == pytest.approx(30.0)
    assert longer.warn and longer.share > WARN_SHARE
    shorter = estimate_gen0(elapsed=0.0, batch_seconds=10.0, batch_requests=10, batch_words=1000,
                            remaining_requests=10, remaining_words=100, budget=40.0)
    assert shorter.length_factor == 1.0 and shorter.seconds == pytest.approx(10.0)


def test_a_windowed_training_meeting_counts_as_its_model_calls() -> None:
    # 6 seeds x 3 tasks, one of them read in 3 windows + a merge: 36 model calls, not 18 requests
    by_calls = estimate_gen0(elapsed=0.0, batch_seconds=360.0, batch_requests=18, batch_words=18000,
                             remaining_requests=60, remaining_words=30000, budget=2400.0, batch_calls=36)
    assert by_calls.per_request == pytest.approx(10.0) and by_calls.batch_calls == 36
    assert by_calls.length_factor == 1.0 and by_calls.seconds == pytest.approx(600.0)
    by_requests = estimate_gen0(elapsed=0.0, batch_seconds=360.0, batch_requests=18, batch_words=18000,
                                remaining_requests=60, remaining_words=30000, budget=2400.0)
    assert by_requests.per_request == pytest.approx(20.0) and by_requests.batch_calls == 18
    # fewer calls than requests (a call log served some) reads as one call per request
    assert estimate_gen0(elapsed=0.0, batch_seconds=360.0, batch_requests=18, batch_words=18000,
                         remaining_requests=60, remaining_words=30000, budget=2400.0,
                         batch_calls=4).per_request == pytest.approx(20.0)


def test_a_tiny_budget_warns_before_generation_0_with_the_estimate(
        tiny_run_config: Callable[[], Config], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = tiny_run_config()
    cfg.outer.budget.seconds = 1e-6  # generation 0 alone takes longer on any machine (1 s did not on the tiny model)
    cfg.archive.live_report = False
    with caplog.at_level(logging.WARNING, logger="evotrainer.evolve.budget_check"):
        summary = run_evolve(cfg, run_dir=tmp_path)
    lines = [r.getMessage() for r in caplog.records if r.name == "evotrainer.evolve.budget_check"]
    assert len(lines) == 1 and "generation 0 alone is expected to take about" in lines[0]
    assert "s budget" in lines[0] and "outer.budget.seconds" in lines[0]
    assert summary.stop_reason == "outer.budget.seconds"
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        run_id = store.list_runs()[0].run_id
        (event,) = [e for e in store.events(run_id, kind="phase") if e.payload["name"] == "gen0_estimate"]
        assert "gen0_estimate" not in str(dump_deterministic(store, run_id))
    est = event.payload
    assert est["warn"] is True and est["budget"] == 1e-6 and est["share"] > WARN_SHARE
    assert est["seconds"] >= est["elapsed"] > 0 and est["per_request"] > 0
    assert est["batch_calls"] >= 3 * 2  # the tiny run's seeds x tasks, each at least one model call
    # 3 seeds screened on 2 items, then the best seed on the selection items not screened
    assert est["remaining_requests"] >= 3 * 2
