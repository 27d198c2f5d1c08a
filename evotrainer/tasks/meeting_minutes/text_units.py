"""Text units for the meeting-minutes scores: a Unicode-aware word tokenizer and a sentence splitter.

**Tokenizer** (:class:`UnicodeTokenizer`, :func:`tokenize`). rouge-score's ``DefaultTokenizer``
lower-cases and then keeps only ``[a-z0-9]`` runs, so text in any other script silently disappears
(a Chinese reference and an identical candidate score 0.0; see huggingface/evaluate issues #108 and
#256, and the ``tokenizer`` argument of ``rouge_scorer.RougeScorer`` in google-research/rouge, which
accepts any object with ``tokenize(text) -> list[str]``). Ours:

1. NFKC-normalises (full-width Latin letters and digits become ASCII, ``ｶ`` becomes ``カ``) and
   case-folds (Unicode ``str.casefold``; equal to ``lower()`` on ASCII).
2. A *word* is a run of letters and digits of any script (Unicode categories L* and N*), with
   combining marks (M*) kept inside the word they follow (so Devanagari vowel signs and viramas do not
   split a word). Everything else (spaces, punctuation, symbols, ``_``) separates words.
3. Scripts written without spaces between words (Han ideographs, Hiragana, Katakana, Bopomofo,
   Thai, Lao, Khmer, Myanmar; code-point ranges in ``_UNSPACED_RANGES``) give one token per
   character (plus its combining marks), the character-level ROUGE used for Chinese summarisation
   (Hu et al. 2015, "LCSTS", EMNLP). Hangul is written with spaces and stays word-level.
4. With ``use_stemmer=True``, ASCII tokens longer than 3 characters are Porter-stemmed with the same
   stemmer and length rule as rouge-score's ``DefaultTokenizer``; other tokens are kept as they are.

On pure ASCII text the tokens equal ``DefaultTokenizer(use_stemmer).tokenize`` exactly (tested), so
English scores do not move.

**Sentence splitter** (:func:`split_sentences`, :func:`sentence_lines`). rouge-score's ``rougeLsum``
treats each ``"\\n"``-separated line as one sentence (``rouge_scorer.py``: "Assume sentences are
separated by newline"); its ``split_summaries=True`` alternative needs nltk's ``punkt`` data, which
is not installed and is not downloaded at run time. A prose paragraph would therefore be scored as a
single sentence. Rules:

- every non-empty line is its own unit (a Markdown heading or bullet never merges with its
  neighbours); a leading bullet, list number or heading marker is removed;
- inside a line, a unit ends after ``. ! ?`` or ``…`` (plus closing quotes or brackets) followed by
  whitespace, unless the word before the period is a known abbreviation (``Dr.``, ``e.g.``,
  ``etc.``; ``_ABBREVIATIONS``) or a single letter (an initial, ``J. Smith``);
- it also ends after ``。！？`` (CJK), ``। ॥`` (Devanagari danda) and ``؟ ۔`` (Arabic script), with
  or without a following space;
- units without any letter or digit (``---``) are dropped.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from nltk.stem import porter
from rouge_score import tokenizers

__all__ = ["UnicodeTokenizer", "is_unspaced_char", "sentence_lines", "split_sentences", "tokenize"]

_UNSPACED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3040, 0x30FF),  # Hiragana, Katakana (incl. ー)
    (0x3100, 0x312F),  # Bopomofo
    (0x31A0, 0x31BF),  # Bopomofo extended
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana (NFKC maps most of these to full width)
    (0x20000, 0x3134F),  # CJK extensions B-G, compatibility supplement
)


def is_unspaced_char(ch: str) -> bool:
    """Whether ``ch`` (one character) belongs to a script written without spaces between words."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _UNSPACED_RANGES)


_ASCII_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=1)
def _stemmer() -> porter.PorterStemmer:
    # The stemmer rouge-score's DefaultTokenizer(use_stemmer=True) builds (same class, same mode).
    return porter.PorterStemmer()


def _raw_tokens(text: str) -> list[str]:
    """Unstemmed tokens (rules 1-3 of the module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():
        return _ASCII_WORD.findall(text)
    tokens: list[str] = []
    word: list[str] = []  # the current word of a spaced script
    glue = False  # a combining mark may still join the last (unspaced) token
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] == "M":  # a combining mark stays with what it follows
            if word:
                word.append(ch)
            elif glue:
                tokens[-1] += ch
            continue
        if cat[0] in "LN" and is_unspaced_char(ch):
            if word:
                tokens.append("".join(word))
                word = []
            tokens.append(ch)
            glue = True
            continue
        glue = False
        if cat[0] in "LN":
            word.append(ch)
        elif word:
            tokens.append("".join(word))
            word = []
    if word:
        tokens.append("".join(word))
    return tokens


def _stem(token: str) -> str:
    # rouge-score stems only tokens longer than 3 characters; we also stem only ASCII ones (Porter
    # is an English stemmer).
    return _stemmer().stem(token) if len(token) > 3 and token.isascii() else token


@lru_cache(maxsize=4096)
def _tokens(text: str, stem: bool) -> tuple[str, ...]:
    raw = _raw_tokens(text)
    return tuple(_stem(t) for t in raw) if stem else tuple(raw)


def tokenize(text: str, *, stem: bool = True) -> list[str]:
    """Word tokens of ``text`` (see the module docstring).

    Args:
        text: any text (untrusted model output is fine; never raises).
        stem: Porter-stem ASCII tokens longer than 3 characters, as rouge-score does.

    Returns:
        Lower-cased tokens in text order; empty when ``text`` has no letter or digit.
    """
    return list(_tokens(text, stem))


class UnicodeTokenizer(tokenizers.Tokenizer):
    """A rouge-score tokenizer that keeps every script (pass it as ``RougeScorer(tokenizer=...)``).

    Args:
        use_stemmer: Porter-stem ASCII tokens longer than 3 characters (rouge-score's rule).
    """

    def __init__(self, use_stemmer: bool = True) -> None:
        self.use_stemmer = use_stemmer

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text``; see :func:`tokenize`."""
        return tokenize(text, stem=self.use_stemmer)


_ABBREVIATION_TEXT = """mr mrs ms mx dr prof sr jr st mt vs etc e.g i.e cf approx appx est dept div inc ltd co corp llc plc
    no nos vol fig al jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri
    sat sun a.m p.m u.s u.k e.u ph.d"""
_ABBREVIATIONS = frozenset(_ABBREVIATION_TEXT.split())
_LINE_MARKER = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|(?:[-*•+‣◦–]|\d{1,3}[.)])\s+(?:\[[ xX]?\]\s*)?)")
_LATIN_END = re.compile(r"[.!?…]+[\"'”’»)\]]*(?=\s)")
_OTHER_END = re.compile(r"[。！？｡।॥؟۔]+[」』）)\"'”’》〉]*")
_HAS_WORD = re.compile(r"[^\W_]", re.UNICODE)


def _ends(line: str) -> list[int]:
    """Offsets in ``line`` just after each sentence end."""
    cuts = set()
    for match in _LATIN_END.finditer(line):
        before = line[: match.start()].split()
        word = before[-1].lstrip("(\"'“‘[").casefold() if before else ""
        if match.group().startswith(".") and (word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())):
            continue
        cuts.add(match.end())
    cuts.update(match.end() for match in _OTHER_END.finditer(line))
    return sorted(cuts)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentence units (rules in the module docstring).

    Args:
        text: minutes or a reference: Markdown, prose or both, any script.

    Returns:
        The units in text order, stripped, none empty and none containing a newline; ``[]`` when
        the text has no letter or digit. Never raises.
    """
    units: list[str] = []
    for raw_line in text.splitlines():
        line = _LINE_MARKER.sub("", raw_line, count=1).strip()
        if not line:
            continue
        start = 0
        for cut in [*_ends(line), len(line)]:
            piece = line[start:cut].strip()
            start = cut
            if piece and _HAS_WORD.search(piece):
                units.append(piece)
    return units


def sentence_lines(text: str) -> str:
    """``text`` with one sentence unit per line: the input rouge-score's ``rougeLsum`` expects."""
    return "\n".join(split_sentences(text))
