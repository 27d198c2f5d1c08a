"""LLM operators on recorded real calls of the default mutator, Qwen2.5-Coder-1.5B-Instruct (replayed from a file).

To re-record after changing the mutation prompts or mutator settings (loads the real model, a few minutes):
``HF_HUB_OFFLINE=1 .venv/bin/python -m tests.search.test_recorded_mutator``
"""

from __future__ import annotations

import random
from pathlib import Path

from evotrainer.genome import Policy
from evotrainer.search.cleaning import on_topic_fraction
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.operators import MutationPlan, cx_llm_merge_plan, is_valid, mut_llm_rewrite_plan
from evotrainer.search.toolbox import build_toolbox
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

from ._fakes import seed_population
from ._replay import ReplayLLM

MEETING = InnerConfig().with_texts(MEETING_TEXTS)  # the recording was made with the meeting family's texts
DOMAIN_VOCABULARY = MEETING.vocabulary()
RECORDING = Path(__file__).parent / "data" / "qwen15b_mutator.jsonl"


def _plans() -> list[MutationPlan]:
    rng, pop = random.Random(0), seed_population()
    hint = MEETING_TEXTS.task_hint
    plans = [mut_llm_rewrite_plan(pop[i % 4], rng, 1, styles=MEETING.styles(), task_hint=hint) for i in range(12)]
    merges = (cx_llm_merge_plan(pop[i], pop[(i + 1) % 4], rng, 1, task_hint=hint) for i in range(4))
    return plans + [p for p in merges if p is not None]


def test_recorded_real_rewrites_are_filtered_to_valid_on_topic_children() -> None:
    plans = _plans()
    answers = ReplayLLM(RECORDING, name="qwen2.5-coder-1.5b").generate([p.request for p in plans])
    toolbox = build_toolbox(MEETING)
    children = [toolbox.apply_plan(p, a.text) for p, a in zip(plans, answers, strict=True)]
    kept = [(p, c) for p, c in zip(plans, children, strict=True) if isinstance(c, Policy)]
    assert 1 <= len(kept) < len(plans)  # the small model's output needs the filters
    reasons = [c for c in children if not isinstance(c, Policy)]
    assert all(isinstance(r, str) and r for r in reasons)  # each rejection says why
    assert any(r.startswith("off topic") for r in reasons)
    for plan, child in kept:
        assert is_valid(child) and child.operator == plan.operator
        text = child.section(plan.section)
        assert on_topic_fraction(plan.parent.section(plan.section), text, DOMAIN_VOCABULARY) >= 0.5
        assert "rewritten" not in text.lower() and not text.startswith('"')
    # a raw answer about a wedding cake never becomes a genome
    assert all("cake" not in c.section(p.section) for p, c in kept)


if __name__ == "__main__":  # re-record with the real default model
    from evotrainer.backends.hf import HFBackend

    from ._replay import RecordingLLM

    RECORDING.unlink(missing_ok=True)
    RecordingLLM(HFBackend(), RECORDING).generate([p.request for p in _plans()])
    print(f"recorded {len(_plans())} answers to {RECORDING}")
