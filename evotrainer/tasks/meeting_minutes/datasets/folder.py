"""Meeting items from a folder: ``<name>.txt`` transcripts with ``<name>.md`` minutes beside them.

Layout (subfolders allowed; each subfolder is a *source* for per-source results)::

    meetings/
      2024-05-02_standup.txt     Speaker lines: "Aiko: ..." or "[00:01:05] Aiko: ..."
      2024-05-02_standup.md      reference minutes: "## Topics / ## Decisions / ## Action items"
      board/
        2024-06-10.txt
        2024-06-10.md

Transcripts are parsed with :mod:`evotrainer.tasks.meeting_minutes.datasets.speaker_lines`, minutes with
:mod:`evotrainer.tasks.meeting_minutes.datasets.minutes_md`. The item id is the path of the ``.txt`` relative to the folder,
without its suffix (``board/2024-06-10``); the source is the subfolder (``board``), or the folder's own
name for files directly in it. Items are sorted by that id. A ``.txt`` without its ``.md`` is an
error; a ``.md`` without a ``.txt`` (a README, say) is ignored. Hidden files and folders are skipped.
"""

from __future__ import annotations

import logging
from pathlib import Path

from evotrainer.errors import DataError
from evotrainer.tasks.meeting_minutes.datasets.action_items import OWNER_SOURCES_KEY
from evotrainer.tasks.meeting_minutes.datasets.jsonl import check_limit
from evotrainer.tasks.meeting_minutes.datasets.minutes_md import parse_reference_minutes
from evotrainer.tasks.meeting_minutes.datasets.speaker_lines import parse_speaker_lines, render_turns
from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["load_folder"]

log = logging.getLogger(__name__)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _visible(path: Path, root: Path) -> bool:
    return not any(part.startswith(".") for part in path.relative_to(root).parts)


def load_folder(path: str | Path, *, limit: int | None = None,
                limit_key: str = "evaluate.limit") -> list[MeetingTask]:
    """Load every ``<name>.txt`` + ``<name>.md`` pair under ``path`` (layout in the module docstring).

    Args:
        path: the folder.
        limit: keep only the first ``limit`` items in id order (None keeps all); >= 0.
        limit_key: config key named when ``limit`` is bad.

    Returns:
        Items sorted by id. ``meta`` holds ``path`` (the .txt), ``n_speakers``, for stamped
        transcripts ``duration_s`` (last minus first timestamp, seconds), and with action items
        ``action_owner_sources`` (how each owner was read, see :mod:`evotrainer.tasks.meeting_minutes.datasets.action_items`).

    Raises:
        DataError: not a folder; no ``.txt`` in it; a ``.txt`` without its ``.md`` (names the .txt and
            the .md it looked for); a malformed transcript or minutes line (names ``file:LINE``).
        ConfigError: bad ``limit``.
    """
    root = Path(path)
    check_limit(limit, limit_key)
    if not root.is_dir():
        raise DataError(f"{root}: not a folder; expected a folder of <name>.txt transcripts with <name>.md minutes")
    transcripts = sorted((p for p in root.rglob("*.txt") if p.is_file() and _visible(p, root)),
                         key=lambda p: p.relative_to(root).with_suffix("").as_posix())
    if not transcripts:
        raise DataError(f"{root}: no .txt transcripts found; expected <name>.txt files with <name>.md minutes beside them")
    orphans = sorted(p for p in root.rglob("*.md") if _visible(p, root) and not p.with_suffix(".txt").is_file())
    if orphans:
        log.info("%s: %d .md file(s) without a .txt ignored (e.g. %s)", root, len(orphans), orphans[0].name)
    for txt in transcripts:  # every pair is checked, even past the limit
        if not txt.with_suffix(".md").is_file():
            raise DataError(f"{txt}: transcript without minutes; expected {txt.with_suffix('.md').name} beside it")
    tasks: list[MeetingTask] = []
    for txt in transcripts[: limit if limit is not None else None]:
        md = txt.with_suffix(".md")
        turns = parse_speaker_lines(_read(txt), source=str(txt))
        speakers = tuple(dict.fromkeys(t.speaker for t in turns))
        minutes = parse_reference_minutes(_read(md), source=str(md), speakers=speakers)
        rel = txt.relative_to(root)
        meta: dict[str, object] = {"path": str(txt), "n_speakers": len(speakers)}
        if minutes.action_items:
            meta[OWNER_SOURCES_KEY] = list(minutes.owner_sources)
        stamps = [t.start for t in turns if t.start is not None]
        if stamps:
            meta["duration_s"] = max(stamps) - min(stamps)
        tasks.append(MeetingTask(
            task_id=rel.with_suffix("").as_posix(),
            transcript=render_turns(turns),
            reference_minutes=minutes.text,
            topics=minutes.topics,
            decisions=minutes.decisions,
            action_items=minutes.action_items,
            source=rel.parent.as_posix() if rel.parent != Path(".") else root.resolve().name,
            meta=meta,
        ))
    return tasks
