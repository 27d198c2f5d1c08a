"""Training items of self-evolution: (task, answer) pairs, turned into chat SFT examples at train time.

An item keeps its task (not a rendered chat), so the system prompt is always the *current* policy's
prompt when it is trained on (the co-evolution may change the prompt between rounds) and the
dev/meta-validation guard can check the task's content hash right before training.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from evotrainer.adapters.train import SFTExample
from evotrainer.genome import Policy
from evotrainer.selfevolve.pool import check_disjoint
from evotrainer.tasks.base import SelfEvolving, Task

__all__ = ["TrainItem", "check_items", "extend_replay", "reference_items", "to_sft"]


@dataclass(frozen=True)
class TrainItem:
    """One answer to learn.

    Attributes:
        task: the pool task answered.
        answer: the assistant text (a passing sample, or a seed task's reference answer).
        origin: ``"reference"`` (seed task reference) or ``"sample"`` (a passing rollout).
        round: the round that produced it (0 for references).
        score: its judge score in [0, 1] (1.0 for references).
    """

    task: Task
    answer: str
    origin: str
    round: int
    score: float = 1.0


def reference_items(tasks: Iterable[Task], family: SelfEvolving) -> tuple[TrainItem, ...]:
    """The reference outputs of (seed) tasks as items (``family.reference_answer``), the
    replay source of round 1; tasks without one are skipped."""
    out = []
    for t in tasks:
        answer = family.reference_answer(t)
        if answer is not None and answer.strip():
            out.append(TrainItem(t, answer, "reference", 0))
    return tuple(out)


def check_items(items: Iterable[TrainItem], forbidden: Mapping[str, str] | frozenset[str], what: str) -> None:
    """Raise DataError when an item's task is a dev-set or meta-validation item (content hash)."""
    check_disjoint([i.task for i in items], forbidden, what)


def to_sft(family: SelfEvolving, policy: Policy, items: Sequence[TrainItem], source: str) -> list[SFTExample]:
    """Chat examples under ``policy``'s prompt (``family.training_chats``): the opening messages and the
    answer for a single reply; one example per model reply of a multi-step episode, so the loss covers
    exactly the model's own tokens."""
    return [SFTExample(messages=chat, source=source)
            for item in items for chat in family.training_chats(policy.sections, item.task, item.answer)]


def extend_replay(replay: Sequence[TrainItem], new: Sequence[TrainItem], cap: int) -> tuple[TrainItem, ...]:
    """The replay buffer after a kept round: references always stay, then the newest samples up to ``cap``.

    Pure. References count towards ``cap`` too; when they alone exceed it they are all kept.
    """
    refs = [i for i in replay if i.origin == "reference"]
    samples = [i for i in replay if i.origin != "reference"] + list(new)
    room = max(0, cap - len(refs))
    return tuple(refs + (samples[-room:] if room else []))
