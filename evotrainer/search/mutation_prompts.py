"""Mutation instructions as data, and the short chats that ask the mutator model to apply them.

The styles follow the idea of EvoPrompt (Guo et al. 2023, arXiv:2309.08532) and PromptBreeder
(Fernando et al. 2023, arXiv:2309.16797): a small library of "mutation prompts" that tell a model how
to change an instruction. The styles themselves are the task family's
(:attr:`evotrainer.tasks.base.FamilyTexts.mutation_styles`, parsed by :func:`parse_style`). The mutator
may be SmolLM2-135M on CPU, so every chat is short, names one change only, and ends with "Output only the ... text, nothing else." (whatever chatter still comes back
is removed by :mod:`evotrainer.search.cleaning`, which also rejects echoes of these very phrases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evotrainer.backends.base import Message
from evotrainer.tasks.base import NEUTRAL_TEXTS

__all__ = [
    "NEUTRAL_STYLES",
    "parse_style",
    "MutationStyle",
    "build_merge_messages",
    "build_rewrite_messages",
    "styles_for",
]


@dataclass(frozen=True)
class MutationStyle:
    """One way of changing a prompt section.

    Attributes:
        name: short identifier, recorded in the child's operator name (``mut_llm_rewrite/<name>``).
        instruction: the change, as one imperative sentence sent to the mutator.
        sections: section names the style suits; empty means every section.
    """

    name: str
    instruction: str
    sections: tuple[str, ...] = ()


_STYLE_TEXT = re.compile(r"^\s*([A-Za-z][\w-]*)\s*(?:\(([^()]*)\))?\s*:\s*(\S.*?)\s*$", re.DOTALL)


def parse_style(text: str) -> MutationStyle:
    """A style from its config text: ``"name: instruction"`` or ``"name (role, rules): instruction"``.

    Raises:
        ValueError: the text has no name, no colon or an empty instruction (the message quotes it).
    """
    m = _STYLE_TEXT.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"expected 'name: instruction' or 'name (section, ...): instruction' with a one-word "
                         f"name (letters, digits, - or _), got {text!r}")
    sections = tuple(s.strip() for s in (m.group(2) or "").split(",") if s.strip())
    return MutationStyle(m.group(1), m.group(3), sections)


NEUTRAL_STYLES: tuple[MutationStyle, ...] = tuple(parse_style(t) for t in NEUTRAL_TEXTS.mutation_styles)
"""The domain-neutral styles (:data:`~evotrainer.tasks.base.NEUTRAL_TEXTS`), the default of functions
taking a style library; a run passes its family's."""

_SYSTEM = "You edit instructions for an AI that {task_hint}. Output only the requested text."


def styles_for(section: str, styles: tuple[MutationStyle, ...]) -> tuple[MutationStyle, ...]:
    """Styles that suit ``section`` (all styles when none names it specifically)."""
    suited = tuple(s for s in styles if not s.sections or section in s.sections)
    return suited or styles


def build_rewrite_messages(
    section_text: str, instruction: str, *, task_hint: str = NEUTRAL_TEXTS.task_hint
) -> tuple[Message, ...]:
    """The mutator chat asking for ``section_text`` rewritten according to ``instruction``.

    Args:
        section_text: current text of one section (non-empty).
        instruction: one change to make (a :attr:`MutationStyle.instruction`).
        task_hint: what the policy does, completing "an AI that ...".

    Returns:
        ``(system, user)`` messages.
    """
    user = (
        f"Text:\n{section_text.strip()}\n\n"
        f"Change: {instruction.strip()}\n"
        "Output only the rewritten text, nothing else."
    )
    return (
        {"role": "system", "content": _SYSTEM.format(task_hint=task_hint)},
        {"role": "user", "content": user},
    )


def build_merge_messages(
    text_a: str, text_b: str, *, task_hint: str = NEUTRAL_TEXTS.task_hint
) -> tuple[Message, ...]:
    """The mutator chat asking to merge two parents' versions of one section into one text.

    Args:
        text_a: the first parent's version (non-empty).
        text_b: the second parent's version (non-empty).
        task_hint: what the policy does, completing "an AI that ...".

    Returns:
        ``(system, user)`` messages.
    """
    user = (
        f"Text A:\n{text_a.strip()}\n\n"
        f"Text B:\n{text_b.strip()}\n\n"
        "Change: Combine A and B into one text that keeps the best points of both.\n"
        "Output only the combined text, nothing else."
    )
    return (
        {"role": "system", "content": _SYSTEM.format(task_hint=task_hint)},
        {"role": "user", "content": user},
    )
