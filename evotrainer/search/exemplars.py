"""Few-shot exemplars for prompts, built from *generated* training tasks, and the exemplar-swap mutation.

An exemplar is a short worked example of the expected output (minutes of another meeting) placed in an
``example`` section of the genome. Exemplars come only from generated task batches; a task whose
transcript hash is in ``forbidden`` (the meta-validation set) is an error, so a validation meeting can
never leak into a prompt. Few-shot exemplar choice as a search dimension follows PromptBreeder
(Fernando et al. 2023, arXiv:2309.16797, "context shuffling") and DSPy's bootstrapped demonstrations.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from evotrainer.errors import DataError
from evotrainer.genome import Policy
from evotrainer.search.cleaning import word_count
from evotrainer.tasks.base import MeetingTask

__all__ = ["EXAMPLE_SECTION", "exemplar_text", "exemplars_from_tasks", "mut_exemplar_swap"]

EXAMPLE_SECTION = "example"
"""Name of the genome section that holds a few-shot exemplar (rendered after the required sections)."""

_LEAD = "Example minutes of a different meeting (use the real names of your meeting, not these):"


def exemplar_text(task: MeetingTask, *, max_items: int = 2) -> str:
    """A compact exemplar from one task's ground truth: Topics, Decisions, Action items headings.

    Args:
        task: a generated task (its topics, decisions and action items are used; not its transcript).
        max_items: at most this many bullets per heading, >= 1.

    Returns:
        Markdown text of a few lines (about 30-60 words).
    """
    lines = [_LEAD, "## Topics"]
    lines += [f"- {t}" for t in task.topics[:max_items]] or ["- None."]
    lines.append("## Decisions")
    lines += [f"- {d}" for d in task.decisions[:max_items]] or ["- None."]
    lines.append("## Action items")
    items = []
    for item in task.action_items[:max_items]:
        due = f" (due: {item.due})" if getattr(item, "due", "") else ""
        items.append(f"- {item.owner}: {item.task}{due}")
    lines += items or ["- None."]
    return "\n".join(lines)


def exemplars_from_tasks(
    tasks: Sequence[MeetingTask], *, forbidden: Collection[str] = (), max_words: int = 60
) -> tuple[str, ...]:
    """Distinct exemplars of ``tasks`` that fit ``max_words``, in task order.

    Args:
        tasks: generated training tasks.
        forbidden: transcript content hashes that must never become exemplars (meta-validation items).
        max_words: word budget of one exemplar, >= 1; longer ones are built with one bullet per heading,
            and dropped when still too long.

    Raises:
        DataError: a task's transcript is a forbidden (validation) one.
    """
    banned = set(forbidden)
    out: list[str] = []
    for task in tasks:
        if task.content_hash in banned:
            raise DataError(f"exemplars: task {task.task_id!r} is a meta-validation meeting; "
                            "exemplars may only come from generated training tasks")
        text = exemplar_text(task)
        if word_count(text) > max_words:
            text = exemplar_text(task, max_items=1)
        if word_count(text) <= max_words and text not in out:
            out.append(text)
    return tuple(out)


def mut_exemplar_swap(
    parent: Policy, rng: random.Random, generation: int, *, exemplars: Sequence[str], max_words: int = 160,
    section: str = EXAMPLE_SECTION,
) -> Policy:
    """Swap the parent's few-shot exemplar for another one (or add one, or drop it).

    With no exemplar section the child gets one drawn from ``exemplars`` (when the prompt stays within
    ``max_words``); with one, it is replaced by a different exemplar, or dropped with probability 1/4
    (so selection can also find that no exemplar is better). Nothing applicable: the child has the
    parent's genome (operator ``mut_exemplar/none``; the loop rejects it as a duplicate).

    Args:
        parent: the policy (not modified).
        rng: random source.
        generation: generation number stamped on the child.
        exemplars: candidate exemplar texts (see :func:`exemplars_from_tasks`).
        max_words: word budget of the whole prompt.
        section: name of the exemplar section.

    Returns:
        The child, operator ``mut_exemplar/<add|swap|drop|none>``.
    """
    texts = dict(parent.sections)
    current = texts.get(section)
    others = sum(word_count(t) for name, t in parent.sections if name != section)
    fitting = [e for e in exemplars if e != current and others + word_count(e) <= max_words]
    if current is not None and (not fitting or rng.random() < 0.25):
        sections = [(n, t) for n, t in parent.sections if n != section]
        return parent.child(sections, operator="mut_exemplar/drop", generation=generation)
    if not fitting:
        return parent.child(parent.sections, operator="mut_exemplar/none", generation=generation)
    chosen = rng.choice(fitting)
    if current is None:
        return parent.child([*parent.sections, (section, chosen)], operator="mut_exemplar/add",
                            generation=generation)
    sections = [(n, chosen if n == section else t) for n, t in parent.sections]
    return parent.child(sections, operator="mut_exemplar/swap", generation=generation)
