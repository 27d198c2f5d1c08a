import pytest

from evotrainer.errors import ConfigError
from evotrainer.tasks.meeting_minutes import (
    DEFAULT_REWARD_WEIGHTS,
    REWARD_COMPONENTS,
    reward,
)
from evotrainer.tasks.meeting_minutes.matching import action_f1, content_stems, topic_coverage
from evotrainer.tasks.meeting_minutes.minutes_format import parse_action_item, parse_minutes
from evotrainer.tasks.meeting_minutes.rewards import action_count_score, reward_components
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask
from evotrainer.tasks.reward_weights import check_reward_weights, on_simplex

from ._fixtures import BAD, GOOD, TASK


def test_good_minutes_score_high_on_every_component():
    comps = reward_components(GOOD, TASK)
    assert set(comps) == set(REWARD_COMPONENTS)
    assert {k: v for k, v in comps.items() if k != "content"} == {
        "completeness": 1.0, "format": 1.0, "action_count": 1.0, "action_f1": 1.0}
    assert comps["content"] > 0.8  # GOOD is close to the reference minutes
    assert reward(GOOD, TASK, DEFAULT_REWARD_WEIGHTS).total == pytest.approx(1.0)


def test_bad_minutes_score_low_on_every_component():
    comps = reward_components(BAD, TASK)
    assert comps["completeness"] == 0.0
    assert comps["format"] == 0.0
    assert comps["action_count"] == 0.0
    assert comps["action_f1"] == 0.0
    assert reward(BAD, TASK, DEFAULT_REWARD_WEIGHTS).total == 0.0


def test_completeness_counts_covered_topics_by_stems():
    assert topic_coverage(TASK.topics, "We discussed the greenhouse heating budgets.") == 0.5
    assert topic_coverage(TASK.topics, "Heating of the greenhouse; the seed swapping volunteers") == 1.0
    assert topic_coverage(TASK.topics, "budget") == 0.0  # one word of three is below the threshold
    assert topic_coverage((), "anything") == 1.0
    assert content_stems("Sending the reports") == {"send", "report"}


def test_format_rewards_headers_and_bullets():
    only_bullets = "- one\n- two"
    labels = "Topics:\n- a\nDecisions:\n- b\nNext steps:\n- Ottilie: book the hall"
    assert reward_components(only_bullets, TASK)["format"] == 0.25
    assert reward_components(labels, TASK)["format"] == 1.0
    assert reward_components("**Key points**\ntext\n**Agreed**\ntext", TASK)["format"] == 0.5


@pytest.mark.parametrize("n, expected", [(0, 0.0), (1, 0.5), (2, 1.0), (5, 1.0), (6, 0.8), (10, 0.0), (12, 0.0)])
def test_action_count_band(n, expected):
    assert action_count_score(n, (2, 5)) == pytest.approx(expected)


def test_action_count_band_is_configurable():
    text = "## Action items\n" + "\n".join(f"- Ottilie: task {i}" for i in range(7))
    assert reward(text, TASK, DEFAULT_REWARD_WEIGHTS, band=(6, 8)).components["action_count"] == 1.0
    assert reward(text, TASK, DEFAULT_REWARD_WEIGHTS).components["action_count"] < 1.0


def test_action_f1_owner_match_and_mismatch():
    truth = (ActionItem("Baptiste Moreau", "ask the supplier for a revised quote"),)
    right = [parse_action_item("Baptiste: ask supplier for revised quote")]
    full = [parse_action_item("BAPTISTE MOREAU - request a revised quote from the supplier")]
    wrong_owner = [parse_action_item("Rosalind: ask the supplier for a revised quote")]
    wrong_task = [parse_action_item("Baptiste: book the hall")]
    no_owner_field = [parse_action_item("Ask the supplier for a revised quote, Baptiste")]
    assert action_f1(right, truth) == 1.0
    assert action_f1(wrong_owner, truth) == 0.0
    assert action_f1(wrong_task, truth) == 0.0
    assert action_f1(no_owner_field, truth) == 1.0
    assert action_f1(full, truth) == 1.0  # owner names match case-insensitively
    assert action_f1([parse_action_item("Baptiste Moreau - ask the supplier for a quote")], truth) == 1.0


def test_action_f1_is_one_to_one_and_partial():
    truth = TASK.action_items
    one = [parse_action_item("Ottilie: book the community hall")]
    twice = one * 2
    assert action_f1(one, truth) == pytest.approx(2 * (1.0 * (1 / 3)) / (1 + 1 / 3))
    assert action_f1(twice, truth) == pytest.approx(2 * (0.5 * (1 / 3)) / (0.5 + 1 / 3))


def test_action_f1_without_ground_truth_items():
    empty = MeetingTask(task_id="x", transcript="A: hi\nB: hello", topics=("Greetings",))
    assert reward_components("## Action items\n- None", empty)["action_f1"] == 1.0
    assert reward_components("## Action items\n- Ann: call Bob", empty)["action_f1"] == 0.0


@pytest.mark.parametrize(
    "line, owner, task",
    [
        ("- Maria: send the report", "Maria", "send the report"),
        ("- [Maria] send the report", "Maria", "send the report"),
        ("- Send the report (Maria)", "Maria", "Send the report"),
        ("* Send the report. Owner: Maria", "Maria", "Send the report"),
        ("1. Maria will send the report by Friday", "Maria", "send the report by Friday"),
        ("- [ ] **Maria**: send the report (due Friday)", "Maria", "send the report"),
    ],
)
def test_parse_action_item_formats(line, owner, task):
    parsed = parse_minutes("## Action items\n" + line).action_items
    assert len(parsed) == 1
    assert parsed[0].owner == owner and parsed[0].task == task


def test_parse_actions_without_header_and_with_continuations():
    text = "Summary: fine.\nAction item: Maria to email the vendor.\nOwner: Tomasz - book the hall\nplain line"
    items = parse_minutes(text).action_items
    assert [i.owner for i in items] == ["Maria", "Tomasz"]
    nested = "ACTION ITEMS\n- Send the report\n  Owner: Maria\n  Due: Friday\n- None"
    items = parse_minutes(nested).action_items
    assert len(items) == 1 and items[0].owner == "Maria" and items[0].due == "Friday"


def test_weights_are_validated_and_renormalised():
    assert on_simplex(check_reward_weights({"completeness": 2, "format": 2}, REWARD_COMPONENTS),
                      REWARD_COMPONENTS) == {"completeness": 0.5, "format": 0.5, "action_count": 0.0, "action_f1": 0.0, "content": 0.0}
    with pytest.raises(ConfigError, match="task.reward_weights.format"):
        check_reward_weights({"format": -1}, REWARD_COMPONENTS)
    with pytest.raises(ConfigError, match="task.reward_weights.style"):
        check_reward_weights({"style": 1}, REWARD_COMPONENTS)
    with pytest.raises(ConfigError, match="task.reward_weights"):
        check_reward_weights({"format": 0}, REWARD_COMPONENTS)
    with pytest.raises(ConfigError, match="task.reward_weights.format"):
        check_reward_weights({"format": True}, REWARD_COMPONENTS)
    only_f1 = reward(GOOD, TASK, {"action_f1": 5.0})
    assert only_f1.total == pytest.approx(1.0)


def test_form_alone_earns_nothing_under_any_weights():
    """Issue 24 item 5: the skeleton scored 0.5 under the default weights; the content gate makes it 0."""
    import numpy as np

    from evotrainer.tasks.meeting_minutes.generator import DEFAULT_DIFFICULTY, generate
    from evotrainer.tasks.meeting_minutes.probes import SKELETON
    from evotrainer.tasks.meeting_minutes.rewards import content_gate, reward

    skeleton2 = SKELETON + "\n- Owner: task (due: date)"
    assert content_gate(skeleton2, TASK) == 0.0 and content_gate(GOOD, TASK) == 1.0
    for weights in ({"format": 1.0}, {"action_count": 1.0}, {"format": 0.5, "action_count": 0.5}, None):
        assert reward(skeleton2, TASK, weights).total == 0.0
        assert reward(GOOD, TASK, weights).total > 0.5
    # on a generated batch, the skeleton never wins: a short honest output beats it under form-only weights
    for task in generate(np.random.default_rng(3), DEFAULT_DIFFICULTY, 5):
        honest = task.reference_minutes
        assert reward(honest, task, {"format": 0.9, "completeness": 0.1}).total > \
            reward(skeleton2, task, {"format": 0.9, "completeness": 0.1}).total == 0.0
