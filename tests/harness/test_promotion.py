"""The one promotion rule both rooms use (evotrainer/harness/promotion.py)."""

from __future__ import annotations

from evotrainer.harness.promotion import Promotion, PromotionRule
from evotrainer.harness.racing import paired_bound


def test_paired_items_decide_on_the_lower_bound() -> None:
    inc, cand = [0.2, 0.3, 0.4, 0.5, 0.6], [0.4, 0.5, 0.6, 0.7, 0.8]
    got = PromotionRule(0.95).decide(0.4, 0.6, inc, cand)
    assert got == Promotion(True, paired_bound(inc, cand, 0.95))
    noisy = [0.9, 0.1, 0.9, 0.1, 0.9]  # higher mean, but no confident gain
    assert not PromotionRule(0.95).decide(0.4, 0.58, inc, noisy).promoted


def test_means_decide_without_paired_items() -> None:
    assert PromotionRule().decide(0.5, 0.6) == Promotion(True, None)
    assert not PromotionRule().decide(0.5, 0.5).promoted  # the evolve room keeps its incumbent on ties
    assert PromotionRule(ties=True).decide(0.5, 0.5).promoted  # self-evolution keeps an adapter that did not fall
    assert not PromotionRule(ties=True).decide(0.5, 0.49).promoted
    assert PromotionRule().decide(0.5, 0.6, [0.5, 0.5], [0.6]).evidence is None  # lengths differ: the means
