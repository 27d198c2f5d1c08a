"""Reading a tool call or a final answer out of one model reply (ReAct style, Yao et al. 2022).

Primary format, the one the prompt asks for (ReAct: Yao et al. 2022, "ReAct: Synergizing Reasoning and
Acting in Language Models", arXiv:2210.03629)::

    Thought: <free text>
    Action: calculator[(12.5 + 3) * 4]

or ``Final Answer: <answer>``. Also accepted, because small models write them: ``Action: tool(input)``,
``Action: tool`` followed by an ``Action Input: ...`` line, a bracket left open by a reply that ends
inside it (cut by the token limit; the closing bracket is added to the kept text), and a JSON object either after ``Action:`` or
on its own line (``{"tool": ..., "input": ...}``, with the key spellings ``name``/``action`` and
``arguments``/``action_input``/``tool_input``/``args``/``query``/``expression``).

The earliest of the action or the final answer wins; what follows it (typically an ``Observation:`` the
model invented, having no stop sequence) is dropped from the kept text. A reply that is neither gives a
``malformed`` result whose ``error`` is the observation to show the model; parsing never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MAX_REPLY_CHARS", "ParsedReply", "parse_reply"]

MAX_REPLY_CHARS = 8000
"""Characters of a reply that are read; the rest is ignored (bounds the work on huge outputs)."""

_FINAL = re.compile(r"final\s*answer\s*:", re.IGNORECASE)
_ACTION = re.compile(r"^[ \t>*#-]*(?:\d+[.)]\s*)?\**action\**\s*(?:\d+\s*)?\**:\**[ \t]*", re.IGNORECASE | re.MULTILINE)
_JSON_LINE = re.compile(r"^[ \t]*(?=\{)", re.MULTILINE)
_ACTION_INPUT = re.compile(r"^[ \t*]*action[ \t]*input\**[ \t]*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)
_TOOL_NAME = re.compile(r"[ \t`*]*([A-Za-z_][\w-]{0,39})[ \t`*]*")
_STOP_LINE = re.compile(r"^[ \t*]*(?:observation|action|thought|question)\b[^\n:]{0,12}:", re.IGNORECASE | re.MULTILINE)
_TOOL_KEYS = ("tool", "name", "action", "tool_name", "function")
_INPUT_KEYS = ("input", "action_input", "tool_input", "arguments", "args", "query", "expression", "parameters")
_CLOSERS = {"[": "]", "(": ")"}
_FORMAT_HINT = "Write 'Action: tool[input]' or 'Final Answer: <answer>'."


@dataclass(frozen=True)
class ParsedReply:
    """One model reply, read.

    Attributes:
        kind: "action" (a tool call), "final" (a final answer) or "malformed".
        text: the part of the reply that counts (up to the end of the action or answer; an invented
            observation after it dropped); the whole reply, clipped to :data:`MAX_REPLY_CHARS`, when
            malformed.
        tool: the tool name as written, stripped (kind "action" only, else "").
        tool_input: the input inside the brackets, stripped (kind "action" only, else "").
        answer: the final answer, stripped (kind "final" only, else "").
        error: for "malformed", what was wrong, written as an observation for the model; else "".
    """

    kind: str
    text: str
    tool: str = ""
    tool_input: str = ""
    answer: str = ""
    error: str = ""

    @property
    def malformed(self) -> bool:
        """True when the reply held neither a well-formed action nor a final answer."""
        return self.kind == "malformed"


def _bad(text: str, why: str) -> ParsedReply:
    return ParsedReply("malformed", text, error=f"Error: {why} {_FORMAT_HINT}")


def _balanced(text: str, start: int) -> int | None:
    """Index just past the bracket closing the one at ``start`` (nesting of both kinds counted), or None."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth == 0:
                return i + 1 if ch == _CLOSERS[text[start]] else None
    return None


def _unclosed_tail(text: str, start: int) -> int | None:
    """End of a bracket left open at the very end of a reply (a reply cut by the token limit, e.g.
    ``lookup[speed of Tova``): the index where its input stops, when the input is the rest of the reply,
    holds no bracket and no line break and is not blank; else None."""
    rest = text[start + 1:].rstrip()
    if not rest.strip() or any(ch in rest for ch in "[]()\n"):
        return None
    return start + 1 + len(rest)


def _json_call(text: str, start: int) -> ParsedReply | None:
    """A JSON tool call starting at ``text[start] == "{"``; None when it is not JSON at all."""
    try:
        obj, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):  # JSONDecodeError, and e.g. an integer past Python's digit limit
        return None
    kept = text[:end]
    if not isinstance(obj, dict):
        return _bad(kept, "the JSON call must be an object with a tool name and an input.")
    tool = next((obj[k] for k in _TOOL_KEYS if isinstance(obj.get(k), str) and obj[k].strip()), None)
    if tool is None:
        return _bad(kept, "the JSON call names no tool (key 'tool').")
    raw = next((obj[k] for k in _INPUT_KEYS if k in obj), None)
    if isinstance(raw, dict) and len(raw) == 1:
        raw = next(iter(raw.values()))
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        return _bad(kept, "the JSON call's input must be one string (key 'input').")
    return ParsedReply("action", kept, tool=tool.strip(), tool_input=str(raw).strip())


def _action(text: str, at: int) -> ParsedReply:
    """The action whose text starts at ``at`` (just after ``Action:``)."""
    if text.startswith("{", at):
        call = _json_call(text, at)
        return call if call is not None else _bad(text, "the text after 'Action:' is not valid JSON.")
    m = _TOOL_NAME.match(text, at)
    if not m or not m.group(1):
        return _bad(text, "'Action:' must be followed by a tool name.")
    tool, pos = m.group(1), m.end()
    if pos < len(text) and text[pos] in _CLOSERS:
        end = _balanced(text, pos)
        if end is None:
            cut = _unclosed_tail(text, pos)
            if cut is not None:
                return ParsedReply("action", text[:cut] + _CLOSERS[text[pos]], tool=tool,
                                   tool_input=text[pos + 1:cut].strip())
            return _bad(text, f"the input of {tool} has no closing '{_CLOSERS[text[pos]]}'.")
        return ParsedReply("action", text[:end], tool=tool, tool_input=text[pos + 1:end - 1].strip())
    follow = _ACTION_INPUT.search(text, pos)
    if follow and not text[pos:follow.start()].strip():
        return ParsedReply("action", text[:follow.end()], tool=tool, tool_input=follow.group(1).strip())
    return _bad(text, f"no input for {tool}: put it in brackets, e.g. {tool}[...].")


def _final(text: str, at: int) -> ParsedReply:
    """The final answer whose text starts at ``at`` (just after ``Final Answer:``)."""
    stop = _STOP_LINE.search(text, at)
    end = stop.start() if stop else len(text)
    answer = text[at:end].strip().strip("*").strip()
    if not answer:
        return _bad(text, "the final answer is empty.")
    return ParsedReply("final", text[:end].rstrip(), answer=answer)


def parse_reply(text: str, tools: Iterable[str] | None = None) -> ParsedReply:
    """Read one model reply.

    Args:
        text: the reply (untrusted; any length; only the first :data:`MAX_REPLY_CHARS` characters are read).
        tools: the tool names offered; when given, an action naming another tool is malformed (compared
            case-insensitively). None accepts any name.

    Returns:
        The :class:`ParsedReply`. Never raises.
    """
    text = (text or "")[:MAX_REPLY_CHARS]
    if not text.strip():
        return _bad(text, "the reply is empty.")
    final, action = _FINAL.search(text), _ACTION.search(text)
    json_line = _JSON_LINE.search(text)
    candidates = [(m.start(), kind, m) for kind, m in (("final", final), ("action", action)) if m]
    if json_line and not action:
        candidates.append((json_line.start(), "json", json_line))
    if not candidates:
        return _bad(text, "no Action and no Final Answer found.")
    _, kind, m = min(candidates, key=lambda c: c[0])
    if kind == "final":
        return _final(text, m.end())
    if kind == "json":
        call = _json_call(text, m.end())
        parsed = call if call is not None else _bad(text, "the JSON call is not valid JSON.")
    else:
        parsed = _action(text, m.end())
    if parsed.kind == "action" and tools is not None:
        names = {t.casefold() for t in tools}
        if parsed.tool.casefold() not in names:
            return ParsedReply("malformed", parsed.text, error=(
                f"Error: unknown tool {parsed.tool[:40]!r}; the tools are {', '.join(sorted(names))}. {_FORMAT_HINT}"))
    return parsed
