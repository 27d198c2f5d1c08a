"""Guards on what a prompt may learn: no training-meeting leaks, no negation flips as paraphrases."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from evotrainer.backends.base import Generation
from evotrainer.genome import Policy
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import GenerationReport, run_inner_loop
from evotrainer.search.leakage import LeakGuard, Leaks
from evotrainer.search.operators import judge_rewrite, mut_llm_rewrite_plan
from evotrainer.search.phrases import PhraseBank, mut_phrase_substitution, negation_count, negation_flipped
from evotrainer.search.reflection import TaskFeedback, mut_reflective_plan
from evotrainer.search.toolbox import build_toolbox
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

from ._fakes import TableEmbedder, apply_rewrite, keyword_fitness, seed_population

DOMAIN_VOCABULARY = InnerConfig().with_texts(MEETING_TEXTS).vocabulary()
TRANSCRIPT = (
    "Priya Raman: Let's start with the Q3 budget review.\n"
    "Tomasz Wolak: The vendor quote came in at 48,500 for the new badge readers.\n"
    "Priya Raman: Then we replace the badge readers in the east wing before the audit.\n"
    "Tomasz Wolak: Fine. So Priya will call the vendor by Friday.\n"
    "Priya Raman: And Tomasz drafts the rollout plan. Thanks, everyone.\n"
)
SEEDS = (
    "You write meeting minutes.",
    "## Topics\n## Decisions\n## Action items\nOne short bullet per item.",
    "Only facts from the transcript. Keep names exactly as written. List every action item with its owner.",
)
RULES = "Only facts from the transcript. Keep names exactly as written."


# --- the leak check itself --------------------------------------------------------------------------


def leaked_terms(text, training_texts, allowed_texts=(), **kw) -> Leaks:
    """The leaks of one text (a guard built for it alone)."""
    return LeakGuard(training_texts, allowed_texts, **kw)(text)

def test_names_numbers_and_phrases_only_the_training_meeting_holds_are_leaks() -> None:
    leaks = leaked_terms("List every action item with its owner, e.g. Priya Raman calls the vendor about Q3.",
                         [TRANSCRIPT], SEEDS, vocabulary=DOMAIN_VOCABULARY)
    assert leaks.names == ("Priya", "Raman") and leaks.numbers == ("Q3",)
    assert leaks.reason() == "leak: names 'Priya', 'Raman'; numbers 'Q3'"
    copied = leaked_terms("Record decisions like: we replace the badge readers in the east wing.",
                          [TRANSCRIPT], SEEDS, vocabulary=DOMAIN_VOCABULARY)
    assert copied.phrases == ("we replace the badge readers in the east wing",)
    assert leaked_terms("Quote amounts as said, e.g. 48,500.", [TRANSCRIPT], SEEDS).numbers == ("48,500",)


def test_a_rule_made_of_seed_words_passes() -> None:
    for text in ("Keep names exactly as written. List every action item with its owner.",
                 "Only facts from the transcript; one short bullet per item. Then list the decisions.",
                 "Write the action items for each owner, at most 7."):
        assert leaked_terms(text, [TRANSCRIPT], SEEDS, vocabulary=DOMAIN_VOCABULARY) == Leaks(), text
    # a capitalised word at a sentence start of the transcript ("Fine", "Thanks") is no name,
    # and a name an allowed text holds (a seed's example) is allowed
    assert not leaked_terms("Fine. Thanks.", [TRANSCRIPT], SEEDS)
    assert not leaked_terms("- Priya: call the vendor", [TRANSCRIPT], [*SEEDS, "- Priya: send the draft"]).names
    assert not leaked_terms("Priya Raman", [], SEEDS)  # no training text, nothing to leak


def test_guard_profiles_once_and_adds_per_answer_texts() -> None:
    guard = LeakGuard([TRANSCRIPT], SEEDS, vocabulary=DOMAIN_VOCABULARY)
    assert guard("Name the owner, such as Tomasz.").names == ("Tomasz",)
    assert not guard("Name the owner, such as Tomasz.", allowed=["Tomasz reviews the minutes."])
    shown = "- Amara Okoye: update the rota (due: Monday)"  # a failed output the mutator was shown
    assert guard("Write owners like Amara Okoye.", shown=[shown]).names == ("Amara", "Okoye")
    with pytest.raises(ValueError, match="phrase_words"):
        LeakGuard([TRANSCRIPT], phrase_words=1)


# --- wired where mutator answers are accepted --------------------------------------------------------

def _parent() -> Policy:
    return Policy.seed("p", {"role": SEEDS[0], "format": SEEDS[1], "rules": RULES})


def test_a_reflection_copying_the_training_meetings_names_is_rejected_with_the_reason() -> None:
    info = TaskFeedback("t0", "h0", 0.2, "## Action items\n- Priya Raman: call the vendor (due: Friday)",
                        (("action_f1", 0.1),))
    plan = mut_reflective_plan(_parent(), random.Random(0), 1, feedback=lambda p: info, sections=("rules",))
    assert plan is not None and plan.shown == (info.output, "")
    guard = LeakGuard([TRANSCRIPT], SEEDS, vocabulary=DOMAIN_VOCABULARY)
    leak = "Only facts from the transcript. Every action item names its owner, like Priya Raman by Friday."
    verdict = judge_rewrite(plan, leak, leak_guard=guard)
    assert verdict == "leak: names 'Priya', 'Raman', 'Friday'"
    assert apply_rewrite(plan, leak, leak_guard=guard) is None
    # the shown output alone is enough: no batch transcripts known
    assert judge_rewrite(plan, leak, leak_guard=LeakGuard([])) == "leak: names 'Priya', 'Raman'"
    clean = "Only facts from the transcript. Every action item names its owner exactly as written."
    child = judge_rewrite(plan, clean, leak_guard=guard)
    assert isinstance(child, Policy) and child.section("rules") == clean
    assert judge_rewrite(plan, leak) != verdict  # no guard, no leak check


def test_the_inner_loop_rejects_leaking_answers_and_archives_why() -> None:
    class Recorder:  # the feedback seam carrying its training batch, as rollout.FeedbackRecorder does
        tasks = (MeetingTask("t0", TRANSCRIPT),)

        def __call__(self, policy: Policy) -> None:
            return None

    class Copycat:  # a mutator that pastes a training meeting's owner into every rewrite
        name = "copycat"

        def generate(self, requests):
            return [Generation(text="Name each owner, for example Tomasz Wolak.", prompt_tokens=1,
                               generated_tokens=7, finish_reason="stop") for _ in requests]

    reports: list[GenerationReport] = []
    cfg = InnerConfig(population_size=4, elites=1, cx_prob=0.0, mut_prob=1.0, llm_mutation_share=1.0,
                          min_on_topic=0.0, generations=2)
    toolbox = build_toolbox(cfg, mutator=Copycat(), feedback=Recorder(), seed_prompts=seed_population())
    result = run_inner_loop(seed_population(), toolbox, lambda ps: [keyword_fitness(p) for p in ps], cfg,
                            random.Random(0), on_generation=reports.append)
    leaks = [r for rep in reports for r in rep.rejections if "leak:" in r]
    assert len(leaks) == 6  # 3 offspring slots x 2 generations, every answer rejected
    assert all(r.endswith("leak: names 'Tomasz', 'Wolak'") and r.startswith("mut_") for r in leaks)
    assert all(rep.rejected == len(rep.rejections) for rep in reports)
    assert "leak: names 'Tomasz', 'Wolak'" in reports[-1].record["rejections"]
    assert all("Tomasz" not in text for p in result.population for _, text in p.sections)
    # the same answers pass when the batch is not known (explicit empty training texts)
    reports.clear()
    toolbox = build_toolbox(cfg, mutator=Copycat(), training_texts=[], seed_prompts=seed_population())
    run_inner_loop(seed_population(), toolbox, lambda ps: [keyword_fitness(p) for p in ps],
                   replace(cfg, generations=1), random.Random(0), on_generation=reports.append)
    assert not any("leak:" in r for rep in reports for r in rep.rejections)


def test_plain_rewrite_plans_carry_nothing_shown() -> None:
    assert mut_llm_rewrite_plan(_parent(), random.Random(0), 1).shown == ()


# --- negation flips are not paraphrases ---------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "flipped"), [
    ("List attendees.", "Do not list attendees.", True),
    ("List attendees.", "Don't list attendees.", True),
    ("Copy the transcript.", "Avoid copying the transcript.", True),
    ("Add deadlines.", "Never add deadlines.", True),
    ("Write every owner.", "Write every owner except the chair.", True),
    ("Do not guess. Do not add names.", "Do not guess. Add names.", True),
    ("Never guess owners.", "Do not guess owners.", False),
    ("Don't copy the transcript.", "Avoid copying the transcript.", False),
    ("No more than 7 action items.", "At most 7 action items.", False),
    ("List attendees.", "Name everyone who attended.", False),
])
def test_negation_flipped(a: str, b: str, flipped: bool) -> None:
    assert negation_flipped(a, b) is flipped
    assert negation_flipped(b, a) is flipped


def test_negation_count_reads_contractions_and_curly_apostrophes() -> None:
    assert negation_count("Don’t guess, and never add names.") == 2
    assert negation_count("Leave the small talk out.") == 1
    assert negation_count("Not only decisions: also topics.") == 0


def test_phrase_substitution_never_swaps_a_rule_for_its_negation() -> None:
    from .test_semantic_operators import _at  # unit vectors at a chosen cosine to axis 0

    old, negated, paraphrase = "List attendees.", "Do not list attendees.", "Name everyone who attended."
    table = {old: _at(1.0, 1), negated: _at(0.85, 2), paraphrase: _at(0.7, 3)}
    bank = PhraseBank(TableEmbedder(table), min_words=2)
    bank.add(("rules", t) for t in table)
    parent = Policy.seed("p", {"role": "", "format": "Use bullets.", "rules": old})
    picks = {mut_phrase_substitution(parent, random.Random(s), 1, bank=bank).section("rules") for s in range(20)}
    assert picks == {paraphrase}  # the negation is closer in embedding space but never chosen
    bank = PhraseBank(TableEmbedder(table), min_words=2)
    bank.add(("rules", t) for t in (old, negated))
    child = mut_phrase_substitution(parent, random.Random(0), 1, bank=bank)
    assert child.operator == "mut_phrase_substitution/none"
