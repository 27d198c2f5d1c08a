"""Tool-agent task generation (templates and exploration), answer checking and the JSONL form."""

from __future__ import annotations

import json
import random

import pytest

from evotrainer.errors import ConfigError, DataError
from evotrainer.tasks.tool_agent.env import ToolEnv
from evotrainer.tasks.tool_agent.generator import explore_tasks, generate_tasks
from evotrainer.tasks.tool_agent.tasks import check_answer, load_tasks, task_from_dict, task_to_dict


@pytest.mark.parametrize("make", [generate_tasks, explore_tasks])
@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_plans_have_the_requested_steps_and_replay_exactly(make, steps: int) -> None:
    tasks = make(random.Random(steps), {"steps": steps, "distractors": 5, "magnitude": 3}, 25)
    assert len(tasks) == 25 and len({t.task_id for t in tasks}) == 25
    for t in tasks:
        assert len(t.plan) == steps
        assert len(t.facts) == sum(s.tool == "lookup" for s in t.plan) + 5
        env = ToolEnv.of(t.facts)
        for s in t.plan:  # every gold value is what the real tool returns
            obs = env.run(s.tool, s.tool_input)
            assert obs.ok and obs.text == s.output and obs.value == s.value
        if t.answer_value is not None:
            assert t.answer_value == t.plan[-1].value and check_answer(t.answer, t)
        else:
            assert check_answer(t.answer, t) and not check_answer(t.wrong_options[0], t)


def test_generation_is_reproducible_and_seed_dependent() -> None:
    d = {"steps": 3, "distractors": 4, "magnitude": 2}
    a = [task_to_dict(t) for t in generate_tasks(random.Random(7), d, 10)]
    b = [task_to_dict(t) for t in generate_tasks(random.Random(7), d, 10)]
    c = [task_to_dict(t) for t in generate_tasks(random.Random(8), d, 10)]
    assert a == b and a != c
    e1 = [task_to_dict(t) for t in explore_tasks(random.Random(7), d, 10)]
    assert e1 == [task_to_dict(t) for t in explore_tasks(random.Random(7), d, 10)]


def test_magnitude_sets_the_number_range() -> None:
    small = generate_tasks(random.Random(0), {"steps": 1, "magnitude": 1, "distractors": 6}, 30)
    big = generate_tasks(random.Random(0), {"steps": 1, "magnitude": 5, "distractors": 6}, 30)
    small_pop = [f.value for t in small for f in t.facts if f.attribute == "population"]
    big_pop = [f.value for t in big for f in t.facts if f.attribute == "population"]
    assert small_pop and big_pop and max(small_pop) < 10 and min(big_pop) >= 10_000


def test_pools_are_disjoint() -> None:
    d = {"steps": 4, "distractors": 12}
    train = {f.entity for t in generate_tasks(random.Random(1), d, 20) for f in t.facts}
    val = {f.entity for t in generate_tasks(random.Random(1), d, 20, pool="validation") for f in t.facts}
    assert train and val and not train & val


@pytest.mark.parametrize(("difficulty", "key"), [
    ({"steps": 5}, "difficulty.steps"), ({"noise": 1}, "difficulty.noise"), ({"magnitude": "big"}, "difficulty.magnitude"),
])
def test_bad_difficulty_names_the_key(difficulty, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        generate_tasks(random.Random(0), difficulty, 1)


def _numeric_task(value: float):
    task = generate_tasks(random.Random(0), {"steps": 1}, 1)[0]
    return task.__class__(**{**task.__dict__, "answer_value": value, "answer": str(value)})


@pytest.mark.parametrize(("answer", "ok"), [
    ("19.31", True), ("19.31 km", True), ("about 19.3 km", True), ("12 miles is 19.31 km", True),
    ("19,312.1", False), ("1 2 3 4 19.31", False), ("", False), ("nineteen", False), ("19.9", False),
    ("Final: 19.312128", True), ("−19.31", False),
])
def test_numeric_answers(answer: str, ok: bool) -> None:
    assert check_answer(answer, _numeric_task(19.312128)) is ok


def test_thousands_and_unicode_minus() -> None:
    assert check_answer("2,468 dollars", _numeric_task(2468))
    assert check_answer("\u22125.5", _numeric_task(-5.5))


def test_name_answers() -> None:
    task = next(t for t in generate_tasks(random.Random(3), {"steps": 2}, 40) if t.answer_value is None)
    win, lose = task.answer, task.wrong_options[0]
    assert check_answer(f"{win.upper()}.", task) and check_answer(f"It is {win}!", task)
    assert not check_answer(f"{win} or {lose}", task) and not check_answer("", task)


def test_jsonl_round_trip_and_errors(tmp_path) -> None:
    tasks = generate_tasks(random.Random(2), {"steps": 2, "distractors": 3}, 6)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(task_to_dict(t)) + "\n" for t in tasks), encoding="utf-8")
    back = load_tasks(path)
    assert [task_to_dict(t) for t in back] == [task_to_dict(t) for t in tasks]
    assert [t.content_hash for t in back] == [t.content_hash for t in tasks]
    path.write_text(path.read_text() + "{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.jsonl:7"):
        load_tasks(path)
    with pytest.raises(DataError, match="malformed"):
        task_from_dict({"id": "x"})
