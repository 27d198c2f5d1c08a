"""Finding archives on disk: a file, a run folder, or a Hydra (multi)run tree with many ``archive.db``.

Hydra writes one job folder per run (``outputs/DATE/TIME/`` or ``multirun/DATE/TIME/<job>/``) holding
``.hydra/overrides.yaml``; a multirun sweep folder also holds ``multirun.yaml``. Jobs are grouped by
their sweep folder (hydra.cc/docs/tutorials/basic/running_your_app/multi-run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from evotrainer.archive.store import DEFAULT_ARCHIVE_NAME
from evotrainer.errors import ArchiveError

__all__ = ["ArchiveLocation", "find_archives", "resolve_archive", "resolve_beside"]

_MAX_ARCHIVES = 10_000


@dataclass(frozen=True)
class ArchiveLocation:
    """One archive file found on disk and what Hydra left next to it.

    Attributes:
        path: the archive file.
        group: the Hydra multirun sweep folder it belongs to, or None for a single run.
        job: the job folder name inside the sweep (e.g. "0"), or "" for a single run.
        overrides: the job's command-line overrides from ``.hydra/overrides.yaml`` (empty when absent).
    """

    path: Path
    group: Path | None = None
    job: str = ""
    overrides: tuple[str, ...] = field(default_factory=tuple)


def _overrides(job_dir: Path) -> tuple[str, ...]:
    path = job_dir / ".hydra" / "overrides.yaml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return ()
    return tuple(str(x) for x in doc) if isinstance(doc, list) else ()


def _location(path: Path) -> ArchiveLocation:
    job_dir = path.parent
    sweep = job_dir.parent
    if (sweep / "multirun.yaml").is_file():
        return ArchiveLocation(path, sweep, job_dir.name, _overrides(job_dir))
    return ArchiveLocation(path, None, "", _overrides(job_dir))


def find_archives(root: str | Path) -> list[ArchiveLocation]:
    """Every ``archive.db`` at or under ``root`` (a file is returned as itself), sorted by path.

    Raises:
        ArchiveError: ``root`` does not exist, or a folder holds no ``archive.db``.
    """
    root = Path(root)
    if root.is_file():
        return [_location(root)]
    if not root.is_dir():
        raise ArchiveError(f"{root}: no such archive file or folder")
    found: list[Path] = []
    for p in sorted(root.rglob(DEFAULT_ARCHIVE_NAME)):
        if p.is_file():
            found.append(p)
        if len(found) >= _MAX_ARCHIVES:
            break
    if not found:
        raise ArchiveError(f"{root}: no {DEFAULT_ARCHIVE_NAME} found in this folder or below")
    return [_location(p) for p in found]


def resolve_archive(arg: str | Path) -> Path:
    """The one archive file meant by ``arg``: the file itself, or the single ``archive.db`` under a folder.

    Raises:
        ArchiveError: nothing there, or a folder holding several archives (the message lists a few).
    """
    path = Path(arg)
    if path.is_file():
        return path
    found = find_archives(path)
    if len(found) > 1:
        shown = ", ".join(str(f.path) for f in found[:3])
        raise ArchiveError(f"{path}: holds {len(found)} archives ({shown}, ...); name one archive.db")
    return found[0].path


def resolve_beside(path: str, folder: str | Path) -> str:
    """A path stored relative to ``folder`` (an adapter archived relative to its run folder, or named relative to
    an export's ``policy.json``), made absolute when it exists there; an absolute path, or a relative one that
    does not exist under ``folder``, is returned as given."""
    if not path or Path(path).is_absolute():
        return path
    beside = Path(folder) / path
    return str(beside.resolve()) if beside.exists() else path
