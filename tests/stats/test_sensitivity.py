"""The harness sensitivity study (issue 25): per-knob Spearman rho of knob value vs run-centred candidate score."""

from __future__ import annotations

import numpy as np
import pytest

from evotrainer.stats.sensitivity import CandidatePoint, knob_values, sensitivity


def _points(seed: int = 0) -> list[CandidatePoint]:
    rng = np.random.default_rng(seed)
    pts = []
    for run, offset in (("a", 0.0), ("b", 0.3)):  # run b scores higher throughout: centring must remove it
        for i in range(20):
            length, noise = float(rng.uniform(100, 900)), float(rng.uniform(0, 1))
            score = offset + 0.001 * length + 0.02 * float(rng.normal())
            pts.append(CandidatePoint(run, f"h{i}", {"length": length, "noise": noise, "frozen": 1.0}, score))
    return pts


def test_a_knob_that_drives_the_score_ranks_first_with_an_interval_above_zero() -> None:
    rows = sensitivity(_points(), resamples=500)
    assert [r.knob for r in rows] == ["length", "noise", "frozen"]
    length, noise, frozen = rows
    assert length.rho > 0.8 and length.excludes_zero and length.low > 0
    assert not noise.excludes_zero
    assert frozen.rho is None and frozen.spread == 0 and not frozen.excludes_zero


def test_the_same_seed_gives_the_same_intervals() -> None:
    assert sensitivity(_points(), resamples=300, seed=3) == sensitivity(_points(), resamples=300, seed=3)


def test_knob_values_reads_the_flat_values_or_merges_difficulty_and_weights() -> None:
    assert knob_values({"values": {"length": 300, "format": 0.2, "name": "x", "flag": True}}) == {
        "length": 300.0, "format": 0.2}
    assert knob_values({"difficulty": {"length": 300}, "reward_weights": {"format": 0.2}}) == {
        "length": 300.0, "format": 0.2}


@pytest.mark.parametrize("kwargs", [{"level": 1.0}, {"resamples": 10}])
def test_bad_settings_raise(kwargs) -> None:
    with pytest.raises(ValueError):
        sensitivity(_points(), **kwargs)
