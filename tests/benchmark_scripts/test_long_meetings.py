"""benchmarks/long_meetings.py: the windowed-vs-cut table from two evaluate result files (no model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.long_meetings import compare, render  # noqa: E402
from evotrainer.tasks.meeting_minutes.data import load_tasks  # noqa: E402
from evotrainer.tasks.meeting_minutes.metric import meta_score  # noqa: E402

DATA = ROOT / "validation_set" / "long_generated.jsonl"


def _result(outputs: dict[str, str], handling: dict[str, str]) -> dict:
    tasks = {t.task_id: t for t in load_tasks(DATA)}
    items = [{"id": i, "size": len(tasks[i].transcript.split()), "outputs": {"p": out}, "handling": {"p": handling[i]},
              "scores": {"p": meta_score(out, tasks[i]).value}} for i, out in outputs.items()]
    return {"policies": [{"label": "p"}], "items": items}


@pytest.mark.skipif(not DATA.is_file(), reason="validation_set/long_generated.jsonl not found")
def test_window_minus_cut_is_paired_by_item() -> None:
    tasks = load_tasks(DATA)[:3]
    ids = [t.task_id for t in tasks]
    window = _result({t.task_id: t.reference_minutes for t in tasks}, {i: "windowed:4" for i in ids})
    cut = _result({t.task_id: t.reference_minutes.split("\n")[0] for t in tasks}, {i: "cut:0.300" for i in ids})
    table = compare(window, cut, DATA)
    assert table["n"] == 3 and table["cut_items"] == 3 and table["windows_median"] == 4
    assert table["cut_share_seen_median"] == pytest.approx(0.3)
    s = table["rows"]["s_val"]
    assert s["window"] > s["cut"] and s["wins"] == 3 and s["low"] > 0
    text = render(table, {"window": {"wall_s": 30.0, "cpu_s": 50.0, "peak_rss_gib": 2.0}})
    assert "| s_val |" in text and "| window | 30 | 10.0 | 16.7 | 2.00 |" in text
    words = table["answer_words"]
    assert words["window"] > words["cut"] > 0 and "| words per answer (mean) |" in text
    json.dumps(table)  # the table is plain JSON
