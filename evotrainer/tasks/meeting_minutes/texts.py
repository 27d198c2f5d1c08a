"""What the search and the judge show a model about meeting minutes (:class:`~evotrainer.tasks.base.FamilyTexts`).

``tests/tasks/test_family_texts.py`` pins the chats the mutator and the judge see.
"""

from __future__ import annotations

from evotrainer.tasks.base import FamilyTexts

__all__ = ["DEFAULT_PREFILLS", "MEETING_TEXTS", "MUTATION_STYLES", "REFLECTION_HINTS", "RULE_PHRASES"]

MUTATION_STYLES: tuple[str, ...] = (
    "stricter: Make it stricter: state each requirement as a firm rule.",
    "example (format, rules): Add one short example line of the expected output.",
    "simplify: Make it simpler: use short, plain sentences.",
    "reorder: Put the most important point first.",
    "persona (role): Describe a different expert persona, such as an experienced secretary.",
    "owners (format, rules): Stress that every action item must name its owner.",
    "decisions (format, rules): Stress that the final decisions must be listed.",
    "concise: Make it more concise: remove words that add nothing.",
    "faithful (rules): Add that only facts said in the meeting may be written.",
    "headings (format): Ask for clear headings: Topics, Decisions, Action items.",
    "specific: Make it more specific and concrete.",
)
"""The mutation styles a meeting-minutes run starts from (``"name (sections): instruction"``)."""

RULE_PHRASES: tuple[str, ...] = (
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

DEFAULT_PREFILLS: tuple[str, ...] = ("## Topics\n-", "Topics:\n-", "## Action items\n-")
"""Prefills offered to a prompt that names no heading (minutes layouts)."""

REFLECTION_HINTS: dict[str, str] = {
    "completeness": "the minutes must cover the topics, the decisions and the action items",
    "format": "the minutes must follow the required layout with its headings and bullets",
    "action_count": "the minutes must list exactly the action items that were agreed, no more and no fewer",
    "action_f1": "each action item must match what was agreed, with its owner",
}
"""Plain-words meaning of the reward components (``rewards.REWARD_COMPONENTS``), for the mutator."""

_EXTRA_WORDS = (
    " meeting minutes action item items owner owners decision decisions decided topic topics summary"
    " summarise summarize bullet bullets speaker speakers agenda due date deadline task tasks assign"
    " assigned responsible follow next step steps note notes record secretary assistant expert format"
    " rule rules sentence sentences line lines heading headings section list point points write writing"
    " name names clear clearly short concise brief briefly fact facts transcript discuss discussed"
    " discussion include keep use avoid never always exactly accurate accurately plain english order"
    " final important key main number numbered date dates who what when structure structured output"
    " reader team participant participants attendee attendees outcome outcomes question questions"
    " answer issue issues risk risks plan plans update updates status report professional neutral"
)

# the rules and the style instructions joined with no space between the two joins: the content words, and with
# them every on-topic and leak decision, depend on it
_DOMAIN_WORDS = " ".join(RULE_PHRASES) + " ".join(t.split(":", 1)[1].strip() for t in MUTATION_STYLES) + _EXTRA_WORDS

_JUDGE_SYSTEM = (
    "You grade meeting minutes. Compare the minutes with the transcript: are the topics, decisions and "
    "action items (with owners) correct and complete, and is the text well organised? "
    "Reply with one integer from 0 (useless) to 10 (perfect) and nothing else."
)

MEETING_TEXTS = FamilyTexts(
    task_hint="writes meeting minutes",
    output_name="these minutes",
    rule_phrases=RULE_PHRASES,
    mutation_styles=MUTATION_STYLES,
    domain_words=_DOMAIN_WORDS,
    prefills=DEFAULT_PREFILLS,
    reflection_hints=REFLECTION_HINTS,
    judge_prompt=(_JUDGE_SYSTEM, "Transcript:\n\n{task_input}\n\nMinutes:\n\n{output}\n\nGrade (0-10):"),
    size_name="transcript length (words)",
)
"""The meeting-minutes family's texts (``MeetingMinutes.texts``)."""
