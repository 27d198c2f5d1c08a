"""Cleaning of mutator output: what survives and what is rejected."""

from __future__ import annotations

import pytest

from evotrainer.search.cleaning import clean_mutator_text, content_words, on_topic_fraction

RULE = "List every action item with its owner."

KEEP_CASES = [
    ("plain", RULE, RULE),
    ("double quotes", f'"{RULE}"', RULE),
    ("curly quotes", f"“{RULE}”", RULE),
    ("nested quotes", f"\"'{RULE}'\"", RULE),
    ("code fence", f"```\n{RULE}\n```", RULE),
    ("code fence with language", f"```text\n{RULE}\n```\nThis keeps it short.", RULE),
    ("label rewrite", f"Rewrite: {RULE}", RULE),
    ("label new prompt", f"New prompt: {RULE}", RULE),
    ("label improved instruction", f"Improved instruction: {RULE}", RULE),
    ("bold label", f"**Rewritten text:** {RULE}", RULE),
    ("here is preamble", f"Here is the rewritten section:\n\n{RULE}", RULE),
    ("sure preamble", f"Sure! Here is a stricter version:\n{RULE}", RULE),
    ("sure sentence", f"Sure. {RULE}", RULE),
    ("certainly + label + quotes", f'Certainly! New prompt: "{RULE}"', RULE),
    ("trailing hope", f"{RULE} I hope this helps!", RULE),
    ("trailing let me know", f"{RULE}\n\nLet me know if you need anything else.", RULE),
    ("trailing this version", f"{RULE} This version is stricter than the original.", RULE),
    ("trailing note", f"{RULE}\nNote: I made it shorter.", RULE),
    ("role markers", f"<|im_start|>assistant\n{RULE}<|im_end|>", RULE),
    # the markers the 1.5B copies from the chats around the instruction and the shown output
    ("instruction markers", f"<<<\n{RULE}\n>>>\n\nThis adds owners.", RULE),
    ("output markers", f"---\n{RULE}\n---\nThis instruction focuses on owners.", RULE),
    ("stray closing marker", f">>> {RULE}", RULE),
    ("trailing rule line", f"{RULE}\n---", RULE),
    ("assistant prefix", f"Assistant: {RULE}", RULE),
    ("whitespace", "  List   every action\titem with  its owner.  \n\n", RULE),
    ("fence + label + chatter", f"Sure!\n```\nRewrite: {RULE}\n```\nI hope this helps.", RULE),
    ("colon inside content", "Format the minutes as three headings: Topics, Decisions, Action items.",
     "Format the minutes as three headings: Topics, Decisions, Action items."),
    ("section label", f"Rules: {RULE}", RULE),
    ("label with verb and trailing original",
     f'The rewritten text is: "{RULE}"\n\nThe original text was: "Be brief."', RULE),
    ("dangling intro dropped", f"{RULE} Here is an example:", RULE),
    ("inner quotes kept", 'Use "must" and "never" in rules.', 'Use "must" and "never" in rules.'),
    ("list kept", "Use three headings:\n- Topics\n- Decisions\n- Action items",
     "Use three headings:\n- Topics\n- Decisions\n- Action items"),
]


@pytest.mark.parametrize(("name", "raw", "expected"), KEEP_CASES, ids=[c[0] for c in KEEP_CASES])
def test_clean_keeps_the_instruction(name: str, raw: str, expected: str) -> None:
    assert clean_mutator_text(raw) == expected


REJECT_CASES = [
    ("empty", ""),
    ("whitespace only", "   \n\t "),
    ("not a string", None),
    ("only quotes", '""'),
    ("only fence", "```\n```"),
    ("only a label", "New prompt:"),
    ("too short", "Be brief."),
    ("only chatter", "I hope this helps!"),
    ("echo of the request", "Output only the rewritten text, nothing else."),
    ("echo of text a/b", "Text A: list owners. Text B: list decisions."),
    ("a question", "What are the best ways to prepare for a job interview?"),
    ("too long", "word " * 200),
]


@pytest.mark.parametrize(("name", "raw"), REJECT_CASES, ids=[c[0] for c in REJECT_CASES])
def test_clean_rejects(name: str, raw: object) -> None:
    assert clean_mutator_text(raw) is None


def test_clean_respects_max_words_and_echo_of() -> None:
    text = "one two three four five six"
    assert clean_mutator_text(text, max_words=6) == text
    assert clean_mutator_text(text, max_words=5) is None
    assert clean_mutator_text(text, min_words=7) is None
    instruction = "Make it stricter: use must."
    assert clean_mutator_text(f"{RULE} Make it stricter: use must.", echo_of=[instruction]) is None


def test_on_topic_fraction() -> None:
    assert content_words("The owners of the Action Items") == {"owner", "action", "item"}
    old = "Keep the order of the meeting."
    assert on_topic_fraction(old, "Keep the meeting order.") == 1.0
    assert on_topic_fraction(old, "A woman baked a beautiful wedding cake.") == 0.0
    assert on_topic_fraction(old, "Name each owner.", {"name", "owner"}) == 1.0
    assert on_topic_fraction(old, "...") == 1.0


@pytest.mark.parametrize(
    "raw",
    [
        'The text will now be rewritten: "Use only the transcript. Keep names exact."',
        "Replace the rules with the rewritten version: Use only the transcript. Keep names exact.",
    ],
)
def test_clean_drops_a_leading_clause_about_the_rewrite(raw: str) -> None:
    """Seen on SmolLM2 as mutator: chatter about the rewrite had spread into 9 policies' rules."""
    assert clean_mutator_text(raw) == "Use only the transcript. Keep names exact."
