"""The guard's speaker-continuation check: dialogue instead of minutes scores zero; real minutes never fire."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evotrainer.config import PACKAGE_DATA
from evotrainer.tasks.meeting_minutes import (
    DEFAULT_DIFFICULTY,
    DEFAULT_REWARD_WEIGHTS,
    degenerate_reason,
    generate,
    meta_score,
    reward,
)
from evotrainer.tasks.meeting_minutes.datasets import load_jsonl
from evotrainer.tasks.meeting_minutes.guard import speaker_line_share

from ._fixtures import GOOD, TASK

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data" / "qmsum_meetings.jsonl"
VALIDATION = PACKAGE_DATA / "validation_set" / "meeting_minutes.jsonl"
VALIDATION_QMSUM = PACKAGE_DATA / "validation_set" / "qmsum_meetings.jsonl"

# A paraphrased continuation of TASK's transcript: not copied (no 8-gram run), but all speaker lines.
CONTINUATION = """Ottilie: So the heating budget for the greenhouse is the first thing.
Baptiste: Yeah, the quote for the boiler was twelve thousand, more than planned.
Ottilie: Maybe we could spread it across two years?
Baptiste: I think that works, phase it over two years then.
Rosalind: I'll get the posters printed before Monday.
Ottilie: And I will book the hall for the seed swap."""

CONTINUATIONS = {
    "named_speakers": CONTINUATION,
    "after_a_heading": "## Minutes\n" + CONTINUATION,
    "generic_tags": "Speaker 1: So the budget first.\nSpeaker 2: The boiler is twelve thousand.\n"
                    "Speaker 1: Phase it?\nSpeaker 3: I'll print posters.",
    "first_names_bold_and_stamps": "**ottilie**: so, the budget.\n[00:01] baptiste: yes, twelve thousand.\n"
                                   "Rosalind: posters by Monday then.",
    "one_paragraph": CONTINUATION.replace("\n", " "),
    "bulleted_utterances": "\n".join(f"- {line}" for line in CONTINUATION.splitlines()),
}


@pytest.mark.parametrize("case", sorted(CONTINUATIONS))
def test_speaker_continuation_scores_zero_with_its_reason(case) -> None:
    output = CONTINUATIONS[case]
    assert degenerate_reason(output, TASK.transcript) == "speaker_continuation"
    guarded = reward(output, TASK, DEFAULT_REWARD_WEIGHTS)
    assert guarded.total == 0.0 and guarded.degenerate == "speaker_continuation"
    score = meta_score(output, TASK)
    assert score.value == 0.0 and score.parts["degenerate"] == 1.0


def test_continuation_would_score_without_the_guard() -> None:
    # Why the check exists: the dialogue shares words with the reference, so ROUGE-Lsum rewards it.
    assert meta_score(CONTINUATION, TASK).parts["rouge_lsum"] > 0.15


OWNER_MINUTES = {
    "owned_bullets_without_header": "- Baptiste: ask the supplier for a revised quote\n- Ottilie: book the hall\n"
                                    "- Rosalind: print the posters",
    "unbulleted_under_action_header": "Decisions:\n- Phase the boiler\nAction items:\nBaptiste: ask for a quote\n"
                                      "Ottilie: book the hall\nRosalind: print the posters",
    "markdown_sections": GOOD,
    "decisions_and_owner_bullets": "## Decisions\n- Phase the boiler over two years\n## Action items\n"
                                   "- Baptiste: ask the supplier for a revised quote (Friday)\n"
                                   "- Ottilie: book the community hall\n- Rosalind: print posters (Monday)",
    "two_quotes_in_a_summary": "## Summary\nThe boiler costs more than planned.\nBaptiste: I think so.\n"
                               "The seed swap is in April.\nOttilie: Agreed.\nPosters are printed by Monday.",
}


@pytest.mark.parametrize("case", sorted(OWNER_MINUTES))
def test_minutes_with_owner_lines_do_not_fire(case) -> None:
    assert degenerate_reason(OWNER_MINUTES[case], TASK.transcript) is None


def test_generated_references_do_not_fire() -> None:
    for task in generate(np.random.default_rng(3), DEFAULT_DIFFICULTY, 30):
        assert speaker_line_share(task.reference_minutes, task.transcript)[0] == 0
        assert degenerate_reason(task.reference_minutes, task.transcript) is None


@pytest.mark.parametrize("path", [SHARED, VALIDATION, VALIDATION_QMSUM],
                         ids=["qmsum", "validation_set", "validation_set_qmsum"])
def test_human_references_do_not_fire(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"{path} not present")
    tasks = load_jsonl(path)
    assert tasks
    for task in tasks:
        assert speaker_line_share(task.reference_minutes, task.transcript)[0] == 0, task.task_id
        assert degenerate_reason(task.reference_minutes, task.transcript) is None, task.task_id


def test_invented_speakers_in_the_transcripts_style_count() -> None:
    """A real SmolLM2 output on an ICSI window (plain prompt): a dialogue of "Grad X:" lines, half of them
    speakers the meeting never had (Grad F-I beside Grad A-E), scored 0.118 before this rule."""
    transcript = "\n".join(f"{who}: we should look at the user budget." for who in
                           ("Grad A", "Grad B", "Grad C", "Grad D", "Grad E", "Professor B"))
    output = "\n".join(f"{who}: So here is the user's budget." for who in
                       ("Grad E", "Grad A", "Grad D", "Grad F", "Grad G", "Grad H", "Grad I"))
    assert degenerate_reason(output + "\n\nSummary:\n\nGrad E, Grad A, Grad B", transcript) == "speaker_continuation"
    minutes = "## Action items\n- Grad A: check the budget\n## Topics\n- Grad students' budget: the 2 options"
    assert degenerate_reason(minutes, transcript) is None


# Real outputs of the 1.5B under the plain prompt on two transfer windows (cut): minutes organised by speaker, each
# speaker line a third-person account. Before the narration rule both scored 0 as "speaker_continuation".
BY_SPEAKER = {
    "icsi": ("Professor D: so the results from Stephane and Sunil are in.\nPhD A: Yeah, the Danish is lower.\n"
             "PhD C: The development set is thirty three.",
             "### Meeting Summary\n\n**Professor D:** The meeting began with Professor D presenting the results from "
             "Stephane and Sunil. The results showed that the Danish system had a lower overall improvement.\n\n"
             "**PhD A:** The PhDs discussed the results and the overall improvement.\n\n**PhD C:** The PhD C "
             "discussed the best system and the development set results."),
    "committee": ("Helen Mary Jones AM: Good morning, welcome.\nKirsty Williams AM: Thank you, Chair.\n"
                  "Lynne Neagle AM: Can I ask about youth services?",
                  "### Meeting Summary\n\n**Helen Mary Jones AM:** Chair of the Education Committee, addressing the "
                  "mental health and well-being of staff and learners.\n\n**Kirsty Williams AM:** Minister of "
                  "Education, discussing the importance of youth services.\n\n**Lynne Neagle AM:** Member of the "
                  "Welsh Parliament, expressing gratitude for the meeting and asking about youth services."),
}


@pytest.mark.parametrize("case", sorted(BY_SPEAKER))
def test_minutes_organised_by_speaker_do_not_fire(case) -> None:
    transcript, minutes = BY_SPEAKER[case]
    assert speaker_line_share(minutes, transcript)[0] == 0
    assert degenerate_reason(minutes, transcript) is None


def test_a_turn_with_a_reporting_verb_still_counts() -> None:
    turns = ("Ottilie: We discussed the boiler last week.\nBaptiste: I asked for a second quote.\n"
             "Ottilie: Yeah, and you shared it with Rosalind?\nRosalind: So it was agreed, phase it over two years.")
    assert degenerate_reason(turns, TASK.transcript) == "speaker_continuation"
