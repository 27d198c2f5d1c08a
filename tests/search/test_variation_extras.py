"""Crossover by embedding-matched sections, few-shot exemplar swaps, the evolving mutation-style library."""

from __future__ import annotations

import random

import pytest

from evotrainer.backends.base import SamplingParams
from evotrainer.errors import ConfigError, DataError
from evotrainer.genome import Policy
from evotrainer.search.exemplars import (
    EXAMPLE_SECTION,
    exemplars_from_tasks,
    mut_exemplar_swap,
)
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.mutation_prompts import MutationStyle
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.operators import align_sections, cx_sections, is_valid
from evotrainer.search.style_library import apply_style_mutation, plan_style_mutation, style_rates
from evotrainer.search.toolbox import build_toolbox
from evotrainer.tasks.meeting_minutes.exemplars import exemplar_text
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

from ._fakes import seed_population

MEETING = InnerConfig().with_texts(MEETING_TEXTS)
MUTATION_STYLES = MEETING.styles()


def _word_jaccard(a: str, b: str) -> float:
    wa, wb = set(a.lower().split()), set(b.lower().split())
    return len(wa & wb) / max(1, len(wa | wb))


P1 = Policy.seed("a", {"role": "You write minutes.", "format": "## Topics\n## Decisions\n## Action items",
                       "rules": "Only facts. Name owners."})
P2 = Policy.seed("b", {"role": "You are a secretary.", "output_format": "## Topics ## Decisions ## Action items list",
                       "rules": "Keep it short. List decisions.", "style_notes": "Use a calm tone for the weather"})


def test_align_sections_pairs_by_name_then_by_similarity() -> None:
    assert align_sections(P1, P2) == [("role", "role"), ("rules", "rules")]
    pairs = align_sections(P1, P2, _word_jaccard, min_similarity=0.3)
    assert pairs[:2] == [("role", "role"), ("rules", "rules")]
    assert ("format", "output_format") in pairs
    assert all(b != "style_notes" for _, b in pairs)  # unrelated text stays unpaired


def test_cx_sections_swaps_embedding_matched_sections_keeping_names() -> None:
    seen_swap = False
    for seed in range(20):
        c1, c2 = cx_sections(P1, P2, random.Random(seed), 3, section_similarity=_word_jaccard,
                             min_section_similarity=0.3)
        assert [n for n, _ in c1.sections] == [n for n, _ in P1.sections]
        assert [n for n, _ in c2.sections] == [n for n, _ in P2.sections]
        assert c1.parent_ids == ("a", "b") and c2.parent_ids == ("b", "a") and c1.operator == "cx_sections"
        assert {t for _, t in c1.sections} <= {t for _, t in P1.sections + P2.sections}
        if c1.section("format") == P2.section("output_format"):
            seen_swap = True
            assert c2.section("output_format") == P1.section("format")
        assert c2.section("style_notes") == P2.section("style_notes")
    assert seen_swap


def _task(i: int) -> MeetingTask:
    return MeetingTask(task_id=f"g{i}", transcript=f"Ana: hello {i}\nBo: fine", topics=(f"Budget {i}", "Hiring"),
                       decisions=(f"Approve plan {i}",), action_items=(ActionItem("Ana", f"send draft {i}", "Friday"),))


def test_exemplars_come_only_from_generated_tasks() -> None:
    tasks = [_task(i) for i in range(3)]
    ex = exemplars_from_tasks(tasks, exemplar_text, max_words=60)
    assert len(ex) == 3 and "- Ana: send draft 0 (due: Friday)" in ex[0] and "## Decisions" in ex[0]
    with pytest.raises(DataError, match="meta-validation"):
        exemplars_from_tasks(tasks, exemplar_text, forbidden={tasks[1].content_hash})
    assert exemplar_text(tasks[0], max_items=1).count("\n- ") == 3


def test_exemplar_swap_adds_swaps_and_drops() -> None:
    ex = exemplars_from_tasks([_task(i) for i in range(3)], exemplar_text)
    parent = seed_population()[0]
    kinds = set()
    for seed in range(30):
        child = mut_exemplar_swap(parent, random.Random(seed), 4, exemplars=ex, max_words=400)
        assert child.operator == "mut_exemplar/add" and child.section(EXAMPLE_SECTION) in ex
        assert child.parent_ids == (parent.id,) and child.id != parent.id and is_valid(child, max_words=400)
        grand = mut_exemplar_swap(child, random.Random(seed), 5, exemplars=ex, max_words=400)
        kinds.add(grand.operator)
        if grand.operator == "mut_exemplar/swap":
            assert grand.section(EXAMPLE_SECTION) != child.section(EXAMPLE_SECTION)
        if grand.operator == "mut_exemplar/drop":
            assert EXAMPLE_SECTION not in grand.section_dict
    assert kinds == {"mut_exemplar/swap", "mut_exemplar/drop"}
    none = mut_exemplar_swap(parent, random.Random(0), 4, exemplars=ex, max_words=5)
    assert none.operator == "mut_exemplar/none" and none.genome_hash == parent.genome_hash


def test_toolbox_registers_exemplar_swap_and_config_checks_shares() -> None:
    cfg = InnerConfig()
    assert not hasattr(build_toolbox(cfg), "mutate_exemplar")
    tb = build_toolbox(cfg, exemplars=("Example minutes: ## Topics - Budget",))
    assert hasattr(tb, "mutate_exemplar")
    with pytest.raises(ConfigError, match="inner.exemplar_mutation_share"):
        InnerConfig(phrase_mutation_share=0.5, decoding_mutation_share=0.4, exemplar_mutation_share=0.2).validate()
    with pytest.raises(ConfigError, match="inner.style_evolution_every"):
        InnerConfig(style_evolution_every=-1).validate()


def _stats(rates: dict[str, tuple[int, int]]) -> OperatorStats:
    return OperatorStats({"mut_llm_rewrite": (sum(t for t, _ in rates.values()), sum(i for _, i in rates.values()))},
                         {f"mut_llm_rewrite/{k}": v for k, v in rates.items()})


PARAMS = SamplingParams(temperature=0.8, max_new_tokens=48)


def test_style_plan_needs_evidence_and_targets_worst_and_best() -> None:
    rng = random.Random(0)
    assert plan_style_mutation(MUTATION_STYLES, OperatorStats(), rng, 2, params=PARAMS) is None
    assert plan_style_mutation(MUTATION_STYLES, _stats({"stricter": (3, 1), "simplify": (3, 1)}), rng, 2,
                               params=PARAMS) is None  # no gap
    stats = _stats({"stricter": (4, 3), "simplify": (4, 0), "concise": (1, 0)})
    assert style_rates(stats, MUTATION_STYLES) == {"stricter": 0.75, "simplify": 0.0}
    plan = plan_style_mutation(MUTATION_STYLES, stats, rng, 2, params=PARAMS)
    assert plan is not None and (plan.worst, plan.best, plan.new_name) == ("simplify", "stricter", "stricter~2")
    assert "firm rule" in plan.request.messages[-1]["content"]


def test_style_mutation_replaces_only_with_a_valid_new_instruction() -> None:
    stats = _stats({"stricter": (4, 3), "simplify": (4, 0)})
    plan = plan_style_mutation(MUTATION_STYLES, stats, random.Random(0), 2, params=PARAMS)
    good = "State every action item as a firm rule with its owner and due date."
    new = apply_style_mutation(MUTATION_STYLES, plan, good, vocabulary=MEETING.vocabulary())
    assert new is not None and len(new) == len(MUTATION_STYLES)
    assert "simplify" not in {s.name for s in new} and MutationStyle("stricter~2", good) in new
    assert MUTATION_STYLES[0].name == "stricter"  # the input library is untouched
    for bad in (None, "", "Bananas grow quickly in tropical gardens near rivers.", MUTATION_STYLES[0].instruction,
                "Sure! Here is\nmany lines\nof text that go on"):
        assert apply_style_mutation(MUTATION_STYLES, plan, bad, vocabulary=MEETING.vocabulary()) is None
