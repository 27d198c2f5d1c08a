"""The folder shape: <name>.txt transcripts with <name>.md minutes; sources from subfolders; errors."""

from pathlib import Path

import pytest

from evotrainer.errors import ConfigError, DataError
from evotrainer.tasks.meeting_minutes.datasets import load_dataset, load_folder, parse_reference_minutes

MINUTES = """# Weekly sync

## Topics
- Budget
- Hiring

## Decisions
- Phase the boiler over two years
- None

## Action items
- Aiko: ask for a revised quote (due: Friday)
- Bao Tran: book the hall
  before the seed swap
- None.
"""


def _meeting(folder: Path, name: str, transcript: str = "Aiko: hi\nBao Tran: hello", minutes: str = MINUTES) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_text(transcript, encoding="utf-8")
    if minutes is not None:
        (folder / f"{name}.md").write_text(minutes, encoding="utf-8")


def test_folder_loads_pairs_with_ground_truth_and_sources(tmp_path: Path) -> None:
    root = tmp_path / "meetings"
    _meeting(root, "b_sync", "[00:00:05] Aiko: hi\n[00:01:05] Bao Tran: hello")
    _meeting(root, "a_sync")
    _meeting(root / "board", "2024-06-10")
    (root / "README.md").write_text("notes about the folder")  # a .md without a .txt is ignored
    tasks = load_dataset(root)
    assert [(t.task_id, t.source) for t in tasks] == [("a_sync", "meetings"), ("b_sync", "meetings"),
                                                      ("board/2024-06-10", "board")]
    t = tasks[1]
    assert t.transcript == "Aiko: hi\nBao Tran: hello" and t.meta["duration_s"] == 60.0
    assert t.topics == ("Budget", "Hiring") and t.decisions == ("Phase the boiler over two years",)
    assert [(a.owner, a.task, a.due) for a in t.action_items] == [
        ("Aiko", "ask for a revised quote", "Friday"), ("Bao Tran", "book the hall before the seed swap", "")]
    assert t.reference_minutes.startswith("# Weekly sync")
    assert len(load_folder(root, limit=2)) == 2


def test_txt_without_md_names_the_file(tmp_path: Path) -> None:
    _meeting(tmp_path, "ok")
    _meeting(tmp_path, "lonely", minutes=None)
    with pytest.raises(DataError, match=r"lonely\.txt: transcript without minutes; expected lonely\.md beside it"):
        load_dataset(tmp_path)


def test_malformed_transcript_line_names_file_and_line(tmp_path: Path) -> None:
    _meeting(tmp_path, "m", "\nno speaker yet\nAiko: hi")
    with pytest.raises(DataError, match=r"m\.txt:2: expected a 'Speaker: text'"):
        load_dataset(tmp_path)


def test_bad_timestamp_names_file_and_line(tmp_path: Path) -> None:
    _meeting(tmp_path, "m", "[00:00] Aiko: hi\n[00:7x] Bao: hello")
    with pytest.raises(DataError, match=r"m\.txt:2: bad timestamp \[00:7x\]"):
        load_dataset(tmp_path)


def test_unowned_action_item_is_kept_without_owner(tmp_path: Path) -> None:
    _meeting(tmp_path, "m", minutes="## Action items\n- Aiko: call\n- think about it more\n")
    (task,) = load_dataset(tmp_path)
    assert [(a.owner, a.task) for a in task.action_items] == [("Aiko", "call"), ("", "think about it more")]
    assert task.meta["action_owner_sources"] == ["explicit", "none"]


def test_empty_folder_empty_minutes_and_field_map(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no .txt transcripts"):
        load_dataset(tmp_path)
    _meeting(tmp_path, "m", minutes="  \n")
    with pytest.raises(DataError, match=r"m\.md: the minutes are empty"):
        load_dataset(tmp_path)
    with pytest.raises(ConfigError, match="evaluate.field_map"):
        load_dataset(tmp_path, field_map={"transcript": "x"})


def test_minutes_without_sections_are_still_a_reference() -> None:
    ref = parse_reference_minutes("They agreed to meet again.", source="x.md")
    assert ref.text == "They agreed to meet again." and ref.action_items == () and ref.topics == ()


def test_shape_detection_errors(tmp_path: Path) -> None:
    odd = tmp_path / "d.csv"
    odd.write_text("x")
    with pytest.raises(DataError, match=r"cannot tell the dataset shape"):
        load_dataset(odd)
    with pytest.raises(DataError, match="dataset not found"):
        load_dataset(tmp_path / "nope")
    with pytest.raises(ConfigError, match="evaluate.format"):
        load_dataset(tmp_path, fmt="csv")
