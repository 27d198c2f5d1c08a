"""Free-text action items (AMI style): owners read off the sentence where it names one, else none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evotrainer.errors import DataError
from evotrainer.tasks.meeting_minutes import meta_score, reward
from evotrainer.tasks.meeting_minutes.datasets import load_dataset, owner_source_counts, read_action_item
from evotrainer.tasks.meeting_minutes.datasets.action_items import (
    owner_sources,
    owner_sources_line,
    transcript_speakers,
)
from evotrainer.tasks.meeting_minutes.matching import action_f1
from evotrainer.tasks.meeting_minutes.minutes_format import parse_minutes
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask

AMI = ("Project Manager", "Industrial Designer", "Marketing", "User Interface")


@pytest.mark.parametrize(("text", "speakers", "owner", "task", "source"), [
    ("Bao: book a room", (), "Bao", "book a room", "explicit"),
    ("Maria Lopez (PM): book the hall", (), "Maria Lopez (PM)", "book the hall", "explicit"),
    ("PM: send the minutes", AMI, "PM", "send the minutes", "explicit"),
    ("Will Smith: book the van", (), "Will Smith", "book the van", "explicit"),
    # a role subject names the AMI speaker of that role, written as the speaker's label
    ("The industrial designer will try to find out which components are needed.", AMI,
     "Industrial Designer", "try to find out which components are needed", "read_from_sentence"),
    ("Project manager to send the minutes.", AMI, "Project Manager", "send the minutes", "read_from_sentence"),
    ("Action: the marketing expert will research trends", AMI, "Marketing", "research trends", "read_from_sentence"),
    ("The user interface designer is responsible for the layout", AMI, "User Interface", "the layout",
     "read_from_sentence"),
    # a role without a matching speaker: the phrase itself
    ("The chair will write to the applicant", ("Gareth", "Shirin"), "chair", "write to the applicant",
     "read_from_sentence"),
    # capitalised names, with or without a speaker list
    ("Alice will book the room", (), "Alice", "book the room", "read_from_sentence"),
    ("Dr. Chen will review the protocol", ("Aiko",), "Dr. Chen", "review the protocol", "read_from_sentence"),
    ("Alice'll call Bao", (), "Alice", "call Bao", "read_from_sentence"),
    ("Alice to call the venue", ("Alice Smith", "Bob"), "Alice Smith", "call the venue", "read_from_sentence"),
    ("The professor will look at the net", ("Professor B", "Grad A"), "Professor B", "look at the net",
     "read_from_sentence"),
    # no owner can be read: kept, matched on task text alone
    ("Find out which components are needed.", AMI, "", "Find out which components are needed", "none"),
    ("We will check the costs", AMI, "", "We will check the costs", "none"),
    ("The team should meet again", AMI, "", "The team should meet again", "none"),
    ("Talk to Bao about the budget", ("Bao", "Ines"), "", "Talk to Bao about the budget", "none"),
    ("The report for Alice will be ready", ("Alice", "Bob"), "", "The report for Alice will be ready", "none"),
    ("Marketing materials will be ready", AMI, "", "Marketing materials will be ready", "none"),
    ("The grad will run the net", ("Grad A", "Grad C"), "", "The grad will run the net", "none"),  # ambiguous
])
def test_read_action_item_rules(text, speakers, owner, task, source) -> None:
    item, how = read_action_item(text, speakers)
    assert (item.owner, item.task, how) == (owner, task, source)


def test_blank_items_are_not_items() -> None:
    assert read_action_item("  ") is None and read_action_item("Bao:  ") is None


def test_transcript_speakers_in_order() -> None:
    text = "[00:01] Project Manager: hi\nMarketing: hello\nProject Manager: so: the plan\n  continued"
    assert transcript_speakers(text) == ("Project Manager", "Marketing")


AMI_TRANSCRIPT = ("Project Manager: Let's talk about the remote control components.\n"
                  "Industrial Designer: I can look into which components we need.\n"
                  "Marketing: I'll research the trends in remote controls.\n"
                  "User Interface: We should also check the costs.")
AMI_ITEMS = ["The industrial designer will try to find out which components are needed.",
             "Marketing will research the trends in remote controls.",
             "Check the costs of the components."]


def _write(tmp_path: Path, recs: list[dict]) -> Path:
    path = tmp_path / "ami.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    return path


def _ami_rec(**over) -> dict:
    rec = {"id": "ES2002a", "transcript": AMI_TRANSCRIPT,
           "reference_minutes": "The team discussed the remote control components and trends.",
           "action_items": AMI_ITEMS}
    rec.update(over)
    return rec


def test_jsonl_with_free_text_items_loads_and_records_sources(tmp_path: Path) -> None:
    dict_items = [{"task": "The industrial designer will look at the batteries"}, {"owner": None, "task": "Buy pens"},
                  {"owner": "Marketing", "task": "write the survey", "due": "Friday"}]
    (task, other) = load_dataset(_write(tmp_path, [_ami_rec(), _ami_rec(id="b", action_items=dict_items)]))
    assert [(a.owner, a.task) for a in task.action_items] == [
        ("Industrial Designer", "try to find out which components are needed"),
        ("Marketing", "research the trends in remote controls"),
        ("", "Check the costs of the components")]
    assert task.meta["action_owner_sources"] == ["read_from_sentence", "read_from_sentence", "none"]
    assert [(a.owner, a.task, a.due) for a in other.action_items] == [
        ("Industrial Designer", "look at the batteries", ""), ("", "Buy pens", ""), ("Marketing", "write the survey",
                                                                                        "Friday")]
    assert owner_sources(other) == ("read_from_sentence", "none", "explicit")
    assert owner_source_counts([task, other]) == {"explicit": 1, "read_from_sentence": 3, "none": 2}
    assert owner_sources_line([task, other]) == ("ground-truth action items: 6 (1 explicit owner, 3 owner read from "
                                                 "the sentence, 2 without owner: matched on task text alone)")


def test_owner_sources_without_meta() -> None:
    task = MeetingTask("g", "A: x", action_items=(ActionItem("A", "x"), ActionItem("", "y")))
    assert owner_sources(task) == ("explicit", "none")
    assert owner_sources_line([MeetingTask("q", "A: x")]) is None


@pytest.mark.parametrize(("items", "pattern"), [
    (["Bao:   "], r"ami\.jsonl:1: action_items\[0\] has no task text; expected 'Owner: task' or a sentence"),
    ([{"owner": 3, "task": "x"}], r"ami\.jsonl:1: action_items\[0\] expected \{'owner'\?: str, 'task': str"),
    ([{"owner": "Bao", "task": "  "}], r"ami\.jsonl:1: action_items\[0\] expected"),
    ([7], r"ami\.jsonl:1: action_items\[0\] expected an object, an 'Owner: task' string or a sentence"),
    ("Bao: call", r"ami\.jsonl:1: field 'action_items' must be a list"),
])
def test_bad_items_give_one_line_errors(tmp_path: Path, items, pattern) -> None:
    with pytest.raises(DataError, match=pattern) as err:
        load_dataset(_write(tmp_path, [_ami_rec(action_items=items)]))
    assert "\n" not in str(err.value)


def test_free_text_items_score_owner_only_where_read(tmp_path: Path) -> None:
    (task,) = load_dataset(_write(tmp_path, [_ami_rec()]))
    right = ("## Action items\n- Industrial Designer: find out which components are needed\n"
             "- Marketing: research the trends in remote controls\n- Project Manager: check the costs of the components")
    assert meta_score(right, task).parts["action_f1"] == pytest.approx(1.0)
    # the unowned item matches whoever the output names; the read owners still have to match
    wrong_owner = right.replace("Industrial Designer:", "Marketing:").replace("- Marketing: research",
                                                                             "- Industrial Designer: research")
    predicted = parse_minutes(wrong_owner).action_items
    assert action_f1(predicted, task.action_items) == pytest.approx(1 / 3)
    no_owner = "## Action items\n- check the costs of the components"
    assert action_f1(parse_minutes(no_owner).action_items, task.action_items) == pytest.approx(0.5)
    assert reward(right, task).degenerate is None


def test_folder_minutes_with_sentences(tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text(AMI_TRANSCRIPT, encoding="utf-8")
    (tmp_path / "m.md").write_text("## Action items\n- The industrial designer will pick the batteries\n"
                                   "- Marketing: run the survey\n- [Project Manager] book the room\n"
                                   "- Talk to the manufacturer\n", encoding="utf-8")
    (task,) = load_dataset(tmp_path)
    assert [(a.owner, a.task) for a in task.action_items] == [
        ("Industrial Designer", "pick the batteries"), ("Marketing", "run the survey"),
        ("Project Manager", "book the room"), ("", "Talk to the manufacturer")]
    assert task.meta["action_owner_sources"] == ["read_from_sentence", "explicit", "explicit", "none"]
