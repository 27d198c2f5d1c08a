"""Meeting items from JSONL: our schema, or any other field names through a ``field_map``.

One JSON object per line (blank lines ignored)::

    {"id": str,                      # unique in the file; optional (default: "<file stem>-<line>")
     "source": str,                  # optional (default: the file stem); per-source results group by it
     "domain": str,                  # optional, stored in meta["domain"]
     "transcript": str | [turn],     # required: "Speaker: text" lines ("[hh:mm:ss] Speaker: text" too),
                                     #   or a list of {"speaker", "text", "start"?} objects / "Speaker: text" strings
     "reference_minutes": str,       # required, non-empty
     "topics": [str],                # optional
     "decisions": [str],             # optional
     "action_items": [{"owner": str?, "task": str, "due": str?} | "Owner: task" | "sentence"],  # optional
     "meta": {}}                     # optional, free-form

Action items may be free-text sentences, as public corpora write them ("The industrial designer
will try to find out which components are needed"): the owner is read off the sentence where it
names a speaker, a role or a capitalised name, else the item has no owner and is matched on its task
text alone (rules in :mod:`evotrainer.tasks.meeting_minutes.datasets.action_items`; an object without ``owner`` is read the
same way from its ``task``). How each owner was obtained ("explicit", "read_from_sentence", "none")
is stored in ``meta["action_owner_sources"]``, one entry per item.

The QMSum export at ``../shared/data/qmsum_meetings.jsonl`` (``id, source, transcript,
reference_minutes, action_items ([]), topics, meta``) fits this schema as is. ``field_map`` maps our
field names to the names another file uses, e.g. ``{"reference_minutes": "summary", "transcript":
"dialogue"}``. A transcript string whose first line starts with a timestamp is parsed with
:mod:`evotrainer.tasks.meeting_minutes.datasets.speaker_lines` and stored as plain ``Speaker: text`` lines (timestamps
dropped); other transcript strings are kept as written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evotrainer.errors import ConfigError, DataError
from evotrainer.tasks.jsonl_rows import jsonl_objects
from evotrainer.tasks.meeting_minutes.datasets.action_items import (
    OWNER_SOURCES_KEY,
    owner_from_sentence,
    read_action_item,
    transcript_speakers,
)
from evotrainer.tasks.meeting_minutes.datasets.speaker_lines import (
    Turn,
    looks_timestamped,
    parse_speaker_lines,
    render_turns,
)
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask

__all__ = ["FIELDS", "check_limit", "load_jsonl", "resolve_field_map"]

FIELDS: tuple[str, ...] = (
    "id", "source", "domain", "transcript", "reference_minutes", "topics", "decisions", "action_items", "meta",
)


def check_limit(limit: int | None, key: str) -> None:
    """Raise ConfigError naming ``key`` unless ``limit`` is None or an integer >= 0."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"{key}: expected an integer >= 0 or None, got {limit!r}")


def resolve_field_map(field_map: Mapping[str, str] | None, key: str = "task.field_map") -> dict[str, str]:
    """Our field name -> the file's field name, for every field of :data:`FIELDS`.

    Raises:
        ConfigError: a key of ``field_map`` that is not one of :data:`FIELDS` (names ``key.<name>``).
    """
    names = {f: f for f in FIELDS}
    for ours, theirs in (field_map or {}).items():
        if ours not in names:
            raise ConfigError(f"{key}.{ours}: unknown field; expected one of {list(FIELDS)}")
        names[ours] = str(theirs)
    return names


def load_jsonl(
    path: str | Path,
    *,
    field_map: Mapping[str, str] | None = None,
    limit: int | None = None,
    field_map_key: str = "task.field_map",
    limit_key: str = "task.validation_limit",
) -> list[MeetingTask]:
    """Load meeting items from a JSONL file (schema in the module docstring).

    Args:
        path: the JSONL file (UTF-8).
        field_map: our field name -> the file's field name, for files with other names.
        limit: keep only the first ``limit`` items (None keeps all); >= 0.
        field_map_key: config key named when ``field_map`` is bad.
        limit_key: config key named when ``limit`` is bad.

    Returns:
        The items in file order; ``meta`` extended with ``domain`` (when given) and ``line``.

    Raises:
        DataError: missing file; not UTF-8; a line that is not JSON or not an object; a missing,
            empty or ill-typed field; a malformed transcript line; a duplicate id. Messages name
            ``file:LINE`` and what was expected.
        ConfigError: bad ``limit`` or an unknown ``field_map`` key.
    """
    path = Path(path)
    check_limit(limit, limit_key)
    names = resolve_field_map(field_map, field_map_key)
    tasks: list[MeetingTask] = []
    seen: dict[str, int] = {}
    for where, lineno, rec in jsonl_objects(path, "validation file"):
        if limit is not None and len(tasks) >= limit:
            break
        task = _task(rec, names, where, path, lineno)
        if task.task_id in seen:
            raise DataError(f"{where}: duplicate id {task.task_id!r} (first on line {seen[task.task_id]})")
        seen[task.task_id] = lineno
        tasks.append(task)
    return tasks


def _label(key: str, name: str) -> str:
    return repr(key) if key == name else f"{key!r} ({name})"


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
        expected = "a non-empty string" if required else "a string"
        raise DataError(f"{where}: field {_label(key, name)} {got}; expected {expected}")
    return value


def _strings(rec: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = rec.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{where}: field {key!r} must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _items(rec: Mapping[str, Any], key: str, where: str, speakers: tuple[str, ...]) -> tuple[
        tuple[ActionItem, ...], list[str]]:
    """The action items of ``rec[key]`` and how each got its owner (:mod:`evotrainer.tasks.meeting_minutes.datasets.action_items`)."""
    value = rec.get(key)
    if value is None:
        return (), []
    if not isinstance(value, list):
        raise DataError(f"{where}: field {key!r} must be a list of action items")
    out: list[ActionItem] = []
    sources: list[str] = []
    for k, item in enumerate(value):
        if isinstance(item, str):
            read = read_action_item(item, speakers)
            if read is None:
                raise DataError(f"{where}: {key}[{k}] has no task text; expected 'Owner: task' or a sentence "
                                f"such as 'Alice will send the report', got {item!r}")
            out.append(read[0])
            sources.append(read[1])
        elif isinstance(item, dict):
            owner, task, due = item.get("owner"), item.get("task"), item.get("due", "") or ""
            if not isinstance(owner, str | None) or not isinstance(task, str) or not task.strip() \
                    or not isinstance(due, str):
                raise DataError(f"{where}: {key}[{k}] expected {{'owner'?: str, 'task': str (non-empty), "
                                f"'due'?: str}}, got {json.dumps(item, ensure_ascii=False)[:80]}")
            if owner and owner.strip():
                out.append(ActionItem(owner=owner.strip(), task=task.strip(), due=due.strip()))
                sources.append("explicit")
                continue
            read_owner = owner_from_sentence(task, speakers)  # no owner given: read it off the task
            source = "read_from_sentence" if read_owner else "none"
            who, what = read_owner or ("", " ".join(task.split()))
            out.append(ActionItem(owner=who, task=what, due=due.strip()))
            sources.append(source)
        else:
            raise DataError(f"{where}: {key}[{k}] expected an object, an 'Owner: task' string or a sentence")
    return tuple(out), sources


def _turn_list(value: list, key: str, name: str, where: str, path: Path, lineno: int) -> str:
    """A transcript given as a list of turns -> ``Speaker: text`` lines."""
    turns: list[Turn] = []
    for k, item in enumerate(value):
        if isinstance(item, str):
            turns += parse_speaker_lines(item, source=str(path), first_line=lineno, line_label=f"{key}[{k}]")
        elif isinstance(item, dict) and isinstance(item.get("speaker"), str) and isinstance(item.get("text"), str) \
                and item["speaker"].strip():
            if item["text"].strip():
                turns.append(Turn(" ".join(item["speaker"].split()), " ".join(item["text"].split())))
        else:
            raise DataError(f"{where}: {key}[{k}] expected {{'speaker': str, 'text': str}} or a "
                            f"'Speaker: text' string, got {json.dumps(item, ensure_ascii=False)[:60]}")
    if not turns:
        raise DataError(f"{where}: field {_label(key, name)} has no turns; expected a non-empty transcript")
    return render_turns(turns)


def _transcript(rec: Mapping[str, Any], key: str, where: str, path: Path, lineno: int) -> str:
    value = rec.get(key)
    if isinstance(value, list):
        return _turn_list(value, key, "transcript", where, path, lineno)
    text = _text(rec, key, "transcript", where, required=True)
    if looks_timestamped(text):
        return render_turns(parse_speaker_lines(text, source=str(path), first_line=lineno, line_label=key))
    return text


def _task(rec: Mapping[str, Any], names: Mapping[str, str], where: str, path: Path, lineno: int) -> MeetingTask:
    raw_id = rec.get(names["id"])
    if raw_id is None:
        task_id = f"{path.stem}-{lineno}"
    elif isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id).strip():
        task_id = str(raw_id).strip()
    else:
        raise DataError(f"{where}: field {_label(names['id'], 'id')} has a bad value; expected a non-empty string")
    meta = rec.get(names["meta"]) or {}
    if not isinstance(meta, dict):
        raise DataError(f"{where}: field {_label(names['meta'], 'meta')} has type {type(meta).__name__}; "
                        "expected an object")
    meta = dict(meta)
    domain = _text(rec, names["domain"], "domain", where, required=False)
    if domain:
        meta["domain"] = domain
    meta["line"] = lineno
    transcript = _transcript(rec, names["transcript"], where, path, lineno)
    items, sources = _items(rec, names["action_items"], where, transcript_speakers(transcript))
    if items:
        meta[OWNER_SOURCES_KEY] = sources
    return MeetingTask(
        task_id=task_id,
        transcript=transcript,
        reference_minutes=_text(rec, names["reference_minutes"], "reference_minutes", where, required=True),
        topics=_strings(rec, names["topics"], where),
        decisions=_strings(rec, names["decisions"], where),
        action_items=items,
        source=_text(rec, names["source"], "source", where, required=False) or path.stem,
        meta=meta,
    )
