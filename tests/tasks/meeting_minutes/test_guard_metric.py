import math

import numpy as np
import pytest

from evotrainer.tasks.meeting_minutes import (
    DEFAULT_DIFFICULTY,
    DEFAULT_REWARD_WEIGHTS,
    SCORER_VERSION,
    degenerate_reason,
    generate,
    meta_score,
    reward,
    s_val,
)
from evotrainer.tasks.meeting_minutes.task import MeetingTask

from ._fixtures import BAD, GOOD, TASK

DEGENERATE = {
    "empty": "",
    "whitespace": "  \n\t \n",
    "copied": TASK.transcript,
    "copied_excerpt": "\n".join(TASK.transcript.splitlines()[:6]),
    "repeated_line": "\n".join(["- The meeting discussed things."] * 20),
    "loop_without_newlines": "and then we and then we " * 30,
}
EXPECTED_REASON = {
    "empty": "empty",
    "whitespace": "empty",
    "copied": "copied_transcript",
    "copied_excerpt": "copied_transcript",
    "repeated_line": "repetition",
    "loop_without_newlines": "repetition",
}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_guard_reason_and_scores_below_a_real_summary(case):
    output = DEGENERATE[case]
    assert degenerate_reason(output, TASK.transcript) == EXPECTED_REASON[case]
    guarded = reward(output, TASK, DEFAULT_REWARD_WEIGHTS)
    assert guarded.total == 0.0
    assert guarded.degenerate == EXPECTED_REASON[case]
    assert set(guarded.components) == {"completeness", "format", "action_count", "action_f1", "content"}
    assert guarded.total < reward(GOOD, TASK, DEFAULT_REWARD_WEIGHTS).total
    score = meta_score(output, TASK)
    assert score.value == 0.0 and score.parts["degenerate"] == 1.0
    assert score.value < meta_score(GOOD, TASK).value


def test_copied_transcript_would_score_well_without_the_guard():
    # The reason the guard exists: the transcript covers every topic.
    assert reward(TASK.transcript, TASK, DEFAULT_REWARD_WEIGHTS).components["completeness"] == 1.0


def test_guard_passes_honest_minutes():
    assert degenerate_reason(GOOD, TASK.transcript) is None
    assert degenerate_reason(BAD, TASK.transcript) is None
    assert degenerate_reason(TASK.reference_minutes, TASK.transcript) is None
    for task in generate(np.random.default_rng(0), DEFAULT_DIFFICULTY, 20):
        assert degenerate_reason(task.reference_minutes, task.transcript) is None


def test_meta_score_identical_and_unrelated():
    same = meta_score(TASK.reference_minutes, TASK)
    assert same.parts["rouge_l"] == pytest.approx(1.0)
    assert same.parts["rouge_lsum"] == pytest.approx(1.0)
    assert same.parts["action_f1"] == pytest.approx(1.0)
    assert same.value == pytest.approx(1.0)
    unrelated = meta_score("Quarterly revenue rose in Asia while shipping costs fell sharply.", TASK)
    assert unrelated.parts["rouge_l"] < 0.1
    assert unrelated.value < 0.1
    good = meta_score(GOOD, TASK)
    assert unrelated.value < good.value < 1.0


def test_meta_score_without_action_items_is_content_only():
    task = MeetingTask(task_id="q", transcript="A: we talked budgets\nB: yes",
                       reference_minutes="They reviewed the budget.")
    score = meta_score("The budget was reviewed.", task)
    # mm-5: the value is the content score; ROUGE-Lsum and plain ROUGE-L are reported alongside.
    assert set(score.parts) == {"content", "lexical", "semantic", "grounded", "rouge_lsum", "rouge_l", "degenerate"}
    assert score.parts["degenerate"] == 0.0
    assert score.value == score.parts["content"] > 0.3


def test_meta_score_is_finite_on_odd_text():
    for text in ["###", "- \n- ", "\u00e9\u00e8\u00ea", "1. 2. 3.", "x" * 5000]:
        score = meta_score(text, TASK)
        assert math.isfinite(score.value) and 0.0 <= score.value <= 1.0


def test_s_val_mean_and_items():
    mean, items = s_val([TASK.reference_minutes, ""], [TASK, TASK])
    assert mean == pytest.approx(0.5)
    assert [s.value for s in items] == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError):
        s_val(["a"], [TASK, TASK])
    with pytest.raises(ValueError):
        s_val([], [])
    assert SCORER_VERSION == "mm-5"
