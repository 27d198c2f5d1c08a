"""Reading tool calls and final answers: the primary format, variants, and malformed replies."""

from __future__ import annotations

import random

import pytest

from evotrainer.tasks.tool_agent.parse import MAX_REPLY_CHARS, parse_reply

TOOLS = ("calculator", "convert", "lookup")


@pytest.mark.parametrize(("reply", "tool", "tool_input"), [
    ("Thought: add them\nAction: calculator[2 + 3]", "calculator", "2 + 3"),
    ("Action: calculator[(2+3)*[4]]\nObservation: 20", "calculator", "(2+3)*[4]"),
    ("Action: lookup(population of Velmora)", "lookup", "population of Velmora"),
    ("Action: convert\nAction Input: 12 mile to km", "convert", "12 mile to km"),
    ('Action: {"tool": "calculator", "input": "1+1"}', "calculator", "1+1"),
    ('{"name": "lookup", "arguments": {"query": "weight of kettle"}}', "lookup", "weight of kettle"),
    ('{"action": "calculator", "action_input": 7}', "calculator", "7"),
    ("**Action:** calculator[1]", "calculator", "1"),
    ("1. Action: Calculator [ 4 / 2 ]", "Calculator", "4 / 2"),
    ("Action 1: lookup[price of lamp]", "lookup", "price of lamp"),
])
def test_actions(reply: str, tool: str, tool_input: str) -> None:
    parsed = parse_reply(reply, TOOLS)
    assert parsed.kind == "action", parsed.error
    assert (parsed.tool, parsed.tool_input) == (tool, tool_input)
    assert "Observation" not in parsed.text and reply.startswith(parsed.text)


def test_final_answer_and_the_earliest_marker_wins() -> None:
    p = parse_reply("Thought: done\nFinal Answer: 19.31 km\nObservation: nothing", TOOLS)
    assert p.kind == "final" and p.answer == "19.31 km" and p.text == "Thought: done\nFinal Answer: 19.31 km"
    first_action = parse_reply("Action: calculator[1+1]\nObservation: 2\nFinal Answer: 2", TOOLS)
    assert first_action.kind == "action" and first_action.text == "Action: calculator[1+1]"
    first_final = parse_reply("Final answer: **42**\nAction: calculator[1]", TOOLS)
    assert first_final.kind == "final" and first_final.answer == "42"


@pytest.mark.parametrize(("reply", "why"), [
    ("", "empty"), ("   \n ", "empty"), ("I think the answer is 4.", "no Action"),
    ("Action: calculator[1 + (2", "closing"), ("Action: calculator(1 + 2]", "closing"),
    ("Action: ", "tool name"), ("Action: calculator", "no input"), ("Action: search[cats]", "unknown tool"),
    ("Final Answer:   ", "empty"), ('{"tool": 5}', "names no tool"), ('{"tool": "lookup", "input": [1]}', "input"),
    ('Action: {"tool": "lookup", ', "not valid JSON"), ("[1, 2, 3]", "no Action"),
    ("Action: 計算[1+1]", "tool name"),
])
def test_malformed_replies_become_observations(reply: str, why: str) -> None:
    parsed = parse_reply(reply, TOOLS)
    assert parsed.malformed and parsed.error.startswith("Error:") and why in parsed.error, parsed.error
    assert "Action: tool[input]" in parsed.error


def test_a_reply_cut_inside_its_action_input_still_calls_the_tool() -> None:
    parsed = parse_reply("Thought: I need it.\nAction: lookup[speed of Tova", TOOLS)
    assert parsed.kind == "action" and parsed.tool_input == "speed of Tova"
    assert parsed.text == "Thought: I need it.\nAction: lookup[speed of Tova]"
    assert parse_reply("Action: lookup[speed of\nTova", TOOLS).malformed  # not the reply's end
    assert parse_reply("Action: lookup[  ", TOOLS).malformed


def test_unicode_inside_input_is_kept() -> None:
    parsed = parse_reply("Thought: ünïcode 🚀\nAction: lookup[population of Zürich-Ōsaka]", TOOLS)
    assert parsed.kind == "action" and parsed.tool_input == "population of Zürich-Ōsaka"


def test_huge_and_deeply_nested_inputs_do_not_crash() -> None:
    assert parse_reply("x" * 1_000_000, TOOLS).malformed
    deep = "Action: calculator[" + "[" * 50_000 + "1" + "]" * 50_000 + "]"
    assert parse_reply(deep, TOOLS).malformed  # clipped to MAX_REPLY_CHARS: the bracket never closes
    assert len(parse_reply("Final Answer: " + "9" * 100_000).answer) < MAX_REPLY_CHARS
    assert parse_reply("{" * 100_000, TOOLS).malformed
    assert parse_reply("Action: {" + '"a":[' * 5000, TOOLS).malformed


def test_random_garbage_never_raises() -> None:
    rng = random.Random(0)
    alphabet = "Action:Final Answer[](){}\"'\n calculator lookup 0123456789+-*/ é🚀\\"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        parsed = parse_reply(text, TOOLS)
        assert parsed.kind in {"action", "final", "malformed"}
        assert parsed.malformed == bool(parsed.error)
        if parsed.kind == "action":
            assert parsed.tool.casefold() in TOOLS


def test_a_json_integer_past_pythons_digit_limit_is_not_a_crash() -> None:
    """``json`` raises a plain ValueError for an integer of more than 4300 digits (sys.int_info)."""
    reply = '{"tool": "calculator", "input": ' + "1" * 5000 + "}"
    assert parse_reply(reply, TOOLS).malformed
