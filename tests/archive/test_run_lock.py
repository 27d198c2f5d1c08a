"""The run lock on filesystems without ``flock`` (issue 26, line 3; filelock#67): a warning naming the
filesystem, not a refusal; a lock another process really holds still refuses."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evotrainer.archive import run_lock
from evotrainer.archive.run_lock import filesystem_of, lock_path, probe
from evotrainer.errors import ConfigError
from evotrainer.run.resume import RunFiles, plan_resume

RUN = "run-x"


def _fake_mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mount table in which ``tmp_path`` lies on Lustre (a longer mount point beats ``/``)."""
    table = tmp_path / "mounts"
    table.write_text("/dev/vda / ext4 rw,relatime 0 0\n"
                     f"10.0.0.1@o2ib:/scratch {tmp_path} lustre rw,noflock,lazystatfs 0 0\n"
                     "tmpfs /dev/shm tmpfs rw 0 0\n", encoding="utf-8")
    monkeypatch.setattr(run_lock, "_MOUNTS", table)


def _no_flock(code: int):
    def flock(fd: int, operation: int) -> None:
        raise OSError(code, os.strerror(code))
    return flock


@pytest.mark.parametrize("code", [errno.ENOSYS, errno.ENOLCK], ids=["ENOSYS", "ENOLCK"])
def test_flock_enosys_warns_with_filesystem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture, code: int) -> None:
    """Lustre without ``flock`` (ENOSYS) or NFS with ``nolock`` (ENOLCK) used to refuse every run as
    "being written by another process"; now the run writes its archive, after a warning naming the mount."""
    _fake_mounts(tmp_path, monkeypatch)
    monkeypatch.setattr(fcntl, "flock", _no_flock(code))
    run_dir = tmp_path / "run"
    files = RunFiles(run_dir, None, None)
    with caplog.at_level(logging.WARNING, logger="evotrainer.archive.run_lock"):
        store = files.archive(run_dir / "archive.db", RUN)
    try:
        store.create_run(RUN, seed=0, config={"mode": "evolve", "seed": 0}, code_version="t")
        assert [r.run_id for r in store.list_runs()] == [RUN]
    finally:
        store.close()
        files.close()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"lustre mounted at {tmp_path} (from 10.0.0.1@o2ib:/scratch" in warning
    assert "no flock" in warning and str(lock_path(run_dir / "archive.db", RUN)) in warning
    # resume cannot tell a live writer there: the run counts as not running, so it can be resumed
    assert probe(lock_path(run_dir / "archive.db", RUN)) is None
    assert plan_resume(run_dir, {"mode": "evolve", "seed": 0}).run_id == RUN


def test_flock_held_by_another_process_still_refuses(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    lock = lock_path(run_dir / "archive.db", RUN)
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert probe(lock) is True
        with pytest.raises(ConfigError, match="being written by another process"):
            RunFiles(run_dir, None, None).archive(run_dir / "archive.db", RUN)
    finally:
        holder.communicate("", timeout=60)
    assert probe(lock) is False  # the holder ended: the kernel released its lock
    files = RunFiles(run_dir, None, None)
    files.archive(run_dir / "archive.db", RUN).close()
    files.close()


def test_another_flock_error_is_not_reported_as_another_process(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fcntl, "flock", _no_flock(errno.EBADF))
    with pytest.raises(OSError, match=r"cannot lock .*\.run-x\.lock"):
        RunFiles(tmp_path, None, None).archive(tmp_path / "archive.db", RUN)


def test_filesystem_of_names_the_longest_mount_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if Path("/proc/mounts").is_file():
        assert filesystem_of("/proc/self").startswith("proc mounted at /proc ")  # the real table
    _fake_mounts(tmp_path, monkeypatch)
    assert filesystem_of(tmp_path / "deep" / "er").startswith(f"lustre mounted at {tmp_path} ")
    assert filesystem_of("/etc").startswith("ext4 mounted at / ")
    spaced = tmp_path / "mounts"
    spaced.write_text("nfs-server:/export /mnt/my\\040runs nfs4 rw,nolock 0 0\n", encoding="utf-8")
    assert filesystem_of("/mnt/my runs/r1") == "nfs4 mounted at /mnt/my runs (from nfs-server:/export; options rw,nolock)"
    monkeypatch.setattr(run_lock, "_MOUNTS", tmp_path / "missing")
    assert filesystem_of(tmp_path).startswith("an unknown filesystem")
