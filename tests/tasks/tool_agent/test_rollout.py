"""Multi-step rollouts, rule rewards and step credit, with a scripted backend replaying fixed replies."""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Sequence

import pytest

from evotrainer import progress
from evotrainer.backends.base import Generation, GenerationRequest, SamplingParams, split_prefill
from evotrainer.errors import ConfigError
from evotrainer.tasks.reward_weights import check_reward_weights
from evotrainer.tasks.tool_agent.generator import generate_tasks
from evotrainer.tasks.tool_agent.reward import REWARD_COMPONENTS, score_episode
from evotrainer.tasks.tool_agent.rollout import Episode, ToolRolloutConfig, build_messages, run_episodes
from evotrainer.tasks.tool_agent.tasks import ToolTask
from evotrainer.tasks.tool_agent.trajectory import Step


class ScriptedLLM:
    """An LLM whose continuation is ``script(request)``, returned after the request's prefill (as the real
    backends do; "" when the continuation is blank); records every generate call's requests."""

    name = "scripted"

    def __init__(self, script: Callable[[GenerationRequest], str]) -> None:
        self.script = script
        self.calls: list[list[GenerationRequest]] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.calls.append(list(requests))
        out = []
        for r in requests:
            text = self.script(r)
            out.append(Generation(split_prefill(r.messages)[1] + text if text.strip() else "", 10, 5, "stop"))
        return out


def _tasks(steps: int, n: int = 3) -> list[ToolTask]:
    return generate_tasks(random.Random(steps), {"steps": steps, "distractors": 3, "magnitude": 2}, n)


def _turn(request: GenerationRequest) -> int:
    return sum(m["role"] == "assistant" for m in split_prefill(request.messages)[0])


def _oracle(tasks: Sequence[ToolTask]) -> Callable[[GenerationRequest], str]:
    """Follows each task's gold plan, then answers; invents an observation after each action."""
    by_question = {t.question: t for t in tasks}

    def reply(request: GenerationRequest) -> str:
        task = by_question[request.messages[1]["content"].rsplit("Question: ", 1)[1]]
        k = _turn(request)
        if k < len(task.plan):
            s = task.plan[k]
            return f" step {k}\nAction: {s.tool}[{s.tool_input}]\nObservation: made up"
        return f" done\nFinal Answer: {task.answer}"
    return reply


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_following_the_gold_plan_earns_full_reward(steps: int) -> None:
    tasks = _tasks(steps)
    llm = ScriptedLLM(_oracle(tasks))
    trajs = run_episodes(llm, [Episode("p", "Be exact.", t) for t in tasks])
    assert len(llm.calls) == steps + 1 and all(len(c) == len(tasks) for c in llm.calls)  # batched per turn
    for traj, task in zip(trajs, tasks, strict=True):
        assert traj.stop_reason == "final_answer" and traj.final_answer == task.answer
        assert traj.reward == 1.0 and traj.first_wrong_step is None and traj.malformed == 0
        assert [s.reward for s in traj.steps] == [1.0] * (steps + 1)
        assert tuple(s.observation for s in traj.steps if s.kind != "final") == tuple(s.output for s in task.plan)
        assert tuple((s.tool, s.tool_input) for s in traj.steps if s.kind == "action") == tuple(
            (s.tool, s.tool_input) for s in task.plan)
        roles = [m["role"] for m in traj.messages]
        assert roles == ["system", "user"] + ["assistant", "user"] * steps + ["assistant"]
        assert all("made up" not in m["content"] for m in traj.messages)  # invented observations dropped
        assert all(m["content"].startswith("Thought: ") for m in traj.messages if m["role"] == "assistant")
        assert all(r.messages[-1] == {"role": "assistant", "content": "Thought:"} for c in llm.calls for r in c)


def test_step_limit_stops_an_episode_that_never_answers() -> None:
    tasks = _tasks(1, 2)
    llm = ScriptedLLM(lambda r: " add\nAction: calculator[1 + 1]")
    trajs = run_episodes(llm, [Episode("p", "", t) for t in tasks], ToolRolloutConfig(max_steps=3, stop_on_repeat=False))
    assert len(llm.calls) == 3
    for t in trajs:
        assert t.stop_reason == "max_steps" and len(t.steps) == 3 and t.final_answer is None
        assert t.components["correct"] == 0.0 and t.components["efficiency"] == 0.0
        assert t.components["format"] == 1.0 and t.reward == pytest.approx(0.15)
        assert t.messages[-1]["content"] == "Observation: 2"


def test_a_greedy_reply_that_repeats_the_previous_one_ends_the_episode() -> None:
    task = _tasks(1, 2)[0]
    llm = ScriptedLLM(lambda r: " add\nAction: calculator[1 + 1]\nObservation: made up")
    t = run_episodes(llm, [Episode("p", "", task)], ToolRolloutConfig(max_steps=6))[0]
    assert len(llm.calls) == 2 and t.stop_reason == "repeated" and len(t.steps) == 2
    assert t.components["format"] == 1.0 and t.components["correct"] == 0.0
    sampled = SamplingParams(temperature=0.7, seed=1)
    t = run_episodes(llm, [Episode("p", "", task, sampled)], ToolRolloutConfig(max_steps=3))[0]
    assert t.stop_reason == "max_steps" and len(t.steps) == 3  # sampling may leave a loop: no early stop


def test_malformed_replies_become_observations_and_are_counted() -> None:
    task = _tasks(1, 1)[0]
    replies = iter(["", "Action: calculator[1 + (2", "Action: search[x]", f"Final Answer: {task.answer}"])
    trajs = run_episodes(ScriptedLLM(lambda r: next(replies)), [Episode("p", "", task)], ToolRolloutConfig(prefill=""))
    t = trajs[0]
    assert t.malformed == 3 and t.first_wrong_step == 0 and t.stop_reason == "final_answer"
    assert all(o.startswith("Error:") for o in (s.observation for s in t.steps if s.kind != "final"))
    assert t.components == {"correct": 1.0, "efficiency": 0.5, "format": 0.25}
    assert t.reward == pytest.approx(0.7 + 0.15 * 0.5 + 0.15 * 0.25)


def test_finished_episodes_leave_the_batch() -> None:
    tasks = _tasks(2, 2)
    fast = tasks[0].question

    def script(r: GenerationRequest) -> str:
        return "Final Answer: 0" if fast in r.messages[1]["content"] else "Action: calculator[2*3]"
    llm = ScriptedLLM(script)
    trajs = run_episodes(llm, [Episode("a", "", t) for t in tasks], ToolRolloutConfig(max_steps=4, stop_on_repeat=False))
    assert [len(c) for c in llm.calls] == [2, 1, 1, 1]
    assert trajs[0].stop_reason == "final_answer" and trajs[1].stop_reason == "max_steps"


def test_backend_failure_ends_episodes_without_raising() -> None:
    def boom(r: GenerationRequest) -> str:
        if _turn(r) == 1:
            raise RuntimeError("GPU on fire")
        return "Action: calculator[1]"
    trajs = run_episodes(ScriptedLLM(boom), [Episode("p", "", t) for t in _tasks(1, 2)])
    assert all(t.stop_reason == "error" and "GPU on fire" in (t.error or "") and len(t.steps) == 1 for t in trajs)


def test_an_episode_can_bring_its_own_decoding() -> None:
    llm = ScriptedLLM(lambda r: " x\nFinal Answer: 1")
    tasks = _tasks(1, 2)
    run_episodes(llm, [Episode("a", "", tasks[0], SamplingParams(top_p=0.5)), Episode("b", "", tasks[1])])
    assert [r.params.top_p for r in llm.calls[0]] == [0.5, 1.0]


def test_default_step_limit_is_8() -> None:
    llm = ScriptedLLM(lambda r: f" x\nAction: calculator[{len(r.messages)}]")  # never the same reply twice
    assert len(run_episodes(llm, [Episode("p", "", _tasks(1, 1)[0])])[0].steps) == 8 == len(llm.calls)


def test_sampling_seeds_differ_per_episode_and_step() -> None:
    llm = ScriptedLLM(lambda r: "Action: calculator[1]")
    run_episodes(llm, [Episode("p", "", t) for t in _tasks(1, 2)], ToolRolloutConfig(max_steps=2, max_new_tokens=7),
                 sampling=SamplingParams(temperature=0.7, seed=3))
    seeds = [r.params.seed for c in llm.calls for r in c]
    assert len(set(seeds)) == 4 and all(r.params.max_new_tokens == 7 for c in llm.calls for r in c)


def test_prompt_lists_tools_format_and_question() -> None:
    task = _tasks(2, 1)[0]
    system, user = build_messages("Policy text.", task)
    assert system == {"role": "system", "content": "Policy text."}
    for needle in ("calculator", "convert", "lookup", "Final Answer:", "Action: <tool>[<input>]", task.question):
        assert needle in user["content"]
    assert str(task.facts[0].value) not in user["content"].split("Question:")[0]  # facts only via lookup


def test_credit_points_at_the_first_wrong_tool_result() -> None:
    task = _tasks(3, 1)[0]
    s0 = task.plan[0]
    steps = [Step(0, "", "", "action", s0.tool, s0.tool_input, s0.output, s0.value),
             Step(1, "", "", "action", "calculator", "2+2", "4", 4.0),
             Step(2, "", "", "final", answer=task.answer)]
    score = score_episode(steps, task)
    assert score.first_wrong_step == 1 and [s.reward for s in score.steps] == [1.0, 0.0, 1.0]
    assert score.breakdown.components["efficiency"] == 1.0  # 3 gold steps + answer > 3 calls: capped at 1
    wrong = score_episode([Step(0, "", "", "final", answer="nothing")], task)
    assert wrong.first_wrong_step == 0 and wrong.breakdown.total == pytest.approx(0.15)
    assert score_episode([], task).breakdown.total == 0.0


@pytest.mark.parametrize(("weights", "key"), [
    ({"correct": 1.2, "format": -0.2}, "reward_weights.format"), ({"speed": 1.0}, "reward_weights.speed"),
    ({"correct": 0.5}, "sum to 1"),
])
def test_bad_weights_name_the_key(weights, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        check_reward_weights(weights, REWARD_COMPONENTS, simplex=True)


@pytest.mark.parametrize(("field", "value"), [("max_steps", 0), ("max_new_tokens", 0), ("observation_chars", 5)])
def test_bad_rollout_config_names_the_key(field: str, value: int) -> None:
    with pytest.raises(ConfigError, match=f"rollout.{field}"):
        ToolRolloutConfig(**{field: value})


def test_an_episodes_sampling_seed_does_not_depend_on_its_place_in_the_batch() -> None:
    tasks = _tasks(1, 3)
    sampling = SamplingParams(temperature=0.7, seed=3)

    def seed_of(batch: list[Episode]) -> int:
        llm = ScriptedLLM(lambda r: "Final Answer: 1")
        run_episodes(llm, batch, ToolRolloutConfig(max_steps=1), sampling=sampling)
        return llm.calls[0][[e.task for e in batch].index(tasks[0])].params.seed

    alone = seed_of([Episode("p", "", tasks[0])])
    assert seed_of([Episode("q", "", tasks[1]), Episode("p", "", tasks[2]), Episode("p", "", tasks[0])]) == alone


def test_progress_counts_episodes_not_model_calls() -> None:
    tasks = _tasks(2, 2)
    fast = tasks[0].question

    def script(r: GenerationRequest) -> str:
        if fast in r.messages[1]["content"]:
            return "Final Answer: 0"
        return f"Action: calculator[{len(r.messages)}]"

    class Counting(ScriptedLLM):
        def generate(self, requests):  # the backend reports each call, as the transformers backend does
            progress.advance(len(requests))
            return super().generate(requests)

    with progress.task("episodes", total=2, heartbeat=False, stream=io.StringIO()) as bar:
        run_episodes(Counting(script), [Episode("a", "", t) for t in tasks], ToolRolloutConfig(max_steps=3))
        assert bar.done == 2
