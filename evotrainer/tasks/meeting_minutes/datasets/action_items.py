"""Ground-truth action items from data files: ``Owner: task``, free-text sentences, or no owner at all.

Public meeting corpora write action items as sentences ("The industrial designer will try to find
out which components are needed", AMI; Carletta et al. 2005). :func:`read_action_item` reads one
item written as text, in this order:

1. ``explicit``: ``Owner: task``, where the part before the first ``:`` is a short owner phrase (at
   most :data:`MAX_OWNER_WORDS` words, no verb marker such as "will" or "to"). A generic label
   before the colon ("Action: ...", "Note: ...", "TODO: ...") is dropped and the rest read as below.
2. ``read_from_sentence``: a leading subject, then a marker (``will``, ``'ll``, ``shall``,
   ``should``, ``must``, ``is/are (going) to``, ``has/have/needs to``, ``agreed/offered/volunteered/
   promised to``, ``is responsible for``, or a bare ``to`` as in minutes style "Alice to call Bao"),
   then the task. The subject is kept as the owner when it

   a. names exactly one speaker of the meeting: a name or role phrase (b, c) that
      :func:`~evotrainer.tasks.meeting_minutes.owners.owner_matches` the label (case-insensitive, first
      name <-> full name, role aliases: "the industrial designer" names the AMI speaker "Industrial
      Designer"), or a subject all of whose words, "the" and possessives aside, are words of the label
      ("the professor" names "Professor B" when no other speaker is a professor); the owner is then
      written as that speaker's label; or
   b. is a role phrase (:data:`~evotrainer.tasks.meeting_minutes.owners.ROLE_ALIASES`: "the project
      manager", "PM", "the chair") with no other lower-case word; the owner is the phrase without
      "the"; or
   c. is a capitalised name of 1-4 words ("Alice", "Maria Lopez", "Dr. Chen", "Alice and Bob") whose
      first word is not a pronoun or determiner ("We", "The", "Everyone", ...). With a bare ``to``, a
      one-word name must name a speaker (a) when the speakers are known: "Talk to Bao" must not make
      "Talk" an owner.

   The task is what follows the marker ("try to find out which components are needed").
3. ``none``: no owner can be read ("We need to check the costs", "Find out which components are
   needed"): the whole sentence is the task, and the item is matched on its task text alone.

The source of each item's owner is recorded in ``MeetingTask.meta[OWNER_SOURCES_KEY]`` (one of
:data:`OWNER_SOURCES` per item, in item order) by the loaders; :func:`owner_sources` reads it back
(for tasks without it: ``explicit`` when the item has an owner, else ``none``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from evotrainer.tasks.meeting_minutes.datasets.speaker_lines import speaker_label
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask

__all__ = ["MAX_OWNER_WORDS", "OWNER_SOURCES", "OWNER_SOURCES_KEY", "owner_from_sentence",
           "owner_source_counts", "owner_sources", "owner_sources_line", "read_action_item",
           "transcript_speakers"]

OWNER_SOURCES: tuple[str, ...] = ("explicit", "read_from_sentence", "none")
"""How an item's owner was obtained: an owner field or ``Owner: task``; read off a sentence; not at all."""

OWNER_SOURCES_KEY = "action_owner_sources"
"""``MeetingTask.meta`` key of the per-item owner sources (a list of :data:`OWNER_SOURCES` values)."""

MAX_OWNER_WORDS = 6
"""At most this many words before the ``:`` of an ``Owner: task`` item (more reads as a sentence)."""

_GENERIC_LABELS = frozenset({"action", "action item", "action items", "actions", "ai", "todo", "to-do", "to do",
                             "task", "item", "note", "next step", "next steps", "follow-up", "follow up"})
_MODALS = (r"will|shall|should|must|is going to|are going to|is to|are to|has to|have to|needs to|need to|"
           r"agreed to|agree to|offered to|volunteered to|promised to|is responsible for|are responsible for|"
           r"is asked to|was asked to|were asked to|takes care of|would")
_LEAD = re.compile(rf"^(?P<subject>[^,;:()]{{1,80}}?)\s+(?P<marker>{_MODALS}|to)\s+(?P<task>\S.*)$")
_MARKER_WORD = re.compile(rf"\b(?:{_MODALS}|to)\b|'ll\b")  # lower case: "Will Smith: ..." is an owner
_NOT_NAME_TEXT = """we they i you he she it everyone everybody someone somebody anyone anybody nobody all
    both each either neither one people team group the a an this that these those there here our their his her
    my your its next then also and so but if when after before once finally first second afterwards later
    meanwhile someone's who what which"""
_NOT_NAME = frozenset(_NOT_NAME_TEXT.split())
_ARTICLES = frozenset({"the", "our", "their", "his", "her", "my", "your"})
_JOINERS = frozenset({"and", "&", "de", "van", "von", "der", "da", "di", "del", "la", "le", "bin", "al", "el"})
_SPEAKER = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?P<label>[^\W_][^:]{0,59}?)\s*:\s")


def transcript_speakers(transcript: str) -> tuple[str, ...]:
    """Distinct speaker labels of ``Speaker: text`` lines, in first-seen order (never raises).

    A label is 1-6 words before the first ``": "`` (an optional ``[hh:mm:ss]`` stamp before it);
    multi-word labels need capitalised words, as in :mod:`evotrainer.tasks.meeting_minutes.datasets.speaker_lines`.
    """
    seen: dict[str, None] = {}
    for line in transcript.splitlines():
        match = _SPEAKER.match(line)
        label = speaker_label(match["label"]) if match else None
        if label:
            seen.setdefault(label, None)
    return tuple(seen)


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(" \t.;,")


def _capitalised_name(subject: str) -> bool:
    words = subject.split()
    if not 1 <= len(words) <= 4 or words[0].casefold().strip(".") in _NOT_NAME:
        return False
    for word in words:
        if word.casefold() in _JOINERS:
            continue
        if not word[:1].isupper() or not re.fullmatch(r"[\w.'’-]+", word):
            return False
    return words[-1].casefold() not in _JOINERS


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.casefold())


def _owner_of(subject: str, speakers: Sequence[str], bare_to: bool) -> str | None:
    """The owner named by a sentence's subject (rules 2a-2c of the module docstring), or None."""
    # Imported here: evotrainer.tasks.meeting_minutes imports evotrainer.tasks.meeting_minutes.datasets.jsonl, which imports us.
    from evotrainer.tasks.meeting_minutes.owners import owner_matches, parse_owner

    subject = _clean(subject)
    words = subject.split()
    if not words or len(words) > MAX_OWNER_WORDS:
        return None
    if words[0].casefold() in _NOT_NAME - _ARTICLES:
        return None  # "We will ...", "Everyone should ...", "This needs to ..."
    phrase = parse_owner(subject)
    # A role phrase: "The industrial designer", "PM", "our treasurer" (other words must be names).
    is_role = bool(phrase.roles) and all(w[:1].isupper() for w in words if w.casefold().strip(".") in phrase.name)
    is_name = _capitalised_name(subject)
    bare = [w for w in _words(subject) if w not in _ARTICLES]
    # A speaker named by a name, a role, or only words of its label ("the professor" -> "Professor B").
    named = [s for s in speakers
             if (bare and set(bare) <= set(_words(s))) or ((is_role or is_name) and owner_matches(subject, s))]
    if len(named) == 1:
        return named[0]
    if is_role:
        return re.sub(r"^(?:the|our|their)\s+", "", subject, flags=re.I)
    if is_name and (not bare_to or len(words) >= 2 or not speakers):
        return subject
    return None


def read_action_item(text: str, speakers: Sequence[str] = ()) -> tuple[ActionItem, str] | None:
    """Read one action item written as text (rules in the module docstring).

    Args:
        text: ``"Owner: task"`` or a free-text sentence, e.g. ``"The industrial designer will try to
            find out which components are needed."``.
        speakers: the meeting's speaker labels (:func:`transcript_speakers`); a subject naming one of
            them becomes that label. May be empty.

    Returns:
        ``(item, source)`` with ``source`` in :data:`OWNER_SOURCES` (``item.owner`` is "" for
        ``"none"``; ``item.due`` is ""), or None when ``text`` has no task text (blank, or
        ``"Owner:"`` with nothing after it). Never raises.
    """
    body = _clean(text.replace("’ll ", " will ").replace("'ll ", " will "))
    if not body:
        return None
    owner, sep, task = body.partition(":")
    owner, task = _clean(owner), _clean(task)
    if sep and owner.casefold() in _GENERIC_LABELS:
        return read_action_item(task, speakers)
    if sep and owner and len(owner.split()) <= MAX_OWNER_WORDS and not _MARKER_WORD.search(owner):
        return (ActionItem(owner=owner, task=task), "explicit") if task else None
    read = owner_from_sentence(body, speakers)
    if read:
        return ActionItem(owner=read[0], task=read[1]), "read_from_sentence"
    return ActionItem(owner="", task=body), "none"


def owner_from_sentence(sentence: str, speakers: Sequence[str] = ()) -> tuple[str, str] | None:
    """``(owner, task)`` read off a free-text sentence (rule 2 of the module docstring), or None.

    Args:
        sentence: e.g. ``"The industrial designer will try to find out which components are needed."``
        speakers: the meeting's speaker labels (may be empty).

    Returns:
        The owner (a speaker label when one is named) and the task after the marker, or None when the
        sentence names no owner that can be read. Never raises.
    """
    body = _clean(sentence.replace("’ll ", " will ").replace("'ll ", " will "))
    match = _LEAD.match(body)
    if not match:
        return None
    who = _owner_of(match["subject"], speakers, bare_to=match["marker"] == "to")
    task = _clean(match["task"])
    return (who, task) if who and task else None


def owner_sources(task: MeetingTask) -> tuple[str, ...]:
    """How each of ``task.action_items`` got its owner (:data:`OWNER_SOURCES`), in item order.

    Read from ``task.meta[OWNER_SOURCES_KEY]`` when it holds one known source per item; otherwise
    ``"explicit"`` for an item with an owner and ``"none"`` for one without (generated tasks).
    """
    stored = task.meta.get(OWNER_SOURCES_KEY) if isinstance(task.meta, Mapping) else None
    if isinstance(stored, (list, tuple)) and len(stored) == len(task.action_items) \
            and all(s in OWNER_SOURCES for s in stored):
        return tuple(stored)
    return tuple("explicit" if a.owner.strip() else "none" for a in task.action_items)


def owner_source_counts(tasks: Iterable[MeetingTask]) -> dict[str, int]:
    """Number of ground-truth action items per owner source over ``tasks`` (every key of :data:`OWNER_SOURCES`)."""
    counts = dict.fromkeys(OWNER_SOURCES, 0)
    for task in tasks:
        for source in owner_sources(task):
            counts[source] += 1
    return counts


def owner_sources_line(tasks: Iterable[MeetingTask]) -> str | None:
    """One line saying how the ground-truth owners of ``tasks`` were obtained, or None without items.

    E.g. ``"ground-truth action items: 7 (3 explicit owner, 2 owner read from the sentence, 2 without
    owner: matched on task text alone)"``.
    """
    counts = owner_source_counts(tasks)
    total = sum(counts.values())
    if not total:
        return None
    return (f"ground-truth action items: {total} ({counts['explicit']} explicit owner, "
            f"{counts['read_from_sentence']} owner read from the sentence, {counts['none']} without owner: "
            "matched on task text alone)")
