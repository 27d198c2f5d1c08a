"""Schema version 3 (issue 27): the pool's ``transcript`` / ``reference_minutes`` columns become ``task_input`` /
``reference``, and an archive written before the change opens and reads the same rows.

``tests/data/archive_v2/archive_v2.db`` was written by main at f44bae6 (schema version 2); ``expected.json``
holds what that code read back from it (``tests/data/archive_v2/make.py`` made both).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from evotrainer.archive import SCHEMA_VERSION, ArchiveStore

DATA = Path(__file__).resolve().parents[1] / "data" / "archive_v2"
RENAMED = {"transcript": "task_input", "reference_minutes": "reference"}


def _expected() -> dict:
    """What the version-2 code read, under the version-3 column names."""
    expected = json.loads((DATA / "expected.json").read_text())
    for group in (expected["dump"]["selfevolve_pool"], expected["pool"]):
        for i, row in enumerate(group):
            group[i] = {RENAMED.get(k, k): v for k, v in row.items()}
    return expected


def _read(path: Path) -> dict:
    with ArchiveStore(path, read_only=True) as ro:
        pool = [dict(vars(r)) for r in ro.selfevolve_pool("run0")]
        return json.loads(json.dumps({"dump": ro.dump_deterministic("run0"), "pool": pool}, default=list))


def _columns(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute("PRAGMA table_info(selfevolve_pool)")}


def test_a_version_2_archive_reads_the_same_read_only(tmp_path: Path) -> None:
    copy = tmp_path / "archive.db"  # a read-only open leaves the file as it is; a copy keeps the fixture clean
    shutil.copyfile(DATA / "archive_v2.db", copy)
    before = copy.read_bytes()
    assert _read(copy) == _expected()
    assert copy.read_bytes() == before and "transcript" in _columns(copy)  # not migrated by a reader


def test_opening_for_writing_migrates_to_version_3_and_keeps_every_row(tmp_path: Path) -> None:
    copy = tmp_path / "archive.db"
    shutil.copyfile(DATA / "archive_v2.db", copy)
    with ArchiveStore(copy) as store:
        assert store.selfevolve_pool("run0")[0].task_input == "Ana: hi\nBo: send it by Friday."
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    assert {"task_input", "reference"} <= _columns(copy) and not {"transcript", "reference_minutes"} & _columns(copy)
    assert _read(copy) == _expected()


def test_a_new_archive_has_the_neutral_columns(tmp_path: Path) -> None:
    with ArchiveStore(tmp_path / "new.db"):
        pass
    assert {"task_input", "reference"} <= _columns(tmp_path / "new.db")
    assert not {"transcript", "reference_minutes"} & _columns(tmp_path / "new.db")
