"""Reading ground truth (topics, decisions, owned action items) from hand-written Markdown minutes.

The reference layout is the project's own (see ``validation_set/README.md``)::

    ## Topics
    - Mobile release
    ## Decisions
    - Ship the mobile release on Thursday
    ## Action items
    - Aiko: write the release notes (due: Friday)

A section starts at a Markdown heading (``#`` … ``######``), a bold label line (``**Decisions**``) or
a label line ending in ``:`` (``Next steps:``); it is classified by keywords (actions: "action", "next
step", "to-do", "follow-up", "task"; decisions: "decision", "agreed", "resolution", "outcome";
topics: "topic", "agenda", "discussion", "summary", "overview"). Bullets (``-``, ``*``, ``+``, ``•``,
``1.``) under a section are its entries; an indented non-bullet line continues the previous bullet.
Bullets reading "None", "n/a", "-" are skipped. An action item's owner is read, in this order, from
``Aiko: task (due: Friday)`` ("explicit"); from a free-text sentence such as "The industrial designer
will find out which components are needed" or "Aiko to book the room"
(:func:`evotrainer.tasks.meeting_minutes.datasets.action_items.owner_from_sentence`, "read_from_sentence"); from the
markup the lenient model-output parser knows (:func:`evotrainer.tasks.meeting_minutes.minutes_format.parse_action_item`:
``[Aiko] task``, ``task (Aiko)``, ``task - Aiko``; "explicit"). An item with none of these keeps no
owner ("none") and is matched on its task text alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evotrainer.errors import DataError
from evotrainer.tasks.meeting_minutes.datasets.action_items import owner_from_sentence
from evotrainer.tasks.meeting_minutes.datasets.speaker_lines import speaker_label
from evotrainer.tasks.meeting_minutes.minutes_format import parse_action_item
from evotrainer.tasks.meeting_minutes.task import ActionItem

__all__ = ["ReferenceMinutes", "parse_reference_minutes"]


@dataclass(frozen=True)
class ReferenceMinutes:
    """Ground truth read from reference minutes.

    Attributes:
        text: the minutes as written (stripped), the ROUGE-L reference.
        topics: topic bullets in order.
        decisions: decision bullets in order.
        action_items: action items in order (``owner`` is "" where none could be read).
        owner_sources: how each item's owner was obtained ("explicit", "read_from_sentence", "none"),
            in item order.
    """

    text: str
    topics: tuple[str, ...]
    decisions: tuple[str, ...]
    action_items: tuple[ActionItem, ...]
    owner_sources: tuple[str, ...] = ()


_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("actions", ("action", "next step", "to-do", "todo", "to do", "follow-up", "follow up", "tasks",
                 "assignment")),
    ("decisions", ("decision", "decided", "agreed", "agreement", "resolution", "outcome", "conclusion")),
    ("topics", ("topic", "agenda", "discussion", "discussed", "summary", "overview", "key point")),
)
_NO_DUE = re.compile(r"^(?:not (?:specified|set|given|said)|unspecified|none|n/?a|-*)$", re.I)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<label>.*?)\s*#*\s*$")
_BOLD = re.compile(r"^\s*(?:\*\*|__)(?P<label>[^*_]{1,60}?)(?:\*\*|__)\s*:?\s*$")
_LABEL = re.compile(r"^\s*(?P<label>[A-Za-z][A-Za-z /&'-]{0,40}?)\s*:\s*$")
_BULLET = re.compile(r"^(?P<indent>\s*)(?:[-*+•]|\d{1,3}[.)])\s+(?P<body>.*)$")
_NONE = re.compile(r"^(?:(?:none|n/?a|nothing)(?:\s*\(.*\))?|-+|no (?:action items?|actions|decisions?|topics?)\b.*)\W*$",
                   re.I)
_OWNED = re.compile(r"^(?P<owner>[^:]{1,60}):\s+(?P<task>.+?)(?:\s*\((?:due|by|deadline)\s*:?\s*(?P<due>[^()]*)\))?\s*\.?$",
                    re.I)


def _kind(label: str) -> str:
    low = label.lower()
    for kind, keys in _KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def _header(line: str) -> str | None:
    """The section kind a header line opens ("other" for an unknown label), or None for a non-header."""
    for pattern in (_HEADING, _BOLD, _LABEL):
        match = pattern.match(line)
        if match:
            return _kind(match["label"].strip("*_: "))
    return None


def parse_reference_minutes(text: str, *, source: str, speakers: Sequence[str] = ()) -> ReferenceMinutes:
    """Read the sections of reference minutes (layout in the module docstring).

    Args:
        text: the Markdown minutes.
        source: the file named in errors (``source:LINE``).
        speakers: the meeting's speaker labels, for owners read off sentences ("the chair will ..."
            -> the speaker "Chair"); may be empty.

    Returns:
        The minutes and their topics, decisions and action items (each possibly empty: minutes with
        no recognised section are still a valid ROUGE-L reference).

    Raises:
        DataError: empty minutes (names ``source``).
    """
    if not text.strip():
        raise DataError(f"{source}: the minutes are empty; expected Markdown minutes "
                        "(## Topics / ## Decisions / ## Action items)")
    entries: dict[str, list[tuple[int, str]]] = {"topics": [], "decisions": [], "actions": [], "other": []}
    current: str | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        kind = _header(line)
        if kind is not None:
            current = kind
            continue
        if current is None:
            continue
        bullet = _BULLET.match(line)
        bucket = entries[current]
        if bullet:
            bucket.append((lineno, " ".join(bullet["body"].replace("**", "").split())))
        elif bucket and line[:1].isspace():  # an indented line continues the previous bullet
            first, body = bucket[-1]
            bucket[-1] = (first, f"{body} {' '.join(line.split())}")
    kept = {k: [(n, b) for n, b in v if b and not _NONE.match(b)] for k, v in entries.items()}
    read = [_action_item(body, speakers) for _, body in kept["actions"]]
    return ReferenceMinutes(
        text=text.strip(),
        topics=tuple(b for _, b in kept["topics"]),
        decisions=tuple(b for _, b in kept["decisions"]),
        action_items=tuple(item for item, _ in read),
        owner_sources=tuple(how for _, how in read),
    )


def _action_item(body: str, speakers: Sequence[str]) -> tuple[ActionItem, str]:
    """One action-item bullet and how its owner was read (order in the module docstring)."""
    match = _OWNED.match(body)
    owner = speaker_label(match["owner"]) if match else None
    if match and owner:
        due = " ".join((match["due"] or "").split())
        return ActionItem(owner=owner, task=match["task"].strip(), due="" if _NO_DUE.match(due) else due), "explicit"
    sentence = owner_from_sentence(body, speakers)
    if sentence:
        return ActionItem(owner=sentence[0], task=sentence[1]), "read_from_sentence"
    parsed = parse_action_item(body)
    # The sentence reader already judged "Talk to Bao"-like leads; take only markup owners from here.
    lead = body.startswith(parsed.owner) and body[len(parsed.owner):].lstrip()[:1].isalpha()
    if parsed.owner and parsed.task and not lead:
        return ActionItem(owner=parsed.owner, task=parsed.task, due=parsed.due), "explicit"
    return ActionItem(owner="", task=" ".join(body.split()).rstrip(".")), "none"
