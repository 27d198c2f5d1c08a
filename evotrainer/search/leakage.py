"""Training-input leakage guard: mutator text may not copy what only the training inputs say.

A prompt should learn how to do the task, not the answers of its training batch. A reflective
mutation shows the mutator a failed output on a training task (GEPA), and a small mutator readily
pastes that task's names, dates and phrases into a rule ("- Jarrah Grigoryan: test the scanner
software"). Such a rule can score well on that batch and means nothing on the next task: selection on
the training batch then rewards memorising it (the overfitting DESIGN.md measured on small validation
sets). :class:`LeakGuard` finds such copies so the loop can reject the answer and archive why.

A term is a *leak* when it occurs in the training texts (the batch's task inputs, and whatever training
output the mutator was shown) and not in the *allowed* texts (the parent prompt, the seed prompts, the
task hint, the mutation instruction, the domain vocabulary). Three kinds:

* **name**: a capitalised token of the answer (>= 2 letters before any apostrophe, so no "I'm"; no
  digit; possessive ``'s`` dropped) that the training texts use as a proper noun, i.e. in a label
  opening a line (``Priya Shah: ...`` or a bullet ``- Priya Shah: ...``) or
  capitalised *not* at a sentence start, and never in lower case (so "Budget" in a heading is not a
  name when "budget" also occurs), and whose lower-case form is no word of the allowed texts. Found
  anywhere in the answer, sentence starts included.
* **number**: a token holding a digit ("Q3", "2024", "15%", "10:30") found in the training texts and
  not in the allowed texts. A bare single digit is exempt (too common to point at one task).
* **phrase**: a run of ``phrase_words`` (default 4) or more consecutive words of the answer that occurs
  in the training texts but not in the allowed texts, and that holds a content word (>= 3 letters, not
  a stop word, see :func:`~evotrainer.search.cleaning.content_words`) the allowed texts never use.
  "list the open points for" is therefore no leak even when a training input says it; "repair the old
  scanners" is. Overlapping runs are merged and reported whole.

Everything here is plain string matching on untrusted model text; nothing is executed.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, fields

from evotrainer.search.cleaning import content_words

__all__ = ["LeakGuard", "Leaks"]

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z0-9]+)*")
_NUMBER = re.compile(r"[A-Za-z0-9]*\d[A-Za-z0-9]*(?:[.,:/-][A-Za-z0-9]+)*%?")
_SPEAKER = re.compile(  # "Priya Shah: ..." (a labelled line) or "- Priya Shah: ..." (a labelled bullet)
    r"^[ \t]*(?:(?:[-*•]|\d+[.)])[ \t]+)?((?:[A-Z][\w'’-]*[ \t]+){0,3}[A-Z][\w'’-]*)[ \t]*:", re.MULTILINE)
_SENTENCE_OPENERS = frozenset(".!?:;\"“”'‘([*•#>-–—")
_GENERAL_CAPITALISED = frozenset({"ok", "okay"})
"""Capitalised interjections that are no names (single letters such as "I" are never names)."""


@dataclass(frozen=True)
class Leaks:
    """Training-only terms found in one text; empty (falsy) when there are none.

    Attributes:
        names: leaked names, in order of first occurrence in the text.
        numbers: leaked digit-bearing tokens, same order.
        phrases: leaked word runs (merged), as written in the text.
    """

    names: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names or self.numbers or self.phrases)

    def reason(self) -> str:
        """A short archive reason, e.g. ``leak: names 'Priya', 'Jarrah'; numbers 'Q3'`` ("" when empty); at most 4
        terms are quoted per kind, the rest counted ("+2 more")."""
        parts = []
        for kind, terms in (("names", self.names), ("numbers", self.numbers), ("phrases", self.phrases)):
            if terms:
                shown = ", ".join(repr(t) for t in terms[:4])
                more = f" +{len(terms) - 4} more" if len(terms) > 4 else ""
                parts.append(f"{kind} {shown}{more}")
        return "leak: " + "; ".join(parts) if parts else ""


def _is_sentence_start(text: str, start: int) -> bool:
    """True when the token at ``start`` opens its line or follows sentence punctuation or a bullet."""
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start].rstrip()
    return not before or before[-1] in _SENTENCE_OPENERS


def _name_key(token: str) -> str:
    """A name token without a possessive ending ("Priya's" -> "Priya")."""
    return re.sub(r"['’]s$", "", token)


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text))


def _numbers(text: str) -> set[str]:
    return {m.group(0) for m in _NUMBER.finditer(text) if not (m.group(0).isdigit() and len(m.group(0)) == 1)}


def _ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _lower_words(text: str) -> list[str]:
    return [m.group(0).lower().replace("’", "'") for m in _WORD.finditer(text)]


@dataclass(frozen=True)
class _Profile:
    """What a set of texts holds, in the forms the three checks compare."""

    proper: frozenset[str]  # tokens used as proper nouns (speaker labels, capitalised mid-sentence)
    lower: frozenset[str]  # tokens seen in lower case
    vocabulary: frozenset[str]  # every word, lower-cased
    content: frozenset[str]  # content words (crude stems, see cleaning.content_words)
    numbers: frozenset[str]
    ngrams: frozenset[tuple[str, ...]]

    @classmethod
    def of(cls, texts: Iterable[str], n: int) -> _Profile:
        proper: set[str] = set()
        lower: set[str] = set()
        vocabulary: set[str] = set()
        numbers: set[str] = set()
        ngrams: set[tuple[str, ...]] = set()
        joined: list[str] = []
        for text in texts:
            if not isinstance(text, str) or not text:
                continue
            joined.append(text)
            for label in _SPEAKER.finditer(text):
                proper.update(_name_key(t) for t in _WORD.findall(label.group(1)))
            for m in _words(text):
                token = m.group(0)
                if token[0].isupper() and not _is_sentence_start(text, m.start()):
                    proper.add(_name_key(token))
                elif token[0].islower():
                    lower.add(_name_key(token).lower())
            words = _lower_words(text)
            vocabulary.update(words)
            numbers |= _numbers(text)
            ngrams |= _ngrams(words, n)
        return cls(frozenset(proper), frozenset(lower), frozenset(vocabulary),
                   frozenset(content_words(" ".join(joined))), frozenset(numbers), frozenset(ngrams))

    def __or__(self, other: _Profile) -> _Profile:
        return _Profile(*(getattr(self, f.name) | getattr(other, f.name) for f in fields(self)))


class LeakGuard:
    """Finds training-only names, numbers and phrases in mutator answers (see the module doc).

    Built once per training batch (the inputs are profiled here, not per answer); calling it is
    pure and cheap (the answer, a few hundred words of per-call allowed text).

    Args:
        training_texts: the texts the prompt must not learn by heart (the batch's task inputs), any number.
        allowed_texts: texts whose terms are never leaks (seed prompts, task hint, style instructions,
            rule phrases).
        vocabulary: extra allowed words (lower case; crude stems as in
            :func:`~evotrainer.search.cleaning.content_words` also count, e.g. ``InnerConfig.vocabulary()``).
        phrase_words: shortest leaked word run, >= 2 (words).

    Raises:
        ValueError: ``phrase_words`` < 2.
    """

    def __init__(
        self,
        training_texts: Iterable[str],
        allowed_texts: Iterable[str] = (),
        *,
        vocabulary: Collection[str] = frozenset(),
        phrase_words: int = 4,
    ) -> None:
        if phrase_words < 2:
            raise ValueError(f"LeakGuard: phrase_words must be >= 2, got {phrase_words!r}")
        self.phrase_words = phrase_words
        self._training = _Profile.of(training_texts, phrase_words)
        allowed = _Profile.of(allowed_texts, phrase_words)
        extra = frozenset(w.lower() for w in vocabulary)
        self._allowed = allowed | _Profile(frozenset(), frozenset(), extra, extra, frozenset(), frozenset())

    def __call__(self, text: str, allowed: Iterable[str] = (), shown: Iterable[str] = ()) -> Leaks:
        """The leaks of ``text``.

        Args:
            text: the (cleaned) mutator answer.
            allowed: more allowed texts for this answer (the parent prompt's sections, the instruction).
            shown: more training texts for this answer (e.g. the training output a reflection showed).

        Returns:
            The leaks found; falsy when there are none.
        """
        n = self.phrase_words
        training = self._training
        shown = [s for s in shown if isinstance(s, str) and s]
        if shown:
            training = training | _Profile.of(shown, n)
        allowed_profile = self._allowed | _Profile.of(allowed, n)
        if not isinstance(text, str) or not training.vocabulary:
            return Leaks()
        names_known = training.proper - {w for w in training.proper if w.lower() in training.lower}
        names: dict[str, None] = {}
        for m in _words(text):
            token = _name_key(m.group(0))
            if (token in names_known and len(re.split(r"['’]", token)[0]) >= 2
                    and not any(c.isdigit() for c in token)
                    and token.lower() not in allowed_profile.vocabulary
                    and token.lower() not in _GENERAL_CAPITALISED):
                names[token] = None
        numbers = {t: None for m in _NUMBER.finditer(text) if (t := m.group(0)) in training.numbers
                   and t not in allowed_profile.numbers and not (t.isdigit() and len(t) == 1)}
        return Leaks(tuple(names), tuple(numbers), self._phrases(text, training, allowed_profile))

    def _phrases(self, text: str, training: _Profile, allowed: _Profile) -> tuple[str, ...]:
        n = self.phrase_words
        matches = _words(text)
        words = [m.group(0).lower().replace("’", "'") for m in matches]
        covered = [False] * len(words)
        for i in range(len(words) - n + 1):
            gram = tuple(words[i:i + n])
            novel = content_words(" ".join(gram)) - allowed.content
            if gram in training.ngrams and gram not in allowed.ngrams and novel:
                covered[i:i + n] = [True] * n
        spans: dict[str, None] = {}
        i = 0
        while i < len(words):
            if not covered[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(words) and covered[j + 1]:
                j += 1
            spans[text[matches[i].start():matches[j].end()]] = None
            i = j + 1
        return tuple(spans)
