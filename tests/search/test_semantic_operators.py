"""Decoding genes, phrase bank and substitution, near-duplicates, diversity, structural moves."""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import pytest

from evotrainer.backends.base import SamplingParams
from evotrainer.errors import ConfigError
from evotrainer.genome import Policy
from evotrainer.search.decoding import (
    DEFAULT_DECODING_GENES,
    DecodingGene,
    check_decoding_genes,
    decoding_genes_for,
    mut_decoding,
)
from evotrainer.search.diversity import (
    differing_sentences,
    enforce_min_diversity,
    is_near_duplicate,
    population_diversity,
)
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.operators import cx_sections, is_valid, mut_structural
from evotrainer.search.phrases import PhraseBank, mut_phrase_substitution

from ._fakes import FakeEmbedder, TableEmbedder, seed_population


def _at(cos: float, axis: int) -> list[float]:
    """A unit vector with cosine ``cos`` to axis 0, the rest on ``axis``."""
    v = [0.0] * 64
    v[0], v[axis] = cos, math.sqrt(max(0.0, 1 - cos * cos))
    return v


# --- decoding genes --------------------------------------------------------------------------------


def test_mut_decoding_is_pure_bounded_deterministic_and_sorted() -> None:
    genes = {g.name: g for g in DEFAULT_DECODING_GENES}
    for parent in seed_population():
        before = copy.deepcopy(parent)
        current = parent
        for step in range(60):
            child = mut_decoding(current, random.Random(step), 2)
            assert child == mut_decoding(current, random.Random(step), 2)  # deterministic
            assert child.genome_hash != current.genome_hash and child.sections == current.sections
            assert child.parent_ids == (current.id,) and child.generation == 2
            assert child.operator.startswith("mut_decoding/") and is_valid(child)
            names = [n for n, _ in child.decoding]
            assert names == sorted(names)
            for name, value in child.decoding:
                assert genes[name].low <= value <= genes[name].high
                if genes[name].integer:
                    assert isinstance(value, int)
            current = child
        assert parent == before
        assert {n for n, _ in current.decoding} == set(genes)  # every gene gets explored


def test_mut_decoding_steps_are_small() -> None:
    parent = seed_population()[0]
    for seed in range(40):
        child = mut_decoding(parent, random.Random(seed), 1)
        (name, value), = child.decoding
        gene = {g.name: g for g in DEFAULT_DECODING_GENES}[name]
        assert 0 < abs(value - gene.default) <= max(4 * gene.step, 1)


def test_decoding_gene_bounds_are_checked_and_recentred() -> None:
    check_decoding_genes(DEFAULT_DECODING_GENES)
    for bad in (DecodingGene("beam_width", 1, 4, 1, 1), DecodingGene("top_p", 0.5, 0.4, 0.45, 0.1),
                DecodingGene("top_p", 0.5, 0.9, 1.0, 0.1), DecodingGene("top_p", 0.5, 0.9, 0.7, 0.0)):
        with pytest.raises(ConfigError, match="decoding_genes"):
            check_decoding_genes((bad,))
    with pytest.raises(ConfigError, match="inner.decoding_genes"):
        InnerConfig(decoding_genes=(DecodingGene("seed", 0, 9, 0, 1, True),)).validate()
    assert "max_new_tokens" not in {g.name for g in DEFAULT_DECODING_GENES}  # cost can never grow by default
    genes = {g.name: g for g in decoding_genes_for(SamplingParams(max_new_tokens=128, repetition_penalty=1.5))}
    assert (genes["max_new_tokens"].low, genes["max_new_tokens"].high, genes["max_new_tokens"].default) == (77, 128, 128)
    assert genes["repetition_penalty"].high == 1.5 and genes["repetition_penalty"].default == 1.5
    check_decoding_genes(tuple(genes.values()))
    parent = seed_population()[0]
    for seed in range(30):  # the token budget only ever goes down from the run default
        child = mut_decoding(parent, random.Random(seed), 1, genes=tuple(genes.values()))
        assert dict(child.decoding).get("max_new_tokens", 128) <= 128


def test_the_window_reading_gene_is_checked_and_mutated_within_its_bounds() -> None:
    window = DecodingGene("window_tokens", 512, 3072, 1536, 256, integer=True)
    check_decoding_genes((*DEFAULT_DECODING_GENES, window))  # a reading gene is a known name
    for bad in (DecodingGene("window_tokens", 512, 3072, 1536, 256),  # not integer
                DecodingGene("window_tokens", 0, 3072, 1536, 256, integer=True)):  # low < 1
        with pytest.raises(ConfigError, match=r"inner.decoding_genes\['window_tokens'\]: a reading gene"):
            check_decoding_genes((bad,))
    with pytest.raises(ConfigError, match="expected one of"):  # an unknown name still fails, naming the choices
        check_decoding_genes((DecodingGene("window_words", 1, 9, 1, 1, True),))
    assert window in decoding_genes_for(SamplingParams(), (window,))  # nothing to re-centre on: kept as is
    current, seen = seed_population()[0], set()
    for seed in range(40):
        current = mut_decoding(current, random.Random(seed), 1, genes=(window,))
        value = dict(current.decoding)["window_tokens"]
        assert isinstance(value, int) and 512 <= value <= 3072 and (value - 1536) % 256 == 0
        assert current.operator == "mut_decoding/window_tokens"
        seen.add(value)
    assert len(seen) >= 4  # it explores, one step at a time


def test_crossover_inherits_decoding_genes_over_the_union() -> None:
    a, b = seed_population()[:2]
    a = mut_decoding(a, random.Random(0), 1)
    name, value = a.decoding[0]
    got = set()
    for seed in range(30):
        c1, c2 = cx_sections(a, b, random.Random(seed), 2)
        got.add((c1.decoding, c2.decoding))
        assert sorted(c1.decoding + c2.decoding) == [(name, value)]  # the gene moves, never copies
    assert got == {(((name, value),), ()), ((), ((name, value),))}


# --- phrase bank and substitution --------------------------------------------------------------------


def test_phrase_bank_is_deduplicated_and_append_only() -> None:
    emb = FakeEmbedder()
    bank = PhraseBank(emb)
    assert bank.add([("rules", "Name every owner."), ("rules", "- name every  OWNER."), ("format", "Name every owner."),
                     ("rules", "Too short.")]) == 1
    assert bank.sentences == ("Name every owner.",) and bank.sections_of(0) == {"rules", "format"}
    first = bank.matrix.copy()
    assert bank.add_policies(seed_population()) > 0
    assert bank.sentences[0] == "Name every owner." and np.array_equal(bank.matrix[0], first[0])
    assert bank.matrix.shape == (len(bank), emb.dim)
    np.testing.assert_allclose(np.linalg.norm(bank.matrix, axis=1), 1.0, rtol=1e-5)
    n = len(bank)
    bank.vectors(["A sentence the bank never saw."])
    assert len(bank) == n  # embedding a query does not bank it
    calls = emb.calls
    bank.vectors(["A sentence the bank never saw.", "Name every owner."])
    assert emb.calls == calls  # memoised


def _band_setup(variants: dict[str, float]) -> tuple[Policy, PhraseBank]:
    old = "Name the owner of each action item."
    table = {old: _at(1.0, 1)}
    table.update({text: _at(cos, 2 + i) for i, (text, cos) in enumerate(variants.items())})
    bank = PhraseBank(TableEmbedder(table))
    bank.add(("rules", text) for text in variants)
    parent = Policy.seed("p", {"role": "", "format": "Use bullets.", "rules": old})
    return parent, bank


def test_cosine_band_rejects_a_noop_and_an_unrelated_sentence() -> None:
    near, noop, unrelated = ("Say who owns every action item.", "Name the owner of every action item.",
                             "Ask about the job interview of the candidate.")
    parent, bank = _band_setup({near: 0.8, noop: 0.99, unrelated: 0.2})
    picks = {mut_phrase_substitution(parent, random.Random(s), 1, bank=bank).section("rules") for s in range(20)}
    assert picks == {near}
    parent, bank = _band_setup({noop: 0.99, unrelated: 0.2})
    child = mut_phrase_substitution(parent, random.Random(0), 1, bank=bank)
    assert child.operator == "mut_phrase_substitution/none" and child.genome_hash == parent.genome_hash
    # the band is configurable: widened, the near-copy is accepted
    child = mut_phrase_substitution(parent, random.Random(0), 1, bank=bank, band=(0.5, 1.0))
    assert child.section("rules") == noop


def test_phrase_substitution_is_pure_valid_and_deterministic() -> None:
    bank = PhraseBank(FakeEmbedder())
    pop = seed_population()
    bank.add_policies(pop)
    bank.add([("rules", "Be clear and brief in every line."), ("rules", "Mention the topics of the meeting."),
              ("format", "Use a short list of points."), ("rules", "Avoid small talk and jokes.")])
    changed = 0
    for parent in pop:
        before = copy.deepcopy(parent)
        for seed in range(10):
            child = mut_phrase_substitution(parent, random.Random(seed), 4, bank=bank, band=(0.3, 0.95))
            assert child == mut_phrase_substitution(parent, random.Random(seed), 4, bank=bank, band=(0.3, 0.95))
            assert is_valid(child) and child.parent_ids == (parent.id,) and child.generation == 4
            assert [n for n, _ in child.sections] == [n for n, _ in parent.sections]
            if child.operator != "mut_phrase_substitution/none":
                changed += 1
                assert child.genome_hash != parent.genome_hash
                section = child.operator.split("/")[1]
                assert sum(a != b for a, b in zip(child.sections, parent.sections, strict=True)) == 1
                assert child.section(section) != parent.section(section)
        assert parent == before
    assert changed > 0


def test_phrase_substitution_keeps_bullets_and_the_word_budget() -> None:
    table = {"Name the owner.": _at(1.0, 1), "Say who owns each item.": _at(0.8, 2),
             "Say who owns each item and when it is due and why it matters to the team.": _at(0.85, 3)}
    bank = PhraseBank(TableEmbedder(table))
    bank.add(("rules", t) for t in table)
    parent = Policy.seed("p", {"role": "", "format": "Use bullets.", "rules": "- Be brief.\n- Name the owner."})
    for seed in range(10):
        child = mut_phrase_substitution(parent, random.Random(seed), 1, bank=bank, max_words=12)
        assert child.section("rules") == "- Be brief.\n- Say who owns each item."


# --- near-duplicates and diversity -------------------------------------------------------------------

_LONG = " ".join(f"Rule {w} says to keep the {w} part of the minutes in order." for w in
                 ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                  "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth"))


def test_long_prompts_differing_only_in_their_last_sentence_are_not_duplicates() -> None:
    emb = FakeEmbedder()
    bank = PhraseBank(emb)
    a = Policy.seed("a", {"role": "", "format": "Use bullets.", "rules": _LONG + " List every owner."})
    b = Policy.seed("b", {"role": "", "format": "Use bullets.", "rules": _LONG + " Skip the small talk."})
    c = Policy.seed("c", {"role": "", "format": "Use bullets.", "rules": _LONG + " - list EVERY owner."})
    assert differing_sentences(a, b) == [("List every owner.", "Skip the small talk.")]
    assert not is_near_duplicate(a, b, bank.vectors, 0.95)
    assert is_near_duplicate(a, c, bank.vectors, 0.95)  # same up to bullet and case
    # a reworded last sentence is a near-duplicate at a threshold below its cosine
    d = Policy.seed("d", {"role": "", "format": "Use bullets.", "rules": _LONG + " List every single owner."})
    cos = float(bank.vectors(["List every owner."])[0] @ bank.vectors(["List every single owner."])[0])
    assert is_near_duplicate(a, d, bank.vectors, cos - 1e-3) and not is_near_duplicate(a, d, bank.vectors, cos + 1e-3)
    # structure, order and decoding differences are never duplicates
    assert differing_sentences(a, mut_decoding(a, random.Random(0), 1)) is None
    moved = Policy.seed("m", {"role": "", "format": "Use bullets.", "rules": "List every owner. " + _LONG})
    assert not is_near_duplicate(a, moved, bank.vectors, 0.5)


def test_population_diversity_and_the_diversity_floor() -> None:
    bank = PhraseBank(FakeEmbedder())
    pop = seed_population()
    copies = [pop[0].child(pop[0].sections, operator="x", generation=g) for g in range(3)]
    assert population_diversity(copies, bank.vectors) == pytest.approx(0.0, abs=1e-6)
    assert population_diversity(pop, bank.vectors) > 0.2
    fitness = {p.id: 0.5 for p in pop} | {c.id: 0.9 - i / 10 for i, c in enumerate(copies)}
    members = [copies[0], copies[1], copies[2], pop[1]]
    out, swaps = enforce_min_diversity(members, pop, fitness, bank.vectors, 0.7, protect=1)
    assert swaps >= 1 and copies[0] in out and len(out) == len(members)
    assert population_diversity(out, bank.vectors) > population_diversity(members, bank.vectors)
    assert enforce_min_diversity(members, pop, fitness, bank.vectors, 0.0) == (members, 0)


# --- structural ------------------------------------------------------------------------------------


def test_mut_structural_move_keeps_the_sentences() -> None:
    parent = Policy.seed("p", {"role": "", "format": "Use bullets.", "rules": "One rule. Two rule. Three rule."})
    moves = 0
    for seed in range(60):
        child = mut_structural(parent, random.Random(seed), 1)
        if child.operator == "mut_structural/move":
            moves += 1
            assert sorted(child.section("rules").split(". ")) != parent.section("rules").split(". ")
            assert sorted(child.section("rules").rstrip(".").split(". ")) == ["One rule", "Three rule", "Two rule"]
    assert moves > 0


# --- reflective mutation ---------------------------------------------------------------------------


def test_reflective_plan_shows_the_worst_task_and_is_pure() -> None:
    from evotrainer.search.reflection import TaskFeedback, mut_reflective_plan
    from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

    parent = seed_population()[0]
    info = TaskFeedback("t7", "h" * 64, 0.2, "Minutes: " + "blah " * 300, (("action_f1", 0.1), ("format", 0.3)))
    before = copy.deepcopy(parent)
    assert mut_reflective_plan(parent, random.Random(0), 1, feedback=lambda p: None) is None
    words = {"hints": MEETING_TEXTS.reflection_hints, "output_name": MEETING_TEXTS.output_name}
    plan = mut_reflective_plan(parent, random.Random(0), 1, feedback=lambda p: info, **words)
    assert plan == mut_reflective_plan(parent, random.Random(0), 1, feedback=lambda p: info, **words)
    assert parent == before
    assert plan.operator == "mut_reflective/rules" and plan.parent is parent
    user = plan.request.messages[-1]["content"]
    assert user.startswith(f"Current instruction (rules the AI must follow):\n<<<\n{parent.section('rules')}\n>>>")
    assert "do not rewrite or continue it" in user and "\nChange: Fix the weak points" in user
    assert "with its owner (very poor)" in user and "layout" in user and "Minutes: blah" in user
    assert len(user) < 1500  # the output is cut
    assert "For contrast" not in user  # no reference given


def test_reflection_shows_the_reference_for_contrast_and_no_score_to_copy() -> None:
    from evotrainer.search.leakage import LeakGuard
    from evotrainer.search.reflection import TaskFeedback, mut_reflective_plan

    from ._fakes import apply_rewrite

    parent = seed_population()[0]
    info = TaskFeedback("t7", "h" * 64, 0.2, "Minutes: nothing useful", (("action_f1", 0.1), ("format", 0.3)),
                        reference="The team agreed that Zbigniew Kowalczyk owns the Q3 budget of 41,000 euros. " * 20)
    plan = mut_reflective_plan(parent, random.Random(0), 1, feedback=lambda p: info)
    user = plan.request.messages[-1]["content"]
    assert "For contrast, what a good answer on the same input contains" in user and "Zbigniew" in user
    assert "(very poor)" in user and "(poor)" in user and "0.1" not in user and "0.3" not in user
    assert len(user) < 1700  # the reference is cut like the output
    assert info.reference in plan.shown
    guard = LeakGuard(["Ann: hello\nBob: bye"])  # the batch's inputs; the shown reference is checked too
    assert apply_rewrite(plan, "Name Zbigniew as the owner of every budget item.", leak_guard=guard) is None
    assert apply_rewrite(plan, "Name the owner of every budget item.", leak_guard=guard) is not None
