"""The self-evolution task pool: set-up tasks plus each round's new ones, near-duplicates dropped, size capped.

Two tasks are near-duplicates when the cosine similarity of the MiniLM embeddings of their inputs
(``Task.text``) is at least ``cosine`` (default 0.85). Measured on 10 tasks of the default family
generated at its default difficulty: the closest pair of distinct tasks has cosine 0.66 (median nearest
neighbour 0.43), so 0.85 drops only re-generated or lightly varied tasks. The cap keeps every set-up task (round 0:
the seed tasks and the real items drawn with them) and removes the oldest later tasks first (the newest were
generated at the current curriculum difficulty).

New tasks are generated, or drawn from real training items (``task.train_path``, items with references of other
groups than the meta-validation and transfer items): :func:`real_count` says how many of ``n`` are real for a
share, :func:`draw_real` draws them, each item at most once per run. With ``selfevolve.dev_source=real``,
:func:`split_dev` first holds whole groups of them out as the dev set.

The dev set and the meta-validation set never enter the pool: :func:`check_disjoint` compares
content hashes (:func:`evotrainer.tasks.base.content_hash`) and raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evotrainer.errors import DataError
from evotrainer.tasks.base import Task

__all__ = ["POOL_SOURCES", "PoolTask", "PoolUpdate", "add_to_pool", "check_disjoint", "draw_real", "real_count",
           "split_dev"]

POOL_SOURCES: tuple[str, ...] = ("seed", "real", "generated")
"""Values of ``PoolTask.source``: generated at set-up, a real training item, generated in a round."""

Embed = Callable[[Sequence[str]], np.ndarray]
"""Texts -> shape (n, dim) float array with L2-normalised rows (``Embedder.encode``)."""


@dataclass(frozen=True)
class PoolTask:
    """One task of the pool.

    Attributes:
        task: the task (a generated one carries its ground truth).
        round: the round that added it (0 for the set-up tasks).
        source: one of :data:`POOL_SOURCES`.
        difficulty: the generator knobs it was made at, natural units (empty for a real item).
    """

    task: Task
    round: int
    source: str
    difficulty: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolUpdate:
    """The result of :func:`add_to_pool`.

    Attributes:
        pool: the new pool (set-up tasks first, then later ones oldest first).
        added: candidates that entered (and were not evicted by the cap in the same call).
        duplicates: task ids of candidates dropped as near-duplicates (or exact duplicates).
        evicted: task ids removed by the cap (old tasks of later rounds, or new ones when the cap is tight).
    """

    pool: tuple[PoolTask, ...]
    added: tuple[PoolTask, ...]
    duplicates: tuple[str, ...]
    evicted: tuple[str, ...]


def check_disjoint(tasks: Iterable[Task], forbidden: Mapping[str, str] | frozenset[str], what: str) -> None:
    """Raise when any task's input is a dev-set or meta-validation item's (content hash).

    Args:
        tasks: tasks about to enter the pool or the training data.
        forbidden: content hashes of the held-apart sets (a mapping hash -> set name gives a clearer
            message; a plain set works too).
        what: where the tasks are going (for the message), e.g. "pool" or "training data".

    Raises:
        DataError: naming the offending task ids and the set they belong to.
    """
    leaked = [t for t in tasks if t.content_hash in forbidden]
    if leaked:
        names = sorted({forbidden[t.content_hash] if isinstance(forbidden, Mapping) else "held-out"
                        for t in leaked})
        raise DataError(f"self-evolution {what}: tasks {[t.task_id for t in leaked]} are {'/'.join(names)} "
                        "items (content hash match); those sets must never be trained on")


def add_to_pool(
    pool: Sequence[PoolTask],
    candidates: Sequence[PoolTask],
    *,
    embed: Embed,
    cosine: float,
    cap: int,
    forbidden: Mapping[str, str] | frozenset[str] = frozenset(),
) -> PoolUpdate:
    """Add ``candidates`` to ``pool``, dropping near-duplicates, then apply the cap. Pure: inputs untouched.

    A candidate is dropped when its input has the same content hash as, or an embedding cosine
    ``>= cosine`` with, a pool task or a candidate accepted before it (candidates are taken in order).

    Args:
        pool: the current pool.
        candidates: new tasks, in order.
        embed: texts -> L2-normalised embeddings, shape (n, dim) (e.g. ``MiniLMEmbedder.encode``).
        cosine: near-duplicate threshold in (0, 1]; higher keeps more.
        cap: most tasks kept, >= number of set-up tasks (round 0) in ``pool`` and ``candidates``.
        forbidden: content hashes of the dev and meta-validation sets (see :func:`check_disjoint`).

    Returns:
        The :class:`PoolUpdate`.

    Raises:
        DataError: a candidate is a dev-set or meta-validation item.
        ValueError: ``cap`` is smaller than the number of set-up tasks, or ``embed`` returns a wrong shape.
    """
    check_disjoint([c.task for c in candidates], forbidden, "pool")
    check_disjoint([p.task for p in pool], forbidden, "pool")
    if not candidates:
        return PoolUpdate(tuple(pool), (), (), ())
    texts = [p.task.text for p in pool] + [c.task.text for c in candidates]
    vectors = np.asarray(embed(texts), dtype=np.float64)  # (n_pool + n_cand, dim)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"embed returned shape {vectors.shape} for {len(texts)} texts")
    kept_rows = list(range(len(pool)))
    hashes = {p.task.content_hash for p in pool}
    accepted: list[PoolTask] = []
    duplicates: list[str] = []
    for j, cand in enumerate(candidates):
        row = len(pool) + j
        sims = vectors[kept_rows] @ vectors[row] if kept_rows else np.zeros(0)  # (n_kept,)
        if cand.task.content_hash in hashes or (sims.size and float(sims.max()) >= cosine):
            duplicates.append(cand.task.task_id)
            continue
        kept_rows.append(row)
        hashes.add(cand.task.content_hash)
        accepted.append(cand)
    merged = list(pool) + accepted
    seeds = [p for p in merged if p.round == 0]
    if len(seeds) > cap:
        raise ValueError(f"pool cap {cap} is below the {len(seeds)} set-up tasks")
    generated = sorted((p for p in merged if p.round != 0), key=lambda p: p.round)  # stable: oldest first
    n_evict = max(0, len(seeds) + len(generated) - cap)
    evicted, generated = generated[:n_evict], generated[n_evict:]
    evicted_ids = {id(p) for p in evicted}
    return PoolUpdate(
        pool=tuple(seeds + generated),
        added=tuple(p for p in accepted if id(p) not in evicted_ids),
        duplicates=tuple(duplicates),
        evicted=tuple(p.task.task_id for p in evicted),
    )


def real_count(n: int, share: float, available: int) -> int:
    """How many of ``n`` new tasks are real: ``share * n`` rounded half up, at most ``available``.

    The same rule as the co-evolution's task batches (:func:`evotrainer.evolve.llm_objective.task_batch`).

    Args:
        n: new tasks, >= 0.
        share: ``selfevolve.real_share`` in [0, 1].
        available: real items not drawn yet, >= 0.
    """
    return max(0, min(int(available), int(np.floor(float(share) * int(n) + 0.5))))


def draw_real(items: Sequence[Task], k: int, rng: np.random.Generator) -> tuple[list[Task], tuple[Task, ...]]:
    """Draw ``k`` of ``items`` without replacement: ``(drawn, left)``, both in the items' order. Pure.

    Args:
        items: the real items not drawn yet.
        k: how many, in [0, len(items)] (:func:`real_count`).
        rng: the only randomness; nothing is drawn from it when ``k`` is 0.

    Raises:
        ValueError: ``k`` outside [0, len(items)].
    """
    if not 0 <= k <= len(items):
        raise ValueError(f"draw_real: cannot draw {k} of {len(items)} items")
    if k == 0:
        return [], tuple(items)
    chosen = {int(i) for i in rng.choice(len(items), size=k, replace=False)}
    return ([t for i, t in enumerate(items) if i in chosen],
            tuple(t for i, t in enumerate(items) if i not in chosen))


def split_dev(items: Sequence[Task], k: int, rng: np.random.Generator) -> tuple[list[Task], tuple[Task, ...]]:
    """Hold ``k`` of ``items`` out as a dev set, one item from each of ``k`` groups: ``(dev, rest)``. Pure.

    ``k`` groups (``Task.group``; an item without one is its own) are drawn at random and one item of each; ``rest``
    (in the items' order) has no item of those groups, so no dev item shares a group with a pool or replay item,
    and the dev set spans ``k`` groups rather than the windows of one.

    Args:
        items: the real training items.
        k: dev items, >= 1.
        rng: the only randomness.

    Raises:
        DataError: fewer than ``k + 1`` groups (the pool needs one left).
    """
    keys = [t.group or t.task_id for t in items]
    groups = list(dict.fromkeys(keys))
    if not 1 <= k < len(groups):
        raise DataError(f"selfevolve.dev_source=real: cannot hold {k} dev items of different groups out of the "
                        f"{len(groups)} groups of the {len(items)} training items (task.train_path) and keep one for "
                        "the pool; lower selfevolve.dev_size")
    taken = [groups[int(i)] for i in rng.choice(len(groups), size=k, replace=False)]
    dev = []
    for g in taken:
        members = [t for t, key in zip(items, keys, strict=True) if key == g]
        dev.append(members[int(rng.integers(len(members)))])
    rest = tuple(t for t, key in zip(items, keys, strict=True) if key not in set(taken))
    return dev, rest
