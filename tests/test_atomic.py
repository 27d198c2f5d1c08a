"""evotrainer.atomic: whole file or old file, temporary file gone on failure."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from evotrainer.atomic import write_text_atomic


def test_writes_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    assert write_text_atomic(path, "one\n") == path
    write_text_atomic(str(path), "twö")
    assert path.read_bytes() == "twö".encode()
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temporary file left


def test_mode(tmp_path: Path) -> None:
    path = write_text_atomic(tmp_path / "r.html", "x", mode=0o644)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(write_text_atomic(tmp_path / "p", "x").stat().st_mode) == 0o600


def test_failure_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("old", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, "\ud800")  # a lone surrogate cannot be encoded as UTF-8
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    with pytest.raises(OSError):
        write_text_atomic(tmp_path / "missing" / "a.txt", "x")
