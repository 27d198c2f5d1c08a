"""The shipped meta-validation set is fixed: checksum, schema, balance."""

from __future__ import annotations

import hashlib
import json
import re

from evotrainer.config import PACKAGE_DATA
from evotrainer.tasks.meeting_minutes import load_tasks

VAL_DIR = PACKAGE_DATA / "validation_set"


def test_checksum_matches_the_pinned_value() -> None:
    """Fails when the set changes without SHA256SUMS being updated on purpose."""
    pinned = {}
    for line in (VAL_DIR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        pinned[name] = digest
    assert pinned, "SHA256SUMS lists no file"
    for name, digest in pinned.items():
        actual = hashlib.sha256((VAL_DIR / name).read_bytes()).hexdigest()
        assert actual == digest, f"{name} changed: update evotrainer/validation_set/SHA256SUMS on purpose if intended"


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
