"""Mutation instructions as data, and the short chats that ask the mutator model to apply them.

The styles follow the idea of EvoPrompt (Guo et al. 2023, arXiv:2309.08532) and PromptBreeder
(Fernando et al. 2023, arXiv:2309.16797): a small library of "mutation prompts" that tell a model how
to change an instruction. The mutator may be SmolLM2-135M on CPU, so every chat is short, names one
change only, and ends with "Output only the ... text, nothing else." (whatever chatter still comes back
is removed by :mod:`evotrainer.search.cleaning`, which also rejects echoes of these very phrases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evotrainer.backends.base import Message
from evotrainer.search.cleaning import content_words

__all__ = [
    "DEFAULT_RULE_PHRASES",
    "DOMAIN_VOCABULARY",
    "MUTATION_STYLES",
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


MUTATION_STYLES: tuple[MutationStyle, ...] = (
    MutationStyle("stricter", "Make it stricter: state each requirement as a firm rule."),
    MutationStyle("example", "Add one short example line of the expected output.", ("format", "rules")),
    MutationStyle("simplify", "Make it simpler: use short, plain sentences."),
    MutationStyle("reorder", "Put the most important point first."),
    MutationStyle("persona", "Describe a different expert persona, such as an experienced secretary.", ("role",)),
    MutationStyle("owners", "Stress that every action item must name its owner.", ("format", "rules")),
    MutationStyle("decisions", "Stress that the final decisions must be listed.", ("format", "rules")),
    MutationStyle("concise", "Make it more concise: remove words that add nothing."),
    MutationStyle("faithful", "Add that only facts said in the meeting may be written.", ("rules",)),
    MutationStyle("headings", "Ask for clear headings: Topics, Decisions, Action items.", ("format",)),
    MutationStyle("specific", "Make it more specific and concrete."),
)
"""Default mutation styles for meeting-minutes policies."""

DEFAULT_RULE_PHRASES: tuple[str, ...] = (
    "List every action item with its owner.",
    "Give the due date of an action item when one is said.",
    "Write only facts stated in the meeting.",
    "List the final decisions, not the ones that were reversed.",
    "Keep each bullet to one short line.",
    "Use the speakers' names exactly as written.",
    "Do not copy the transcript.",
    "Skip small talk and off-topic remarks.",
    "Start with the topics discussed.",
    "Write at most ten bullets.",
    "Do not repeat a point.",
    "Write in plain English.",
)
"""Rule sentences the structural mutation may add (no model needed)."""

DOMAIN_VOCABULARY: frozenset[str] = frozenset(
    content_words(
        " ".join(DEFAULT_RULE_PHRASES)
        + " ".join(s.instruction for s in MUTATION_STYLES)
        + " meeting minutes action item items owner owners decision decisions decided topic topics summary"
        " summarise summarize bullet bullets speaker speakers agenda due date deadline task tasks assign"
        " assigned responsible follow next step steps note notes record secretary assistant expert format"
        " rule rules sentence sentences line lines heading headings section list point points write writing"
        " name names clear clearly short concise brief briefly fact facts transcript discuss discussed"
        " discussion include keep use avoid never always exactly accurate accurately plain english order"
        " final important key main number numbered date dates who what when structure structured output"
        " reader team participant participants attendee attendees outcome outcomes question questions"
        " answer issue issues risk risks plan plans update updates status report professional neutral"
    )
)
"""Content words a meeting-minutes instruction plausibly uses; rewrites drawing mostly on other words
are off-topic (see :func:`~evotrainer.search.cleaning.on_topic_fraction`)."""

_SYSTEM = "You edit instructions for an AI that {task_hint}. Output only the requested text."


def styles_for(section: str, styles: tuple[MutationStyle, ...] = MUTATION_STYLES) -> tuple[MutationStyle, ...]:
    """Styles that suit ``section`` (all styles when none names it specifically)."""
    suited = tuple(s for s in styles if not s.sections or section in s.sections)
    return suited or styles


def build_rewrite_messages(
    section_text: str, instruction: str, *, task_hint: str = "writes meeting minutes"
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
    text_a: str, text_b: str, *, task_hint: str = "writes meeting minutes"
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
