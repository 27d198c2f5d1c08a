"""A reasoning model as mutator: its thoughts and its cut-off answers never become a genome section."""

from __future__ import annotations

import random
import re
from dataclasses import replace

from evotrainer.backends.base import Generation
from evotrainer.search.cleaning import clean_mutator_text
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import GenerationReport, run_inner_loop
from evotrainer.search.toolbox import build_toolbox
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

from ._fakes import keyword_fitness, seed_population

RULE = "List every action item with its owner."
THOUGHTS = "<think>\nThe user wants stricter minutes rules. Maybe mention owners and deadlines...\n</think>\n\n"
CFG = replace(InnerConfig(mut_prob=1.0, cx_prob=0.0, llm_mutation_share=1.0, reflective_share=0.0, generations=2),
              ).with_texts(MEETING_TEXTS)


class ReasoningMutator:
    """Answers like a reasoning model served without a reasoning parser: a think block, then the answer;
    ``cut`` answers stop inside the think block at the token limit (finish reason ``length``)."""

    name = "reasoning-mutator"

    def __init__(self, cut: bool = False) -> None:
        self.cut = cut

    def generate(self, requests):
        out = []
        for r in requests:
            old = re.search(r"<<<\n(.*?)\n>>>", r.messages[-1]["content"], re.DOTALL).group(1)
            if self.cut:
                out.append(Generation(text="<think>\nFirst, the rules must " + "really " * 40, prompt_tokens=1,
                                      generated_tokens=96, finish_reason="length"))
            else:
                out.append(Generation(text=f"{THOUGHTS}{old} {RULE}", prompt_tokens=1, generated_tokens=40,
                                      finish_reason="stop"))
        return out


def _run(mutator) -> list[GenerationReport]:
    reports: list[GenerationReport] = []
    toolbox = build_toolbox(CFG, mutator=mutator, seed_prompts=seed_population())
    run_inner_loop(seed_population(), toolbox, lambda ps: [keyword_fitness(p) for p in ps], CFG, random.Random(0),
                   on_generation=reports.append)
    return reports


def test_a_reasoning_mutators_think_block_never_becomes_a_genome_section() -> None:
    children = [c for r in _run(ReasoningMutator()) for c in r.children if c.operator.startswith("mut_llm_rewrite")]
    assert children  # the answers after the thoughts became children
    for child in children:
        text = " ".join(t for _, t in child.sections)
        assert "think>" not in text and "The user wants" not in text and RULE in text


def test_a_rewrite_cut_at_the_token_limit_is_rejected_with_its_reason() -> None:
    reports = _run(ReasoningMutator(cut=True))
    reasons = " | ".join(str(r.record.get("rejections", "")) for r in reports)
    assert "mut_llm_rewrite" in reasons and "cut at the token limit" in reasons
    assert not [c for r in reports for c in r.children if c.operator.startswith("mut_llm_rewrite")]


def test_cleaning_strips_reasoning_blocks_and_refuses_unclosed_ones() -> None:
    assert clean_mutator_text(f"{THOUGHTS}{RULE}") == RULE
    assert clean_mutator_text(f"The user wants owners named.\n</think>\n{RULE}") == RULE  # opened by the template
    assert clean_mutator_text(f"<think>\nOwners matter, so: {RULE}") is None  # the thoughts never ended
