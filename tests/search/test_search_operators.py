"""Operators keep genomes valid, never modify their inputs, and set lineage."""

from __future__ import annotations

import copy
import random

import pytest

from evotrainer.backends.base import SamplingParams
from evotrainer.genome import Policy
from evotrainer.search.mutation_prompts import build_rewrite_messages
from evotrainer.search.operators import (
    cx_llm_merge_plan,
    cx_sections,
    is_valid,
    mut_llm_rewrite_plan,
    mut_structural,
    sel_tournament,
    split_sentences,
    validity_problem,
)
from evotrainer.tasks.meeting_minutes.texts import RULE_PHRASES

from ._fakes import FakeMutator, apply_rewrite, seed_population


def test_is_valid_cases() -> None:
    good = Policy.seed("a", {"role": "", "format": "Use bullets.", "rules": "Name owners."})
    assert is_valid(good)
    assert not is_valid(Policy.seed("b", {"role": "x", "format": "y"}))  # rules missing
    assert validity_problem(Policy.seed("b", {"role": "x", "format": "y"})) == "missing section 'rules'"
    # a one-line prompt is a genome, and so are its children (the plain prompt's mutants had been rejected)
    assert is_valid(Policy.seed("c", {"role": "x", "format": "y", "rules": "  "}))
    assert is_valid(Policy.seed("plain", {"role": "Summarize the meeting.", "format": "", "rules": ""}))
    assert not is_valid(Policy.seed("e", {"role": " ", "format": "", "rules": ""}))  # every section empty
    assert not is_valid(Policy.seed("c", {"role": "x", "format": "y", "rules": "  "}), may_be_empty=("role",))
    assert not is_valid(Policy.seed("d", {"role": "x", "format": "y", "rules": "word " * 200}))
    assert is_valid(Policy.seed("d", {"role": "x", "format": "y", "rules": "word " * 200}), max_words=300)
    assert not is_valid("not a policy")


def test_cx_sections_children_only_hold_parent_sections_and_inputs_unchanged() -> None:
    pop = seed_population()
    rng = random.Random(0)
    for _ in range(50):
        p1, p2 = rng.sample(pop, 2)
        before = copy.deepcopy((p1, p2))
        c1, c2 = cx_sections(p1, p2, rng, generation=3)
        assert (p1, p2) == before
        for child, (first, other) in ((c1, (p1, p2)), (c2, (p2, p1))):
            assert is_valid(child)
            assert [n for n, _ in child.sections] == [n for n, _ in first.sections]
            for name, text in child.sections:
                assert text in (first.section(name), other.section(name))
            assert child.parent_ids == (first.id, other.id)
            assert child.operator == "cx_sections" and child.generation == 3
            # differing in all three sections: a child is never a plain copy of a parent
            assert child.genome_hash not in (p1.genome_hash, p2.genome_hash)


def test_cx_sections_recombines_decoding_genes_by_name() -> None:
    a = Policy.seed("a", {"role": "", "format": "f", "rules": "r"})
    a = a.child(a.sections, operator="x", generation=0, decoding=(("repetition_penalty", 1.1),))
    b = Policy.seed("b", {"role": "", "format": "g", "rules": "s"})
    b = b.child(b.sections, operator="x", generation=0, decoding=(("repetition_penalty", 1.3),))
    seen = set()
    for seed in range(20):
        c1, c2 = cx_sections(a, b, random.Random(seed), 1)
        seen.add(c1.decoding)
        assert {c1.decoding[0][1], c2.decoding[0][1]} == {1.1, 1.3}
    assert len(seen) == 2


def test_mut_structural_keeps_genomes_valid_and_within_budget() -> None:
    rng = random.Random(1)
    kinds = set()
    for policy in seed_population():
        current = policy
        for _ in range(40):
            before = copy.deepcopy(current)
            child = mut_structural(current, rng, 1, max_words=40, phrase_bank=RULE_PHRASES)
            assert current == before
            assert is_valid(child, max_words=40), child.sections
            assert child.parent_ids == (current.id,)
            kinds.add(child.operator)
            for sentence in split_sentences(child.section("rules")):
                assert sentence in split_sentences(current.section("rules")) or sentence in RULE_PHRASES
            current = child
    assert {"mut_structural/add", "mut_structural/drop", "mut_structural/swap"} <= kinds


def test_mut_structural_keeps_bullets() -> None:
    p = Policy.seed("b", {"role": "", "format": "f", "rules": "- Be brief.\n- Name owners."})
    rng = random.Random(0)
    for _ in range(30):
        child = mut_structural(p, rng, 1)
        if child.operator == "mut_structural/add":
            assert all(line.startswith("- ") for line in child.section("rules").splitlines())
            break
    else:
        pytest.fail("no add drawn")


def test_llm_rewrite_plan_and_apply_make_valid_children() -> None:
    mutator = FakeMutator()
    rng = random.Random(2)
    for policy in seed_population():
        before = copy.deepcopy(policy)
        plan = mut_llm_rewrite_plan(policy, rng, 5, params=SamplingParams(temperature=0.7))
        assert policy == before
        assert plan.section in dict(policy.sections) and policy.section(plan.section).strip()
        assert plan.operator.startswith("mut_llm_rewrite/")
        assert plan.request.params.temperature == 0.7
        (answer,) = mutator.generate([plan.request])
        child = apply_rewrite(plan, answer.text)
        assert child is not None and is_valid(child)
        assert child.operator == plan.operator and child.generation == 5
        assert child.parent_ids == (policy.id,)
        assert "hope" not in child.section(plan.section) and '"' not in child.section(plan.section)
        for name, text in child.sections:
            if name != plan.section:
                assert text == policy.section(name)


def test_apply_rewrite_rejections() -> None:
    policy = seed_population()[0]
    plan = mut_llm_rewrite_plan(policy, random.Random(0), 1)
    old = policy.section(plan.section)
    assert apply_rewrite(plan, "") is None
    assert apply_rewrite(plan, f"Rewrite: {old}") is None  # unchanged
    assert apply_rewrite(plan, f"{plan.instruction} Name owners.") is None  # echoed the instruction
    assert apply_rewrite(plan, "word " * 155, max_words=160) is None  # over the whole-prompt budget
    new = "Always name the owner of every action item."
    assert apply_rewrite(plan, new) is not None
    assert apply_rewrite(plan, new, similarity=lambda a, b: 0.1, similarity_band=(0.3, 0.95)) is None
    assert apply_rewrite(plan, new, similarity=lambda a, b: 0.5, similarity_band=(0.3, 0.95)) is not None


def test_merge_plan() -> None:
    p1, p2 = seed_population()[:2]
    assert cx_llm_merge_plan(p1, p1, random.Random(0), 1) is None
    plan = cx_llm_merge_plan(p1, p2, random.Random(0), 4)
    assert plan is not None and plan.co_parent == p2
    (answer,) = FakeMutator().generate([plan.request])
    child = apply_rewrite(plan, answer.text)
    assert child is not None and child.parent_ids == (p1.id, p2.id) and child.operator == "cx_llm_merge"


def test_rewrite_request_is_short_and_explicit() -> None:
    messages = build_rewrite_messages("Be brief.", "Make it stricter.")
    assert messages[0]["role"] == "system" and messages[-1]["role"] == "user"
    user = messages[-1]["content"]
    assert user.endswith("Output only the rewritten instruction, nothing else.")
    assert "<<<\nBe brief.\n>>>" in user and "at most 30 words" in user
    assert "not an example of its work" in messages[0]["content"]  # an instruction, never the task's own output
    assert len(" ".join(m["content"] for m in messages).split()) < 80


def test_the_rewrite_request_says_which_part_of_the_prompt_it_is() -> None:
    user = build_rewrite_messages("## Topics", "Be clearer.", section="format")[-1]["content"]
    assert user.startswith("Current instruction (the layout of the AI's answer: its headings or parts, with no "
                           "content filled in):\n<<<\n## Topics\n>>>")
    assert "(the team rules part" in build_rewrite_messages("x y z", "Be clearer.", section="team_rules")[-1]["content"]


def test_sel_tournament() -> None:
    pop = seed_population()
    fitness = [0.1, 0.9, 0.5, 0.3]
    assert sel_tournament(pop, fitness, 5, random.Random(0), tournsize=1) == sel_tournament(
        pop, fitness, 5, random.Random(0), tournsize=1)
    winners = sel_tournament(pop, fitness, 200, random.Random(0), tournsize=3)
    counts = {p.id: sum(w.id == p.id for w in winners) for p in pop}
    assert counts["s1"] > counts["s2"] > counts["s3"] > counts["s0"]
