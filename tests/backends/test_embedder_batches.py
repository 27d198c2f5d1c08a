"""Embeddings that depend on what shares an ``encode`` call (issue 26, line 9; sentence-transformers#2312, #3197).

sentence-transformers pads a batch to its longest text, and the padding moves the last bits of the other
texts' vectors. Two decisions read cosines against a threshold: a child is a near-duplicate of its parent
at ``inner.near_duplicate_cosine`` (0.95, :func:`evotrainer.search.diversity.is_near_duplicate`), and a
predicted action item paraphrases a reference one at ``PARAPHRASE_THRESHOLD`` (0.65,
:mod:`evotrainer.tasks.meeting_minutes.matching`). Both read vectors from memos filled by whichever call saw a
text first, so a decision must not depend on the company a text had in that call.

200 labelled pairs: at 0.65, the 36 measured paraphrases, the 12 hard negatives and 52 same-topic
negatives behind ``PARAPHRASE_THRESHOLD``; at 0.95, 50 seed-population rule sentences each paired with a
light rewording (near-duplicates) and 50 pairs of different rule sentences of the same section (not).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from evotrainer.backends.embedder import shared_embedder
from evotrainer.config import PACKAGE_DATA
from evotrainer.genome import load_population
from evotrainer.search.cleaning import split_sentences
from evotrainer.search.inner_config import InnerConfig
from evotrainer.tasks.meeting_minutes.matching import PARAPHRASE_THRESHOLD
from tests.tasks.meeting_minutes.test_matching_aliases import (
    HARD_NEGATIVES,
    PARAPHRASES,
    SAME_TOPIC_NEGATIVES,
)

_LONG = " ".join(
    ["The committee went through the budget line by line, then the hiring plan, then the timeline."] * 3
)  # ~60 word pieces, longer than any pair's text: pads every text that shares its batch


def _reworded(sentence: str, k: int) -> str:
    """A light rewording of a rule sentence, one of four kinds by ``k``."""
    kind = k % 4
    if kind == 0:
        return sentence.rstrip(".") if sentence.endswith(".") else sentence + "."
    if kind == 1:
        return "Please " + sentence[:1].lower() + sentence[1:]
    if kind == 2 and " the " in sentence:
        return sentence.replace(" the ", " each ", 1)
    first, _, rest = sentence.partition(" ")
    return f"{first} always {rest}" if rest else sentence + "!"


def _rule_pairs() -> list[tuple[str, str, bool]]:
    """100 labelled (a, b, near-duplicate) pairs of seed-population rule sentences."""
    population = load_population(str(PACKAGE_DATA / "populations" / "meeting_minutes.yaml"))
    by_section: dict[str, list[str]] = {}
    for policy in population:
        for name, text in policy.sections:
            for s in split_sentences(text):
                if len(s.split()) >= 4 and s not in by_section.setdefault(name, []):
                    by_section[name].append(s)
    sentences = [s for name in sorted(by_section) for s in by_section[name]]
    assert len(sentences) >= 50, len(sentences)
    rng = random.Random(0)
    same = [(s, _reworded(s, k), True) for k, s in enumerate(rng.sample(sentences, 50))]
    different = []
    for name in sorted(by_section):
        group = by_section[name]
        different += [(a, b, False) for a, b in zip(group, group[1:], strict=False)]
    return same + rng.sample(different, 50)


def _task_pairs() -> list[tuple[str, str, bool]]:
    """100 labelled (a, b, paraphrase) pairs of action-item tasks."""
    negatives = HARD_NEGATIVES + SAME_TOPIC_NEGATIVES[::7][:52]
    return [(a, b, True) for a, b in PARAPHRASES] + [(a, b, False) for a, b in negatives]


def _cosines(vectors: dict[str, np.ndarray], pairs: list[tuple[str, str, bool]]) -> np.ndarray:
    return np.array([float(vectors[a].astype(np.float64) @ vectors[b].astype(np.float64)) for a, b, _ in pairs])


@pytest.mark.real_model
def test_near_duplicate_and_paraphrase_decisions_do_not_depend_on_the_encode_batch() -> None:
    rules, tasks = _rule_pairs(), _task_pairs()
    assert len(rules) == 100 and len(tasks) == 100
    texts = sorted({t for a, b, _ in rules + tasks for t in (a, b)})
    embedder = shared_embedder()
    alone = {t: embedder.encode([t])[0] for t in texts}
    shuffled = random.Random(1).sample(texts, len(texts))
    one_call = dict(zip(shuffled, embedder.encode(shuffled), strict=True))
    padded: dict[str, np.ndarray] = {}
    for start in range(0, len(texts), 15):  # 15 texts and a long one per call: padded batches
        chunk = texts[start : start + 15]
        padded.update(zip(chunk, embedder.encode([*chunk, _LONG])[:-1], strict=True))

    for pairs, threshold in ((rules, InnerConfig().near_duplicate_cosine), (tasks, PARAPHRASE_THRESHOLD)):
        reference = _cosines(alone, pairs) >= threshold
        for name, vectors in (("one call", one_call), ("padded batches", padded)):
            flipped = [(a, b) for (a, b, _), r, d in zip(pairs, reference, _cosines(vectors, pairs) >= threshold,
                                                       strict=True) if r != d]
            assert not flipped, f"{name}: decisions at {threshold} flipped for {flipped}"
    # the reason none can flip, at any threshold: each text's vector is the one it gets alone, bit for bit
    for name, vectors in (("one call", one_call), ("padded batches", padded)):
        worst = max(float(np.abs(vectors[t] - alone[t]).max()) for t in texts)
        assert worst == 0.0, f"{name}: a vector moved by {worst:.2g} with the texts that shared its call"
