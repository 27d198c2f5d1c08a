"""The JSONL shape: our schema, a field map, turn lists and timestamped transcripts, errors with file:line."""

import json
from pathlib import Path

import pytest

from evotrainer.errors import ConfigError, DataError
from evotrainer.tasks.meeting_minutes.datasets import load_dataset, load_jsonl


def _rec(i: int, **over) -> dict:
    rec = {"id": f"m{i}", "source": "club", "transcript": "Ines: hello\nBao: hi, Ines",
           "reference_minutes": "## Topics\n- Greetings", "action_items": ["Bao: book a room"]}
    rec.update(over)
    return rec


def _write(tmp_path: Path, recs: list, name: str = "d.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    return path


def test_our_schema_keeps_source_and_order(tmp_path: Path) -> None:
    path = _write(tmp_path, [_rec(1), _rec(2, source=None)])
    tasks = load_dataset(path)
    assert [(t.task_id, t.source) for t in tasks] == [("m1", "club"), ("m2", "d")]  # default source: file stem
    assert tasks[0].action_items[0].owner == "Bao" and tasks[0].meta["line"] == 1


def test_field_map_for_other_names(tmp_path: Path) -> None:
    rec = {"meeting_id": "x1", "dialogue": "A: hi\nB: yo", "summary": "They greeted.", "corpus": "ami"}
    path = _write(tmp_path, [rec])
    fmap = {"id": "meeting_id", "transcript": "dialogue", "reference_minutes": "summary", "source": "corpus"}
    (task,) = load_dataset(path, field_map=fmap)
    assert (task.task_id, task.source, task.transcript, task.reference_minutes) == ("x1", "ami", "A: hi\nB: yo",
                                                                                    "They greeted.")
    with pytest.raises(DataError, match=r"d\.jsonl:1: field 'summary2' \(reference_minutes\) is missing"):
        load_dataset(path, field_map={"transcript": "dialogue", "reference_minutes": "summary2"})
    with pytest.raises(ConfigError, match=r"evaluate\.field_map\.bogus: unknown field"):
        load_dataset(path, field_map={"bogus": "x"})


def test_turn_list_and_timestamped_transcripts(tmp_path: Path) -> None:
    turns = [{"speaker": "Aiko", "text": "hi"}, "Bao: hello", {"speaker": "Aiko", "text": "  "}]
    stamped = "[00:00:01] Aiko: hi\n[00:00:09] Bao: hello\n  and more"
    path = _write(tmp_path, [_rec(1, transcript=turns), _rec(2, transcript=stamped)])
    a, b = load_jsonl(path)
    assert a.transcript == "Aiko: hi\nBao: hello"
    assert b.transcript == "Aiko: hi\nBao: hello and more"


@pytest.mark.parametrize(("bad", "pattern"), [
    ('{"id": "m2", "transcript": ', r"d\.jsonl:2: not valid JSON"),
    ("[1, 2]", r"d\.jsonl:2: expected a JSON object, got list"),
    (_rec(2, transcript=""), r"d\.jsonl:2: field 'transcript' is empty; expected a non-empty string"),
    (_rec(2, transcript=[{"who": "A"}]), r"d\.jsonl:2: transcript\[0\] expected \{'speaker': str, 'text': str\}"),
    (_rec(2, transcript="[00:00:05] A: x\n[00:00:61] B: y"),
     r"d\.jsonl:2 \(transcript line 2\): bad timestamp \[00:00:61\]"),
    (_rec(1), r"d\.jsonl:2: duplicate id 'm1' \(first on line 1\)"),
])
def test_malformed_line_names_file_and_line(tmp_path: Path, bad, pattern: str) -> None:
    path = _write(tmp_path, [_rec(1), bad])
    with pytest.raises(DataError, match=pattern):
        load_dataset(path)


def test_not_utf8_and_empty(tmp_path: Path) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(DataError, match="not UTF-8"):
        load_dataset(bad)
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match="no meeting items"):
        load_dataset(empty)
