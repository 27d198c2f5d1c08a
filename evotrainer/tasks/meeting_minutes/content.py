"""What minutes *say* once their template is removed: content units, content words and grounding.

The content metric (:mod:`~evotrainer.tasks.meeting_minutes.metric`) reads texts through this module, so that
S_val scores what a meeting's minutes say, not the Markdown template every reference shares (surface-overlap
scores such as ROUGE reward shared boilerplate, Lin 2004; why and by how much: docs/concepts.md):

- **Content units** (:func:`content_units`): one per sentence or bullet (the sentence splitter of
  :mod:`~evotrainer.tasks.meeting_minutes.text_units`), each tagged with the section it sits under
  (``topics`` / ``decisions`` / ``actions``, read by the minutes parser's header rule; ``None`` outside
  any section). Headings are not units; bullet and numbering marks, bold markers and field labels
  (``Owner:``, ``Due:``, ``(due: …)``, ``Topic:``, ``Action item:`` …) are stripped from unit text.
- **Content words** (:func:`content_words`): Porter-stemmed words of the unit minus English stop words
  and minus :data:`TEMPLATE_WORDS`, the minutes' own vocabulary (section names, field labels and words
  that say "a meeting happened": meeting, discussed, decision, owner, due, date, none, …). A unit
  without content words is dropped: ``- The meeting`` and ``- Owner: task (due: date)`` say nothing.
- **Entities** (:func:`entities`): the checkable facts of a unit: numbers and capitalised words that do
  not open the sentence (names, places, products). An entity is *grounded* when its lower-cased form
  occurs in the transcript's words (a number also when the transcript spells it: "40" is grounded by
  "forty", "14" by "fourteenth", through the ``num2words`` package); the metric gives ungrounded content nothing and charges for it
  (the idea of factual-consistency checks such as SummaC, Laban et al. 2022, and QAGS, Wang et al.
  2020, reduced to what a CPU budget allows: a lexical check of names and numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from evotrainer.tasks.meeting_minutes.matching import STOPWORDS
from evotrainer.tasks.meeting_minutes.minutes_format import header_of
from evotrainer.tasks.meeting_minutes.text_units import split_sentences, tokenize

__all__ = ["TEMPLATE_WORDS", "ContentUnit", "content_units", "content_words", "entities", "grounded",
           "transcript_words"]

_TEMPLATE_TEXT = """topic topics decision decisions decide decided decides action actions item items owner owners
    owned task tasks assignee assigned due date dates deadline deadlines none tbd tba na n/a unknown unassigned
    pending meeting meetings minute minutes summary summaries summarize summarise summarized summarised discuss
    discussed discusses discussing discussion discussions agree agreed agrees agreement agenda note notes
    attendee attendees participant participants speaker speakers transcript key point points main general
    various overview next step steps follow following followup item talk talked talking mention mentioned
    person people someone everyone responsible responsibility status update updates"""
TEMPLATE_WORDS: frozenset[str] = frozenset(
    stem for word in _TEMPLATE_TEXT.split() for stem in tokenize(word) + tokenize(word, stem=False)
)
"""Stems (and unstemmed forms) of the minutes' template vocabulary: they carry no score. Domain
words of meeting minutes, so they live in this family; a word here is never a content word."""

_BULLET = re.compile(r"^\s*(?:[-*•+‣◦–]|\d{1,3}[.)])\s+(?:\[[ xX]?\]\s*)?")
_LEAD_LABEL = re.compile(
    r"^\s*(?:\*\*|__)?(?:owner|owners|assignee|assigned to|responsible|due|deadline|date|topic|topics|decision|"
    r"decisions|action items?|actions?|tasks?|to-?do|next steps?|notes?|summary)(?:\*\*|__)?\s*[:\-–—]\s*",
    re.I,
)
_FIELD = re.compile(r"[(\[]\s*(?:due|deadline|by|owner|date)\s*:?[^()\[\]]*[)\]]|\b(?:due|deadline|owner)\s*:", re.I)
_MARKUP = re.compile(r"\*\*|__|`|#+")
_ENTITY = re.compile(r"\b(?:\d[\d.,:/%]*|[A-Z][\w'’-]*)")


@dataclass(frozen=True)
class ContentUnit:
    """One sentence or bullet of minutes with its template removed.

    Attributes:
        text: the unit's words without bullet marks, markup or field labels (what the embedder reads).
        words: its content words (stemmed, lower-cased; stop and template words removed), in order.
        section: ``"topics"``, ``"decisions"``, ``"actions"`` or None (outside any section).
        entities: its checkable names and numbers, lower-cased (see the module docstring).
    """

    text: str
    words: tuple[str, ...]
    section: str | None
    entities: tuple[str, ...]


def content_words(text: str) -> tuple[str, ...]:
    """Content words of ``text``: stemmed tokens minus stop words and :data:`TEMPLATE_WORDS` (any script).

    Returns:
        Lower-cased stems in text order (repeats kept); empty for a text of template words only.
    """
    raw = [w for w in tokenize(text, stem=False) if w not in STOPWORDS and w not in TEMPLATE_WORDS]
    return tuple(s for s in tokenize(" ".join(raw)) if s not in TEMPLATE_WORDS) if raw else ()


def entities(text: str) -> tuple[str, ...]:
    """Names and numbers of one sentence: digits, and capitalised words except the first word (unless it
    is an owner label, ``Aiko: send the report``).

    Returns:
        Lower-cased forms in text order; template and stop words (``Owner``, ``The``) excluded.
    """
    out = []
    for i, match in enumerate(_ENTITY.finditer(text)):
        word = match.group(0).rstrip(".,:/%'’-")
        low = word.casefold()
        opener = i == 0 and match.start() == _first_word_start(text) and not word[0].isdigit()
        if not word or (opener and not text[match.end():].lstrip().startswith(":")):  # "Aiko: send …" names
            continue
        if low in STOPWORDS or low in TEMPLATE_WORDS or low in _TITLES or not any(ch.isalnum() for ch in low):
            continue
        out.append(low)
    return tuple(out)


def _first_word_start(text: str) -> int:
    m = re.search(r"\w", text)
    return m.start() if m else -1


def _clean(line: str) -> str:
    text = _BULLET.sub("", line, count=1)
    text = _MARKUP.sub(" ", text)
    for _ in range(2):  # "Action item: Owner: ..." carries two labels
        text = _LEAD_LABEL.sub("", text, count=1)
    text = _FIELD.sub(" ", text)
    return " ".join(text.split()).strip(" -–—:;,")


@lru_cache(maxsize=4096)
def content_units(text: str) -> tuple[ContentUnit, ...]:
    """The content units of minutes (module docstring), in text order; never raises.

    Args:
        text: minutes or a summary (untrusted model output is fine).

    Returns:
        Units with at least one content word; empty for empty text or a bare template.
    """
    units: list[ContentUnit] = []
    section: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        is_header, kind, inline = header_of(line)
        if is_header:
            section = kind if kind is not None else section
            if not inline:
                continue
            line = inline
        for sentence in split_sentences(_clean(line)):
            body = _clean(sentence)
            words = content_words(body)
            if words:
                units.append(ContentUnit(body, words, section, entities(body)))
    return tuple(units)


_TITLES = frozenset({"dr", "mr", "mrs", "ms", "mx", "prof", "st", "sr", "jr"})
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@lru_cache(maxsize=8192)
def _number_spellings(number: str) -> tuple[tuple[str, ...], ...]:
    """Word forms of a number as a transcript may say it: cardinal and ordinal (``num2words``)."""
    from num2words import num2words

    try:
        value = float(number.replace(",", ""))
    except ValueError:
        return ()
    whole = int(value)
    forms = [num2words(whole), num2words(whole, to="ordinal")]
    if value != whole:
        forms.append(num2words(value))
    return tuple(tuple(w for w in tokenize(f, stem=False) if w != "and") for f in forms)


def grounded(entity: str, words: frozenset[str]) -> bool:
    """Whether an entity (from :func:`entities`) occurs in a transcript whose words are ``words``.

    Args:
        entity: a lower-cased name or number.
        words: :func:`transcript_words` of the transcript.

    Returns:
        True when every word of the entity is in ``words``; a number also when each of its numeric parts
        (``5:30`` has two) is written in digits or spelled out (cardinal or ordinal) in the transcript.
    """
    tokens = tokenize(entity, stem=False)
    if all(t in words for t in tokens):
        return True
    numbers = _NUMBER.findall(entity.replace(":00", ""))  # "06:00" is said "six"
    if not numbers:
        return False
    return all(any(n.replace(",", "") + end in words for end in ("", "st", "nd", "rd", "th"))  # "28th"
               or any(f and all(w in words for w in f) for f in _number_spellings(n))
               or all(t in words for t in tokenize(n, stem=False)) for n in numbers)


@lru_cache(maxsize=512)
def transcript_words(transcript: str) -> frozenset[str]:
    """Every lower-cased word of ``transcript`` (unstemmed and stemmed forms): what grounds an entity."""
    return frozenset(tokenize(transcript, stem=False)) | frozenset(tokenize(transcript))
