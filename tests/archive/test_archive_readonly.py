"""Reading an archive never writes beside it, works on a read-only folder, and names a missing -wal (issue 16)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore, EvaluationRow, open_archive
from evotrainer.archive.store import checkpoint_archive
from evotrainer.browse.cli import main
from evotrainer.config import PROJECT_ROOT
from evotrainer.errors import ArchiveError
from evotrainer.genome import Policy
from tests.browse.test_cli_archive import RUN, build_archive

MISSING_WAL = "archive.db-wal, which is missing"
SIDE = ("archive.db-wal", "archive.db-shm")


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _write_some(store: ArchiveStore, n: int = 3) -> None:
    store.create_run(RUN, seed=0, config={}, code_version="t")
    store.add_policies(RUN, [Policy.seed(f"s{i}", {"role": f"r{i}"}) for i in range(n)])
    store.add_evaluations(RUN, [EvaluationRow(f"s{i}", "meta_val", "val", 0.1 * i) for i in range(n)])


def _killed_run(folder: Path, *, shm: bool = True) -> Path:
    """The files a killed run leaves: archive.db (header only), archive.db-wal with every row, -shm."""
    folder.mkdir(parents=True)
    live = folder.parent / f"{folder.name}-live"
    store = ArchiveStore(live / "archive.db")
    try:
        _write_some(store)
        for name in ("archive.db", *SIDE[: 2 if shm else 1]):  # copied while the writer is still open
            shutil.copyfile(live / name, folder / name)
    finally:
        store.close()
    return folder / "archive.db"


def _count(store: ArchiveStore) -> int:
    return len(store.policies(RUN))


@pytest.mark.parametrize("layout", ["clean", "killed", "killed_no_shm"])
def test_reading_creates_nothing_beside_the_archive(tmp_path: Path, layout: str) -> None:
    if layout == "clean":
        db = tmp_path / "run" / "archive.db"
        with ArchiveStore(db) as store:
            _write_some(store)
    else:
        db = _killed_run(tmp_path / "run", shm=layout == "killed")
    before = _listing(db.parent)
    for _ in range(2):
        with open_archive(db) as store:
            assert _count(store) == 3
    assert _listing(db.parent) == before
    assert main(["runs", str(db.parent), "--json"]) == 0
    assert _listing(db.parent) == before


@pytest.mark.parametrize("layout", ["clean", "killed", "killed_no_shm"])
def test_every_read_command_leaves_the_run_folder_as_it_was(tmp_path: Path, layout: str, capsys) -> None:
    """The CLI's read commands and the report (written elsewhere) open the archive read-only."""
    if layout == "clean":
        db = tmp_path / "run" / "archive.db"
        build_archive(db)
    else:
        db = _killed_run(tmp_path / "run", shm=layout == "killed")
    before = _listing(db.parent)
    out = tmp_path / "elsewhere" / "report.html"
    for command in (["runs"], ["show"], ["best"], ["harness"], ["rollbacks"], ["report", "-o", str(out)]):
        assert main([command[0], str(db.parent), *command[1:], "--json"]) == 0, command
        assert _listing(db.parent) == before, command
    assert out.is_file()
    capsys.readouterr()


def test_reader_beside_a_live_writer_sees_new_rows_and_adds_no_files(tmp_path: Path) -> None:
    db = tmp_path / "archive.db"
    with ArchiveStore(db) as writer:
        _write_some(writer)
        before = _listing(tmp_path)
        with open_archive(db) as reader:
            writer.add_policies(RUN, [Policy.seed("late", {"role": "x"})])
            assert _count(reader) == 4
        assert _listing(tmp_path) == before


def test_closing_writer_checkpoints_even_with_a_reader_open(tmp_path: Path) -> None:
    db = tmp_path / "run" / "archive.db"
    writer = ArchiveStore(db)
    _write_some(writer)
    reader = open_archive(db)
    try:
        assert _count(reader) == 3
        writer.close()  # not the last connection: SQLite alone would leave the rows in the WAL
        alone = tmp_path / "copy" / "archive.db"
        alone.parent.mkdir()
        shutil.copyfile(db, alone)  # archive.db without its -wal
        with open_archive(alone) as store:
            assert _count(store) == 3
    finally:
        reader.close()


def test_db_copied_without_its_wal_is_named_not_empty(tmp_path: Path, capsys) -> None:
    db = _killed_run(tmp_path / "run")
    alone = tmp_path / "copied" / "archive.db"
    alone.parent.mkdir()
    shutil.copyfile(db, alone)
    with pytest.raises(ArchiveError, match=MISSING_WAL) as err:
        open_archive(alone)
    assert "empty" not in str(err.value) and "archive checkpoint" in str(err.value)
    assert _listing(alone.parent) == ["archive.db"]
    assert main(["runs", str(alone.parent)]) == 2
    assert MISSING_WAL in capsys.readouterr().err
    assert main(["checkpoint", str(alone.parent)]) == 2
    assert MISSING_WAL in capsys.readouterr().err
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(ArchiveError, match="an empty SQLite file"):  # a truly empty file stays "empty"
        open_archive(empty)


def test_checkpoint_command_folds_the_wal_in(tmp_path: Path, capsys) -> None:
    db = _killed_run(tmp_path / "run")
    assert main(["checkpoint", str(db.parent), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["wal_bytes"] > 0
    assert _listing(db.parent) == ["archive.db"]  # the last connection closed: WAL and -shm removed
    alone = tmp_path / "copied" / "archive.db"
    alone.parent.mkdir()
    shutil.copyfile(db, alone)
    with open_archive(alone) as store:
        assert _count(store) == 3
    assert checkpoint_archive(db) == 0  # nothing left to fold in; nothing created
    assert _listing(db.parent) == ["archive.db"]


def test_report_goes_into_the_run_folder_unless_out_is_given(tmp_path: Path, monkeypatch, capsys) -> None:
    run_dir = tmp_path / "run"
    build_archive(run_dir / "archive.db")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["report"] == str(run_dir / "report.html")
    assert (run_dir / "report.html").is_file() and not (elsewhere / "report.html").exists()
    out = elsewhere / "mine.html"
    assert main(["report", str(run_dir / "archive.db"), "-o", str(out)]) == 0
    assert out.is_file()


# --- a real read-only folder: as a user without write permission -----------------------------------------


@contextmanager
def _read_only_tree() -> Iterator[tuple[Path, list[str]]]:
    """A temporary folder, and the command prefix of a user who may read but not write it.

    Root ignores file modes, so as root the reader runs as ``nobody`` (``setpriv``); the folder lives
    in /tmp, traversable by that user (pytest's root-owned tmp_path is not).
    """
    if os.geteuid() != 0:
        prefix: list[str] = []
    elif shutil.which("setpriv"):
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        pytest.skip("running as root without setpriv: cannot drop write permission")
    if prefix:  # the checkout may sit in a folder that user cannot enter (e.g. a mktemp -d clone, mode 700)
        probe = _as_reader(prefix, "-c", "import evotrainer.archive")
        if probe.returncode != 0:
            pytest.skip("the user 'nobody' cannot import this checkout (its folders are not readable to others): "
                        + (probe.stderr.strip().splitlines() or ["?"])[-1][:160])
    root = Path(tempfile.mkdtemp(prefix="evotrainer-ro-"))
    root.chmod(0o755)
    try:
        yield root, prefix
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)


def _freeze(folder: Path) -> None:
    for f in folder.iterdir():
        f.chmod(0o444)
    folder.chmod(0o555)


def _as_reader(prefix: list[str], *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([*prefix, sys.executable, *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


_EVALUATE_REF = (
    "import sys; from evotrainer.run.policy_refs import resolve_policy_ref as r; "
    "print(r('archive:best', seeds=[], archive=sys.argv[1]).policy.id)"
)


@pytest.mark.parametrize("layout", ["clean", "killed", "killed_no_shm"])
def test_cli_report_and_evaluate_archive_open_a_read_only_folder(layout: str) -> None:
    with _read_only_tree() as (root, prefix):
        if layout == "clean":
            db = root / "run" / "archive.db"
            build_archive(db)
        else:
            db = _killed_run(root / "run", shm=layout == "killed")
        for p in [root, *root.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        _freeze(db.parent)
        before = _listing(db.parent)
        proc = _as_reader(prefix, "-m", "evotrainer.archive", "runs", str(db.parent), "--json")
        assert proc.returncode == 0, proc.stderr
        assert [r["run_id"] for r in json.loads(proc.stdout)] == [RUN]
        if layout == "clean":
            best = _as_reader(prefix, "-m", "evotrainer.archive", "best", str(db.parent), "--json")
            assert best.returncode == 0, best.stderr
            ref = _as_reader(prefix, "-c", _EVALUATE_REF, str(db.parent))
            assert ref.returncode == 0, ref.stderr
            assert ref.stdout.strip() == json.loads(best.stdout)[0]["policy_id"]
            rep = _as_reader(prefix, "-m", "evotrainer.archive", "report", str(db.parent))
            assert rep.returncode == 2 and "--out" in rep.stderr  # the run folder cannot take report.html
            out = root / "out"
            out.mkdir(mode=0o777)
            out.chmod(0o777)
            rep = _as_reader(prefix, "-m", "evotrainer.archive", "report", str(db.parent), "-o",
                             str(out / "r.html"))
            assert rep.returncode == 0, rep.stderr
        assert _listing(db.parent) == before


# --- issue 26, line 8: a long-lived reader while a writer appends and checkpoints -----------------------------

_ROWS_PER_BATCH, _LOCKSTEP_ROUNDS, _FREE_BATCHES = 40, 9, 30


def _batch(k: int) -> list[EvaluationRow]:
    return [EvaluationRow("s0", "fitness", f"b{k}-{i}", 0.5, components={f"c{j}": j / 30 for j in range(30)})
            for i in range(_ROWS_PER_BATCH)]


def _appending_writer(path: str, go, done, finished) -> None:
    """A run (holding its run lock) that appends batches and checkpoints its WAL after each, as a long run
    does past 1,000 WAL pages; every third round it closes and reopens, as a killed run resumed does. The
    first rounds go in lockstep with the reader (``go`` / ``done``), the rest as fast as they can."""
    from evotrainer.run.resume import RunFiles

    db = Path(path)

    def open_run() -> tuple[RunFiles, ArchiveStore]:
        files = RunFiles(db.parent, None, None)
        return files, files.archive(db, RUN)

    files, store = open_run()
    for k in range(_LOCKSTEP_ROUNDS + _FREE_BATCHES):
        if k < _LOCKSTEP_ROUNDS:
            go.wait()
            go.clear()
        store.add_evaluations(RUN, _batch(k))
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if k % 3 == 2:
            store.close()
            files.close()
            files, store = open_run()
        if k < _LOCKSTEP_ROUNDS:
            done.set()
    store.close()
    files.close()
    finished.set()


def test_reader_opened_before_a_writer_appends_and_checkpoints_never_sees_a_malformed_image(tmp_path: Path) -> None:
    """A reader opened on a closed run's archive (no -wal) was ``immutable=1``: once a writer appended and
    checkpointed, it counted wrong rows, then raised "database disk image is malformed" (from the first
    round, on the code before the fix). It must see every committed batch, whole, and never raise."""
    import multiprocessing as mp

    db = tmp_path / "run" / "archive.db"
    with ArchiveStore(db) as store:
        _write_some(store, n=1)
    assert _listing(db.parent) == ["archive.db"]
    reader = open_archive(db)
    ctx = mp.get_context("spawn")
    go, done, finished = ctx.Event(), ctx.Event(), ctx.Event()
    writer = ctx.Process(target=_appending_writer, args=(str(db), go, done, finished))
    writer.start()
    try:
        for k in range(_LOCKSTEP_ROUNDS):  # each batch committed and checkpointed before the reader counts
            go.set()
            assert done.wait(timeout=300), "the writer stopped"
            done.clear()
            assert len(reader.evaluations(RUN, kind="fitness")) == (k + 1) * _ROWS_PER_BATCH
        seen = [_LOCKSTEP_ROUNDS * _ROWS_PER_BATCH]
        while not finished.is_set() and writer.is_alive():  # reads racing the writer's commits and checkpoints
            n = len(reader.evaluations(RUN, kind="fitness"))
            assert n % _ROWS_PER_BATCH == 0 and n >= seen[-1], (n, seen[-1])  # whole batches, never fewer
            seen.append(n)
        writer.join(timeout=300)
        assert writer.exitcode == 0
        assert len(reader.evaluations(RUN, kind="fitness")) == (_LOCKSTEP_ROUNDS + _FREE_BATCHES) * _ROWS_PER_BATCH
        assert len(reader.policies(RUN)) == 1
    finally:
        reader.close()
        if writer.is_alive():
            writer.kill()
    assert _listing(db.parent) == [f".{RUN}.lock", "archive.db"]  # the run's lock stays; no side file left


_READ_WAY = (
    "import sys; from evotrainer.archive import open_archive\n"
    "with open_archive(sys.argv[1]) as s: print(len(s.policies(sys.argv[2])), 'copy' if s._copy_dir else 'file')"
)


@pytest.mark.parametrize("writer", ["none", "live"])
def test_read_only_folder_opens_immutable_only_without_a_live_writer(writer: str) -> None:
    """A read-only run folder still opens; ``immutable=1`` (the file read in place, no locks) only when no
    process holds a run lock there, else a private copy (``mode=ro`` cannot create the -shm it needs)."""
    import fcntl

    with _read_only_tree() as (root, prefix):
        db = root / "run" / "archive.db"
        with ArchiveStore(db) as store:
            _write_some(store)
        lock = db.parent / f".{RUN}.lock"
        lock.touch()
        for p in [root, *root.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        _freeze(db.parent)
        before = _listing(db.parent)
        with open(lock) as held:
            if writer == "live":
                fcntl.flock(held, fcntl.LOCK_EX)  # a live writer (e.g. another user with write access)
            proc = _as_reader(prefix, "-c", _READ_WAY, str(db), RUN)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["3", "file" if writer == "none" else "copy"]
        assert _listing(db.parent) == before
