"""The phrase bank and embedding-guided substitution of one instruction sentence.

Substitution replaces one sentence of a policy by a sentence seen elsewhere in the run (another policy,
an earlier generation, the default rule phrases) whose embedding cosine to it lies inside a band: above
the band's low end the meaning is kept, below its high end the edit is not a no-op or a mere rewording.
This is the "embedding-guided substitution of instruction fragments" of DESIGN.md; it needs no language
model, so on the CPU default it carries the search together with structural edits and crossover (the
small mutator model often writes off-topic text).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence

import numpy as np

from evotrainer.backends.base import Embedder
from evotrainer.errors import ConfigError
from evotrainer.genome import Policy, instruction_sections
from evotrainer.search.cleaning import (
    bullet_prefix,
    join_sentences,
    normalize_sentence,
    split_sentences,
    word_count,
)

__all__ = ["NEGATION_CUES", "PhraseBank", "mut_phrase_substitution", "negation_count", "negation_flipped"]

NEGATION_CUES: frozenset[str] = frozenset({
    "not", "no", "never", "cannot", "without", "neither", "nor", "except", "nothing", "nobody", "nowhere",
    "avoid", "avoids", "avoiding", "omit", "omits", "omitting", "exclude", "excludes", "excluding",
    "skip", "skips", "skipping", "refrain", "refrains", "unless",
})
"""Words that negate (or exclude) what follows them; any word ending in ``n't`` counts too, and so does
"leave/leaves/left out". "none" is left out on purpose: in layout rules it is mostly the literal
placeholder of an empty section ("write '- None'")."""

_NOT_NEGATING = re.compile(r"\b(?:no|not) (?:more|fewer|less|later|earlier) than\b|\bnot only\b")
_LEAVE_OUT = re.compile(r"\b(?:leave|leaves|leaving|left) (?:\w+ ){0,3}?out\b")


def negation_count(sentence: str) -> int:
    """Number of negation cues in ``sentence`` (:data:`NEGATION_CUES`, ``n't`` endings, "leave ... out").

    Bounds that read like negations but state a limit ("no more than 7", "not later than Friday") and
    "not only" do not count. Case and curly apostrophes are ignored.
    """
    text = sentence.lower().replace("’", "'")
    text = _NOT_NEGATING.sub(" ", text)
    words = re.findall(r"[a-z]+(?:'[a-z]+)?", text)
    return (sum(w in NEGATION_CUES or w.endswith("n't") for w in words)
            + len(_LEAVE_OUT.findall(text)))


def negation_flipped(a: str, b: str) -> bool:
    """True when ``b`` adds or drops a negation relative to ``a`` (their negation counts differ).

    Sentence embeddings barely see negation (Ettinger 2020, "What BERT is not", TACL 8): a rule and its
    negation share almost every word. Measured with all-MiniLM-L6-v2: "List attendees." / "Do not list
    attendees." 0.70, and two more rules of the default family and their negations 0.85 and 0.70, all inside
    the default substitution band (0.55-0.92), so without this check a phrase substitution would turn a
    rule into its opposite and call it a paraphrase. Comparing counts rather than mere presence
    also catches "Do not guess; do not add names" -> "Do not guess; add names". Conservative by design:
    "Never guess, never add opinions" vs "Do not guess or add opinions" (2 vs 1) counts as flipped, which
    only costs the substitution one candidate.

    Args:
        a: the original sentence.
        b: the candidate replacement.
    """
    return negation_count(a) != negation_count(b)


class PhraseBank:
    """Sentences seen in the run's prompts, with their embeddings; append-only and de-duplicated.

    Sentences are keyed by :func:`~evotrainer.search.cleaning.normalize_sentence` (bullet marker,
    case and spacing ignored) and stored without their bullet marker. Each remembers the section
    names it was seen in. Sentences shorter than ``min_words`` or longer than ``max_words`` words are
    not banked (fragments and run-ons make poor substitutes).

    Args:
        embedder: sentence embedder (rows L2-normalised, so a dot product is a cosine).
        min_words: shortest banked sentence (words), >= 1.
        max_words: longest banked sentence (words), >= ``min_words``.

    Raises:
        ConfigError: bad word limits.
    """

    def __init__(self, embedder: Embedder, *, min_words: int = 3, max_words: int = 30) -> None:
        if not 1 <= min_words <= max_words:
            raise ConfigError(f"phrase bank: expected 1 <= min_words <= max_words, got {min_words}, {max_words}")
        self.embedder = embedder
        self.min_words = min_words
        self.max_words = max_words
        self._sentences: list[str] = []
        self._keys: dict[str, int] = {}
        self._sections: list[set[str]] = []
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._memo: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._sentences)

    @property
    def sentences(self) -> tuple[str, ...]:
        """Banked sentences in order of arrival."""
        return tuple(self._sentences)

    @property
    def matrix(self) -> np.ndarray:
        """Embeddings of :attr:`sentences`, shape (len(self), dim), rows L2-normalised (read-only view)."""
        view = self._matrix.view()
        view.flags.writeable = False
        return view

    def sections_of(self, index: int) -> frozenset[str]:
        """Section names sentence ``index`` was seen in."""
        return frozenset(self._sections[index])

    def add(self, sentences: Iterable[tuple[str, str]]) -> int:
        """Bank ``(section, sentence)`` pairs; returns how many new sentences were added.

        New sentences are embedded in one ``embedder.encode`` call. A sentence already banked only
        gains the section name.
        """
        fresh: list[str] = []
        fresh_sections: list[set[str]] = []
        pending: dict[str, int] = {}
        for section, sentence in sentences:
            text = _strip_bullet(sentence)
            key = normalize_sentence(text)
            if not key or not self.min_words <= word_count(text) <= self.max_words:
                continue
            if key in self._keys:
                self._sections[self._keys[key]].add(section)
            elif key in pending:
                fresh_sections[pending[key]].add(section)
            else:
                pending[key] = len(fresh)
                fresh.append(text)
                fresh_sections.append({section})
        if not fresh:
            return 0
        vectors = self.vectors(fresh)
        for key, text, names in zip(pending, fresh, fresh_sections, strict=True):
            self._keys[key] = len(self._sentences)
            self._sentences.append(text)
            self._sections.append(names)
        self._matrix = vectors if self._matrix.size == 0 else np.vstack([self._matrix, vectors])
        return len(fresh)

    def add_policies(self, policies: Iterable[Policy]) -> int:
        """Bank every sentence of every section of ``policies``; returns how many were new."""
        return self.add((name, s) for p in policies for name, text in instruction_sections(p.sections)
                        for s in split_sentences(text))

    def vectors(self, sentences: Sequence[str]) -> np.ndarray:
        """Embeddings of ``sentences`` (bullet markers ignored), shape (len(sentences), dim), float32.

        Banked or earlier-seen sentences come from a memo; the rest go to the embedder in one call and
        are memoised (the memo is a cache: it never adds sentences to the bank).
        """
        keys = [normalize_sentence(_strip_bullet(s)) for s in sentences]
        missing = list(dict.fromkeys(k for k in keys if k not in self._memo))
        if missing:
            texts = {normalize_sentence(_strip_bullet(s)): _strip_bullet(s) for s in sentences}
            encoded = np.asarray(self.embedder.encode([texts[k] for k in missing]), dtype=np.float32)
            if encoded.ndim != 2 or encoded.shape[0] != len(missing):
                raise ValueError(f"embedder returned shape {encoded.shape} for {len(missing)} sentences")
            norms = np.linalg.norm(encoded, axis=1, keepdims=True)
            encoded = encoded / np.where(norms > 0, norms, 1.0)
            self._memo.update(zip(missing, encoded, strict=True))
        if not keys:
            return np.zeros((0, self._dim()), dtype=np.float32)
        return np.stack([self._memo[k] for k in keys]).astype(np.float32)

    def _dim(self) -> int:
        if self._matrix.size:
            return int(self._matrix.shape[1])
        return int(getattr(self.embedder, "dim", 0))


def _strip_bullet(sentence: str) -> str:
    return sentence.strip()[len(bullet_prefix(sentence.strip())):].strip()


def _bullet_of(sentence: str) -> str:
    return bullet_prefix(sentence.strip())


def mut_phrase_substitution(
    parent: Policy,
    rng: random.Random,
    generation: int,
    *,
    bank: PhraseBank,
    band: tuple[float, float] = (0.55, 0.92),
    max_words: int = 160,
    same_section: bool = True,
    top_k: int = 4,
) -> Policy:
    """Replace one sentence of ``parent`` by a banked sentence of near meaning (no language model).

    Sentences of the parent's sections are tried in random order (markdown headings and sentences
    shorter than the bank's ``min_words`` are layout, never replaced); for each, the candidates
    are banked sentences whose cosine to it is inside ``band`` (inclusive), that are not already in that
    section, that were seen in a section of the same name (when ``same_section``), that keep the
    prompt within ``max_words``, and that keep its negation polarity (:func:`negation_flipped`: "Do not
    list attendees." never replaces "List attendees."). The replacement is drawn uniformly from the
    ``top_k`` most similar candidates of the first sentence that has any. A bullet marker on the replaced sentence is kept.

    Args:
        parent: the policy to mutate (not modified; the bank is only read, apart from its embedding memo).
        rng: random source.
        generation: generation number stamped on the child.
        bank: the run's phrase bank.
        band: accepted ``(low, high)`` cosine to the replaced sentence, -1 <= low <= high <= 1. The
            default 0.55-0.92 was read off all-MiniLM-L6-v2 on the default family's rules: paraphrases of
            one rule score ~0.7-0.9, a different rule of the same domain ~0.3-0.5, exact copies 1.0.
        max_words: word budget of the whole prompt.
        same_section: only use sentences seen in a section of the same name.
        top_k: how many of the nearest candidates the replacement is drawn from, >= 1.

    Returns:
        The child, operator ``mut_phrase_substitution/<section>``, or a copy of the parent's genome with
        operator ``mut_phrase_substitution/none`` when no sentence has a candidate (the loop rejects it
        as a duplicate and falls back to a structural edit).
    """
    none = parent.child(parent.sections, operator="mut_phrase_substitution/none", generation=generation)
    if len(bank) == 0:
        return none
    total = sum(word_count(text) for _, text in parent.sections)
    slots = [(name, i) for name, text in instruction_sections(parent.sections) for i in range(len(split_sentences(text)))]
    rng.shuffle(slots)
    texts = dict(parent.sections)
    matrix = bank.matrix
    for name, i in slots:
        sentences = split_sentences(texts[name])
        old = sentences[i]
        if old.lstrip().startswith("#") or word_count(_strip_bullet(old)) < bank.min_words:
            continue  # headings and fragments are layout, not instructions
        present = {normalize_sentence(_strip_bullet(s)) for s in sentences}
        sims = matrix @ bank.vectors([old])[0]  # (len(bank),)
        budget = max_words - total + word_count(_strip_bullet(old))
        order = np.argsort(-sims, kind="stable")
        candidates = []
        for j in order:
            sim = float(sims[j])
            if sim > band[1]:
                continue
            if sim < band[0]:
                break
            text = bank.sentences[j]
            if normalize_sentence(text) in present or word_count(text) > budget:
                continue
            if same_section and name not in bank.sections_of(int(j)):
                continue
            if negation_flipped(old, text):  # embeddings barely see "not": a flip is no paraphrase
                continue
            candidates.append(text)
            if len(candidates) == top_k:
                break
        if not candidates:
            continue
        sentences[i] = _bullet_of(old) + rng.choice(candidates)
        new_text = join_sentences(sentences, texts[name])
        sections = [(n, new_text if n == name else t) for n, t in parent.sections]
        return parent.child(sections, operator=f"mut_phrase_substitution/{name}", generation=generation)
    return none
