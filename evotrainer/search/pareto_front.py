"""Parent choice that keeps specialists: GEPA's per-item Pareto front over selection items.

GEPA (Agrawal et al. 2025, "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement Learning",
arXiv 2507.19457, Algorithm 2; its reference implementation, ``remove_dominated_programs`` and
``select_program_candidate_from_pareto_front`` in ``gepa/gepa_utils.py``) chooses a parent in four steps,
which :func:`item_wins` and :func:`choose_parent` follow over per-item S_val values (higher is better):

1. per item, its *front*: every candidate with the best score on it (ties: all of them are best);
2. the union of the fronts: the candidates best on at least one item (the others cannot be drawn);
3. dominated candidates removed: a candidate is dominated when every item it is best on also has another
   remaining candidate on its front. They are removed one at a time, the lowest mean score first, until no
   remaining one is dominated, so every item keeps at least one best candidate, and of two candidates best
   on the same items only the one with the higher mean stays;
4. a parent drawn with probability proportional to the number of items whose front still holds it.

Here candidates are first collapsed by genome: the same genome scored twice counts once (its first policy
stands for it). GEPA keeps one entry per program, so the collapse only matters to callers whose policies
can repeat a genome under a new id.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

__all__ = ["choose_parent", "item_fronts", "item_wins", "remove_dominated"]


def item_fronts(scores: Mapping[str, Sequence[float]]) -> list[frozenset[str]]:
    """Per item, the policies with the best score on it (step 1 of the module docstring).

    Args:
        scores: policy id -> per-item scores, all of one length n, same item order, finite, higher is better.

    Returns:
        n sets of policy ids; a tie on an item puts every tied policy on its front (exact equality).

    Raises:
        ValueError: the score vectors differ in length, or a score is not finite.
    """
    ids = list(scores)
    if not ids:
        return []
    vectors = {pid: [float(v) for v in scores[pid]] for pid in ids}
    lengths = sorted({len(v) for v in vectors.values()})
    if len(lengths) > 1:
        raise ValueError(f"item_fronts: score vectors differ in length: {lengths}")
    bad = next((pid for pid, v in vectors.items() if not all(math.isfinite(x) for x in v)), None)
    if bad is not None:
        raise ValueError(f"item_fronts: policy {bad!r} has a non-finite score")
    fronts = []
    for k in range(lengths[0]):
        best = max(vectors[pid][k] for pid in ids)
        fronts.append(frozenset(pid for pid in ids if vectors[pid][k] == best))
    return fronts


def remove_dominated(fronts: Sequence[frozenset[str]], order: Sequence[str]) -> list[str]:
    """The candidates left after removing dominated ones (step 3 of the module docstring).

    Args:
        fronts: per item, the ids best on it (:func:`item_fronts`).
        order: every id on any front, in removal priority: the first dominated one in this order is
            removed first (GEPA: ascending mean score).

    Returns:
        The ids that stay, in ``order``; every non-empty front keeps at least one of them.

    Raises:
        ValueError: an id on a front is missing from ``order``.
    """
    on: dict[str, list[int]] = {pid: [] for pid in order}
    for k, front in enumerate(fronts):
        for pid in front:
            if pid not in on:
                raise ValueError(f"remove_dominated: {pid!r} is on a front but not in order")
            on[pid].append(k)
    alive = [pid for pid in order if on[pid]]
    holders = [len(front) for front in fronts]  # remaining candidates on each item's front
    removed = True
    while removed:
        removed = False
        for pid in alive:  # every item it is best on also has another remaining best candidate
            if all(holders[k] >= 2 for k in on[pid]):
                alive.remove(pid)
                for k in on[pid]:
                    holders[k] -= 1
                removed = True
                break
    return alive


def item_wins(scores: Mapping[str, Sequence[float]], genomes: Mapping[str, str] | None = None) -> dict[str, int]:
    """The parent weights: items each non-dominated policy is best on (steps 1-3 of the module docstring).

    Args:
        scores: policy id -> per-item scores, all of one length n, same item order, finite, higher is better.
        genomes: policy id -> genome key; policies sharing a genome count once, as the first of them in
            ``scores`` (the later ones are left out). None: every id is its own genome.

    Returns:
        policy id -> number of items whose front holds it after the dominated policies are removed (every
        value >= 1; policies best on no item, dominated or collapsed into an earlier one are left out),
        in the order of ``scores``. Dominated policies are removed lowest mean first; among equal means the
        later policy in ``scores`` goes first (the earlier one stays).

    Raises:
        ValueError: the score vectors differ in length, a score is not finite, or ``genomes`` lacks an id.
    """
    kept: dict[str, Sequence[float]] = {}
    seen: set[str] = set()
    for pid, vec in scores.items():
        if genomes is not None and pid not in genomes:
            raise ValueError(f"item_wins: no genome given for policy {pid!r}")
        key = pid if genomes is None else genomes[pid]
        if key not in seen:
            seen.add(key)
            kept[pid] = vec
    fronts = item_fronts(kept)
    position = {pid: i for i, pid in enumerate(kept)}
    mean = {pid: math.fsum(float(v) for v in vec) / len(vec) if len(vec) else 0.0 for pid, vec in kept.items()}
    order = sorted(kept, key=lambda pid: (mean[pid], -position[pid]))
    stay = set(remove_dominated(fronts, order))
    counts = {pid: sum(1 for front in fronts if pid in front) for pid in kept if pid in stay}
    return {pid: n for pid, n in counts.items() if n > 0}


def choose_parent(wins: Mapping[str, int], rng: random.Random) -> str | None:
    """A policy id drawn with probability ``wins[id] / sum(wins)`` (step 4; None for an empty front).

    Args:
        wins: :func:`item_wins`' result (non-positive counts are never drawn).
        rng: the caller's seeded generator (one draw; the same generator state gives the same id).
    """
    ids = [pid for pid, w in wins.items() if w > 0]
    if not ids:
        return None
    return rng.choices(ids, weights=[wins[pid] for pid in ids], k=1)[0]
