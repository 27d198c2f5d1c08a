"""Few-shot exemplars for prompts, built from *generated* training tasks, and the exemplar-swap mutation.

An exemplar is a short worked example of the expected output (e.g. the answer to another generated task) placed in an
``example`` section of the genome; the task family writes it (``TaskFamily.exemplar``). Exemplars come only
from generated task batches; a task whose content hash is in ``forbidden`` (the meta-validation set) is an
error, so a validation item can never leak into a prompt. Few-shot exemplar choice as a search dimension follows PromptBreeder
(Fernando et al. 2023, arXiv:2309.16797, "context shuffling") and DSPy's bootstrapped demonstrations.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence
from typing import Any

from evotrainer.errors import DataError
from evotrainer.genome import Policy
from evotrainer.search.cleaning import word_count

__all__ = ["EXAMPLE_SECTION", "ExperiencePool", "exemplars_from_tasks", "mut_exemplar_swap"]

EXAMPLE_SECTION = "example"
"""Name of the genome section that holds a few-shot exemplar (rendered after the required sections)."""

def exemplars_from_tasks(
    tasks: Sequence[Any], make_text: Callable[..., str | None], *, forbidden: Collection[str] = (),
    max_words: int = 60,
) -> tuple[str, ...]:
    """Distinct exemplars of ``tasks`` that fit ``max_words``, in task order.

    Args:
        tasks: generated training tasks.
        make_text: ``(task, max_items=2) -> text or None``, the family's exemplar writer
            (``TaskFamily.exemplar``); None skips the task.
        forbidden: input content hashes that must never become exemplars (meta-validation items).
        max_words: word budget of one exemplar, >= 1; longer ones are built with one bullet per heading,
            and dropped when still too long.

    Raises:
        DataError: a task's input is a forbidden (validation) one.
    """
    banned = set(forbidden)
    out: list[str] = []
    for task in tasks:
        if task.content_hash in banned:
            raise DataError(f"exemplars: task {task.task_id!r} is a meta-validation item; "
                            "exemplars may only come from generated training tasks")
        text = make_text(task)
        if text is None:
            continue
        if word_count(text) > max_words:
            text = make_text(task, max_items=1) or ""
        if text and word_count(text) <= max_words and text not in out:
            out.append(text)
    return tuple(out)


class ExperiencePool:
    """Successful past episodes of a run, offered to prompts as exemplars of similar tasks (experience
    retrieval: an agent reuses its own solved trajectories in context, as in ExpeL, Zhao et al. 2023,
    arXiv:2308.10144, and Reflexion-style memories; here the retrieved text becomes the ``example`` gene that
    :func:`mut_exemplar_swap` adds or swaps).

    Only *training* episodes enter (the caller adds fitness evaluations on generated tasks, never
    meta-validation items); the family decides what a success is and writes its text
    (``TaskFamily.experience(task, output) -> str | None``). Append-only and in arrival order, so a run and
    its resume retrieve the same texts.
    """

    def __init__(self) -> None:
        self._items: list[tuple[int, str]] = []  # (task size, text), oldest first
        self._seen: set[str] = set()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, size: int, text: str | None) -> bool:
        """Keep ``text`` (a solved episode of a task of ``size``) unless it is None, blank or already kept."""
        if not text or not text.strip() or text in self._seen:
            return False
        self._seen.add(text)
        self._items.append((int(size), text))
        return True

    def retrieve(self, tasks: Sequence[Any], k: int = 3, *, max_words: int = 60) -> tuple[str, ...]:
        """Up to ``k`` kept texts most similar to ``tasks``: nearest task size to any of them first, then the
        newest; texts over ``max_words`` are skipped."""
        sizes = [int(t.size) for t in tasks] or [0]
        ranked = sorted(range(len(self._items)),
                        key=lambda i: (min(abs(self._items[i][0] - s) for s in sizes), -i))
        out = [self._items[i][1] for i in ranked if word_count(self._items[i][1]) <= max_words]
        return tuple(out[:k])


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
