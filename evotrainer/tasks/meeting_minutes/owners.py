"""Owner matching for action items: names, first names, titles and role aliases.

An owner phrase (``"Dr. Maria Lopez (PM)"``, ``"the chair"``, ``"Maria"``) is read as a set of *roles*
and a *name* (:func:`parse_owner`):

1. NFKC-normalised and case-folded; words are runs of letters, digits and combining marks (any
   script) and ``'``; everything else, ``-`` included, separates words; a trailing ``'s`` is dropped.
2. Role phrases are found as whole-word sequences, longest first, and mapped to canonical roles with
   :data:`ROLE_ALIASES` (``"pm"`` -> project manager or product manager, ``"chairman"`` -> chair,
   ``"minute taker"`` -> secretary, the AMI meeting-corpus roles of Carletta et al. 2005, ...).
3. The remaining words, minus titles, "the" and possessive pronouns (``_DROP_WORDS``: "the", "dr",
   "ms", "our", ...), are the name.

A predicted owner matches a ground-truth owner (:func:`owner_matches`) when some person named in the
prediction (split on "and", "&", ",", "/", ";", "+", "with", "plus") matches the ground truth or one of its aliases:

- they share a canonical role (``"the PM"`` vs ``"Project Manager"``); or
- their names match: equal; or first name <-> full name, i.e. same first word and the shorter name is a
  word prefix of the longer, where a single letter matches a word with that initial (``"Maria"``,
  ``"Maria L."`` and ``"Maria Lopez"`` match; ``"Maria Garcia"`` does not); or the surname alone or
  with an initial (``"Ms. Lopez"``, ``"M. Lopez"``; a surname of two or more letters) against a full
  name of two or more words; or a name of two or more words occurs inside the other.

Roles are only known from the text itself: ``"the PM"`` matches a ground-truth owner ``"Maria Lopez"``
only when the caller passes the alias (``aliases=("PM",)``); :class:`~evotrainer.tasks.base.ActionItem`
carries no alias field.

When the parser found no owner, :func:`owner_mentioned` searches the item's raw text for the
ground-truth owner as written, its first word, an alias given by the caller, or a role phrase of two or
more words naming one of their roles (``"project manager"``, ``"note taker"``); a one-word role alias from
the table (``"pm"``, ``"chair"``) is not enough there ("3 pm", "move the chair").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["ROLE_ALIASES", "OwnerPhrase", "owner_matches", "owner_mentioned", "parse_owner", "split_owners"]

ROLE_ALIASES: Mapping[str, tuple[str, ...]] = {
    "project manager": ("project manager", "pm", "project lead", "project leader", "project mgr"),
    "product manager": ("product manager", "pm", "product lead", "product mgr"),
    "chair": ("chair", "chairperson", "chairman", "chairwoman", "chair person", "meeting chair", "chairs"),
    "vice chair": ("vice chair", "vice-chair", "vice chairman", "vice chairperson", "deputy chair", "co-chair"),
    "secretary": ("secretary", "minute taker", "minutes taker", "minute-taker", "note taker", "note-taker",
                  "notetaker", "scribe", "recording secretary"),
    "clerk": ("clerk", "town clerk", "council clerk", "parish clerk"),
    "treasurer": ("treasurer", "finance officer", "bursar"),
    "president": ("president",),
    "vice president": ("vice president", "vp", "vice-president"),
    "chief executive": ("ceo", "chief executive", "chief executive officer", "managing director", "md"),
    "chief financial officer": ("cfo", "chief financial officer", "finance director"),
    "chief technology officer": ("cto", "chief technology officer", "chief technical officer"),
    "team lead": ("team lead", "team leader", "tech lead", "technical lead", "lead developer"),
    "human resources": ("hr", "human resources", "hr manager", "people team"),
    "facilitator": ("facilitator", "moderator", "host"),
    # The four roles of the AMI meeting corpus (Carletta et al. 2005), which QMSum draws on.
    "industrial designer": ("industrial designer", "id"),
    "user interface designer": ("user interface designer", "user interface", "ui designer", "ui",
                                "interface designer", "ux designer"),
    "marketing expert": ("marketing expert", "marketing", "marketing lead", "marketing manager"),
}
"""Canonical role -> phrases naming it (case-folded words; a phrase may name several roles: "pm")."""

_DROP_TEXT = """the our their his her my your its mr mrs ms miss mx dr doctor prof professor sir madam dame
    mister rev hon phd jr sr esq of"""
_DROP_WORDS = frozenset(_DROP_TEXT.split())
_SPLIT = re.compile(r"\s*(?:,|/|&|;|\band\b|\bwith\b|\bplus\b|\+)\s*", re.IGNORECASE)


def _words(text: str) -> list[str]:
    """Case-folded words: letters, digits and combining marks of any script; "-" splits, "'s" drops."""
    norm = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    kept = "".join(ch if unicodedata.category(ch)[0] in "LNM" or ch == "'" else " " for ch in norm)
    words = []
    for word in kept.split():
        word = word.strip("'")
        if word.endswith("'s"):
            word = word[:-2]
        if word:
            words.append(word)
    return words


def _phrase_roles() -> dict[tuple[str, ...], frozenset[str]]:
    table: dict[tuple[str, ...], frozenset[str]] = {}
    for role, phrases in ROLE_ALIASES.items():
        for phrase in phrases:
            key = tuple(_words(phrase))
            table[key] = table.get(key, frozenset()) | {role}
    return table


_PHRASE_ROLES = _phrase_roles()
_MAX_PHRASE = max(len(k) for k in _PHRASE_ROLES)


@dataclass(frozen=True)
class OwnerPhrase:
    """An owner phrase read by :func:`parse_owner`.

    Attributes:
        roles: canonical roles named (keys of :data:`ROLE_ALIASES`).
        name: the remaining name words, case-folded (may be empty).
    """

    roles: frozenset[str]
    name: tuple[str, ...]


@lru_cache(maxsize=4096)
def parse_owner(text: str) -> OwnerPhrase:
    """Roles and name of one owner phrase (rules 1-3 of the module docstring; never raises)."""
    words = _words(text)
    roles: set[str] = set()
    name: list[str] = []
    i = 0
    while i < len(words):
        for size in range(min(_MAX_PHRASE, len(words) - i), 0, -1):
            found = _PHRASE_ROLES.get(tuple(words[i : i + size]))
            if found:
                roles |= found
                i += size
                break
        else:
            if words[i] not in _DROP_WORDS:
                name.append(words[i])
            i += 1
    return OwnerPhrase(frozenset(roles), tuple(name))


def split_owners(text: str) -> list[str]:
    """The people named in one owner field: split on "and", "&", ",", "/", ";", "with", "plus"."""
    return [part for part in _SPLIT.split(text) if part.strip()]


def _word_match(a: str, b: str) -> bool:
    return a == b or (len(a) == 1 and b.startswith(a)) or (len(b) == 1 and a.startswith(b))


def _contains(longer: Sequence[str], shorter: Sequence[str]) -> bool:
    n = len(shorter)
    return any(tuple(longer[i : i + n]) == tuple(shorter) for i in range(len(longer) - n + 1))


def _names_match(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return False
    if a == b:
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if short[0] == long[0] and all(_word_match(x, y) for x, y in zip(short, long, strict=False)):
        return True  # first name <-> full name, "Maria L." <-> "Maria Lopez"
    if len(long) >= 2 and len(short[-1]) > 1 and short[-1] == long[-1] and (
        len(short) == 1 or (len(short) == 2 and _word_match(short[0], long[0]))
    ):
        return True  # "Lopez", "M. Lopez" <-> "Maria Lopez"
    return len(short) >= 2 and _contains(long, short)


def _phrase_match(pred: OwnerPhrase, truth: OwnerPhrase) -> bool:
    return bool(pred.roles & truth.roles) or _names_match(pred.name, truth.name)


def _truth_forms(owner: str, aliases: Iterable[str]) -> list[OwnerPhrase]:
    return [parse_owner(x) for x in (owner, *aliases) if x.strip()]


def owner_matches(predicted: str, owner: str, aliases: Sequence[str] = ()) -> bool:
    """Whether a parsed owner field names the ground-truth owner (rules in the module docstring).

    Args:
        predicted: the owner as written in model output, e.g. ``"the PM"``, ``"Maria and Tom"``.
        owner: the ground-truth owner, e.g. ``"Maria Lopez"`` or ``"Project Manager"``.
        aliases: other names of the ground-truth owner (roles, nicknames), e.g. ``("PM", "Mia")``.

    Returns:
        True on a match; False when either side names no one. Never raises.
    """
    forms = _truth_forms(owner, aliases)
    for person in split_owners(predicted):
        phrase = parse_owner(person)
        if any(_phrase_match(phrase, form) for form in forms):
            return True
    return False


def owner_mentioned(text: str, owner: str, aliases: Sequence[str] = ()) -> bool:
    """Whether free ``text`` (an item without a parsed owner) mentions the ground-truth owner.

    Counts: the owner as written, its first name word, any alias given by the caller, or a role
    phrase of two or more words naming a role of the owner or an alias. Word-level, case-insensitive;
    never raises.
    """
    words = _words(text)
    wanted: list[tuple[str, ...]] = []
    for raw in (owner, *aliases):
        full = tuple(_words(raw))
        if full:
            wanted.append(full)
    truth = parse_owner(owner)
    if truth.name:
        wanted.append(truth.name[:1])
        wanted.append(truth.name)
    roles = set(truth.roles)
    for alias in aliases:
        roles |= parse_owner(alias).roles
    for role in roles:
        wanted.extend(key for key in (tuple(_words(p)) for p in ROLE_ALIASES[role]) if len(key) >= 2)
    return any(_contains(words, form) for form in wanted if len(form) <= len(words))
