"""The seconds budget looks ahead: a candidate starts only when the median candidate so far fits."""

from __future__ import annotations

from typing import Any

from evotrainer.harness.stopping import BudgetLimits, Usage, budget_stop
from evotrainer.run.control import RunControl


class Rec:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


def test_budget_stop_counts_the_seconds_ahead() -> None:
    limits = BudgetLimits(seconds=100)
    assert budget_stop(Usage(seconds=70), limits, seconds_ahead=30) is None  # ends exactly at the limit
    stop = budget_stop(Usage(seconds=70), limits, seconds_ahead=31, ahead_basis="median of 2")
    assert stop is not None and stop.key == "outer.budget.seconds"
    assert stop.detail == "70 s used + 31 s expected for the next step (median of 2) > limit 100"
    assert budget_stop(Usage(seconds=100), limits, seconds_ahead=5).detail == "100 s used, limit 100"
    assert budget_stop(Usage(seconds=1e9), BudgetLimits(), seconds_ahead=1e9) is None


def test_a_candidate_starts_only_when_the_median_candidate_fits() -> None:
    """Checks at 0, 10, 40, 50 s measure candidates of 10, 30 and 10 s; at 75 s (median 17.5) one more fits
    the 100 s budget, at 90 s (median 15) it does not; the stop event says why."""
    rec = Rec()
    control = RunControl(rec, BudgetLimits(seconds=100))
    for t in (0.0, 10.0, 40.0, 50.0):
        assert control.check(Usage(seconds=t), outer_generation=1) is None
    assert control.candidate_seconds == [10.0, 30.0, 10.0]
    assert control.check(Usage(seconds=75.0), outer_generation=2, harness_id="g2c0") is None
    stop = control.check(Usage(seconds=90.0), outer_generation=2, harness_id="g2c1")
    assert stop is not None and stop.key == "outer.budget.seconds"
    assert "90 s used + 15 s expected for the next step (median of 5 candidate(s) so far)" in stop.detail
    (event,) = rec.events
    assert event.key == "outer.budget.seconds" and event.where == {"outer_generation": 2, "harness_id": "g2c1"}


def test_the_first_candidate_and_replayed_ones_are_not_measured() -> None:
    """No measurement before two live checks: the first candidate starts while any second is left; checks
    answered from a resumed run's replay measure nothing, nor does the span from the last of them."""

    class Replay:
        replaying = True

        def next_stored_event(self) -> tuple[str, dict[str, Any]]:
            return ("task_batch", {})

    control = RunControl(Rec(), BudgetLimits(seconds=100), replay=Replay())
    assert control.check(Usage(seconds=0.0)) is None
    assert control.check(Usage(seconds=1.0)) is None
    control.replay = None
    assert control.check(Usage(seconds=99.0)) is None  # past the replay: first live check, nothing measured
    assert control.candidate_seconds == []
    assert control.check(Usage(seconds=99.6)).key == "outer.budget.seconds"  # 0.6 s measured: 100.2 > limit
