"""The shipped meta-validation set is fixed: checksum, schema, balance."""

from __future__ import annotations

import hashlib
import json

from evotrainer.config import PROJECT_ROOT
from evotrainer.tasks.meeting_minutes import load_tasks

VAL_DIR = PROJECT_ROOT / "validation_set"


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


def test_schema_and_balance() -> None:
    rows = [json.loads(line) for line in (VAL_DIR / "meeting_minutes.jsonl").read_text().splitlines()]
    tasks = load_tasks(VAL_DIR / "meeting_minutes.jsonl")
    assert len(rows) == len(tasks) >= 40
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert len({t.content_hash for t in tasks}) == len(tasks)
    words = [len(r["transcript"].split()) for r in rows]
    assert min(words) >= 150 and max(words) <= 900
    assert len({r["domain"] for r in rows}) >= 30
    assert len({r["style"] for r in rows}) >= 5
    for r, t in zip(rows, tasks, strict=True):
        assert t.reference_minutes and t.topics
        for item in t.action_items:
            assert item.owner.split()[0] in t.transcript, (r["id"], item.owner)
