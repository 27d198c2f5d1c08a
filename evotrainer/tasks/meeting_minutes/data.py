"""Loading meeting-minutes items from JSONL (validation sets, seed data).

One JSON object per line (blank lines ignored)::

    {"id": str,                      # unique in the file; optional (default: "<file stem>-<line>")
     "source": str,                  # optional (default: the file stem)
     "domain": str,                  # optional, stored in meta["domain"]
     "transcript": str,              # required, non-empty: "Speaker: text" lines
     "reference_minutes": str,       # required, non-empty
     "topics": [str],                # optional
     "decisions": [str],             # optional
     "action_items": [{"owner": str, "task": str, "due": str?} | "Owner: task"],   # optional
     "meta": {}}                     # optional, free-form

The QMSum export at ``/work/shared/data/qmsum_meetings.jsonl`` (``id, source, transcript,
reference_minutes, action_items ([]), topics, meta``) fits this schema as is. ``field_map`` maps our
field names to the names another file uses, e.g. ``{"reference_minutes": "summary"}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evotrainer.errors import ConfigError, DataError
from evotrainer.tasks.base import ActionItem, MeetingTask

__all__ = ["FIELDS", "load_tasks"]

FIELDS: tuple[str, ...] = (
    "id", "source", "domain", "transcript", "reference_minutes", "topics", "decisions", "action_items", "meta",
)


def _text(rec: Mapping[str, Any], key: str, name: str, where: str, required: bool) -> str:
    value = rec.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        if value is None:
            got = "is missing"
        elif isinstance(value, str):
            got = "is empty"
        else:
            got = f"has type {type(value).__name__}"
        label = repr(key) if key == name else f"{key!r} ({name})"
        expected = "a non-empty string" if required else "a string"
        raise DataError(f"{where}: field {label} {got}; expected {expected}")
    return value


def _strings(rec: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = rec.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{where}: field {key!r} must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _items(rec: Mapping[str, Any], key: str, where: str) -> tuple[ActionItem, ...]:
    value = rec.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DataError(f"{where}: field {key!r} must be a list of action items")
    out = []
    for k, item in enumerate(value):
        if isinstance(item, str):
            owner, sep, task = item.partition(":")
            if not sep or not owner.strip() or not task.strip():
                raise DataError(f"{where}: {key}[{k}] must read 'Owner: task', got {item!r}")
            out.append(ActionItem(owner=owner.strip(), task=task.strip()))
        elif isinstance(item, dict):
            owner, task, due = item.get("owner"), item.get("task"), item.get("due", "") or ""
            if not isinstance(owner, str) or not isinstance(task, str) or not isinstance(due, str):
                raise DataError(f"{where}: {key}[{k}] expected {{'owner': str, 'task': str, 'due'?: str}}")
            out.append(ActionItem(owner=owner.strip(), task=task.strip(), due=due.strip()))
        else:
            raise DataError(f"{where}: {key}[{k}] expected an object or an 'Owner: task' string")
    return tuple(out)


def load_tasks(
    path: str | Path, limit: int | None = None, field_map: Mapping[str, str] | None = None
) -> list[MeetingTask]:
    """Load meeting items from a JSONL file (schema in the module docstring).

    Args:
        path: the JSONL file.
        limit: keep only the first ``limit`` items (None keeps all); >= 0.
        field_map: our field name -> the file's field name, for files with other names.

    Returns:
        The items in file order, ``meta`` extended with ``domain`` (when given) and ``line``.

    Raises:
        DataError: missing file; a line that is not JSON or not an object; a missing, empty or
            ill-typed field; a duplicate id. Messages name ``file:LINE``.
        ConfigError: ``limit`` < 0 or a ``field_map`` key that is not one of :data:`FIELDS`.
    """
    path = Path(path)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"validation.limit: expected an integer >= 0 or None, got {limit!r}")
    names = {f: f for f in FIELDS}
    for ours, theirs in (field_map or {}).items():
        if ours not in names:
            raise ConfigError(f"validation.field_map.{ours}: unknown field; expected one of {list(FIELDS)}")
        names[ours] = str(theirs)
    if not path.is_file():
        raise DataError(f"{path}: validation file not found")
    tasks: list[MeetingTask] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if limit is not None and len(tasks) >= limit:
                break
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(rec, dict):
                raise DataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            tasks.append(_task(rec, names, where, path, lineno))
            tid = tasks[-1].task_id
            if tid in seen:
                raise DataError(f"{where}: duplicate id {tid!r} (first on line {seen[tid]})")
            seen[tid] = lineno
    return tasks


def _task(rec: Mapping[str, Any], names: Mapping[str, str], where: str, path: Path, lineno: int) -> MeetingTask:
    raw_id = rec.get(names["id"])
    if raw_id is None:
        task_id = f"{path.stem}-{lineno}"
    elif isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id).strip():
        task_id = str(raw_id).strip()
    else:
        raise DataError(f"{where}: field {names['id']!r} (id) has a bad value; expected a non-empty string")
    meta = rec.get(names["meta"]) or {}
    if not isinstance(meta, dict):
        raise DataError(f"{where}: field {names['meta']!r} (meta) has type {type(meta).__name__}; expected an object")
    meta = dict(meta)
    domain = _text(rec, names["domain"], "domain", where, required=False)
    if domain:
        meta["domain"] = domain
    meta["line"] = lineno
    return MeetingTask(
        task_id=task_id,
        transcript=_text(rec, names["transcript"], "transcript", where, required=True),
        reference_minutes=_text(rec, names["reference_minutes"], "reference_minutes", where, required=True),
        topics=_strings(rec, names["topics"], where),
        decisions=_strings(rec, names["decisions"], where),
        action_items=_items(rec, names["action_items"], where),
        source=_text(rec, names["source"], "source", where, required=False) or path.stem,
        meta=meta,
    )
