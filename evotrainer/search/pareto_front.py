"""Parent choice that keeps specialists: the per-item Pareto front over selection items.

GEPA (Agrawal et al. 2025, "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning", Algorithm 2) keeps, for every validation item, the candidates that score best on it; a
candidate that wins some items stays a possible parent although its mean is lower, and parents are
drawn with probability proportional to the number of items they win, after removing candidates
dominated by another one. :func:`item_wins` and :func:`choose_parent` do the same over the policies
scored on the whole selection set (per-item S_val, higher is better).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["choose_parent", "item_wins"]


def item_wins(scores: Mapping[str, Sequence[float]]) -> dict[str, int]:
    """Items won by each policy on the Pareto front (policies winning nothing are left out).

    Args:
        scores: policy id -> per-item scores, all of one length n, same item order.

    Returns:
        policy id -> items on which it scores the maximum (ties: every holder wins the item), for the
        policies that win at least one item and are not dominated (another policy at least as good on
        every item and better on one). Insertion order follows ``scores``.

    Raises:
        ValueError: the score vectors differ in length.
    """
    ids = list(scores)
    if not ids:
        return {}
    lengths = sorted({len(scores[i]) for i in ids})
    if len(lengths) > 1:
        raise ValueError(f"item_wins: score vectors differ in length: {lengths}")
    mat = np.asarray([[float(v) for v in scores[i]] for i in ids], dtype=float).reshape(len(ids), lengths[0])
    if mat.shape[1] == 0:
        return {}
    best = mat.max(axis=0)  # (n,)
    wins = (mat >= best).sum(axis=1)  # (policies,)
    out: dict[str, int] = {}
    for k, pid in enumerate(ids):
        if wins[k] == 0:
            continue
        others = np.delete(mat, k, axis=0)
        dominated = bool(((others >= mat[k]).all(axis=1) & (others > mat[k]).any(axis=1)).any())
        if not dominated:
            out[pid] = int(wins[k])
    return out


def choose_parent(wins: Mapping[str, int], rng: random.Random) -> str | None:
    """A policy id drawn with probability proportional to its item wins (None for an empty front).

    Args:
        wins: :func:`item_wins`' result (positive counts).
        rng: the caller's seeded generator (one draw).
    """
    ids = [pid for pid, w in wins.items() if w > 0]
    if not ids:
        return None
    return rng.choices(ids, weights=[wins[pid] for pid in ids], k=1)[0]
