"""Atomic file writes: a reader sees the old file or the whole new one, never half a file.

The text goes to a temporary file in the destination's folder (so the final rename stays on one file
system), is flushed and fsynced, then :func:`os.replace` puts it in place (atomic on POSIX and on
Windows). Any failure removes the temporary file and re-raises. This module imports nothing from
EvoTrainer, so every layer (archive, tasks, search, the app) may use it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: str | Path, text: str, *, mode: int | None = None) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically.

    Args:
        path: the file to write; its folder must exist. An existing file is replaced.
        text: the whole new content, written as is (no newline added).
        mode: permission bits set on the file before it replaces ``path`` (``0o644`` for a file others
            read); None keeps those of :func:`tempfile.mkstemp`, 0600 (owner only).

    Returns:
        ``path`` as a Path.

    Raises:
        OSError: the folder is missing or not writable, or the disk is full; the temporary file
            (``.<name>.<random>.tmp`` beside ``path``) is removed first.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
