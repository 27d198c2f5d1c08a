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


def test_a_pooled_gain_that_hides_a_loss_on_one_source_is_refused() -> None:
    """The long-meeting run's case: better on the whole set thanks to the short items, worse on the long ones."""
    short_inc, short_cand = [0.20, 0.25, 0.30, 0.22, 0.28, 0.24, 0.26, 0.21], [0.30, 0.34, 0.41, 0.33, 0.37, 0.35,
                                                                            0.36, 0.30]
    long_inc, long_cand = [0.05, 0.06, 0.04, 0.07], [0.03, 0.045, 0.02, 0.055]
    inc, cand = short_inc + long_inc, short_cand + long_cand
    strata = ["mv"] * 8 + ["elitr"] * 4
    pooled = PromotionRule(0.95).decide(0.0, 0.0, inc, cand, strata)
    assert pooled.promoted and pooled.refused_on is None  # no stratum check unless asked for
    got = PromotionRule(0.95, stratum_level=0.8).decide(0.0, 0.0, inc, cand, strata)
    assert not got.promoted and got.evidence == paired_bound(inc, cand, 0.95)  # the pooled bound is still reported
    assert got.refused_on == ("elitr", paired_bound(long_inc, long_cand, 0.8))
    assert got.refused_stratum is not None and got.refused_stratum["stratum"] == "elitr"
    assert got.refused_stratum["n"] == 4 and got.refused_stratum["high"] < 0
    # a stratum below the minimum size is not checked, nor are labels of another length
    assert PromotionRule(0.95, stratum_level=0.8, stratum_min_items=5).decide(0.0, 0.0, inc, cand, strata).promoted
    assert PromotionRule(0.95, stratum_level=0.8).decide(0.0, 0.0, inc, cand, strata[:-1]).promoted
    # a candidate no worse on any stratum is promoted as before
    even = short_cand + [0.06, 0.07, 0.05, 0.08]
    assert PromotionRule(0.95, stratum_level=0.8).decide(0.0, 0.0, inc, even, strata).promoted
