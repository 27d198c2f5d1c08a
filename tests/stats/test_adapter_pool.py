"""Pooling a trained adapter's difference from its prompt alone over runs (:mod:`evotrainer.stats.adapter_pool`)."""

from __future__ import annotations

import pytest

from evotrainer.stats.adapter_pool import AdapterRun, from_distill, pool_adapters

IDS = ("w1", "w2", "w3", "w4", "w5", "w6")
GROUPS = ("m1", "m1", "m2", "m3", "m4", "m5")
BASE = (0.10, 0.20, 0.15, 0.30, 0.05, 0.25)


def _run(seed: int, gains: tuple[float, ...]) -> AdapterRun:
    return AdapterRun(f"r{seed}", "selfevolve", seed, "plain", f"a{seed}", IDS, GROUPS, BASE,
                      tuple(b + g for b, g in zip(BASE, gains, strict=True)))


def test_a_gain_on_every_meeting_of_two_runs_helps_and_groups_are_the_clusters():
    p = pool_adapters([_run(0, (0.05, 0.03, 0.04, 0.06, 0.02, 0.05)), _run(1, (0.03, 0.05, 0.02, 0.04, 0.04, 0.03))],
                      seed=0)
    assert p is not None and p.helps and p.low > 0 and "the adapter helps" in p.verdict
    assert (p.runs, p.items, p.groups, p.n) == (2, 6, 5, 5)  # m1's two windows are one cluster
    assert (p.wins, p.losses, p.ties) == (12, 0, 0)
    assert p.mean == pytest.approx(0.038)  # meetings weigh equally: m1 0.04, m2 0.03, m3 0.05, m4 0.03, m5 0.04
    assert p.adapter_mean - p.base_mean == pytest.approx(0.46 / 12)  # items weigh equally


def test_a_run_that_kept_nothing_counts_as_zero_and_mixed_signs_show_nothing():
    kept_nothing = _run(1, (0.0,) * 6)
    p = pool_adapters([_run(0, (0.05, -0.04, 0.03, -0.05, 0.02, -0.01)), kept_nothing], seed=0)
    assert p is not None and not p.helps and "no difference shown" in p.verdict and p.ties == 6
    assert pool_adapters([], seed=0) is None
    one = pool_adapters([_run(0, (0.1,) * 6)], seed=0)
    assert one is not None and one.helps  # one run, five meetings: an interval
    with pytest.raises(ValueError, match="6 items but 5 groups"):
        AdapterRun("r", "distill", 0, "b", "a", IDS, GROUPS[:5], BASE, BASE)


def test_a_distill_result_compares_the_student_with_its_prompt_alone():
    doc = {"run_id": "di-1", "seed": 3, "student_prompt": "plain_prompt",
           "arms": {"plain": {"policy_id": "plain_prompt"}, "teacher": {"policy_id": "no_role"},
                    "student": {"policy_id": "distill-x"}},
           "items": [{"id": "w1", "group": "m1", "plain": 0.1, "teacher": 0.3, "student": 0.2},
                     {"id": "w2", "group": None, "plain": 0.2, "teacher": 0.1, "student": None}]}
    r = from_distill(doc)
    assert (r.run_id, r.mode, r.seed, r.base_id, r.adapter_id) == ("di-1", "distill", 3, "plain_prompt", "distill-x")
    assert r.groups == ("m1", "w2") and r.base_values == (0.1, 0.2) and r.adapter_values == (0.2, 0.0)
    own = {**doc, "student_prompt": "terse", "arms": {**doc["arms"], "student_prompt": {"policy_id": "terse"}},
           "items": [{**i, "student_prompt": 0.4} for i in doc["items"]]}
    assert from_distill(own).base_values == (0.4, 0.4)  # the short prompt alone, not the plain prompt
    with pytest.raises(ValueError, match="no arm scores the student's prompt 'terse' alone"):
        from_distill({**doc, "student_prompt": "terse"})
    with pytest.raises(ValueError, match="not a distill result document: missing 'items'"):
        from_distill({k: v for k, v in doc.items() if k != "items"})
