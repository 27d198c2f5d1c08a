"""Loading meeting-minutes items from JSONL (validation sets, seed data).

The schema and the loader live in :mod:`evotrainer.tasks.meeting_minutes.datasets.jsonl` (one JSON object per line: ``id``,
``source``, ``domain``, ``transcript``, ``reference_minutes``, ``topics``, ``decisions``,
``action_items``, ``meta``); this module keeps the family's historical entry point. Other dataset
shapes (a folder of ``.txt`` + ``.md``, timestamped speaker lines) are read by
:func:`evotrainer.tasks.meeting_minutes.datasets.load_dataset`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evotrainer.tasks.meeting_minutes.datasets.jsonl import FIELDS, load_jsonl
from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["FIELDS", "load_tasks"]


def load_tasks(
    path: str | Path, limit: int | None = None, field_map: Mapping[str, str] | None = None
) -> list[MeetingTask]:
    """Load meeting items from a JSONL file (see :func:`evotrainer.tasks.meeting_minutes.datasets.jsonl.load_jsonl`).

    Args:
        path: the JSONL file.
        limit: keep only the first ``limit`` items (None keeps all); >= 0.
        field_map: our field name -> the file's field name, for files with other names.

    Returns:
        The items in file order, ``meta`` extended with ``domain`` (when given) and ``line``.

    Raises:
        DataError: missing file; a line that is not JSON or not an object; a missing, empty or
            ill-typed field; a duplicate id. Messages name ``file:LINE``.
        ConfigError: ``limit`` < 0 or a ``field_map`` key that is not one of :data:`FIELDS`
            (names ``task.validation_limit`` / ``task.field_map``).
    """
    return load_jsonl(path, field_map=field_map, limit=limit)
