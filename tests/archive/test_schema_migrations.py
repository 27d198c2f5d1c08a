"""Archives written by earlier releases open and read the same.

- Schema version 3 (issue 27): the pool's ``transcript`` / ``reference_minutes`` columns became ``task_input`` /
  ``reference``. ``tests/data/archive_v2/archive_v2.db`` was written by main at f44bae6 (schema version 2).
- Schema version 4 (issue 43): ``harness_candidates.screen_s_val`` (the race's estimate of S_val) became
  ``race_estimate``, and outer-generation events stopped writing ``incumbent_screen_s_val`` (the incumbent's
  whole-set S_val a second time). ``tests/data/archive_v3/archive_v3.db`` was written by main at ac2c480 (schema
  version 3).
- Schema version 5 (issue 41): ``selfevolve_rounds`` gained ``grades_requested`` and ``grades_parsed`` (a round's
  model-judge grades asked for and parsed), NULL in older rows. ``tests/data/archive_v4/archive_v4.db`` was written
  by main at bbb66ae (schema version 4).

Each folder's ``expected.json`` holds what that code read back from its file (its ``make.py`` made both).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from evotrainer.archive import SCHEMA_VERSION, ArchiveStore
from evotrainer.archive.schema import RoundRow
from tests.archive._dump import dump_deterministic

DATA = Path(__file__).resolve().parents[1] / "data"
V2, V3, V4 = DATA / "archive_v2", DATA / "archive_v3", DATA / "archive_v4"
POOL_RENAMED = {"transcript": "task_input", "reference_minutes": "reference"}


def _expected_v2() -> dict:
    """What the version-2 code read, under the version-3 column names."""
    expected = json.loads((V2 / "expected.json").read_text())
    for group in (expected["dump"]["selfevolve_pool"], expected["pool"]):
        for i, row in enumerate(group):
            group[i] = {POOL_RENAMED.get(k, k): v for k, v in row.items()}
    return expected


def _read_v2(path: Path) -> dict:
    with ArchiveStore(path, read_only=True) as ro:
        pool = [dict(vars(r)) for r in ro.selfevolve_pool("run0")]
        return json.loads(json.dumps({"dump": dump_deterministic(ro, "run0"), "pool": pool}, default=list))


def _expected_v3() -> dict:
    """What the version-3 code read, with ``screen_s_val`` under its version-4 name ``race_estimate``."""
    expected = json.loads((V3 / "expected.json").read_text())
    for group in (expected["dump"]["harness_candidates"], expected["candidates"]):
        for i, row in enumerate(group):
            group[i] = {("race_estimate" if k == "screen_s_val" else k): v for k, v in row.items()}
    return expected


def _read_v3(path: Path) -> dict:
    with ArchiveStore(path, read_only=True) as ro:
        out = {"dump": dump_deterministic(ro, "run0"),
               "candidates": [dict(vars(r)) for r in ro.harness_candidates("run0")],
               "events": [[e.kind, e.event.to_payload()] for e in ro.events("run0")]}
    return json.loads(json.dumps(out, default=list))


def _columns(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _copy(src: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "archive.db"  # a read-only open leaves the file as it is; a copy keeps the fixture clean
    shutil.copyfile(src, copy)
    return copy


def test_a_version_2_archive_reads_the_same_read_only(tmp_path: Path) -> None:
    copy = _copy(V2 / "archive_v2.db", tmp_path)
    before = copy.read_bytes()
    assert _read_v2(copy) == _expected_v2()
    assert copy.read_bytes() == before and "transcript" in _columns(copy, "selfevolve_pool")  # not migrated


def test_opening_a_version_2_archive_for_writing_migrates_it_and_keeps_every_row(tmp_path: Path) -> None:
    copy = _copy(V2 / "archive_v2.db", tmp_path)
    with ArchiveStore(copy) as store:
        assert store.selfevolve_pool("run0")[0].task_input == "Ana: hi\nBo: send it by Friday."
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    pool = _columns(copy, "selfevolve_pool")
    assert {"task_input", "reference"} <= pool and not {"transcript", "reference_minutes"} & pool
    assert _read_v2(copy) == _expected_v2()


def test_a_version_3_archive_reads_the_same_race_estimates_read_only(tmp_path: Path) -> None:
    copy = _copy(V3 / "archive_v3.db", tmp_path)
    before = copy.read_bytes()
    assert _read_v3(copy) == _expected_v3()
    assert copy.read_bytes() == before and "screen_s_val" in _columns(copy, "harness_candidates")  # not migrated


def test_opening_a_version_3_archive_for_writing_renames_screen_s_val_to_race_estimate(tmp_path: Path) -> None:
    copy = _copy(V3 / "archive_v3.db", tmp_path)
    with ArchiveStore(copy) as store:
        assert [c.race_estimate for c in store.harness_candidates("run0")] == [0.3625, None]
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    cols = _columns(copy, "harness_candidates")
    assert "race_estimate" in cols and "screen_s_val" not in cols
    assert _read_v3(copy) == _expected_v3()


def test_a_new_archive_has_the_current_column_names(tmp_path: Path) -> None:
    with ArchiveStore(tmp_path / "new.db"):
        pass
    pool, cands = _columns(tmp_path / "new.db", "selfevolve_pool"), _columns(tmp_path / "new.db", "harness_candidates")
    assert {"task_input", "reference"} <= pool and not {"transcript", "reference_minutes"} & pool
    assert "race_estimate" in cands and "screen_s_val" not in cands
    assert {"grades_requested", "grades_parsed"} <= _columns(tmp_path / "new.db", "selfevolve_rounds")


def _rounds_v4(path: Path) -> list[dict]:
    with ArchiveStore(path, read_only=True) as ro:
        return json.loads(json.dumps([dict(vars(r)) for r in ro.selfevolve_rounds("run0")], default=list))


def _expected_v4() -> list[dict]:
    """What the version-4 code read, with the counts version 5 added read as None (not counted then)."""
    return [{**r, "grades_requested": None, "grades_parsed": None}
            for r in json.loads((V4 / "expected.json").read_text())["rounds"]]


def test_a_version_4_archive_reads_its_rounds_without_grade_counts_read_only(tmp_path: Path) -> None:
    copy = _copy(V4 / "archive_v4.db", tmp_path)
    before = copy.read_bytes()
    assert _rounds_v4(copy) == _expected_v4()
    with ArchiveStore(copy, read_only=True) as ro:
        assert [r.parse_rate for r in ro.selfevolve_rounds("run0")] == [None, None]
    assert copy.read_bytes() == before and "grades_parsed" not in _columns(copy, "selfevolve_rounds")  # not migrated


def test_opening_a_version_4_archive_for_writing_adds_the_grade_counts_and_keeps_every_row(tmp_path: Path) -> None:
    copy = _copy(V4 / "archive_v4.db", tmp_path)
    with ArchiveStore(copy) as store:
        old = store.selfevolve_rounds("run0")
        store.add_round("run0", RoundRow(round=3, policy_id="s1", status="no_pass", difficulty={}, next_difficulty={},
                                         curriculum="hold", config={}, pool_size=1, n_added=0, n_duplicates=0,
                                         n_samples=2, n_kept=0, pass_rate=0.0, mean_score=0.1, grades_requested=6,
                                         grades_parsed=4))
        third = store.selfevolve_rounds("run0")[-1]
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert {"grades_requested", "grades_parsed"} <= _columns(copy, "selfevolve_rounds")
    assert _rounds_v4(copy)[:2] == _expected_v4() and [r.grades_parsed for r in old] == [None, None]
    assert (third.grades_requested, third.grades_parsed, third.parse_rate) == (6, 4, 4 / 6)
    with ArchiveStore(copy) as store:  # opening again migrates nothing more
        assert len(store.selfevolve_rounds("run0")) == 3
