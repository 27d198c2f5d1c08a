"""Near-duplicate detection and population diversity from sentence embeddings.

Both work on *sentences*, never on whole prompts: all-MiniLM-L6-v2 truncates its input at 256 word
pieces (model card), so two long prompts that differ only near their end would embed identically. Here a
pair of policies is compared on its differing sentences only, and a policy's vector is the mean of its
sentence vectors.

``vectors`` arguments are callables ``(sentences) -> array (n, dim)`` with L2-normalised rows (e.g.
:meth:`evotrainer.search.phrases.PhraseBank.vectors`, which memoises).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from evotrainer.genome import Policy
from evotrainer.search.cleaning import normalize_sentence, split_sentences

__all__ = ["Vectors", "differing_sentences", "enforce_min_diversity", "is_near_duplicate", "policy_vectors",
           "population_diversity", "section_cosine"]

Vectors = Callable[[Sequence[str]], np.ndarray]


def differing_sentences(a: Policy, b: Policy) -> list[tuple[str, str]] | None:
    """The aligned sentence pairs in which two policies differ, or None when they differ structurally.

    Structural differences (None): other section names or order, another number of sentences in some
    section, other decoding genes, another adapter. Otherwise sentences are aligned by position within
    each section and the pairs that differ after :func:`~evotrainer.search.cleaning.normalize_sentence`
    are returned (``[]``: the same prompt up to bullets, case and spacing).
    """
    if a.adapter != b.adapter or dict(a.decoding) != dict(b.decoding):
        return None
    if [n for n, _ in a.sections] != [n for n, _ in b.sections]:
        return None
    pairs: list[tuple[str, str]] = []
    for (_, ta), (_, tb) in zip(a.sections, b.sections, strict=True):
        sa, sb = split_sentences(ta), split_sentences(tb)
        if len(sa) != len(sb):
            return None
        pairs += [(x, y) for x, y in zip(sa, sb, strict=True) if normalize_sentence(x) != normalize_sentence(y)]
    return pairs


def is_near_duplicate(a: Policy, b: Policy, vectors: Vectors, threshold: float) -> bool:
    """True when ``a`` and ``b`` say the same thing.

    They are near-duplicates when :func:`differing_sentences` aligns them and every differing pair has
    cosine >= ``threshold`` (so a reworded sentence counts, a changed, added, dropped or moved one does
    not; two long prompts differing only in their last sentence are compared on that sentence alone).

    Args:
        a: a policy.
        b: another policy.
        vectors: sentence embedder (rows L2-normalised).
        threshold: cosine in [-1, 1] at or above which two sentences mean the same; > 1 disables.
    """
    pairs = differing_sentences(a, b)
    if pairs is None:
        return False
    if not pairs:
        return True
    if threshold > 1.0:
        return False
    va = vectors([x for x, _ in pairs])
    vb = vectors([y for _, y in pairs])
    return bool(np.all(np.einsum("ij,ij->i", va, vb) >= threshold))


def policy_vectors(policies: Sequence[Policy], vectors: Vectors) -> np.ndarray:
    """One vector per policy: the L2-normalised mean of its sentence vectors; shape (n, dim).

    A policy without sentences gets a zero row. Decoding genes and adapters do not enter it.
    """
    rows: list[np.ndarray | None] = []
    for policy in policies:
        sentences = [s for _, text in policy.sections for s in split_sentences(text)]
        if not sentences:
            rows.append(None)
            continue
        mean = vectors(sentences).mean(axis=0)  # (dim,)
        norm = float(np.linalg.norm(mean))
        rows.append(mean / norm if norm > 0 else mean)
    dim = next((len(r) for r in rows if r is not None), 0)
    out = np.zeros((len(rows), dim), dtype=np.float32)  # (n, dim)
    for i, row in enumerate(rows):
        if row is not None:
            out[i] = row
    return out


def population_diversity(policies: Sequence[Policy], vectors: Vectors) -> float:
    """Mean pairwise cosine distance ``1 - cos`` of the policies' vectors (:func:`policy_vectors`).

    Returns:
        A value in [0, 2], higher is more diverse; 0.0 for fewer than two policies. Identical genomes
        count as distance 0.
    """
    if len(policies) < 2:
        return 0.0
    return _mean_distance(policy_vectors(policies, vectors))


def _mean_distance(mat: np.ndarray) -> float:
    n = mat.shape[0]
    sims = mat @ mat.T  # (n, n)
    return float((n * n - sims.sum() - (n - np.trace(sims))) / (n * (n - 1))) if n >= 2 else 0.0


def enforce_min_diversity(
    population: Sequence[Policy],
    pool: Sequence[Policy],
    fitness: Mapping[str, float],
    vectors: Vectors,
    min_diversity: float,
    *,
    protect: int = 1,
) -> tuple[list[Policy], int]:
    """Swap redundant members for distinct ones until the population's diversity reaches ``min_diversity``.

    Greedy: while :func:`population_diversity` < ``min_diversity``, the member most similar to the rest
    (highest mean cosine; the lower fitness breaks ties), never one of the ``protect`` fittest, is
    replaced by the ``pool`` policy that raises the diversity most; it stops when no swap raises it.
    At most ``len(population)`` swaps. Deterministic (no rng).

    Args:
        population: the new population, each with an entry in ``fitness``.
        pool: other scored policies that may come in (e.g. the previous population, rejected children);
            those without a fitness or whose genome is already present are skipped.
        fitness: id -> fitness, higher is better.
        vectors: sentence embedder.
        min_diversity: target mean pairwise cosine distance, in [0, 2]; 0 disables.
        protect: how many of the fittest members are never replaced, >= 0.

    Returns:
        The population (same size; a swapped-in policy takes the slot of the one it replaces) and the
        number of swaps.
    """
    members = list(population)
    if min_diversity <= 0 or len(members) < 2:
        return members, 0
    genomes = {p.genome_hash for p in members}
    candidates = list({p.genome_hash: p for p in pool if p.id in fitness and p.genome_hash not in genomes}.values())
    if not candidates:
        return members, 0
    vec_m = policy_vectors(members, vectors)
    vec_c = policy_vectors(candidates, vectors)
    protected = {p.id for p in sorted(members, key=lambda p: -fitness[p.id])[:protect]}
    swaps = 0
    current = _mean_distance(vec_m)
    for _ in range(len(members)):
        if current >= min_diversity or not candidates:
            break
        sims = vec_m @ vec_m.T
        redundancy = (sims.sum(axis=1) - np.diag(sims)) / (len(members) - 1)
        order = sorted((i for i, p in enumerate(members) if p.id not in protected),
                       key=lambda i: (-redundancy[i], fitness[members[i].id]))
        if not order:
            break
        out = order[0]
        best, best_value = None, current
        for j in range(len(candidates)):
            trial = vec_m.copy()
            trial[out] = vec_c[j]
            value = _mean_distance(trial)
            if value > best_value + 1e-9:
                best, best_value = j, value
        if best is None:
            break
        members[out] = candidates.pop(best)
        vec_m[out] = vec_c[best]
        vec_c = np.delete(vec_c, best, axis=0)
        current = best_value
        swaps += 1
    return members, swaps


def section_cosine(vectors: Vectors) -> Callable[[str, str], float]:
    """``(text_a, text_b) -> cosine`` of the two texts' mean sentence embeddings (0.0 if either is empty).

    Used by crossover to pair sections whose names differ (e.g. ``vectors = PhraseBank.vectors``).
    """

    def similarity(a: str, b: str) -> float:
        va, vb = vectors(split_sentences(a)), vectors(split_sentences(b))
        if not len(va) or not len(vb):
            return 0.0
        ma, mb = va.mean(axis=0), vb.mean(axis=0)
        denom = float(np.linalg.norm(ma) * np.linalg.norm(mb))
        return float(ma @ mb / denom) if denom > 0 else 0.0

    return similarity
