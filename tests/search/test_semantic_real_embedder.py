"""Phrase substitution band and near-duplicate check with the real embedded all-MiniLM-L6-v2."""

from __future__ import annotations

import random

import pytest

from evotrainer.genome import Policy
from evotrainer.search.diversity import is_near_duplicate, population_diversity
from evotrainer.search.phrases import PhraseBank, mut_phrase_substitution

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def minilm():
    from evotrainer.backends.embedder import MiniLMEmbedder

    return MiniLMEmbedder()


def test_default_band_keeps_a_paraphrase_and_rejects_noop_and_off_topic(minilm) -> None:
    old = "Write only facts stated in the meeting."
    paraphrase = "Only write facts that were said in the meeting."
    noop = "Write only the facts stated in the meeting!"
    off_topic = "Ask about the candidate's job interview experience."
    bank = PhraseBank(minilm)
    bank.add(("rules", s) for s in (paraphrase, noop, off_topic))
    parent = Policy.seed("p", {"role": "", "format": "Use bullets.", "rules": f"Name the owners. {old}"})
    children = {mut_phrase_substitution(parent, random.Random(s), 1, bank=bank).section("rules") for s in range(12)}
    assert children == {f"Name the owners. {paraphrase}"}


def test_long_prompts_differing_in_their_last_sentence_are_kept_apart(minilm) -> None:
    body = " ".join(f"Rule {i}: keep part {i} of the minutes in the order it was discussed." for i in range(1, 25))
    a = Policy.seed("a", {"role": "", "format": "Use bullets.", "rules": body + " List every action item owner."})
    b = Policy.seed("b", {"role": "", "format": "Use bullets.", "rules": body + " Never mention the weather."})
    c = Policy.seed("c", {"role": "", "format": "Use bullets.", "rules": body + " List every action item owner!"})
    whole = minilm.encode([a.section("rules"), b.section("rules")])
    assert float(whole[0] @ whole[1]) > 0.99  # whole-prompt embeddings cannot tell them apart (truncation)
    bank = PhraseBank(minilm)
    assert not is_near_duplicate(a, b, bank.vectors, 0.95)
    assert is_near_duplicate(a, c, bank.vectors, 0.95)
    assert population_diversity([a, b], bank.vectors) > 0.0
