"""Policy references: a seed name, an archived policy, or an exported folder.

Forms (``evaluate.policies``, ``evaluate.compare``, ``distill.teacher`` and ``distill.student``):

- ``terse`` — a seed of the population file (``evaluation.population_path``), by name;
- ``archive:<id or unique prefix>`` or ``archive:best`` — a policy of the last run of the archive
  named by ``evaluate.archive`` (an ``archive.db`` or a run folder holding one); ``best`` is the
  highest meta-validation S_val (as ``python -m evotrainer.archive best`` shows); an adapter the run archived
  relative to its folder (``mode=selfevolve``, ``mode=distill``) is found there;
- a path to a folder written by ``python -m evotrainer.archive export`` (``policy.json`` +
  ``prompt.md``), to its ``policy.json``, or to a folder / ``.md`` file holding only a prompt (the
  whole text becomes one ``prompt`` section).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evotrainer.config import find_data_path
from evotrainer.errors import ConfigError, DataError
from evotrainer.genome import Policy

__all__ = ["ARCHIVE_PREFIX", "PolicyRef", "load_exported_policy", "resolve_policy_ref", "resolve_policy_refs"]

ARCHIVE_PREFIX = "archive:"


@dataclass(frozen=True)
class PolicyRef:
    """A resolved policy reference.

    Attributes:
        label: the name shown in tables and result files (unique within one evaluation): the seed
            name, ``archive:<policy id>`` or ``export:<folder name>``.
        ref: the reference as the user wrote it.
        kind: "seed", "archive" or "export".
        policy: the policy to evaluate.
    """

    label: str
    ref: str
    kind: str
    policy: Policy


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def _decoding(value: Any, where: str) -> tuple[tuple[str, float], ...]:
    pairs = value.items() if isinstance(value, dict) else value
    try:
        out = tuple((str(k), float(v)) for k, v in (pairs or ()))
    except (TypeError, ValueError):
        raise DataError(f"{where}: field 'policy.decoding' expected an object of name: number") from None
    return out


def load_exported_policy(path: str | Path) -> Policy:
    """The policy of an export folder (``policy.json``), its ``policy.json``, or a bare prompt.

    A folder (or ``.md`` / ``.txt`` file) without ``policy.json`` gives a policy with a single
    ``prompt`` section holding the whole text, id ``export-<name>``. An adapter path recorded relative
    to the export is resolved against the folder when it exists there.

    Raises:
        DataError: unreadable or malformed ``policy.json`` (names the file and the field), an empty
            prompt, or a folder holding neither file.
    """
    path = Path(path)
    if path.is_file() and path.suffix.lower() in (".md", ".txt"):
        text = path.read_text(encoding="utf-8").strip()
        if not text:
            raise DataError(f"{path}: empty prompt; expected the system prompt text")
        return Policy(id=f"export-{path.stem}", sections=(("prompt", text),), root_id=f"export-{path.stem}")
    folder = path.parent if path.is_file() else path
    doc_path = path if path.is_file() else folder / "policy.json"
    if not doc_path.is_file():
        prompt = folder / "prompt.md"
        if prompt.is_file():
            return load_exported_policy(prompt)
        raise DataError(f"{folder}: not a policy export; expected policy.json (from `python -m evotrainer.archive "
                        "export`) or prompt.md in it")
    doc = _read_json(doc_path)
    pol = doc.get("policy") if isinstance(doc, dict) else None
    where = str(doc_path)
    if not isinstance(pol, dict):
        raise DataError(f"{where}: expected an object with a 'policy' object (export format 1)")
    sections = pol.get("sections")
    if not isinstance(sections, list) or not sections or not all(
            isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("text"), str) for s in sections):
        raise DataError(f"{where}: field 'policy.sections' expected a non-empty list of {{'name': str, 'text': str}}")
    pid = pol.get("id")
    if not isinstance(pid, str) or not pid.strip():
        raise DataError(f"{where}: field 'policy.id' expected a non-empty string")
    adapter = pol.get("adapter")
    if adapter is not None and not isinstance(adapter, str):
        raise DataError(f"{where}: field 'policy.adapter' expected a path string or null")
    if adapter:
        from evotrainer.archive.locate import resolve_beside

        adapter = resolve_beside(adapter, folder)
    parents = pol.get("parent_ids") or []
    return Policy(
        id=pid.strip(),
        sections=tuple((s["name"], s["text"]) for s in sections),
        parent_ids=tuple(str(p) for p in parents) if isinstance(parents, list) else (),
        operator=str(pol.get("operator") or "export"),
        generation=int(pol.get("generation") or 0) if isinstance(pol.get("generation"), int) else 0,
        root_id=str(pol.get("root_id") or pid),
        adapter=adapter,
        decoding=_decoding(pol.get("decoding"), where),
    )


def _archived(prefix: str, archive: str | None, ref: str, key: str) -> Policy:
    from evotrainer.archive.locate import resolve_archive, resolve_beside
    from evotrainer.archive.store import open_archive
    from evotrainer.browse import views

    if not archive:
        raise ConfigError(f"evaluate.archive: needed by {key} entry {ref!r}; expected an archive.db or a run folder")
    found = find_data_path(archive)
    if found is None:
        raise ConfigError(f"evaluate.archive: not found: {archive}")
    db = resolve_archive(found)
    with open_archive(db, read_only=True) as store:
        run = views.pick_run(store)
        policy = views.resolve_policy(store, run.run_id, prefix or "best")
    if policy.adapter:  # archived relative to the run folder
        policy = replace(policy, adapter=resolve_beside(policy.adapter, Path(db).parent))
    return policy


def resolve_policy_ref(ref: str, *, seeds: Sequence[Policy], archive: str | None = None,
                       key: str = "evaluate.policies") -> PolicyRef:
    """Resolve one reference (forms in the module docstring).

    Args:
        ref: the reference.
        seeds: the seed population (names looked up first).
        archive: ``evaluate.archive`` (needed by ``archive:`` refs).
        key: config key named in errors.

    Raises:
        ConfigError: an unknown name (lists the seeds), a missing ``evaluate.archive``.
        ArchiveError: the archive or policy id is not there (or the prefix is ambiguous).
        DataError: a malformed export.
    """
    ref = str(ref).strip()
    by_id = {p.id: p for p in seeds}
    if ref in by_id:
        return PolicyRef(ref, ref, "seed", by_id[ref])
    if ref.startswith(ARCHIVE_PREFIX):
        policy = _archived(ref[len(ARCHIVE_PREFIX):].strip(), archive, ref, key)
        return PolicyRef(f"archive:{policy.id}", ref, "archive", policy)
    found = find_data_path(ref) if ref else None
    if found is None:
        raise ConfigError(f"{key}: {ref!r} is not a seed name, an 'archive:<policy id>' or an existing export "
                          f"folder; known seeds: {sorted(by_id)}")
    policy = load_exported_policy(found)
    name = found.parent.name if found.is_file() and found.name == "policy.json" else found.stem
    return PolicyRef(f"export:{name}", ref, "export", policy)


def resolve_policy_refs(refs: Sequence[str], *, seeds: Sequence[Policy], archive: str | None = None,
                        key: str = "evaluate.policies") -> list[PolicyRef]:
    """Resolve each reference (duplicates dropped; labels made unique with ``#2``, ``#3`` suffixes)."""
    out: list[PolicyRef] = []
    labels: set[str] = set()
    for ref in dict.fromkeys(str(r).strip() for r in refs):
        resolved = resolve_policy_ref(ref, seeds=seeds, archive=archive, key=key)
        label, k = resolved.label, 2
        while label in labels:
            label, k = f"{resolved.label}#{k}", k + 1
        labels.add(label)
        out.append(PolicyRef(label, resolved.ref, resolved.kind, resolved.policy))
    return out
