"""The rows of a JSON Lines file, one object per line, for every family's loaders.

:func:`jsonl_objects` reads a file a family stores tasks or trajectories in (one JSON object per line, blank lines
skipped, a UTF-8 byte-order mark allowed) and names the file and line of anything it cannot use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evotrainer.errors import DataError

__all__ = ["jsonl_objects"]


def jsonl_objects(path: str | Path, what: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(where, line number, object)`` for each non-blank line of ``path``, ``where`` = ``"<path>:<line>"``.

    Args:
        path: a ``.jsonl`` file.
        what: what the file holds, for the missing-file message (e.g. ``"validation file"``).

    Raises:
        DataError: the file is missing, is not UTF-8 text, or a line is not valid JSON or not a JSON object;
            the message names the file (and the line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: {what} not found")
    try:
        with path.open(encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(row, dict):
                    raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
                yield where, lineno, row
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
