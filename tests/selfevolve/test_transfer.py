"""The base model vs the final adapter on transfer items: clustered by meeting, archived, read back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evotrainer.archive.recorder import RunRecorder
from evotrainer.archive.store import ArchiveStore
from evotrainer.backends.base import SamplingParams
from evotrainer.events.selfevolve import SelfEvolveTransferEvent
from evotrainer.genome import Policy
from evotrainer.rollout import RolloutEvaluator
from evotrainer.selfevolve.transfer import (
    AdapterTransfer,
    base_policy,
    compare_adapter,
    from_event,
    score_transfer,
    to_event,
)
from evotrainer.tasks.meeting_minutes import DEFAULT_DIFFICULTY, MeetingMinutes
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from tests.selfevolve._fakes import FakeLLM

POLICY = Policy.seed("p0", {"role": "You write meeting minutes.", "format": "Use Markdown headers.", "rules": ""})


def test_the_difference_is_clustered_by_group_and_counted_per_item() -> None:
    ids = ["a1", "a2", "b1", "c1"]
    groups = ["A", "A", "B", None]
    base = [0.2, 0.2, 0.4, 0.1]
    final = [0.4, 0.2, 0.3, None]  # a failed item counts 0.0
    t = compare_adapter(ids, groups, base, final, base_id="p0", final_id="se2-x", seed=0)
    assert (t.wins, t.losses, t.ties) == (1, 2, 1)
    assert t.groups == ("A", "A", "B", "item:c1") and t.diff.n == 3  # three clusters
    assert t.diff.mean == pytest.approx(np.mean([0.1, -0.1, -0.1]))  # each cluster's mean difference, averaged
    assert t.diff.low <= t.diff.mean <= t.diff.high and not t.same
    assert t.final_values == (0.4, 0.2, 0.3, 0.0) and t.final_mean == pytest.approx(0.225)
    assert "W/L/T 1/2/1" in t.verdict and "3 groups" in t.verdict
    again = compare_adapter(ids, groups, base, final, base_id="p0", final_id="se2-x", seed=0)
    assert again == t  # the bootstrap's generator comes from the seed and the ids


def test_the_verdict_says_what_the_interval_shows() -> None:
    ids, groups = [f"i{k}" for k in range(6)], [f"m{k}" for k in range(6)]
    base = [0.1] * 6
    better = compare_adapter(ids, groups, base, [0.3, 0.2, 0.25, 0.3, 0.2, 0.3], base_id="p", final_id="q", seed=1)
    assert better.diff.low > 0 and better.verdict.endswith("the adapter helps")
    worse = compare_adapter(ids, groups, base, [0.0] * 6, base_id="p", final_id="q", seed=1)
    assert worse.verdict.endswith("the adapter hurts")
    mixed = compare_adapter(ids, groups, base, [0.2, 0.0, 0.2, 0.0, 0.2, 0.0], base_id="p", final_id="q", seed=1)
    assert mixed.verdict.endswith("no difference shown (the interval holds 0)")
    same = compare_adapter(ids, groups, base, base, base_id="p", final_id="p", seed=1)
    assert same.same and same.diff.mean == 0.0 and same.verdict.endswith("the final policy is the base")
    one = compare_adapter(["i0", "i1"], ["m", "m"], [0.1, 0.1], [0.2, 0.2], base_id="p", final_id="q", seed=1)
    assert one.diff.n == 1 and "one item: no interval" in one.verdict and one.verdict.endswith("one group, no interval")
    with pytest.raises(ValueError, match="expected equal and >= 1"):
        compare_adapter([], [], [], [], base_id="p", final_id="q", seed=0)
    with pytest.raises(ValueError, match="2 items, 1 groups"):
        compare_adapter(["a", "b"], ["m"], [0.1, 0.2], [0.1, 0.2], base_id="p", final_id="q", seed=0)


def test_the_event_round_trips_every_number() -> None:
    t = compare_adapter(["a", "b", "c"], ["m1", "m1", "m2"], [0.2, 0.1, 0.3], [0.25, 0.1, 0.2], base_id="p0",
                        final_id="se2-x", seed=3)
    e = to_event(t, "adapters/round_002")
    assert isinstance(e, SelfEvolveTransferEvent) and e.final_adapter == "adapters/round_002"
    assert e.verdict == t.verdict and e.comparison is not None and e.comparison["clusters"] == 2
    assert from_event(e) == t
    with pytest.raises(ValueError, match="comparison is malformed"):
        from_event(replace(e, comparison={"diff": 0.1}))
    with pytest.raises(ValueError, match="comparison is malformed"):
        from_event(replace(e, comparison=None))


def test_base_policy_drops_only_the_adapter() -> None:
    assert base_policy(POLICY) is POLICY
    tuned = replace(POLICY, id="se1-x", adapter="/runs/a/adapters/round_001")
    base = base_policy(tuned)
    assert base.adapter is None and base.sections == tuned.sections and base.id == "se1-x+base"
    assert base.parent_ids == ("se1-x",)


def _items(family: MeetingMinutes) -> list[MeetingTask]:
    """Three generated meetings posing as transfer windows of two meetings."""
    tasks = family.generate(np.random.default_rng(11), DEFAULT_DIFFICULTY, 3)
    return [replace(t, meta={**t.meta, "meeting": m}) for t, m in zip(tasks, ("M1", "M1", "M2"), strict=True)]


def test_score_transfer_scores_both_policies_in_one_call_and_archives_them(tmp_path: Path) -> None:
    family = MeetingMinutes(prompt_layout="system_first")
    items = _items(family)
    fake = FakeLLM(items, answer=lambda task, adapter: task.reference_minutes if adapter else "- nothing useful")
    evaluator = RolloutEvaluator(fake, family, sampling=SamplingParams(max_new_tokens=64))
    final = replace(POLICY, id="se2-x", adapter=str(tmp_path / "adapters" / "round_002"), parent_ids=("p0",))
    with ArchiveStore(tmp_path / "archive.db") as store:
        rec = RunRecorder(store, "run0")
        rec.start(0, {"mode": "selfevolve"})
        rec.policies([POLICY, final])
        t = score_transfer(evaluator, rec, POLICY, final, items, seed=0, final_adapter="adapters/round_002")
        assert isinstance(t, AdapterTransfer) and t.groups == ("M1", "M1", "M2")
        assert t.final_mean > t.base_mean and (t.wins, t.losses) == (3, 0) and t.diff.n == 2
        assert {r.adapter for r in fake.requests} == {None, final.adapter}  # base without adapter
        evals = store.evaluations("run0")
        assert [(e.policy_id, e.kind) for e in evals] == [("p0", "meta_transfer"), ("se2-x", "meta_transfer")]
        (event,) = [e for e in store.events("run0") if e.kind == "selfevolve_transfer"]
        assert from_event(event.event) == t
        assert score_transfer(evaluator, rec, POLICY, final, [], seed=0, final_adapter=None) is None


def test_score_transfer_without_a_kept_adapter_scores_once_and_says_so(tmp_path: Path) -> None:
    family = MeetingMinutes(prompt_layout="system_first")
    items = _items(family)
    fake = FakeLLM(items)
    evaluator = RolloutEvaluator(fake, family, sampling=SamplingParams(max_new_tokens=64))
    with ArchiveStore(tmp_path / "archive.db") as store:
        rec = RunRecorder(store, "run0")
        rec.start(0, {"mode": "selfevolve"})
        rec.policies([POLICY])
        t = score_transfer(evaluator, rec, POLICY, POLICY, items, seed=0, final_adapter=None)
        assert t is not None and t.same and t.diff.mean == 0.0 and len(fake.requests) == len(items)
        assert [e.kind for e in store.evaluations("run0")] == ["meta_transfer"]
