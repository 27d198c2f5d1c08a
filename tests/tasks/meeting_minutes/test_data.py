import json
from pathlib import Path

import pytest

from evotrainer.errors import ConfigError, DataError
from evotrainer.tasks.meeting_minutes import load_tasks

QMSUM = Path("/work/shared/data/qmsum_meetings.jsonl")


def _record(i, **over):
    rec = {
        "id": f"m{i}",
        "source": "hand",
        "domain": "garden club",
        "transcript": "Ines: hello\nBao: hi",
        "reference_minutes": "## Topics\n- Greetings",
        "topics": ["Greetings"],
        "decisions": ["Meet again"],
        "action_items": [{"owner": "Bao", "task": "book a room", "due": "Friday"}, "Ines: bring tea"],
        "meta": {"stratum": "short"},
    }
    rec.update(over)
    return rec


def _write(tmp_path, lines, name="val.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_good_file_loads(tmp_path):
    path = _write(tmp_path, [json.dumps(_record(1)), "", json.dumps(_record(2))])
    tasks = load_tasks(path)
    assert [t.task_id for t in tasks] == ["m1", "m2"]
    first = tasks[0]
    assert first.source == "hand" and first.topics == ("Greetings",) and first.decisions == ("Meet again",)
    assert [(a.owner, a.task, a.due) for a in first.action_items] == [("Bao", "book a room", "Friday"), ("Ines", "bring tea", "")]
    assert first.meta["domain"] == "garden club" and first.meta["stratum"] == "short" and first.meta["line"] == 1
    assert len(load_tasks(path, limit=1)) == 1


def test_field_map(tmp_path):
    rec = _record(1)
    rec["summary"] = rec.pop("reference_minutes")
    path = _write(tmp_path, [json.dumps(rec)])
    assert load_tasks(path, field_map={"reference_minutes": "summary"})[0].reference_minutes.startswith("##")
    with pytest.raises(DataError, match=r"val\.jsonl:1: field 'reference_minutes' is missing"):
        load_tasks(path)
    with pytest.raises(ConfigError, match="field_map.summary"):
        load_tasks(path, field_map={"summary": "x"})


def test_malformed_json_names_file_and_line(tmp_path):
    path = _write(tmp_path, [json.dumps(_record(1)), "", '{"id": "m3", "transcript": '])
    with pytest.raises(DataError, match=r"val\.jsonl:3: not valid JSON"):
        load_tasks(path)


@pytest.mark.parametrize(
    "over, pattern",
    [({"transcript": ""}, "field 'transcript' is empty"), ({"transcript": 3}, "field 'transcript' has type int"),
     ({"reference_minutes": None}, "field 'reference_minutes' is missing"), ({"topics": "x"}, "field 'topics'"),
     ({"action_items": ["Bao:  "]}, r"action_items\[0\] has no task text"),
     ({"action_items": [{"owner": "Bao"}]}, r"action_items\[0\] expected")],
)
def test_bad_fields(tmp_path, over, pattern):
    path = _write(tmp_path, [json.dumps(_record(1)), json.dumps(_record(2, **over))])
    with pytest.raises(DataError, match=r"val\.jsonl:2: .*" + pattern):
        load_tasks(path)


def test_duplicate_ids_and_missing_file(tmp_path):
    path = _write(tmp_path, [json.dumps(_record(1)), json.dumps(_record(1))])
    with pytest.raises(DataError, match="duplicate id 'm1'"):
        load_tasks(path)
    with pytest.raises(DataError, match="nope.jsonl"):
        load_tasks(tmp_path / "nope.jsonl")


@pytest.mark.skipif(not QMSUM.is_file(), reason=f"{QMSUM} not present")
def test_qmsum_file_loads():
    tasks = load_tasks(QMSUM)
    assert len(tasks) == 152
    assert all(t.transcript and t.reference_minutes and t.action_items == () for t in tasks)
    assert len({t.task_id for t in tasks}) == 152
    assert len(load_tasks(QMSUM, limit=10)) == 10
