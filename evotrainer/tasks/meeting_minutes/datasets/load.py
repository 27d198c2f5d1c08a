"""One entry point for every dataset shape: :func:`load_dataset` (auto-detects the shape)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evotrainer.errors import ConfigError, DataError
from evotrainer.tasks.meeting_minutes.datasets.folder import load_folder
from evotrainer.tasks.meeting_minutes.datasets.jsonl import load_jsonl
from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["FORMATS", "detect_format", "load_dataset"]

FORMATS: tuple[str, ...] = ("auto", "jsonl", "folder")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")


def detect_format(path: str | Path, fmt: str = "auto", *, key: str = "evaluate.format") -> str:
    """The concrete shape of ``path``: ``"folder"`` for a folder, ``"jsonl"`` for a ``.jsonl`` file.

    Raises:
        ConfigError: ``fmt`` is not one of :data:`FORMATS` (names ``key``).
        DataError: ``path`` does not exist, or auto-detection cannot tell its shape.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"{key}: expected one of {list(FORMATS)}, got {fmt!r}")
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: dataset not found; expected a .jsonl file or a folder of .txt + .md files")
    if fmt != "auto":
        return fmt
    if path.is_dir():
        return "folder"
    if path.suffix.lower() in _JSONL_SUFFIXES:
        return "jsonl"
    raise DataError(f"{path}: cannot tell the dataset shape from the name; expected a .jsonl file or a folder "
                    f"of <name>.txt transcripts with <name>.md minutes (or set {key}=jsonl)")


def load_dataset(
    path: str | Path,
    *,
    fmt: str = "auto",
    field_map: Mapping[str, str] | None = None,
    limit: int | None = None,
    key_prefix: str = "evaluate",
) -> list[MeetingTask]:
    """Load meeting items (transcript + reference minutes) from any supported shape.

    Shapes: ``jsonl`` (our schema; other field names through ``field_map``; see
    :mod:`evotrainer.tasks.meeting_minutes.datasets.jsonl`) and ``folder`` (``<name>.txt`` + ``<name>.md``; see
    :mod:`evotrainer.tasks.meeting_minutes.datasets.folder`). Transcript lines may read ``Speaker: text`` or
    ``[hh:mm:ss] Speaker: text`` (:mod:`evotrainer.tasks.meeting_minutes.datasets.speaker_lines`).

    Args:
        path: a ``.jsonl`` file or a folder.
        fmt: ``"auto"`` (folder -> folder, ``.jsonl`` -> jsonl), ``"jsonl"`` or ``"folder"``.
        field_map: jsonl only: our field name -> the file's field name.
        limit: first ``limit`` items (file order for jsonl, id order for a folder); None = all.
        key_prefix: config section named in errors (``<prefix>.format``, ``.field_map``, ``.limit``).

    Returns:
        At least one item. ``task.source`` is kept for per-source results.

    Raises:
        DataError: missing path, unknown shape, malformed content (``file:LINE`` and what was
            expected), or no items at all.
        ConfigError: bad ``fmt``, ``limit`` or ``field_map`` key; a ``field_map`` given for a folder.
    """
    shape = detect_format(path, fmt, key=f"{key_prefix}.format")
    if shape == "jsonl":
        if Path(path).is_dir():
            raise DataError(f"{path}: {key_prefix}.format=jsonl but this is a folder; expected a .jsonl file")
        items = load_jsonl(path, field_map=field_map, limit=limit, field_map_key=f"{key_prefix}.field_map",
                           limit_key=f"{key_prefix}.limit")
    else:
        if field_map:
            raise ConfigError(f"{key_prefix}.field_map: only applies to JSONL files, but {path} is read as a folder")
        items = load_folder(path, limit=limit, limit_key=f"{key_prefix}.limit")
    if not items:
        raise DataError(f"{path}: no meeting items (the file is empty or blank)")
    return items
