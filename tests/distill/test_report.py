"""The pure parts of ``mode=distill``: which teacher outputs train, prompt tokens per call, the paired arms."""

from __future__ import annotations

import json
import re

import pytest
from rich.console import Console

from evotrainer.distill.report import (
    PromptTokens,
    compare_arms,
    keep_outputs,
    prompt_tokens,
    render_comparisons,
    result_json,
    score_arms,
    token_savings,
)
from evotrainer.stats.bootstrap import paired_difference, rng_for

# --- teacher outputs ---------------------------------------------------------------------------------------------


def test_guarded_failed_and_blank_outputs_are_dropped_and_counted_by_reason() -> None:
    items = ["a", "b", "c", "d", "e", "f"]
    outputs = ["good one", "loop loop", "", "   ", "copied", "good two"]
    rewards = [0.6, 0.0, None, 0.2, 0.0, 0.4]
    guard = [None, "repetition", None, None, "copied_transcript", None]
    kept = keep_outputs(items, outputs, rewards, guard)
    assert kept.kept == (("a", "good one"), ("f", "good two"))
    assert kept.dropped == {"copied_transcript": 1, "empty": 1, "failed": 1, "repetition": 1}


def test_outputs_and_items_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="2 items, 1 outputs"):
        keep_outputs(["a", "b"], ["x"], [0.1, 0.2], [None, None])


# --- prompt tokens -----------------------------------------------------------------------------------------------


def _build(sections, item):  # a chat builder like a family's: the item's input, then the policy's text
    text = " ".join(t for _, t in sections if t)
    return ({"role": "system", "content": ""}, {"role": "user", "content": f"{item} {text}".strip()})


def _words(messages) -> int:
    return sum(len(m["content"].split()) for m in messages)


def test_policy_tokens_are_the_call_minus_the_same_call_with_an_empty_prompt() -> None:
    items = ["one two three", "one two three four five"]  # inputs of 3 and 5 tokens
    long = prompt_tokens(_words, _build, [("role", "a b c d"), ("rules", "e f")], items)
    short = prompt_tokens(_words, _build, [("role", "g")], items)
    assert long == PromptTokens(total=4 + 6, policy=6) and short == PromptTokens(total=4 + 1, policy=1)
    saved = token_savings(long, short)
    assert saved == {"saved_per_call": 5, "share_of_policy_tokens": 5 / 6, "share_of_call": 5 / 10}
    assert token_savings(PromptTokens(0, 0), short)["share_of_policy_tokens"] is None
    with pytest.raises(ValueError, match="no item"):
        prompt_tokens(_words, _build, [("role", "g")], [])


# --- arms and their comparisons -----------------------------------------------------------------------------------


def _arms(values: dict[str, list[float | None]]):
    tokens = {r: PromptTokens(100.0, 10.0) for r in values}
    return score_arms({r: f"id-{r}" for r in values}, values, tokens, seed=0, n_resamples=200)


def test_arm_scores_count_a_failed_item_as_zero() -> None:
    arms = _arms({"plain": [0.2, None, 0.4], "teacher": [0.3, 0.3, 0.3], "student": [0.1, 0.5, float("nan")]})
    assert list(arms) == ["plain", "teacher", "student"]  # the roles' order, whatever the mapping's
    assert arms["plain"].values == (0.2, 0.0, 0.4) and arms["plain"].mean == pytest.approx(0.2)
    assert arms["student"].values == (0.1, 0.5, 0.0)
    assert arms["teacher"].low == arms["teacher"].high == pytest.approx(0.3)


def test_comparisons_are_a_minus_b_with_item_and_group_intervals_and_wins() -> None:
    arms = _arms({"plain": [0.1, 0.1, 0.2, 0.2], "teacher": [0.3, 0.2, 0.2, 0.1],
                  "student": [0.4, 0.3, 0.2, 0.3]})
    groups = ["m1", "m1", "m2", "m3"]  # two windows of one group move together
    comps = compare_arms(arms, groups, seed=3, n_resamples=500)
    assert [(c.a, c.b) for c in comps] == [("student", "teacher"), ("student", "plain"), ("teacher", "plain")]
    st = comps[0]
    assert st.diff.mean == pytest.approx(0.1) and (st.wins, st.losses, st.ties) == (3, 0, 1)
    assert st.diff == paired_difference(arms["teacher"].values, arms["student"].values,
                                        rng=rng_for(3, "distill", "id-student", "id-teacher"), n_resamples=500)
    assert st.diff.n == 4 and st.by_group.n == 3  # m1's two windows are one cluster
    assert st.by_group.mean == pytest.approx((0.1 + 0.0 + 0.2) / 3)  # each group's mean difference, averaged
    tp = comps[2]
    assert tp.diff.mean == pytest.approx(0.05) and (tp.wins, tp.losses, tp.ties) == (2, 1, 1)
    console = Console(record=True, width=200)
    console.print(render_comparisons(comps, level=0.95))
    assert re.search(r"student prompt \+ adapter − teacher prompt +│ \+0\.1000 .*│ +3 │ 3/0/1", console.export_text())
    with pytest.raises(ValueError, match="4 differences for 3 items"):
        compare_arms(arms, groups[:3], seed=3)


def test_the_student_prompt_arm_is_compared_when_present() -> None:
    arms = _arms({"teacher": [0.3, 0.2], "student_prompt": [0.1, 0.1], "student": [0.2, 0.2]})
    pairs = [(c.a, c.b) for c in compare_arms(arms, ["a", "b"], seed=0, n_resamples=100)]
    assert pairs == [("student", "teacher"), ("student", "student_prompt")]  # no plain arm: its pairs left out


def test_the_result_file_holds_arms_comparisons_and_per_item_values() -> None:
    arms = _arms({"plain": [0.1, 0.3], "teacher": [0.2, 0.2], "student": [0.3, 0.4]})
    comps = compare_arms(arms, ["g", "h"], seed=0, n_resamples=100)
    doc = json.loads(result_json({"run_id": "di-1", "timings": {"train": 1.5}}, arms, comps, ["x", "y"], ["g", "h"]))
    assert doc["run_id"] == "di-1" and doc["timings"] == {"train": 1.5}
    assert doc["arms"]["student"]["s_val"] == pytest.approx(0.35)
    assert doc["arms"]["student"]["prompt_tokens_per_call"] == {"total": 100.0, "policy": 10.0}
    first = doc["comparisons"][0]
    assert (first["a"], first["b"], first["wins"], first["losses"], first["groups"]) == ("student", "teacher", 2, 0, 2)
    assert doc["items"] == [{"id": "x", "group": "g", "plain": 0.1, "teacher": 0.2, "student": 0.3},
                            {"id": "y", "group": "h", "plain": 0.3, "teacher": 0.2, "student": 0.4}]
