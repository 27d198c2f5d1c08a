"""S_val scores meeting content, not the minutes template (issue 24): units, grounding, paraphrase, sections."""

from __future__ import annotations

from evotrainer.tasks.meeting_minutes.content import (
    content_units,
    content_words,
    entities,
    grounded,
    transcript_words,
)
from evotrainer.tasks.meeting_minutes.metric import content_score, meta_score
from evotrainer.tasks.meeting_minutes.probes import SKELETON
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from tests.tasks.meeting_minutes._fixtures import TASK, TRANSCRIPT

HONEST = """## Topics
- Greenhouse heating budget and the boiler quote
- The volunteer seed swap in April

## Decisions
- The boiler replacement will be phased over two years
- The seed swap is on the second Saturday of April

## Action items
- Baptiste: ask the supplier for a revised quote (due: Friday)
- Ottilie: book the community hall
- Rosalind: print the seed swap posters (due: Monday)"""


def test_template_words_carry_nothing():
    assert content_units(SKELETON) == ()
    assert content_units("## Topics\n## Decisions\n## Action items\n- None\n- Owner: TBD (due: TBD)") == ()
    assert content_words("The meeting discussed the decision and the action items.") == ()
    assert meta_score(SKELETON, TASK).value == 0.0


def test_headings_and_labels_do_not_change_content():
    bare = "\n".join(u.text for u in content_units(TASK.reference_minutes))
    with_template = content_score(TASK.reference_minutes, TASK.reference_minutes, TRANSCRIPT)
    without = content_score(bare, bare, TRANSCRIPT)
    assert abs(with_template["lexical"] - without["lexical"]) < 1e-9
    assert [u.section for u in content_units(TASK.reference_minutes)][:2] == ["topics", "topics"]
    assert content_units("- Owner: Baptiste - ask for a quote (due: Friday)")[0].text.startswith("Baptiste")


def test_reference_scores_far_above_honest_minutes_above_unrelated_text():
    ref = meta_score(TASK.reference_minutes, TASK).value
    honest = meta_score(HONEST, TASK).value
    unrelated = meta_score("## Topics\n- Quarterly sales figures\n## Decisions\n- Hire two engineers", TASK).value
    assert ref > 0.85 and 0.3 < honest < ref and unrelated < 0.05


def test_paraphrase_counts_through_the_embedder():
    paraphrase = ("The group talked about paying for the greenhouse boiler in two instalments over two years. "
                  "Posters for the April seed exchange will be printed by Rosalind.")
    parts = content_score(paraphrase, TASK.reference_minutes, TRANSCRIPT)
    other = content_score("Revenue grew in the third quarter and the board approved new hires.",
                          TASK.reference_minutes, TRANSCRIPT)
    assert parts["semantic"] > 0.15 > other["semantic"]


def test_names_and_numbers_not_in_the_transcript_cost():
    truthful = "- Baptiste will ask the supplier for a revised boiler quote by Friday."
    invented = "- Marguerite will ask the supplier for a revised boiler quote of 45,000 by Friday."
    a = content_score(truthful, TASK.reference_minutes, TRANSCRIPT)
    b = content_score(invented, TASK.reference_minutes, TRANSCRIPT)
    assert a["grounded"] == 1.0 and b["grounded"] < 1.0 and b["content"] < a["content"]


def test_spelled_numbers_ground_digits():
    words = transcript_words(TRANSCRIPT)  # "twelve thousand", "twenty volunteers", "second Saturday"
    assert grounded("20", words) and grounded("12,000", words) and grounded("2nd", words)  # "second"
    assert not grounded("37", words)
    assert grounded("2", words)  # "two years"
    assert not grounded("marguerite", words) and grounded("baptiste", words)
    assert entities("Aiko: send the report to Berlin by 5 June.") == ("aiko", "berlin", "5", "june")


def test_section_to_section_rewards_content_in_the_right_section():
    right = TASK.reference_minutes
    swapped = right.replace("## Topics", "## TMP").replace("## Decisions", "## Topics").replace("## TMP",
                                                                                                 "## Decisions")
    assert meta_score(swapped, TASK).parts["content"] < meta_score(right, TASK).parts["content"]


def test_prose_reference_is_compared_whole():
    task = MeetingTask("q", TRANSCRIPT, "Baptiste will get a new boiler quote. Rosalind prints seed swap posters.")
    assert meta_score(HONEST, task).value > 0.2
    assert "rouge_lsum" in meta_score(HONEST, task).parts  # reported, not in value


def test_degenerate_and_odd_text_never_raise():
    for text in ("", "   ", "## Topics", "\x00\x01", "😀" * 50, "Ottilie: " * 40):
        s = meta_score(text, TASK)
        assert 0.0 <= s.value <= 1.0
