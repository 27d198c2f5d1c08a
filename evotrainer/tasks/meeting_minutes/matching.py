"""Word-level matching shared by the rewards and the meta metric.

*Content stems*: the text is tokenised and Porter-stemmed with rouge-score's ``DefaultTokenizer``
(lower-case ASCII alphanumerics, stems on tokens longer than 3 characters; the tokenizer ROUGE-L uses
here), after dropping the English stop words in ``_STOPWORDS``.

*Topic coverage*: a ground-truth topic is covered when at least :data:`TOPIC_COVERAGE_THRESHOLD` of
its content stems occur anywhere in the output (so a two-word topic needs both words, a three-word
topic two of three).

*Action-item matching*: a predicted item matches a ground-truth item when (1) the owner matches:
the parsed owner's words include the ground-truth owner's first name, or the parsed owner equals
the full name (case-insensitive); when no owner was parsed, the first name or full name appearing
as a word in the item's raw text counts; and (2) at least :data:`TASK_OVERLAP_THRESHOLD` of the
ground-truth task's content stems occur in the predicted item's text. Pairs are matched one-to-one,
greedily by overlap. The due date is not part of a match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from rouge_score import tokenizers

from evotrainer.tasks.base import ActionItem
from evotrainer.tasks.meeting_minutes.minutes_format import ParsedItem

__all__ = [
    "TASK_OVERLAP_THRESHOLD",
    "TOPIC_COVERAGE_THRESHOLD",
    "action_f1",
    "content_stems",
    "match_action_items",
    "owner_matches",
    "topic_coverage",
]

TOPIC_COVERAGE_THRESHOLD = 0.6
"""Share of a topic's content stems that must appear in the output for the topic to count."""

TASK_OVERLAP_THRESHOLD = 0.5
"""Share of a ground-truth task's content stems that a predicted item must contain to match it."""

_STOPWORD_TEXT = """a an the and or but of to in on at by for with from into onto about over under up down out off
    as is are was were be been being am do does did done have has had having will would shall should can
    could may might must it its this that these those there here we us our ours you your yours he him his
    she her hers they them their theirs i me my mine who whom whose which what when where why how all any
    some each every both either neither no not nor so than too very just also only then once again further
    more most other such own same s t ll re ve d m o y let lets get gets got make made need needs"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


@lru_cache(maxsize=1)
def _tokenizer() -> tokenizers.DefaultTokenizer:
    return tokenizers.DefaultTokenizer(use_stemmer=True)


@lru_cache(maxsize=4096)
def content_stems(text: str) -> frozenset[str]:
    """Stemmed content words of ``text`` (stop words removed); empty for text without any."""
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS]
    return frozenset(_tokenizer().tokenize(" ".join(words))) if words else frozenset()


def topic_coverage(topics: Sequence[str], output: str) -> float:
    """Share of ``topics`` covered by ``output``, in [0, 1]; 1.0 when there are no topics.

    Topics without content words (e.g. "Other") count as covered.
    """
    if not topics:
        return 1.0
    have = content_stems(output)
    covered = 0
    for topic in topics:
        want = content_stems(topic)
        if not want or len(want & have) / len(want) >= TOPIC_COVERAGE_THRESHOLD:
            covered += 1
    return covered / len(topics)


def _name_words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def owner_matches(predicted: ParsedItem, owner: str) -> bool:
    """Whether ``predicted`` names ``owner`` (first name or full name, case-insensitive)."""
    truth = _name_words(owner)
    if not truth:
        return False
    first, full = truth[0], " ".join(truth)
    if predicted.owner:
        words = _name_words(predicted.owner)
        return first in words or " ".join(words) == full
    raw = " ".join(_name_words(predicted.raw))
    return f" {first} " in f" {raw} " or f" {full} " in f" {raw} "


def _task_overlap(predicted: ParsedItem, truth: ActionItem) -> float:
    want = content_stems(truth.task)
    if not want:
        return 1.0
    have = content_stems(predicted.task or predicted.raw) | content_stems(predicted.raw)
    return len(want & have) / len(want)


def match_action_items(
    predicted: Sequence[ParsedItem], truth: Sequence[ActionItem]
) -> list[tuple[int, int]]:
    """One-to-one matches ``(predicted index, truth index)``, greedy by task overlap (ties: order)."""
    pairs = []
    for i, pred in enumerate(predicted):
        for j, gold in enumerate(truth):
            if not owner_matches(pred, gold.owner):
                continue
            overlap = _task_overlap(pred, gold)
            if overlap >= TASK_OVERLAP_THRESHOLD:
                pairs.append((-overlap, i, j))
    pairs.sort()
    used_p: set[int] = set()
    used_t: set[int] = set()
    out = []
    for _, i, j in pairs:
        if i not in used_p and j not in used_t:
            used_p.add(i)
            used_t.add(j)
            out.append((i, j))
    return out


def action_f1(predicted: Sequence[ParsedItem], truth: Sequence[ActionItem]) -> float:
    """F1 of predicted vs ground-truth action items, in [0, 1], higher is better.

    When ``truth`` is empty: 1.0 if nothing is predicted, else 0.0 (every listed item is spurious).
    """
    if not truth:
        return 1.0 if not predicted else 0.0
    if not predicted:
        return 0.0
    tp = len(match_action_items(predicted, truth))
    if tp == 0:
        return 0.0
    precision, recall = tp / len(predicted), tp / len(truth)
    return 2 * precision * recall / (precision + recall)
