"""Pure outer-loop policies: top-k pair archive, rollback rule, stopping (the reward-hacking flag: test_scoring.py)."""

from __future__ import annotations

import pytest

from evotrainer.harness.rollback import ArchivedPair, RollbackRule, archive_pair, rollback_cause
from evotrainer.harness.stopping import BudgetLimits, Usage, budget_stop, plateau_stop


def _pair(s: float, g: int) -> ArchivedPair:
    return ArchivedPair(s, None, (), None, g, f"g{g}")


def test_archive_keeps_top_k_best_first_earlier_on_ties() -> None:
    pairs: tuple[ArchivedPair, ...] = ()
    for s, g in [(0.5, 0), (0.7, 1), (0.6, 2), (0.7, 3), (0.4, 4)]:
        pairs = archive_pair(pairs, _pair(s, g), 3)
    assert [p.harness_id for p in pairs] == ["g1", "g3", "g2"]
    with pytest.raises(ValueError):
        archive_pair(pairs, _pair(0.1, 5), 0)


def test_regression_needs_consecutive_generations_below_tolerance() -> None:
    rule = RollbackRule(tolerance=0.05, generations=2, oscillation_threshold=1.0)
    assert rollback_cause([0.6, 0.5], 0.6, rule) is None  # one generation only
    assert rollback_cause([0.6, 0.5, 0.56], 0.6, rule) is None  # within tolerance once
    trig = rollback_cause([0.6, 0.5, 0.54], 0.6, rule)
    assert trig is not None and trig.cause == "regression"
    assert rollback_cause([0.5, 0.5], 0.6, RollbackRule(generations=1, tolerance=0.05)).cause == "regression"


def test_oscillation_counts_sign_changes_of_large_deltas_in_window() -> None:
    rule = RollbackRule(tolerance=1.0, oscillation_threshold=0.05, oscillations=2, window=4)
    assert rollback_cause([0.5, 0.6, 0.5], 0.6, rule) is None  # one change
    trig = rollback_cause([0.5, 0.6, 0.5, 0.6], 0.6, rule)
    assert trig is not None and trig.cause == "oscillation"
    assert rollback_cause([0.5, 0.52, 0.5, 0.52], 0.6, rule) is None  # swings below the threshold
    # old swings fall out of the window
    assert rollback_cause([0.5, 0.6, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6], 0.6, rule) is None


def test_budget_and_plateau() -> None:
    limits = BudgetLimits(seconds=10, tokens=100, evaluations=5)
    assert budget_stop(Usage(9.9, 99, 4), limits) is None
    assert budget_stop(Usage(10, 0, 0), limits).key == "outer.budget.seconds"
    assert budget_stop(Usage(0, 100, 9), limits).key == "outer.budget.tokens"
    assert budget_stop(Usage(0, 0, 5), limits).key == "outer.budget.evaluations"
    assert budget_stop(Usage(1e9, 10**9, 10**9), BudgetLimits()) is None
    # prompt tokens (issue 29): the cost measure when one item is 10x longer than another
    assert budget_stop(Usage(0, 0, 0, prompt_tokens=499), BudgetLimits(prompt_tokens=500)) is None
    assert budget_stop(Usage(0, 0, 0, prompt_tokens=500), BudgetLimits(prompt_tokens=500)).key == (
        "outer.budget.prompt_tokens")
    assert plateau_stop([0.5, 0.5], 0.0, 2) is None  # not enough generations yet
    assert plateau_stop([0.5, 0.5, 0.5], 0.0, 2).key == "outer.patience"  # zero gain never counts
    assert plateau_stop([0.5, 0.5, 0.52], 0.01, 2) is None
    assert plateau_stop([0.5, 0.5, 0.505], 0.01, 2) is not None
