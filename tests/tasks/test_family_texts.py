"""The domain belongs to the family: what the mutator and the judge read comes from ``family.spec.texts``; the
meeting family's chats are byte-identical to the recorded ones (``tests/data/meeting_texts.json``), and the
tool agent gets its own wording.

The recorded chats change only on purpose (the mutation prompts were last rewritten for a mutator that can
follow them, measured by ``benchmarks/mutator_validity.py``); to re-record:
``HF_HUB_OFFLINE=1 .venv/bin/python -m tests.tasks.test_family_texts``
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from evotrainer.backends.base import Generation, SamplingParams
from evotrainer.genome import Policy, load_population
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.reflection import TaskFeedback
from evotrainer.search.style_library import plan_style_mutation
from evotrainer.search.toolbox import build_toolbox
from evotrainer.selfevolve.judge import JudgeSettings, judge_messages, judge_samples
from evotrainer.tasks import get_task_family
from evotrainer.tasks.base import NEUTRAL_TEXTS, FamilySpec
from tests.tasks.meeting_minutes._fixtures import TASK

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "tests" / "data" / "meeting_texts.json"
POPULATION = ROOT / "populations" / "meeting_minutes.yaml"


def _meeting_texts() -> dict:
    """The texts the meeting family's mutator and judge chats are made of, built with ``InnerConfig()``."""
    family = get_task_family("meeting_minutes")
    cfg = InnerConfig().with_texts(family.spec.texts)
    pop = load_population(POPULATION)
    fb = TaskFeedback("t1", "h", 0.2, "## Topics\n- boiler", (("completeness", 0.1), ("format", 0.2),
                      ("action_count", 0.3), ("action_f1", 0.4), ("other_part", 0.5)))
    tb = build_toolbox(cfg, feedback=lambda p: fb, styles=cfg.styles())
    out: dict = {"rules": list(cfg.rules()), "styles": [[s.name, s.instruction, list(s.sections)] for s in cfg.styles()],
                 "vocabulary": sorted(cfg.vocabulary()), "prefill_fallbacks": list(tb.mutate_prefill.keywords["fallbacks"]),
                 "task_hint": tb.plan_rewrite.keywords["task_hint"], "rewrite": [], "reflect": [], "merge": [],
                 "prefill": [], "structural": []}
    for i, p in enumerate(pop[:6]):
        out["rewrite"].append(list(tb.plan_rewrite(p, random.Random(i), 1).request.messages))
        out["reflect"].append(list(tb.plan_reflect(p, random.Random(i), 1).request.messages))
        plan = tb.plan_merge(p, pop[i + 1], random.Random(i), 1)
        out["merge"].append(None if plan is None else list(plan.request.messages))
        out["prefill"].append(tb.mutate_prefill(p, random.Random(i), 1).sections)
        out["structural"].append(tb.mutate(p, random.Random(i), 1).sections)
    styles = cfg.styles()
    stats = OperatorStats(detail={f"mut_llm_rewrite/{styles[0].name}": (4, 3),
                                  f"mut_llm_rewrite/{styles[1].name}": (4, 0)})
    plan = plan_style_mutation(styles, stats, random.Random(0), 3, params=SamplingParams(),
                               task_hint=cfg.texts().task_hint)
    out["style_plan"] = list(plan.request.messages)
    out["judge"] = list(judge_messages(TASK, "## Topics\n- boiler", family.spec.texts.judge_prompt))
    return json.loads(json.dumps(out))


def test_the_meeting_family_shows_the_mutator_and_judge_the_same_text_as_before() -> None:
    before = json.loads(BEFORE.read_text())
    after = _meeting_texts()
    for key in before:
        assert after[key] == before[key], key
    assert set(after) == set(before)


def _tool_policy() -> Policy:
    return Policy.seed("tool", {"role": "You answer with tools.", "format": "Thought, then Action.",
                                "rules": "Use the calculator."})


def test_a_tool_agent_reflection_speaks_of_its_replies_and_rewards() -> None:
    cfg = InnerConfig().with_texts(get_task_family("tool_agent").spec.texts)
    fb = TaskFeedback("t1", "h", 0.1, "Thought: guess\nFinal Answer: 7", (("format", 0.0), ("correct", 0.0)))
    tb = build_toolbox(cfg, feedback=lambda p: fb)
    chat = "\n".join(m["content"] for m in tb.plan_reflect(_tool_policy(), random.Random(0), 1).request.messages)
    assert "minutes" not in chat.lower() and "meeting" not in chat.lower()
    assert "the AI wrote these replies" in chat and "calling tools" in chat
    assert "one Action, or the Final Answer" in chat and "right number, with its unit" in chat
    rewrite = tb.plan_rewrite(_tool_policy(), random.Random(1), 1)
    assert rewrite.operator.split("/")[1] in {s.name for s in cfg.styles()}
    assert "Thought:" in tb.mutate_prefill.keywords["fallbacks"]


def test_a_family_without_texts_gets_the_neutral_ones_and_config_keys_win() -> None:
    assert FamilySpec("v", {}, {}, {"r": 1.0}).texts is NEUTRAL_TEXTS
    cfg = InnerConfig(task_hint="sorts words").with_texts(get_task_family("meeting_minutes").spec.texts)
    assert cfg.texts().task_hint == "sorts words"  # a key set in config overrides the family's text
    assert cfg.texts().output_name == "these minutes"  # the rest is the family's
    plain = InnerConfig()
    assert plain.texts() == NEUTRAL_TEXTS and build_toolbox(plain).plan_rewrite.keywords["task_hint"] == (
        NEUTRAL_TEXTS.task_hint)


class _CountingJudge:
    def __init__(self) -> None:
        self.requests: list = []

    def generate(self, requests):
        self.requests += list(requests)
        return [Generation(text="7", generated_tokens=1, prompt_tokens=1, finish_reason="stop") for _ in requests]


def test_the_judge_asks_the_model_only_with_the_familys_prompt() -> None:
    meeting, tool = get_task_family("meeting_minutes"), get_task_family("tool_agent")
    judge = _CountingJudge()
    settings = JudgeSettings(dict(meeting.spec.reward_weights), repeats=1, model_weight=0.5)
    (v,) = judge_samples(judge, meeting, [(TASK, TASK.reference_minutes)], settings, np.random.default_rng(0))
    assert v.model == 0.7 and judge.requests[0].messages[0]["content"] == meeting.spec.texts.judge_prompt[0]
    assert tool.spec.texts.judge_prompt is None
    task = tool.generate(np.random.default_rng(0), tool.spec.difficulty, 1)[0]
    judge = _CountingJudge()
    settings = JudgeSettings(dict(tool.spec.reward_weights), repeats=1, model_weight=0.5)
    (v,) = judge_samples(judge, tool, [(task, "not an episode")], settings, np.random.default_rng(0))
    assert judge.requests == [] and v.model is None  # rules only


if __name__ == "__main__":  # re-record the meeting family's chats after a deliberate change
    BEFORE.write_text(json.dumps(_meeting_texts(), indent=1, ensure_ascii=False) + "\n")
    print(f"recorded {BEFORE}")
