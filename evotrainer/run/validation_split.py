"""Fixed splits of the meta-validation set: selection vs held-out, and the screening subset.

* :func:`split_validation` holds out a share of the items for the final report only: no selection
  (screening, promotion, rollback, early stopping) ever sees them. It splits whole *groups*: items with
  the same ``Task.group`` (e.g. windows of one long document) form one group, every other item is a group
  of its own, and a group lies on one side only, so none straddles selection and held-out. The
  split is stratified by source (hand-written and real items each keep their share in both parts), by
  ``meta["domain"]`` within a source whose labels group its items (:func:`_by_stratum`), and, within a
  stratum, by size: groups are ranked by (total ``Task.size``, smallest task id) and walked in
  that order; a group is held out when that brings the count held so far
  nearer to ``round(n * share) * walked / n`` (systematic sampling by error diffusion). On groups of one
  item this is the earlier per-item rule: every ``1/share``-th rank, offset by half a stride (with 44
  items and share 0.25: ranks 2, 6, 10, ..., 42); with larger groups a stratum's held-out count misses
  ``round(n * share)`` by at most half the last group's items. It depends only on the items, never on a
  seed or the file order.
* :func:`screening_subset` picks a fixed subset of the selection items, stratified the same way, on
  which every harness candidate is screened (the first stage of a race).
* :func:`race_order` orders the selection items for racing (``harness/racing.py``): the screening
  items first, then the others so that every prefix stays spread over item sizes.

Reporting the final best on the held-out part next to its selection score makes the winner's-curse
inflation of selecting on a finite set visible (the best of many noisy scores is biased upward).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from evotrainer.errors import ConfigError
from evotrainer.tasks.base import Task

__all__ = ["interleave", "race_order", "screening_subset", "split_validation"]

T = TypeVar("T")


def _ranked(items: Sequence[Task]) -> list[Task]:
    return sorted(items, key=lambda t: (t.size, t.task_id))


def _group_key(t: Task) -> tuple[str, str]:
    """What keeps items together: their ``Task.group``, or the item alone when it has none."""
    return ("group", t.group) if t.group is not None else ("item", t.task_id)


def _label(t: Task) -> str:
    """The item's ``meta["domain"]`` as text ("" when absent)."""
    value = t.meta.get("domain") if t.meta else None
    return str(value) if value else ""


def _by_stratum(items: Sequence[Task]) -> list[list[Task]]:
    """Items grouped by stratum, groups in order of first appearance.

    A stratum is a ``source``, split further by ``meta["domain"]`` where those labels group the source's items:
    every item labelled, at least two labels, each on at least two groups (``Task.group``, or an item alone), and
    no group under two labels (so a group still lies in one stratum). A dataset mixing two kinds of document keeps
    each kind's share; a source labelled one domain per item (the hand-written set) stays whole.
    """
    sources: dict[str, list[Task]] = {}
    for t in items:
        sources.setdefault(t.source, []).append(t)
    groups: list[list[Task]] = []
    for source in sources.values():
        by_label: dict[str, list[Task]] = {}
        labels_of: dict[tuple[str, str], set[str]] = {}  # group key -> labels of its items
        for t in source:
            by_label.setdefault(_label(t), []).append(t)
            labels_of.setdefault(_group_key(t), set()).add(_label(t))
        groups_per_label = [sum(1 for labels in labels_of.values() if label in labels) for label in by_label]
        grouped = (len(by_label) >= 2 and "" not in by_label and min(groups_per_label) >= 2
                   and all(len(labels) == 1 for labels in labels_of.values()))
        groups.extend(by_label.values() if grouped else [source])
    return groups


def _allocate(sizes: Sequence[int], k: int) -> list[int]:
    """``k`` split over groups in proportion to ``sizes`` (largest remainder; ties: the earlier group)."""
    total = sum(sizes)
    exact = [k * n / total for n in sizes]
    out = [min(int(math.floor(e)), n) for e, n in zip(exact, sizes, strict=True)]
    order = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order:
        if sum(out) >= k:
            break
        if out[i] < sizes[i]:
            out[i] += 1
    return out


def _by_group(items: Sequence[Task]) -> list[list[Task]]:
    """Items grouped by ``Task.group`` (None: an item alone), groups ranked by (total size, smallest task id)."""
    groups: dict[tuple[str, str], list[Task]] = {}
    for t in items:
        groups.setdefault(_group_key(t), []).append(t)
    return sorted(groups.values(), key=lambda g: (sum(t.size for t in g), min(t.task_id for t in g)))


def split_validation(
    items: Sequence[Task], heldout_share: float
) -> tuple[list[Task], list[Task]]:
    """Split into (selection, held-out), both in the input order; a group's items all on one side.

    Args:
        items: the meta-validation set; items with the same ``Task.group`` are kept together.
        heldout_share: in [0, 1); about ``round(n * share)`` items of each stratum (:func:`_by_stratum`) are held
            out (exactly that many when every item is its own group; 0 -> none).

    Raises:
        ConfigError: the share is outside [0, 1) or leaves no selection item (key
            ``outer.heldout_share``).
    """
    if not (math.isfinite(heldout_share) and 0 <= heldout_share < 1):
        raise ConfigError(f"config key 'outer.heldout_share': expected a value in [0, 1), got {heldout_share!r}")
    held_ids: set[int] = set()
    for stratum in _by_stratum(items):
        n = len(stratum)
        n_held = int(math.floor(n * heldout_share + 0.5))
        if n_held == 0:
            continue
        if n - n_held < 1 and len(items) - n_held < 1:
            raise ConfigError(f"config key 'outer.heldout_share': {heldout_share} of {n} item(s) leaves no "
                              "item to select on")
        walked = held = 0
        for group in _by_group(stratum):
            walked += len(group)
            # hold the group out when that brings `held` nearer to the target n_held * walked / n (ties: keep)
            if (2 * held + len(group)) * n < 2 * n_held * walked:
                held += len(group)
                held_ids |= {id(t) for t in group}
    if held_ids and len(held_ids) >= len(items):
        raise ConfigError(f"config key 'outer.heldout_share': {heldout_share} of {len(items)} item(s) leaves no "
                          "item to select on")
    return [t for t in items if id(t) not in held_ids], [t for t in items if id(t) in held_ids]


def screening_subset(items: Sequence[Task], k: int) -> list[Task]:
    """A fixed subset of ``k`` items stratified like the held-out split (:func:`_by_stratum`; shares in
    proportion) and, within a stratum, by size (evenly spaced ranks); in input order, or by size for one source.

    Deterministic: depends only on the items, so every candidate is screened on the same items.
    """
    if k >= len(items):
        return list(items)
    groups = _by_stratum(items)
    picked: set[int] = set()
    for group, m in zip(groups, _allocate([len(g) for g in groups], k), strict=True):
        if m == 0:
            continue
        ranked = _ranked(group)
        idx = np.linspace(0, len(ranked) - 1, m).round().astype(int)
        picked |= {id(ranked[i]) for i in sorted(set(idx.tolist()))}
    if len({t.source for t in items}) == 1:  # one source: by length rank
        ranked = _ranked(items)
        return [t for t in ranked if id(t) in picked]
    return [t for t in items if id(t) in picked]


def _radical_inverse(k: int) -> float:
    """Van der Corput's base-2 radical inverse of ``k`` (0.5, 0.25, 0.75, 0.125, ... for k = 1, 2, ...)."""
    x, f = 0.0, 0.5
    while k:
        x, k, f = x + f * (k & 1), k >> 1, f / 2
    return x


def _spread(items: Sequence[Task]) -> list[Task]:
    """``items`` ranked by (size, task id), then taken at the ranks nearest to the van der Corput
    sequence (0.5, 0.25, 0.75, 0.125, ...): every prefix spans short, middle and long items."""
    rest = _ranked(items)
    n, taken, order = len(rest), set(), []
    k = 1
    while len(order) < n and k <= 64 * max(n, 1):
        r = min(n - 1, int(_radical_inverse(k) * n))
        if r not in taken:
            taken.add(r)
            order.append(rest[r])
        k += 1
    return order + [t for i, t in enumerate(rest) if i not in taken]


def race_order(items: Sequence[Task], first: Sequence[Task] = ()) -> list[Task]:
    """``items`` in racing order: ``first`` (e.g. the screening subset) as given, then the rest.

    The rest are stratified like the held-out split (:func:`_by_stratum`) and, within a stratum, by length
    (:func:`_spread`); strata are interleaved so that each prefix holds every stratum in proportion (the next
    item comes from the stratum with the smallest share taken so far; ties: the stratum seen first). Depends
    only on the items, never on a seed.
    """
    chosen = {id(t) for t in first}
    head = [t for t in first if any(t is s for s in items)]
    return head + interleave([_spread(g) for g in _by_stratum([t for t in items if id(t) not in chosen])])


def interleave(queues: Sequence[Sequence[T]]) -> list[T]:
    """Every item of ``queues``, each queue in its own order, interleaved so that every prefix takes from each queue
    in proportion to its length: the next item comes from the queue with the smallest share taken so far (ties: the
    earlier queue). Empty queues are skipped."""
    taken = [0] * len(queues)
    order: list[T] = []
    while any(taken[i] < len(q) for i, q in enumerate(queues)):
        i = min((i for i, q in enumerate(queues) if taken[i] < len(q)), key=lambda i: (taken[i] / len(queues[i]), i))
        order.append(queues[i][taken[i]])
        taken[i] += 1
    return order
