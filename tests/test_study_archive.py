"""scripts/study_archive.py: a study's job folders packed into the repository and unpacked where they came from."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("study_archive", ROOT / "scripts" / "study_archive.py")
study_archive = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(study_archive)


def _archive(path: Path, *, finished: bool, wal_row: bool = False) -> sqlite3.Connection | None:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(
        "CREATE TABLE runs (run_id TEXT, created_at TEXT, seed INTEGER, config_json TEXT, code_version TEXT)"
    )
    con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT)")
    con.execute("CREATE TABLE harness_candidates (harness_id TEXT)")
    con.execute("CREATE TABLE evaluations (kind TEXT, n_tasks INTEGER, cached INTEGER)")
    con.execute("INSERT INTO harness_candidates VALUES ('g1c0')")
    con.executemany("INSERT INTO evaluations VALUES (?, ?, ?)",
                    [("fitness", 3, 0), ("meta_screen", 6, 0), ("meta_screen", 6, 1), ("transfer", 24, 0)])
    config = {"model": {"dtype": "float32"}, "outer": {"candidate_source": "coevolve"}}
    con.execute("INSERT INTO runs VALUES ('run-1', '2026-12-06', 0, ?, 'abc1234')", (json.dumps(config),))
    if finished:
        con.execute("INSERT INTO events (kind) VALUES ('summary')")
    con.commit()
    if wal_row:  # a row still only in the write-ahead log while the connection stays open
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute("INSERT INTO events (kind) VALUES ('phase')")
        con.commit()
        return con
    con.close()


def _sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "multirun" / "2026-12-06_00-00-00_abc"
    for job in ("0_coevolve_seed0", "1_frozen_harness_seed0"):
        (sweep / job / ".hydra").mkdir(parents=True)
        (sweep / job / ".hydra" / "config.yaml").write_text("seed: 0\n")
        (sweep / job / "report.html").write_text("<html>" + "x" * 1000)
        (sweep / job / ".job.lock").write_text("")
        _archive(sweep / job / "archive.db", finished=job.startswith("0_"))
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    (sweep / "sweep_index.json").write_text("{}")
    sqlite3.connect(sweep / "llm_calls.db").execute("CREATE TABLE calls (k TEXT)").connection.commit()
    return sweep


def test_pack_unpack_round_trip(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    live = _archive(sweep / "0_coevolve_seed0" / "live.db", finished=False, wal_row=True)
    written = study_archive.pack(sweep, tmp_path / "dest")
    live.close()
    assert sorted(p.name for p in written) == [
        "0_coevolve_seed0.tar.gz",
        "1_frozen_harness_seed0.tar.gz",
        "sweep.tar.gz",
    ]
    with tarfile.open(tmp_path / "dest" / sweep.name / "0_coevolve_seed0.tar.gz") as tar:
        names = tar.getnames()
    assert not any(n.endswith(("report.html", ".lock", "-wal", "-shm")) for n in names)
    (restored,) = study_archive.unpack(tmp_path / "dest", tmp_path / "root")
    assert sorted(p.name for p in restored.iterdir()) == [
        "0_coevolve_seed0",
        "1_frozen_harness_seed0",
        "llm_calls.db",
        "multirun.yaml",
        "sweep_index.json",
    ]
    job = restored / "0_coevolve_seed0"
    assert (job / ".hydra" / "config.yaml").read_text() == "seed: 0\n"
    # the backup folded the write-ahead log in: the row written after the last checkpoint is there
    kinds = [r[0] for r in sqlite3.connect(job / "live.db").execute("SELECT kind FROM events")]
    assert kinds == ["phase"]
    rows = {d["job"]: d for d in map(study_archive.describe, study_archive.job_folders(restored))}
    assert rows["0_coevolve_seed0"] == {
        "job": "0_coevolve_seed0",
        "run_id": "run-1",
        "code_version": "abc1234",
        "seed": 0,
        "mode": None,
        "dtype": "float32",
        "arm": "coevolve",
        "finished": True,
        "harness_candidates_of_finished_generations": 1,
        "rollouts": 9,  # the cached screen row and the transfer row do not count
        "selfevolve_rounds": 0,  # no self-evolution table in this archive
    }
    assert rows["1_frozen_harness_seed0"]["finished"] is False


def test_pack_one_job_and_errors(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    written = study_archive.pack(sweep, tmp_path / "dest", ["1_frozen_harness_seed0"])
    assert [p.name for p in written] == ["sweep.tar.gz", "1_frozen_harness_seed0.tar.gz"]
    with pytest.raises(SystemExit, match="no job folder with an archive.db"):
        study_archive.pack(sweep, tmp_path / "dest", ["2_random_harness_seed0"])
    with pytest.raises(SystemExit, match="no such sweep folder"):
        study_archive.pack(tmp_path / "missing", tmp_path / "dest")
    with pytest.raises(SystemExit, match="no <sweep>/sweep.tar.gz"):
        study_archive.unpack(tmp_path / "empty", tmp_path / "root")


def test_unpack_refuses_a_path_out_of_the_target(tmp_path: Path) -> None:
    packed = tmp_path / "dest" / "sweep1"
    packed.mkdir(parents=True)
    evil = tmp_path / "evil.txt"
    evil.write_text("x")
    with tarfile.open(packed / "sweep.tar.gz", "w:gz") as tar:
        tar.add(evil, arcname="../../outside.txt")
    with pytest.raises(tarfile.FilterError):
        study_archive.unpack(tmp_path / "dest", tmp_path / "root")
    assert not (tmp_path / "outside.txt").exists()


def test_pack_leaves_out_excluded_paths_and_lists_rounds(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    job = sweep / "0_coevolve_seed0"
    for name in ("round_1", "round_2", "final"):
        (job / "adapters" / name).mkdir(parents=True)
        (job / "adapters" / name / "adapter_model.safetensors").write_bytes(b"w" * 100)
    con = sqlite3.connect(job / "archive.db")
    con.execute("CREATE TABLE selfevolve_rounds (round INTEGER)")
    con.executemany("INSERT INTO selfevolve_rounds VALUES (?)", [(1,), (2,)])
    config = {"mode": "selfevolve", "model": {}, "outer": {"candidate_source": "coevolve"}}  # no outer loop ran
    con.execute("UPDATE runs SET config_json = ?", (json.dumps(config),))
    con.commit()
    con.close()
    study_archive.pack(sweep, tmp_path / "dest", ["0_coevolve_seed0"], ("adapters/round_*",))
    with tarfile.open(tmp_path / "dest" / sweep.name / "0_coevolve_seed0.tar.gz") as tar:
        names = tar.getnames()
    assert "0_coevolve_seed0/adapters/final/adapter_model.safetensors" in names
    assert not any("round_" in n for n in names)
    (restored,) = study_archive.unpack(tmp_path / "dest", tmp_path / "root")
    row = study_archive.describe(restored / "0_coevolve_seed0")
    assert (row["mode"], row["selfevolve_rounds"], row["arm"]) == ("selfevolve", 2, None)


def test_a_peer_arm_folder_is_packed_and_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = _sweep(tmp_path)
    doc = {"version": 1, "arm": "gepa", "seed": 0, "run_id": "gepa-s0-x", "rollouts": 301, "budget": 300,
           "extra": {"code_version": "def5678", "dtype": "bfloat16"}}
    (sweep / "gepa_seed0").mkdir()
    (sweep / "gepa_seed0" / "arm_result.json").write_text(json.dumps(doc))
    (sweep / "notes").mkdir()  # neither an archive nor an arm result: not a job
    written = study_archive.pack(sweep, tmp_path / "dest")
    assert "gepa_seed0.tar.gz" in [p.name for p in written] and "notes.tar.gz" not in [p.name for p in written]
    assert study_archive.main(["list", str(tmp_path / "dest")]) == 0
    rows = [json.loads(line.split(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()]
    gepa = next(r for r in rows if r["job"] == "gepa_seed0")
    assert (gepa["arm"], gepa["seed"], gepa["rollouts"], gepa["finished"]) == ("gepa", 0, 301, True)
    assert (gepa["code_version"], gepa["dtype"]) == ("def5678", "bfloat16")
