import statistics

import numpy as np
import pytest

from evotrainer.errors import ConfigError
from evotrainer.tasks.meeting_minutes import (
    DEFAULT_DIFFICULTY,
    DIFFICULTY_BOUNDS,
    generate,
    resolve_difficulty,
)
from evotrainer.tasks.meeting_minutes.minutes_format import parse_minutes
from evotrainer.tasks.meeting_minutes.phrases import FIRST_NAMES
from evotrainer.tasks.meeting_minutes.scenarios import DOMAINS

LOW = {"length": 80, "speakers": 2, "topics": 1, "noise": 0.0, "action_items": 0, "implicit_owner": 0.0}
HIGH = {"length": 900, "speakers": 8, "topics": 6, "noise": 0.6, "action_items": 8, "implicit_owner": 1.0}


def test_same_seed_same_tasks_and_different_seeds_differ():
    a = generate(np.random.default_rng(7), DEFAULT_DIFFICULTY, 5)
    b = generate(np.random.default_rng(7), DEFAULT_DIFFICULTY, 5)
    c = generate(np.random.default_rng(8), DEFAULT_DIFFICULTY, 5)
    assert a == b
    assert [t.meta for t in a] == [t.meta for t in b]
    assert [t.task_id for t in a] != [t.task_id for t in c]
    assert len({t.task_id for t in a}) == 5
    assert all(t.task_id.startswith("mm-") and t.source == "generated" for t in a)


def test_higher_knobs_make_harder_tasks():
    low = generate(np.random.default_rng(0), LOW, 20)
    high = generate(np.random.default_rng(0), HIGH, 20)

    def mean(tasks, f):
        return statistics.mean(f(t) for t in tasks)

    assert mean(high, lambda t: t.meta["n_words"]) > 4 * mean(low, lambda t: t.meta["n_words"])
    assert mean(high, lambda t: len(t.topics)) == 6 and mean(low, lambda t: len(t.topics)) == 1
    assert mean(low, lambda t: t.meta["n_noise_turns"]) == 0
    assert mean(high, lambda t: t.meta["n_noise_turns"]) > 20
    assert mean(high, lambda t: len(t.action_items)) == 8 and mean(low, lambda t: len(t.action_items)) == 0
    assert mean(high, lambda t: t.meta["n_implicit_owners"]) == 8


@pytest.mark.parametrize("knob", sorted(DIFFICULTY_BOUNDS))
def test_each_knob_moves_its_measure(knob):
    lo, hi = DIFFICULTY_BOUNDS[knob]
    measure = {
        "length": lambda t: t.meta["n_words"],
        "speakers": lambda t: len({line.split(":")[0] for line in t.transcript.splitlines()}),
        "topics": lambda t: len(t.topics),
        "noise": lambda t: t.meta["n_noise_turns"],
        "action_items": lambda t: len(t.action_items),
        "implicit_owner": lambda t: t.meta["n_implicit_owners"],
    }[knob]
    base = dict(DEFAULT_DIFFICULTY, action_items=4, length=300)
    a = generate(np.random.default_rng(3), {**base, knob: lo}, 15)
    b = generate(np.random.default_rng(3), {**base, knob: hi}, 15)
    assert statistics.mean(map(measure, b)) > statistics.mean(map(measure, a))


def test_ground_truth_is_consistent_with_transcript():
    for task in generate(np.random.default_rng(11), dict(DEFAULT_DIFFICULTY, speakers=5, action_items=6), 30):
        speakers = {line.split(":")[0] for line in task.transcript.splitlines()}
        assert all(":" in line for line in task.transcript.splitlines())
        assert len(speakers) == task.meta["n_speakers"] == 5
        for item in task.action_items:
            assert item.owner in speakers
            assert item.task in task.transcript
        parsed = parse_minutes(task.reference_minutes)
        assert parsed.sections == {"topics", "decisions", "actions"}
        assert len(parsed.action_items) == len(task.action_items)


def test_reversed_decision_keeps_the_final_one():
    tasks = generate(np.random.default_rng(4), dict(DEFAULT_DIFFICULTY, topics=4), 40)
    reversed_tasks = [t for t in tasks if t.meta["n_reversals"]]
    assert reversed_tasks
    for task in reversed_tasks:
        for line in task.transcript.splitlines():
            if "changed my mind" in line or "after all" in line or "let's not" in line:
                final = line.rsplit("Let's ", 1)[-1].rsplit("We should ", 1)[-1].rsplit("I'd rather we ", 1)[-1]
                final = final.removesuffix(".").removesuffix(" instead")
                assert final.lower() in {d.lower() for d in task.decisions}


def test_varied_domains_and_phrasings():
    tasks = generate(np.random.default_rng(5), DEFAULT_DIFFICULTY, 60)
    assert len({t.meta["domain"] for t in tasks}) >= 8
    assert len(DOMAINS) >= 8
    first_topic_lines = {t.transcript.splitlines()[0].split(": ", 1)[1] for t in tasks}
    assert len(first_topic_lines) > 10


def test_generator_names_are_its_own_pool():
    tasks = generate(np.random.default_rng(6), dict(DEFAULT_DIFFICULTY, speakers=8), 10)
    for task in tasks:
        for item in task.action_items:
            assert item.owner.split()[0] in FIRST_NAMES


def test_float_knobs_are_rounded():
    knobs = resolve_difficulty({"speakers": 3.6, "topics": 1.2, "length": 250.4, "noise": 0.25})
    assert knobs["speakers"] == 4 and knobs["topics"] == 1 and knobs["length"] == 250 and knobs["noise"] == 0.25
    task = generate(np.random.default_rng(0), {"speakers": 3.6}, 1)[0]
    assert task.meta["n_speakers"] == 4


@pytest.mark.parametrize(
    "bad, key",
    [({"speakers": 0}, "task.difficulty.speakers"), ({"noise": 0.9}, "task.difficulty.noise"),
     ({"volume": 1}, "task.difficulty.volume"), ({"length": float("nan")}, "task.difficulty.length"),
     ({"topics": "two"}, "task.difficulty.topics")],
)
def test_bad_knobs_raise_config_error(bad, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        generate(np.random.default_rng(0), bad, 1)


def test_speakers_zero_message_names_range():
    with pytest.raises(ConfigError, match=r"\[2, 8\]"):
        resolve_difficulty({"speakers": 0})


def test_length_past_one_segment_gives_a_whole_meeting_with_late_decisions():
    """Issue 29: the length knob reaches hour-long meetings; their last decisions come late."""
    from evotrainer.tasks.meeting_minutes.generator import PART_WORDS

    knobs = dict(DEFAULT_DIFFICULTY, length=6000, topics=3)
    tasks = generate(np.random.default_rng(11), knobs, 3)
    assert tasks == generate(np.random.default_rng(11), knobs, 3)  # deterministic
    for t in tasks:
        parts = int(np.ceil(6000 / PART_WORDS))
        assert t.meta["parts"] == parts and len(t.meta["domains"]) == parts
        assert t.source == "generated" and t.meta["difficulty"]["length"] == 6000
        assert 0.7 * 6000 <= t.meta["n_words"] <= 1.6 * 6000
        assert len(t.topics) == 3 * parts
        # the last segment (its topics, decisions and action items close the ground truth) starts late
        assert sum(t.meta["part_words"][:-1]) >= 0.75 * t.meta["n_words"]
        assert t.reference_minutes.count("## ") == 3


def test_length_up_to_one_segment_keeps_the_tasks_of_earlier_releases():
    """A meeting of at most PART_WORDS is built in one piece: the same draws, ids and meta as before."""
    tasks = generate(np.random.default_rng(5), dict(DEFAULT_DIFFICULTY, length=900), 2)
    assert all("parts" not in t.meta and t.task_id.startswith("mm-") for t in tasks)
