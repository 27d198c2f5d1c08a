"""The shipped meta-validation sets are fixed: checksum, schema, balance, split by meeting."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evotrainer.config import PACKAGE_DATA
from evotrainer.tasks.meeting_minutes import load_tasks

VAL_DIR = PACKAGE_DATA / "validation_set"
ROOT = Path(__file__).resolve().parents[3]
QMSUM_SOURCE = ROOT.parent / "shared" / "data" / "qmsum_meetings.jsonl"


def test_checksum_matches_the_pinned_value() -> None:
    """Fails when the set changes without SHA256SUMS being updated on purpose."""
    pinned = {}
    for line in (VAL_DIR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        pinned[name] = digest
    assert pinned, "SHA256SUMS lists no file"
    for name, digest in pinned.items():
        actual = hashlib.sha256((VAL_DIR / name).read_bytes()).hexdigest()
        assert actual == digest, f"{name} changed: update validation_set/SHA256SUMS on purpose if intended"


def _length_in_words(row: dict) -> float:
    """Whitespace words; for Chinese/Japanese (no spaces) characters / 1.7, the datasheet's convention."""
    text = row["transcript"]
    cjk = len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text))
    rest = len(re.sub(r"[\u3040-\u30ff\u4e00-\u9fff]", " ", text).split())
    return cjk / 1.7 + rest if cjk else rest


def test_schema_and_balance() -> None:
    rows = [json.loads(line) for line in (VAL_DIR / "meeting_minutes.jsonl").read_text().splitlines()]
    tasks = load_tasks(VAL_DIR / "meeting_minutes.jsonl")
    assert len(rows) == len(tasks) >= 40
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert len({t.content_hash for t in tasks}) == len(tasks)
    words = [_length_in_words(r) for r in rows]
    assert min(words) >= 150 and max(words) <= 1500
    assert len({r["domain"] for r in rows}) == len(rows) >= 100
    assert len({r["style"] for r in rows}) >= 5
    assert sum(w >= 1000 for w in words) >= 10 and sum(w < 300 for w in words) >= 10
    languages = {r["meta"]["language"] for r in rows}
    assert {"zh", "es", "fr", "de", "ja"} <= languages and any("-" in lang for lang in languages)
    for r, t in zip(rows, tasks, strict=True):
        assert t.reference_minutes and t.topics
        for item in t.action_items:
            assert item.owner.split()[0] in t.transcript, (r["id"], item.owner)


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (VAL_DIR / name).read_text(encoding="utf-8").splitlines()]


def test_real_meeting_sets_are_split_by_meeting() -> None:
    """qmsum_meetings.jsonl (selection) and qmsum_transfer.jsonl (transfer report) share no meeting."""
    val, transfer = _rows("qmsum_meetings.jsonl"), _rows("qmsum_transfer.jsonl")
    assert len(val) == 64 and len(transfer) == 24
    assert not {r["meta"]["meeting"] for r in val} & {r["meta"]["meeting"] for r in transfer}
    assert not {r["id"] for r in val} & {r["id"] for r in transfer}
    assert all(r["meta"]["n_words"] <= 1600 for r in val + transfer)
    for domain in ("Academic", "Committee"):
        assert sum(r["meta"]["domain"] == domain for r in transfer) == 12
        assert 28 <= sum(r["meta"]["domain"] == domain for r in val) <= 36
    per_meeting = Counter(r["meta"]["meeting"] for r in transfer)
    assert max(per_meeting.values()) <= 2


def test_hand_written_core_is_a_stratified_subset_with_action_items() -> None:
    rows = {r["id"]: r for r in _rows("meeting_minutes.jsonl")}
    ids = [s for line in (VAL_DIR / "meeting_minutes_core.txt").read_text(encoding="utf-8").splitlines()
           if (s := line.split("#", 1)[0].strip())]
    assert len(ids) == len(set(ids)) == 40 and set(ids) <= set(rows)
    core = [rows[i] for i in ids]
    assert all(r["action_items"] for r in core)
    assert {r["style"] for r in core} == {r["style"] for r in rows.values()}
    words = [_length_in_words(r) for r in core]
    assert sum(w < 300 for w in words) >= 5 and sum(w >= 1000 for w in words) >= 5


@pytest.mark.skipif(not QMSUM_SOURCE.is_file(), reason=f"{QMSUM_SOURCE} not present")
def test_scripts_rebuild_the_shipped_files(tmp_path: Path) -> None:
    """The build scripts are deterministic: rerun, they write the shipped bytes (and a rest of unseen meetings)."""
    for script, args in (("make_qmsum_validation.py", [str(QMSUM_SOURCE), str(tmp_path / "qmsum_meetings.jsonl"),
                                                       "--transfer", str(tmp_path / "qmsum_transfer.jsonl"),
                                                       "--rest", str(tmp_path / "rest.jsonl")]),
                         ("make_core_validation.py", [str(VAL_DIR / "meeting_minutes.jsonl"),
                                                      str(tmp_path / "meeting_minutes_core.txt")])):
        subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], check=True, capture_output=True)
    for name in ("qmsum_meetings.jsonl", "qmsum_transfer.jsonl", "meeting_minutes_core.txt"):
        assert (tmp_path / name).read_bytes() == (VAL_DIR / name).read_bytes(), name
    rest = [json.loads(line) for line in (tmp_path / "rest.jsonl").read_text(encoding="utf-8").splitlines()]
    assert not {r["meta"]["meeting"] for r in rest} & {r["meta"]["meeting"] for r in _rows("qmsum_meetings.jsonl")}
    assert not {r["id"] for r in rest} & {r["id"] for r in _rows("qmsum_transfer.jsonl")}
    assert len(rest) + 64 + 24 <= 152 and len(rest) >= 40
