"""The policy genome: named prompt sections, optional decoding genes, an adapter slot, lineage."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from evotrainer.errors import DataError

__all__ = ["MERGE_SECTION", "PREFILL_SECTION", "Policy", "READING_GENES", "REQUIRED_SECTIONS", "WINDOW_GENE",
           "instruction_sections", "load_population", "render_system_prompt"]

REQUIRED_SECTIONS: tuple[str, ...] = ("role", "format", "rules")
"""Sections every policy carries by default (``inner.required_sections``), in render order. Extra sections follow them."""

PREFILL_SECTION = "prefill"
"""Optional section whose text starts the assistant's answer instead of joining the system prompt.

The model continues from it (e.g. a first heading makes a small model write the answer's format rather than
continue its input); the answer scored is prefill + continuation. Pre-filling the assistant turn
is a documented prompting technique (e.g. Anthropic's "prefill Claude's response" guide; what it gained
here: docs/concepts.md). Text operators leave it alone; :func:`evotrainer.search.prefill.mut_prefill` edits it."""

MERGE_SECTION = "merge"
"""Optional section holding the instruction of the merge call that joins the partial answers of a long input
read in windows into one; not part of the system prompt. Text operators may
edit it like any instruction section, so evolution can improve how long inputs are merged; a policy without
it merges with the family's default instruction."""

WINDOW_GENE = "window_tokens"
"""Reading gene: input tokens per window (model tokenizer) when a long input is read in windows by a
family that reads so; it replaces ``task.options.long.window_tokens`` for the policy that carries it, and is
still capped by the context budget as that option is."""

READING_GENES: tuple[str, ...] = (WINDOW_GENE,)
"""Decoding genes (:attr:`Policy.decoding` pairs) that the task family reads at rollout, how the policy reads its
input, instead of a :class:`~evotrainer.backends.base.SamplingParams` field: the rollout passes them by and hands
them to the family in :attr:`~evotrainer.tasks.base.RolloutRequest.decoding`; integers."""


def _sha(obj: object) -> str:
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Policy:
    """One individual of the inner population.

    Attributes:
        id: unique id in a run, derived from content and lineage (deterministic).
        sections: ordered ``(name, text)`` pairs; the system prompt is their texts joined.
        parent_ids: ids of the parents (empty for seeds).
        operator: name of the operator that made it ("seed" for seeds).
        generation: inner generation counter of the run when it was made (0 for seeds).
        root_id: id of the seed it descends from (its own id for seeds; first parent's root for
            crossovers).
        adapter: LoRA adapter gene: a PEFT adapter folder, or None for the base model.
        decoding: optional decoding genes as ``(name, value)`` pairs, overriding run defaults: a
            :class:`~evotrainer.backends.base.SamplingParams` field, or a :data:`READING_GENES` name.
    """

    id: str
    sections: tuple[tuple[str, str], ...]
    parent_ids: tuple[str, ...] = ()
    operator: str = "seed"
    generation: int = 0
    root_id: str = ""
    adapter: str | None = None
    decoding: tuple[tuple[str, float], ...] = ()

    @property
    def genome_hash(self) -> str:
        """sha256 of everything that changes behaviour: sections, adapter, decoding genes."""
        return _sha({"sections": self.sections, "adapter": self.adapter, "decoding": self.decoding})

    def section(self, name: str) -> str:
        """Text of section ``name``; KeyError when absent."""
        for key, text in self.sections:
            if key == name:
                return text
        raise KeyError(name)

    @property
    def section_dict(self) -> dict[str, str]:
        return dict(self.sections)

    def child(
        self,
        sections: Sequence[tuple[str, str]],
        *,
        operator: str,
        generation: int,
        parents: Sequence[Policy] = (),
        decoding: Sequence[tuple[str, float]] | None = None,
    ) -> Policy:
        """A new policy with ``self`` as first parent (``parents`` adds co-parents).

        The id hashes the genome together with parent ids, operator and generation, so the same
        seed and config always give the same ids.
        """
        parent_ids = (self.id, *(p.id for p in parents if p.id != self.id))
        draft = replace(
            self,
            sections=tuple((str(k), str(v)) for k, v in sections),
            parent_ids=parent_ids,
            operator=operator,
            generation=generation,
            root_id=self.root_id or self.id,
            decoding=tuple(decoding) if decoding is not None else self.decoding,
        )
        pid = "p" + _sha([draft.genome_hash, parent_ids, operator, generation])[:11]
        return replace(draft, id=pid)

    @classmethod
    def seed(cls, name: str, sections: Mapping[str, str]) -> Policy:
        """A generation-0 policy; its id is ``name`` (its root is itself)."""
        ordered = [(k, sections[k]) for k in REQUIRED_SECTIONS if k in sections]
        ordered += [(k, v) for k, v in sections.items() if k not in REQUIRED_SECTIONS]
        return cls(id=name, sections=tuple(ordered), root_id=name)


def render_system_prompt(sections: Sequence[tuple[str, str]]) -> str:
    """The system prompt of a genome: non-empty section texts, stripped, joined by blank lines.

    The :data:`PREFILL_SECTION` (it starts the assistant turn) and the :data:`MERGE_SECTION` (the merge call's
    instruction) are not part of it."""
    return "\n\n".join(text.strip() for name, text in sections
                        if text.strip() and name not in (PREFILL_SECTION, MERGE_SECTION))


def instruction_sections(sections: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(name, text)`` pairs that text operators may edit: every section but the prefill."""
    return [(name, text) for name, text in sections if name != PREFILL_SECTION]


def load_population(path: str | Path) -> list[Policy]:
    """Load a seed population YAML.

    Format: a top-level mapping ``policies:`` whose value is a list of ``{id: str, role: str,
    format: str, rules: str, [other sections: str]}``.

    Raises:
        DataError: file missing, not YAML, duplicate id, or a policy lacking a required section;
            the message names the file and the policy.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: seed population file not found")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise DataError(f"{where}: not valid YAML ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("policies"), list):
        raise DataError(f"{path}: expected a mapping with a 'policies:' list")
    out: list[Policy] = []
    seen: set[str] = set()
    for i, entry in enumerate(doc["policies"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise DataError(f"{path}: policies[{i}] must be a mapping with a string 'id'")
        pid = entry["id"]
        if pid in seen:
            raise DataError(f"{path}: duplicate policy id {pid!r}")
        seen.add(pid)
        sections = {k: v for k, v in entry.items() if k != "id"}
        missing = [k for k in REQUIRED_SECTIONS if not isinstance(sections.get(k), str)]
        if missing:
            raise DataError(f"{path}: policy {pid!r} lacks text section(s) {missing}")
        bad = [k for k, v in sections.items() if not isinstance(v, str)]
        if bad:
            raise DataError(f"{path}: policy {pid!r} section(s) {bad} must be strings")
        out.append(Policy.seed(pid, sections))
    if not out:
        raise DataError(f"{path}: the population is empty")
    return out
