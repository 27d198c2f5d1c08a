"""Archive store: round trips, append-only, rollback on failure, bad files, concurrent read-only open."""

import os
import re
import sqlite3
from pathlib import Path

import pytest

import evotrainer.archive as archive_pkg
from evotrainer.archive import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    ArchiveStore,
    EvaluationRow,
    HarnessCandidateRow,
    open_archive,
)
from evotrainer.errors import ArchiveError
from evotrainer.genome import Policy

RUN = "run0"


def _seeds() -> list[Policy]:
    return [
        Policy.seed("s1", {"role": "You take minutes.", "format": "## Decisions", "rules": "Be brief."}),
        Policy.seed("s2", {"role": "Secrétaire — notes", "format": "- bullets", "rules": "No guessing."}),
    ]


def _store(path: Path) -> ArchiveStore:
    store = ArchiveStore(path)
    store.create_run(RUN, seed=0, config={"outer": {"popsize": 3}, "name": "ü"}, code_version="0.1.0")
    return store


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_new_file_has_pragmas_wal_and_parent_dir(tmp_path):
    path = tmp_path / "deep" / "dir" / "archive.db"
    with ArchiveStore(path):
        pass
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with ArchiveStore(path) as again:  # reopening for writing is fine
        assert again.list_runs() == []


def test_round_trip_every_record_type(tmp_path):
    path = tmp_path / "archive.db"
    with _store(path) as store:
        seeds = _seeds()
        child = seeds[0].child(
            [("role", "You write minutes."), ("format", "## Decisions"), ("rules", "Be brief.")],
            operator="mut_llm_rewrite", generation=1, parents=[seeds[1]], decoding=[("repetition_penalty", 1.1)],
        )
        assert store.add_policies(RUN, [*seeds, child]) == 3
        ev = EvaluationRow(
            policy_id=child.id, kind="fitness", batch_id="b0", total=0.42,
            components={"completeness": 0.5, "format": 1.0}, n_tasks=4, generated_tokens=640, seconds=12.5,
            harness_id="h0.1", outer_generation=0, inner_generation=1, cached=False,
        )
        ev_err = EvaluationRow(policy_id=seeds[0].id, kind="meta_val", batch_id="val", total=0.0,
                               error="generation failed", cached=True)
        store.add_evaluations(RUN, [ev, ev_err])
        cand = HarnessCandidateRow(
            harness_id="h0.1", outer_generation=0, index=1, vector=(0.25, 1.0),
            values={"difficulty": {"length": 300.0}, "reward_weights": {"completeness": 0.6, "format": 0.4}},
            s_val=0.37, race_estimate=0.35, best_policy_id=child.id,
        )
        store.add_harness_candidate(RUN, cand)
        eid = store.add_event(RUN, "incumbent", {"policy_id": child.id, "s_val": 0.37, "note": "première"})

    with ArchiveStore(path, read_only=True) as ro:
        run = ro.get_run(RUN)
        assert (run.seed, run.code_version) == (0, "0.1.0")
        assert run.config == {"outer": {"popsize": 3}, "name": "ü"}
        assert run.created_at.endswith("+00:00") and run.host
        assert [r.run_id for r in ro.list_runs()] == [RUN]
        for p in (*seeds, child):
            got = ro.get_policy(RUN, p.id)
            assert got == p and got.genome_hash == p.genome_hash
        assert ro.policies(RUN) == [*seeds, child]
        assert ro.policies(RUN, generation=1) == [child]
        assert ro.evaluations(RUN) == [ev, ev_err]
        assert ro.evaluations(RUN, policy_id=child.id, kind="fitness") == [ev]
        assert ro.evaluations(RUN, kind="meta_heldout") == []
        assert ro.harness_candidates(RUN) == [cand]
        events = ro.events(RUN)
        assert [(e.id, e.kind, e.payload) for e in events] == [
            (eid, "incumbent", {"policy_id": child.id, "s_val": 0.37, "note": "première"})
        ]
        assert ro.events(RUN, kind="phase") == []
    raw = path.read_bytes() + (path.with_name("archive.db-wal").read_bytes()
                               if path.with_name("archive.db-wal").exists() else b"")
    assert "première".encode() in raw  # JSON stored with ensure_ascii=False


def test_re_adding_policies_is_idempotent_but_conflicts_raise(tmp_path):
    path = tmp_path / "a.db"
    with _store(path) as store:
        seeds = _seeds()
        assert store.add_policies(RUN, seeds) == 2
        assert store.add_policies(RUN, seeds) == 0
        assert store.add_policies(RUN, [seeds[0], seeds[0]]) == 0
        assert len(store.policies(RUN)) == 2
        impostor = Policy.seed("s1", {"role": "other", "format": "f", "rules": "r"})
        with pytest.raises(ArchiveError, match="different genome"):
            store.add_policies(RUN, [impostor])
        assert store.get_policy(RUN, "s1") == seeds[0]
    assert _count(path, "policy_parents") == 0


def test_failing_write_rolls_back_and_keeps_earlier_rows(tmp_path):
    path = tmp_path / "a.db"
    with _store(path) as store:
        seeds = _seeds()
        store.add_policies(RUN, seeds)
        good = EvaluationRow(policy_id="s1", kind="fitness", batch_id="b0", total=0.5)
        store.add_evaluations(RUN, [good])
        batch = [
            EvaluationRow(policy_id="s2", kind="fitness", batch_id="b1", total=0.6),
            EvaluationRow(policy_id="s1", kind="fitness", batch_id="b1", total=float("nan")),
        ]
        with pytest.raises(ArchiveError, match="finite"):
            store.add_evaluations(RUN, batch)
        with pytest.raises(ArchiveError, match="kind"):
            store.add_evaluations(RUN, [good, EvaluationRow(policy_id="s1", kind="bogus", batch_id="b", total=0)])
        with pytest.raises(ArchiveError, match="component 'x'"):
            store.add_evaluations(RUN, [good, EvaluationRow("s1", "fitness", "b", 0.1, components={"x": object()})])
        with pytest.raises(ArchiveError, match="JSON"):
            store.add_event(RUN, "bad", {"x": object()})
        assert store.evaluations(RUN) == [good]
        cand = HarnessCandidateRow("h0.0", 0, 0, (0.5,), {"values": {}})
        store.add_harness_candidate(RUN, cand)
        with pytest.raises(ArchiveError, match="h0.0"):
            store.add_harness_candidate(RUN, cand)  # unique per run
        with pytest.raises(ArchiveError):
            store.add_policies("no-such-run", seeds)  # foreign key to runs
        with pytest.raises(ArchiveError):
            store.create_run(RUN, seed=1, config={}, code_version="x")
        store.create_run(RUN, seed=1, config={}, code_version="x", exist_ok=True)
        assert store.get_run(RUN).seed == 0
        assert store.harness_candidates(RUN) == [cand]
        assert len(store.policies(RUN)) == 2
        store.add_event(RUN, "after", {})  # still writable after failures
    assert _count(path, "evaluations") == 1
    assert _count(path, "events") == 1


def test_package_source_is_append_only():
    folder = Path(archive_pkg.__file__).parent
    for src in folder.glob("*.py"):
        text = src.read_text(encoding="utf-8")
        pattern = r"UPDATE\s+\w+\s+SET|DELETE\s+FROM|DROP\s+(TABLE|INDEX)|OR\s+REPLACE|REPLACE\s+INTO"
        assert not re.search(pattern, text, flags=re.IGNORECASE), src.name


def test_read_only_open_while_writer_is_open_does_not_block_it(tmp_path):
    path = tmp_path / "a.db"
    writer = _store(path)
    writer.add_policies(RUN, _seeds())
    reader = ArchiveStore(path, read_only=True)
    try:
        assert len(reader.policies(RUN)) == 2
        with reader._read():  # a reader holding a snapshot open ...
            writer.add_event(RUN, "phase", {"seconds": 1.0})  # ... does not block the writer
            writer.add_evaluations(RUN, [EvaluationRow("s1", "meta_val", "val", 0.3)])
        assert len(reader.events(RUN)) == 1  # and sees the new rows afterwards
        assert reader.best_policy(RUN)[1] == 0.3
        with pytest.raises(ArchiveError, match="read-only"):
            reader.add_event(RUN, "x", {})
    finally:
        reader.close()
        writer.close()
    with open_archive(path) as ro:  # after the writer closed (WAL checkpointed)
        assert len(ro.events(RUN)) == 1


def test_corrupt_file_is_an_archive_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(os.urandom(4096))
    for ro in (False, True):
        with pytest.raises(ArchiveError, match=re.escape(str(path))):
            ArchiveStore(path, read_only=ro)
    text = tmp_path / "notes.txt"
    text.write_text("hello, not a database\n" * 100)
    with pytest.raises(ArchiveError, match="not an EvoTrainer archive"):
        ArchiveStore(text)


def test_foreign_sqlite_file_is_an_archive_error(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.commit()
    conn.close()
    for ro in (False, True):
        with pytest.raises(ArchiveError, match="application_id is 0x0"):
            ArchiveStore(path, read_only=ro)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("songs",)]  # untouched


def test_newer_schema_and_missing_files(tmp_path):
    path = tmp_path / "a.db"
    ArchiveStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    for ro in (False, True):
        with pytest.raises(ArchiveError, match="newer"):
            ArchiveStore(path, read_only=ro)
    with pytest.raises(ArchiveError, match="not found"):
        open_archive(tmp_path / "missing.db")
    with pytest.raises(ArchiveError, match="not found"):
        ArchiveStore(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(ArchiveError, match="empty"):
        ArchiveStore(empty, read_only=True)
    with ArchiveStore(empty) as store:  # an empty file is a fresh archive for a writer
        store.create_run("r", 1, {}, "v")


def test_closed_store_raises(tmp_path):
    store = _store(tmp_path / "a.db")
    store.close()
    store.close()
    with pytest.raises(ArchiveError, match="closed"):
        store.list_runs()


def test_one_migration_per_version_and_archive_path(tmp_path):
    from evotrainer.archive import archive_path
    from evotrainer.archive.schema import MIGRATIONS

    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))
    assert archive_path("archive.db", tmp_path) == tmp_path / "archive.db"
    assert archive_path(tmp_path / "x.db", "/elsewhere") == tmp_path / "x.db"
