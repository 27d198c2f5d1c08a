"""The minutes format: writing reference minutes and parsing (untrusted) model minutes.

Reference minutes are plain Markdown::

    ## Topics
    - Mobile release
    ## Decisions
    - Ship the mobile release on Thursday
    ## Action items
    - Aiko: write the release notes (Friday)

Parsing is lenient because model output follows no schema. A *header* is a Markdown heading
(``# ...``), a bold label (``**Action items**``), a short label line ending in ``:`` (``Next steps:``,
possibly with inline content after the colon) or a bare short label line (``DECISIONS``). Headers are
classified by keywords into ``topics`` / ``decisions`` / ``actions`` (see ``_KIND_KEYWORDS``).

Action items are (a) the lines of an actions section (only its bullet lines when it has any;
continuation lines such as ``Owner: Aiko`` or ``Due: Friday`` attach to the previous item), (b) the
inline content of a one-line label (``Action items: Aiko to call; Bao to write``, split on ``;``), and
(c) anywhere else, lines carrying an explicit marker (``Action:``, ``Action item:``, ``Owner:``,
``assigned to``, ``TODO``). Bullets reading "none", "n/a", "no action items" and similar are not items.
Owners are read from ``Aiko: task``, ``[Aiko] task``, ``task (Aiko)``, ``task - Aiko``,
``Owner: Aiko`` and ``Aiko will/to/should ... task``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evotrainer.tasks.meeting_minutes.task import ActionItem

__all__ = ["ParsedItem", "ParsedMinutes", "format_minutes", "header_of", "parse_action_item", "parse_minutes"]


@dataclass(frozen=True)
class ParsedItem:
    """An action item read from model output.

    Attributes:
        owner: the owner as written ("" when none was recognised).
        task: the task text with owner and due markers removed.
        due: the deadline as written ("" when none).
        raw: the whole item text (bullet marker removed), used as a fallback for matching.
    """

    owner: str
    task: str
    due: str
    raw: str


@dataclass(frozen=True)
class ParsedMinutes:
    """What the reward needs from an output.

    Attributes:
        sections: kinds of headers found, a subset of {"topics", "decisions", "actions"}.
        n_bullets: number of non-empty bullet lines anywhere.
        action_items: parsed action items in output order.
    """

    sections: frozenset[str]
    n_bullets: int
    action_items: tuple[ParsedItem, ...]


def format_minutes(topics: Sequence[str], decisions: Sequence[str], items: Sequence[ActionItem]) -> str:
    """Reference minutes in the project's Markdown format ("- None" under an empty section)."""
    lines = ["## Topics", *(f"- {t}" for t in topics or ["None"]), "", "## Decisions"]
    lines += [f"- {d}" for d in decisions] or ["- None"]
    lines += ["", "## Action items"]
    for item in items:
        owner = f"{item.owner}: " if item.owner.strip() else ""  # an unowned item is its task alone
        lines.append(f"- {owner}{item.task}" + (f" ({item.due})" if item.due else ""))
    if not items:
        lines.append("- None")
    return "\n".join(lines)


_KIND_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("actions", ("action", "next step", "to-do", "todo", "to do", "follow-up", "follow up", "followup",
                 "assignment", "tasks", "owners and", "responsibilit")),
    ("decisions", ("decision", "decided", "agreed", "agreement", "resolution", "outcome", "conclusion")),
    ("topics", ("topic", "agenda", "discussion", "discussed", "summary", "key point", "overview",
                "highlight", "main point")),
)
_BULLET = re.compile(r"^\s*(?:[-*•+‣◦–]|\d{1,2}[.)])\s+(?:\[[ xX]?\]\s*)?")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(.*?)\s*#*\s*$")
_LABEL = re.compile(r"^\s*(?:\*\*|__)?\s*([A-Za-z][A-Za-z /&'-]{0,40}?)\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(.*)$")
_BARE = re.compile(r"^\s*(?:\*\*|__)?\s*([A-Za-z][A-Za-z /&'-]{0,40}?)\s*(?:\*\*|__)?\s*$")
_NONE = re.compile(r"^(?:none|n/?a|nothing|no (?:action items?|actions|decisions?|tasks?)\b.*|-+)\W*$", re.I)
_MARKER = re.compile(r"\baction(?: item)?s?\s*:|\bowner\s*:|\bassigned to\b|\btodo\b|\bto-do\s*:", re.I)
_CONTINUATION = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:\*\*)?(owner|responsible|assignee|assigned to|who|due|deadline|when)(?:\*\*)?\s*[:\-–]",
    re.I,
)


def _kind(label: str) -> str | None:
    low = label.lower()
    for kind, keys in _KIND_KEYWORDS:
        if any(k in low for k in keys):
            return kind
    return None


def _header(line: str) -> tuple[bool, str | None, str]:
    """(is_header, kind or None, inline content after the label)."""
    match = _HEADING.match(line)
    if match:
        label = match.group(1).strip("*_: ")
        return True, _kind(label), ""
    if _BULLET.match(line):
        return False, None, ""
    match = _LABEL.match(line)
    if match and len(match.group(1).split()) <= 5:
        kind = _kind(match.group(1))
        if kind is not None:
            return True, kind, match.group(2).strip()
    match = _BARE.match(line)
    if match and len(match.group(1).split()) <= 4:
        kind = _kind(match.group(1))
        if kind is not None:
            return True, kind, ""
    return False, None, ""


def header_of(line: str) -> tuple[bool, str | None, str]:
    """Whether ``line`` is a section header: ``(is_header, kind or None, inline content after the label)``.

    ``kind`` is ``"topics"``, ``"decisions"``, ``"actions"`` or None (a heading of another kind); the
    inline content is the text after a one-line label (``Decisions: X`` gives ``"X"``). Never raises.
    """
    return _header(line)


def _strip_bullet(line: str) -> str:
    text = _BULLET.sub("", line, count=1).strip()
    return text.replace("**", "").replace("__", "").strip()


def parse_minutes(text: str) -> ParsedMinutes:
    """Parse sections, bullets and action items from free-form minutes (never raises)."""
    lines = text.splitlines()
    sections: set[str] = set()
    n_bullets = sum(1 for line in lines if _BULLET.match(line) and _strip_bullet(line))
    items: list[ParsedItem] = []
    current: str | None = None
    block: list[str] = []  # lines of the current actions section

    def flush() -> None:
        has_bullets = any(_BULLET.match(x) for x in block)
        pending: list[str] = []
        for line in block:
            body = _strip_bullet(line)
            if not body:
                continue
            nested = not _BULLET.match(line) or line[:1].isspace()
            if pending and nested and _CONTINUATION.match(line):
                pending[-1] += "; " + body  # "  Owner: Aiko" under the previous item
            elif not has_bullets or _BULLET.match(line):
                pending.append(body)
        items.extend(parse_action_item(p) for p in pending if not _NONE.match(p))
        block.clear()

    for line in lines:
        if not line.strip():
            continue
        is_header, kind, inline = _header(line)
        if is_header:
            if current == "actions":
                flush()
            if kind is not None:
                sections.add(kind)
            # "Decisions: X" / "Action item: Y" is a one-line section; a bare label opens one.
            current = None if inline else kind
            if inline and kind == "actions":
                parts = [p for p in re.split(r";\s+", inline) if p.strip()]
                items.extend(parse_action_item(p) for p in parts if not _NONE.match(p))
            continue
        if current == "actions":
            block.append(line)
        elif _MARKER.search(line):
            body = re.sub(r"^\s*action(?: item)?s?\s*:\s*", "", _strip_bullet(line), flags=re.I)
            if body and not _NONE.match(body):
                items.append(parse_action_item(body))
    if current == "actions":
        flush()
    return ParsedMinutes(frozenset(sections), n_bullets, tuple(items))


_GENERIC_LABELS = frozenset(
    {"action", "action item", "actions", "task", "todo", "to-do", "item", "ai", "next step", "next steps",
     "note", "follow-up", "follow up", "assignment"}
)
_NOT_OWNER = frozenset(
    {"we", "they", "i", "you", "he", "she", "it", "everyone", "team", "the team", "all", "someone", "somebody",
     "due", "deadline", "decision", "topic", "status", "when", "by"}
)
_DATE_WORDS = re.compile(
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:week|month|quarter|next|today|tomorrow|asap|tbd|"
    r"eod|eow|meeting)\b|\bend of\b|\b\d{1,2}(?:st|nd|rd|th)\b|\d{1,2}[/.]\d{1,2}|\b(?:jan(?:uary)?|"
    r"feb(?:ruary)?|march|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|"
    r"nov(?:ember)?|dec(?:ember)?)\b",
    re.I,
)
_OWNER_FIELD = re.compile(
    r"\b(?:(?:owner|responsible|assignee|who)\s*[:\-–]|assigned to\s*:?)\s*([^,;()\[\]|.]+?)(?=\s+[-–—]\s|[,;()\[\]|.]|$)", re.I
)
_DUE_FIELD = re.compile(
    r"(?:\b(?:due(?: date)?|deadline)(?!\s+to\b)\s*[:\-–]?|\bwhen\s*[:\-–])\s*([^,;()\[\]|]+?)(?=\.\s|[,;()\[\]|]|\.?$)", re.I
)
_NAME = r"[A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*){0,2}"
_VERB_LEAD = re.compile(
    rf"^({_NAME})\s+(?:will|to|is to|is going to|should|shall|must|needs to|has to|agreed to|"
    rf"volunteered to|offered to|is responsible for|takes|'ll)\s+(.+)$"
)
_LEADING_NAME = re.compile(rf"^({_NAME})\s+[-–—]\s+(.+)$")
_TRAILING_NAME = re.compile(rf"^(.+?)\s+[-–—]\s+({_NAME})\s*\.?$")
_TRAILING_PAREN = re.compile(r"^(.*?)\s*\(([^()]{1,60})\)\s*\.?$")


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip(" \t-–—:;,.")


_NAME_JOINERS = frozenset({"and", "&", "de", "van", "von", "da", "di", "del", "la", "le", "bin", "al", "el"})


def _owner_text(text: str) -> str:
    """The name at the start of ``text``: words up to the first lower-case non-joiner word (max 4)."""
    words = _clean(re.sub(r"^(?:owner|assigned to|responsible|assignee)\s*[:\-]?\s*", "", text, flags=re.I)).split()
    kept: list[str] = []
    for word in words[:4]:
        if kept and word[:1].islower() and word not in _NAME_JOINERS:
            break
        kept.append(word)
    return " ".join(kept)


def parse_action_item(text: str) -> ParsedItem:
    """Split one action-item line into owner, task and due (never raises; owner may be "")."""
    raw = _clean(text.replace("**", "").replace("__", ""))
    rest = raw
    owner = due = ""
    match = _OWNER_FIELD.search(rest)
    if match:
        owner = _owner_text(match.group(1))
        leftover = " ".join(match.group(1).split()[len(owner.split()):])  # "Aiko to call" -> "to call"
        leftover = re.sub(r"^(?:to|will|should|shall|must)\s+", "", leftover)
        rest = rest[: match.start()] + " " + leftover + " " + rest[match.end():]
    match = _DUE_FIELD.search(rest)
    if match:
        due = _clean(match.group(1))
        rest = rest[: match.start()] + " " + rest[match.end():]
    rest = _clean(re.sub(r"\([\s,;:.-]*\)", " ", rest))
    match = re.match(r"^([^:]{1,20}):\s*(.+)$", rest)
    if match and match.group(1).strip().lower() in _GENERIC_LABELS:
        rest = _clean(match.group(2))
    for _ in range(2):  # a paren may hold the due and another the owner
        match = _TRAILING_PAREN.match(rest)
        if not match:
            break
        parts = [p.strip() for p in re.split(r"[,;]", match.group(2)) if p.strip()]
        dated = [p for p in parts if _DATE_WORDS.search(p)]
        named = [p for p in parts if not _DATE_WORDS.search(p)]
        if dated and not due:
            due = re.sub(r"^(?:due|by)\s+", "", dated[0], flags=re.I)
        if named and not owner and named[0].lower() not in _NOT_OWNER:
            owner = _owner_text(named[0])
        rest = _clean(match.group(1))
    if not owner:
        match = re.match(r"^\[([^\]]{1,40})\]\s*(.+)$", rest)
        if match:
            owner, rest = _owner_text(match.group(1)), match.group(2)
    if not owner:
        match = re.match(r"^([^:]{1,40}):\s*(.+)$", rest)
        if match and len(match.group(1).split()) <= 4 and match.group(1).strip().lower() not in _NOT_OWNER:
            owner, rest = _owner_text(match.group(1)), match.group(2)
    for pattern, who, what in ((_LEADING_NAME, 1, 2), (_TRAILING_NAME, 2, 1), (_VERB_LEAD, 1, 2)):
        match = None if owner else pattern.match(rest)
        if match and match.group(who).lower() not in _NOT_OWNER:
            owner, rest = match.group(who), match.group(what)
    if not due:
        match = re.search(r"\bby\s+([^,;()]+)$", rest)
        if match and _DATE_WORDS.search(match.group(1)):
            due = _clean(match.group(1))
    return ParsedItem(owner=_clean(owner), task=_clean(rest), due=due, raw=raw)
