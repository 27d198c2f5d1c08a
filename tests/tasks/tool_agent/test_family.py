"""The ToolAgent family object: generation from a numpy Generator, rollout, meta score, loader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.config import PACKAGE_DATA
from evotrainer.errors import ConfigError
from evotrainer.tasks.tool_agent import ToolAgent, ToolRolloutConfig
from evotrainer.tasks.tool_agent.rollout import Episode, run_episodes
from evotrainer.tasks.tool_agent.tasks import task_to_dict


def test_generate_mixes_templates_and_walks_reproducibly() -> None:
    fam = ToolAgent(explore_share=0.25)
    a = fam.generate(np.random.default_rng(0), fam.spec.difficulty, 8)
    b = fam.generate(np.random.default_rng(0), fam.spec.difficulty, 8)
    assert [task_to_dict(t) for t in a] == [task_to_dict(t) for t in b]
    assert [t.source for t in a] == ["generated"] * 6 + ["explored"] * 2
    assert set(fam.spec.difficulty_bounds) == set(fam.spec.difficulty)
    assert tuple(fam.spec.reward_weights) == ("correct", "efficiency", "format")
    with pytest.raises(ConfigError, match="task.explore_share"):
        ToolAgent(explore_share=1.5)


@pytest.mark.parametrize(("options", "key"), [({"max_steps": 0}, "task.options.max_steps"),
                                               ({"stop_on_repeat": "maybe"}, "task.options.stop_on_repeat"),
                                               ({"explore_share": 2}, "task.options.explore_share")])
def test_bad_options_name_their_config_key(options: dict, key: str) -> None:
    from types import SimpleNamespace

    with pytest.raises(ConfigError, match=rf"^{key}: "):
        ToolAgent.from_config(SimpleNamespace(options=options))


class _Answers:
    name = "answers"

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [Generation("Final Answer: 42", 1, 1, "stop") for _ in requests]


def test_rollout_is_policy_major_and_meta_score_is_correctness() -> None:
    fam = ToolAgent(ToolRolloutConfig(max_steps=2))
    tasks = fam.load_validation(PACKAGE_DATA / "validation_set" / "tool_agent.jsonl", limit=3)
    trajs = run_episodes(_Answers(), [Episode(p, s, t) for p, s in (("a", "x"), ("b", "y")) for t in tasks],
                         fam.rollout_cfg)
    assert [(t.policy_id, t.task_id) for t in trajs] == [(p, t.task_id) for p in "ab" for t in tasks]
    for traj, task in zip(trajs, tasks * 2, strict=True):
        meta = fam.meta_score(json.dumps(traj.to_dict()), task)
        assert meta.value == (1.0 if task.answer_value == 42 else 0.0)
        assert set(meta.parts) == {"correct", "efficiency", "format"}


class _Solver:
    """Looks the fact up, then answers with the observation (solves one-step lookup tasks)."""

    name = "solver"

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            last = r.messages[-1]["content"] if r.messages[-1]["role"] != "assistant" else r.messages[-2]["content"]
            if last.startswith("Observation:"):
                out.append(Generation(f" I know it.\nFinal Answer: {last.removeprefix('Observation:').strip()}", 1, 5, "stop"))
            else:
                question = last.rsplit("Question: What is the ", 1)[-1].rstrip("?")
                out.append(Generation(f" I look it up.\nAction: lookup[{question}]", 1, 5, "stop"))
        return out


def test_solved_episodes_become_experience_of_similar_tasks() -> None:
    from evotrainer.genome import Policy
    from evotrainer.rollout import RolloutEvaluator
    from evotrainer.search.exemplars import ExperiencePool

    fam = ToolAgent(ToolRolloutConfig(max_steps=3))
    tasks = fam.load_validation(PACKAGE_DATA / "validation_set" / "tool_agent.jsonl", limit=1)
    policy = Policy.seed("p", {"role": "", "format": "Use the tools.", "rules": "Be exact."})
    (ev,) = RolloutEvaluator(_Solver(), fam).evaluate([policy], tasks, dict(fam.spec.reward_weights))
    assert ev.per_task == (1.0,) or ev.per_task[0] > 0.7
    text = fam.experience(tasks[0], ev.outputs[0])
    assert text is not None and "Action: lookup[" in text and "Final Answer:" in text
    assert fam.experience(tasks[0], "not a trajectory") is None
    pool = ExperiencePool()
    assert pool.add(tasks[0].size, text) and not pool.add(tasks[0].size, text)  # kept once
    pool.add(4, "A four-step solution.")
    assert pool.retrieve(tasks, k=1) == (text,)  # the nearest task size first
    assert pool.retrieve(tasks, k=5, max_words=5) == ("A four-step solution.",)


def test_training_chats_supervise_exactly_the_model_replies() -> None:
    from evotrainer.genome import Policy
    from evotrainer.rollout import RolloutEvaluator

    fam = ToolAgent(ToolRolloutConfig(max_steps=3))
    tasks = fam.load_validation(PACKAGE_DATA / "validation_set" / "tool_agent.jsonl", limit=1)
    policy = Policy.seed("p", {"role": "", "format": "Use the tools.", "rules": "Be exact."})
    (ev,) = RolloutEvaluator(_Solver(), fam).evaluate([policy], tasks, dict(fam.spec.reward_weights))
    traj = json.loads(ev.outputs[0])
    replies = [m["content"] for m in traj["messages"] if m["role"] == "assistant"]
    new_prompt = (("role", ""), ("format", "A newer prompt."), ("rules", "Short."))
    chats = fam.training_chats(new_prompt, tasks[0], ev.outputs[0])
    assert [c[-1]["content"] for c in chats] == replies and all(c[-1]["role"] == "assistant" for c in chats)
    assert all(c[0]["content"].startswith("A newer prompt.") for c in chats)  # the current policy's prompt
    assert all(m["role"] != "assistant" or m["content"] in replies for c in chats for m in c)
    observations = [m["content"] for m in traj["messages"][2:] if m["role"] == "user"]
    assert observations and all(c[-1]["content"] not in observations for c in chats)  # never learnt
    assert fam.training_chats(new_prompt, tasks[0], "junk") == []
