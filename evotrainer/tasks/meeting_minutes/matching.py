"""Word-level and embedding matching shared by the rewards and the meta metric.

*Content stems*: the text is tokenised with the Unicode-aware tokenizer of
:mod:`~evotrainer.tasks.meeting_minutes.text_units` (any script; one token per character in scripts
written without spaces, such as Chinese), the English stop words in ``_STOPWORDS`` are dropped, and
ASCII tokens longer than 3 characters are Porter-stemmed (rouge-score's stemming rule). On ASCII text
this equals the earlier rouge-score ``DefaultTokenizer`` behaviour; before, non-ASCII text had no
content stems at all, so a Chinese topic counted as covered by any output.

*Topic coverage*: a ground-truth topic is covered when at least :data:`TOPIC_COVERAGE_THRESHOLD` of
its content stems occur anywhere in the output (so a two-word topic needs both words, a three-word
topic two of three).

*Action-item matching*: a predicted item can match a ground-truth item when

1. the owner matches (:mod:`~evotrainer.tasks.meeting_minutes.owners`: first name <-> full name,
   titles dropped, role aliases such as "the PM" <-> "Project Manager", plus aliases the caller
   passes per ground-truth owner); when no owner was parsed, the owner's name or an alias appearing
   in the item's raw text counts. A ground-truth item without an owner (``owner == ""``: a free-text
   item from a public corpus whose sentence names no one, see :mod:`evotrainer.tasks.meeting_minutes.datasets.action_items`)
   passes this step for every predicted item, so it is matched on its task text alone; and
2. the task matches. Without an embedder (lexical): at least :data:`TASK_OVERLAP_THRESHOLD` of the
   ground-truth task's content stems occur in the predicted item's text; the pair's score is that
   share. With an embedder: the cosine similarity of the predicted task text (the parsed task, or
   the raw item when none) and the ground-truth task is at least :data:`PARAPHRASE_THRESHOLD`; the
   pair's score is the cosine.

Pairs are then matched one-to-one by the Hungarian method (``scipy.optimize.linear_sum_assignment``;
Kuhn 1955): the most matched pairs, and among those the largest total score. The due date is not
part of a match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from evotrainer.backends.base import Embedder
from evotrainer.tasks.meeting_minutes import owners
from evotrainer.tasks.meeting_minutes.minutes_format import ParsedItem
from evotrainer.tasks.meeting_minutes.task import ActionItem
from evotrainer.tasks.meeting_minutes.text_units import tokenize

__all__ = ["PARAPHRASE_THRESHOLD", "STOPWORDS", "TASK_OVERLAP_THRESHOLD", "TOPIC_COVERAGE_THRESHOLD",
           "OwnerAliases", "action_f1", "content_stems", "match_action_items", "owner_matches",
           "topic_coverage"]

OwnerAliases = Mapping[str, Sequence[str]]
"""Ground-truth owner (as written in ``ActionItem.owner``) -> other names of that person."""

TOPIC_COVERAGE_THRESHOLD = 0.6
"""Share of a topic's content stems that must appear in the output for the topic to count."""

TASK_OVERLAP_THRESHOLD = 0.5
"""Share of a ground-truth task's content stems that a predicted item must contain to match it."""

PARAPHRASE_THRESHOLD = 0.65
"""Cosine (all-MiniLM-L6-v2, unit vectors) at or above which a predicted task paraphrases a ground-truth one.

Measured with :class:`~evotrainer.backends.embedder.MiniLMEmbedder` on task phrases from the meeting
domain (pairs in ``tests/tasks/meeting_minutes/test_matching_aliases.py``):

- 36 paraphrase pairs (12 hand-made, 24 rewrites of generator tasks, e.g. "book a maintenance window
  with operations" / "schedule downtime with the ops team"): cosine min 0.267, median 0.73, max 0.943;
- 372 non-paraphrase pairs (12 hand-made hard negatives such as "book the community hall" / "cancel the
  community hall booking", and all 360 ordered pairs of different tasks under the same generator
  topic, i.e. what one meeting's owner could also be given): cosine min -0.10, median 0.18, max 0.709.

The two overlap, so no threshold separates them. Share of pairs matched:

======================  ===========  ===============
rule                    paraphrases  non-paraphrases
======================  ===========  ===============
lexical (>= 0.5 stems)  0.42         0.035
cosine >= 0.55          0.81         0.086
cosine >= 0.60          0.75         0.056
cosine >= 0.65          0.67         0.027
cosine >= 0.70          0.56         0.008
======================  ===========  ===============

0.65 is the threshold (on a 0.025 grid) with the most paraphrases matched while falsely matching fewer
pairs than the lexical rule does, with a margin for the sampling error of 372 pairs; a false match
credits a wrong item, which is worse for a meta metric than missing a paraphrase.
"""

_STOPWORD_TEXT = """a an the and or but of to in on at by for with from into onto about over under up down out off
    as is are was were be been being am do does did done have has had having will would shall should can
    could may might must it its this that these those there here we us our ours you your yours he him his
    she her hers they them their theirs i me my mine who whom whose which what when where why how all any
    some each every both either neither no not nor so than too very just also only then once again further
    more most other such own same s t ll re ve d m o y let lets get gets got make made need needs"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""English function words that carry no content (lower-case, unstemmed)."""
_STOPWORDS = STOPWORDS


@lru_cache(maxsize=4096)
def content_stems(text: str) -> frozenset[str]:
    """Stemmed content words of ``text`` (stop words removed, any script); empty for text without any."""
    words = [w for w in tokenize(text, stem=False) if w not in _STOPWORDS]
    return frozenset(tokenize(" ".join(words))) if words else frozenset()


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


def owner_matches(predicted: ParsedItem, owner: str, aliases: Sequence[str] = ()) -> bool:
    """Whether ``predicted`` names ``owner`` (rules in :mod:`~evotrainer.tasks.meeting_minutes.owners`).

    Args:
        predicted: a parsed item; its ``owner`` field is used, or its raw text when that is empty.
        owner: the ground-truth owner.
        aliases: other names of the ground-truth owner (roles, nicknames), e.g. ``("PM",)``.
    """
    if predicted.owner:
        return owners.owner_matches(predicted.owner, owner, aliases)
    return owners.owner_mentioned(predicted.raw, owner, aliases)


def _task_overlap(predicted: ParsedItem, truth: ActionItem) -> float:
    want = content_stems(truth.task)
    if not want:
        return 1.0
    have = content_stems(predicted.task or predicted.raw) | content_stems(predicted.raw)
    return len(want & have) / len(want)


def _aliases_for(owner: str, aliases: OwnerAliases | None) -> Sequence[str]:
    if not aliases:
        return ()
    found = aliases.get(owner)
    if found is None:
        key = " ".join(owner.split()).casefold()
        found = next((v for k, v in aliases.items() if " ".join(k.split()).casefold() == key), ())
    return (found,) if isinstance(found, str) else tuple(found)


def _cosines(embedder: Embedder, pairs: Sequence[tuple[str, str]]) -> list[float]:
    texts = sorted({t for pair in pairs for t in pair})
    index = {t: k for k, t in enumerate(texts)}
    vectors = np.asarray(embedder.encode(texts), dtype=np.float64)  # (n_texts, dim), unit rows
    out = []
    for a, b in pairs:
        value = float(vectors[index[a]] @ vectors[index[b]])
        out.append(value if math.isfinite(value) else -1.0)
    return out


def _assign(n_pred: int, n_truth: int, scored: Sequence[tuple[int, int, float]]) -> list[tuple[int, int]]:
    """Maximum-cardinality, then maximum-score one-to-one matching of the admissible pairs."""
    if not scored:
        return []
    from scipy.optimize import linear_sum_assignment

    big = min(n_pred, n_truth) + 1.0  # one more pair always outweighs any score gain (scores <= 1)
    weight = np.zeros((n_pred, n_truth))
    for i, j, score in scored:
        weight[i, j] = big + min(max(score, 0.0), 1.0)
    rows, cols = linear_sum_assignment(weight, maximize=True)
    return sorted((int(i), int(j)) for i, j in zip(rows, cols, strict=True) if weight[i, j] > 0)


def match_action_items(
    predicted: Sequence[ParsedItem],
    truth: Sequence[ActionItem],
    *,
    aliases: OwnerAliases | None = None,
    embedder: Embedder | None = None,
) -> list[tuple[int, int]]:
    """One-to-one matches between predicted and ground-truth action items (module docstring rules).

    Args:
        predicted: parsed items from model output.
        truth: ground-truth items.
        aliases: ground-truth owner -> other names of that person (e.g. ``{"Maria Lopez": ["PM"]}``).
        embedder: when given, tasks match by embedding cosine >= :data:`PARAPHRASE_THRESHOLD`;
            when None, by content-stem overlap >= :data:`TASK_OVERLAP_THRESHOLD`.

    Returns:
        ``(predicted index, truth index)`` pairs sorted by predicted index; each index at most once.
    """
    owned = [
        (i, j)
        for j, gold in enumerate(truth)
        for i, pred in enumerate(predicted)
        if not gold.owner.strip() or owner_matches(pred, gold.owner, _aliases_for(gold.owner, aliases))
    ]
    if embedder is None:
        scored = [(i, j, _task_overlap(predicted[i], truth[j])) for i, j in owned]
        scored = [x for x in scored if x[2] >= TASK_OVERLAP_THRESHOLD]
    else:
        texts = [((predicted[i].task or predicted[i].raw).strip(), truth[j].task.strip()) for i, j in owned]
        cosines = _cosines(embedder, texts) if owned else []
        scored = [(i, j, c) for (i, j), c in zip(owned, cosines, strict=True) if c >= PARAPHRASE_THRESHOLD]
    return _assign(len(predicted), len(truth), scored)


def action_f1(
    predicted: Sequence[ParsedItem],
    truth: Sequence[ActionItem],
    *,
    aliases: OwnerAliases | None = None,
    embedder: Embedder | None = None,
) -> float:
    """F1 of predicted vs ground-truth action items, in [0, 1], higher is better.

    Args:
        predicted: parsed items from model output.
        truth: ground-truth items.
        aliases: see :func:`match_action_items`.
        embedder: see :func:`match_action_items` (None: the lexical matcher).

    Returns:
        2PR / (P + R) over one-to-one matches. When ``truth`` is empty: 1.0 if nothing is
        predicted, else 0.0 (every listed item is spurious).
    """
    if not truth:
        return 1.0 if not predicted else 0.0
    if not predicted:
        return 0.0
    tp = len(match_action_items(predicted, truth, aliases=aliases, embedder=embedder))
    if tp == 0:
        return 0.0
    precision, recall = tp / len(predicted), tp / len(truth)
    return 2 * precision * recall / (precision + recall)
