"""Shared-prefix planning and a KV-cache store for prompts that start with the same tokens.

Every policy of a generation reads the same task inputs; with the input laid out before the
policy's own text (a family's prompt layout that puts it first), all rows that read
one input share a long token prefix. Its key/value states are computed once and reused by each
row; only the differing suffix goes through the model per row. The same idea is vLLM's automatic prefix
caching (https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html) and transformers'
"re-use a prompt cache" recipe (https://huggingface.co/docs/transformers/kv_cache). This module holds
the model-free part: which rows share which prefix (:func:`plan_prefixes`) and a byte-bounded store of
computed prefix states, looked up by the longest common prefix (:class:`PrefixStore`);
:mod:`evotrainer.backends.hf` does the tensor work.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["PrefixGroup", "PrefixStore", "common_prefix_length", "plan_prefixes"]


@dataclass(frozen=True)
class PrefixGroup:
    """Rows that share one computed prefix.

    Attributes:
        key: what else the prefix states depend on (e.g. the adapter of the rows); rows of one group
            have equal keys.
        length: shared prefix length in tokens, >= 0 (0: the rows share nothing worth reusing).
        rows: indices into the planned sequences, in the order they were planned.
    """

    key: Hashable
    length: int
    rows: tuple[int, ...]


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` have in common (0 .. min(len(a), len(b)))."""
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


def plan_prefixes(
    sequences: Sequence[Sequence[int]], keys: Sequence[Hashable], min_tokens: int
) -> list[PrefixGroup]:
    """Group rows by a shared token prefix so that each prefix is computed once.

    Rows are sorted by (key, tokens), so rows sharing a prefix are adjacent and the common prefix of a
    run of rows is the smallest common prefix of its neighbours. A run of ``n`` rows sharing ``L``
    tokens saves ``(n - 1) * L`` prompt tokens; starting from all rows, a run is split at its weakest
    neighbour link whenever its two halves together save more than the run does (top down over the
    LCP-interval tree, as in suffix-array clustering). A prefix always leaves at least one token of
    every row to the model (the last prompt token's logits start the answer), so
    ``length <= len(row) - 1``. A row that shares nothing forms a group of its own with ``length`` 0.

    Args:
        sequences: prompt token ids per row.
        keys: per row, what else the prefix states depend on (the adapter); rows with different keys
            never share a prefix.
        min_tokens: shortest prefix worth reusing, >= 1.

    Returns:
        Groups covering every row exactly once, in sorted order; rows inside a group in sorted order.

    Raises:
        ValueError: ``sequences`` and ``keys`` differ in length, or ``min_tokens < 1``.
    """
    if len(sequences) != len(keys):
        raise ValueError(f"{len(sequences)} sequences but {len(keys)} keys")
    if min_tokens < 1:
        raise ValueError(f"min_tokens must be >= 1, got {min_tokens}")
    if not sequences:
        return []
    key_rank = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    order = sorted(range(len(sequences)), key=lambda i: (key_rank[keys[i]], list(sequences[i])))
    link = [  # usable common prefix of each sorted row and the next one
        0 if keys[a] != keys[b] else min(common_prefix_length(sequences[a], sequences[b]),
                                         len(sequences[a]) - 1, len(sequences[b]) - 1)
        for a, b in zip(order, order[1:], strict=False)
    ]

    def saving(lo: int, hi: int) -> tuple[int, int]:
        """(tokens saved, shared length) if rows order[lo:hi] form one group."""
        if hi - lo < 2:
            return 0, 0
        shared = min(link[lo : hi - 1])
        return ((hi - lo - 1) * shared, shared) if shared >= min_tokens else (0, 0)

    def weakest(lo: int, hi: int) -> int:
        """Where [lo, hi) splits: after its smallest neighbour link."""
        return lo + 1 + min(range(hi - lo - 1), key=lambda j: link[lo + j])

    # bottom-up over the split tree (explicit stacks: a chain of splits can be as deep as the row count)
    spans: list[tuple[int, int]] = []
    stack = [(0, len(order))]
    while stack:
        lo, hi = stack.pop()
        spans.append((lo, hi))
        if hi - lo > 1:
            cut = weakest(lo, hi)
            stack += [(lo, cut), (cut, hi)]
    best: dict[tuple[int, int], int] = {}
    split_at: dict[tuple[int, int], int | None] = {}  # None: keep the span as one group
    for lo, hi in reversed(spans):  # children before parents
        whole = saving(lo, hi)[0]
        if hi - lo == 1:
            best[(lo, hi)], split_at[(lo, hi)] = 0, None
            continue
        cut = weakest(lo, hi)
        parts = best[(lo, cut)] + best[(cut, hi)]
        keep = whole > 0 and whole >= parts
        best[(lo, hi)], split_at[(lo, hi)] = (whole, None) if keep else (parts, cut)

    groups: list[PrefixGroup] = []
    stack = [(0, len(order))]
    while stack:
        lo, hi = stack.pop()
        cut = split_at[(lo, hi)]
        if cut is None:
            groups.append(PrefixGroup(keys[order[lo]], saving(lo, hi)[1], tuple(order[lo:hi])))
        else:
            stack += [(cut, hi), (lo, cut)]  # left span popped first: groups come out in sorted order
    return groups


class PrefixStore:
    """Store of computed prefix states, bounded in bytes, looked up by the longest common prefix.

    An entry is the per-layer ``(keys, values)`` of one prefix, each tensor shaped
    ``(1, kv_heads, length, head_dim)``, stored under ``(key, token ids)``. Key/value states of a causal
    model at a position depend only on the tokens up to it, so an entry also serves any prompt that starts
    with only part of it: :meth:`match` finds the entry sharing the longest prefix with a prompt, and the
    caller slices its states to that length (as vLLM's automatic prefix caching reuses any cached leading
    block, https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html). An input read by one
    policy is thus reused by every other policy that reads it later, however their instructions differ.

    Eviction keeps what is read again: the least recently used entry that was never served is dropped first,
    and only when every entry was served, the least recently used one (a segmented LRU). A run-long store
    keeps the meta-validation items that every harness candidate reads (the screening items) while a scan of
    the whole selection set, or a candidate's generated training tasks, replace one another.

    Args:
        max_bytes: total tensor bytes kept, >= 0 (0 keeps nothing: each call recomputes its prefixes).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        # (key, ids) -> [states, bytes, times served, ids as an array for matching]
        self._entries: OrderedDict[tuple, list] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, ids: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """The stored states of exactly prefix ``ids`` under ``key``, or None (counted as a hit or a miss)."""
        entry = self._entries.get((key, tuple(ids)))
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end((key, tuple(ids)))
        self.hits += 1
        entry[2] += 1
        return entry[0]

    def match(self, key: Hashable, ids: Sequence[int], limit: int) -> tuple[int, tuple[int, ...]]:
        """The stored prefix under ``key`` that shares the most leading tokens with ``ids``.

        Args:
            key: what else the states depend on (entries under other keys never match).
            ids: a prompt's token ids.
            limit: most tokens usable (a prompt keeps at least its last token for the model: ``len(ids) - 1``).

        Returns:
            ``(length, entry ids)``: ``min(common prefix, limit)`` tokens of the entry ``entry ids`` are
            usable; ``(0, ())`` when nothing is stored under ``key``. Counts nothing (:meth:`get` does).
        """
        want = np.asarray(ids, dtype=np.int64)
        best, best_ids = 0, ()
        for (k, entry_ids), entry in self._entries.items():
            if k != key:
                continue
            stored = entry[3]
            n = min(len(stored), len(want))
            diff = np.flatnonzero(stored[:n] != want[:n])
            common = int(diff[0]) if diff.size else n
            if common > best:
                best, best_ids = common, entry_ids
        return min(best, max(limit, 0)), best_ids

    def put(self, key: Hashable, ids: Sequence[int], states: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Keep ``states`` for prefix ``ids`` under ``key``, evicting as the class docstring says."""
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in states)
        if size > self.max_bytes:
            return
        full = (key, tuple(ids))
        old = self._entries.pop(full, None)
        if old is not None:
            self.bytes -= old[1]
        while self._entries and self.bytes + size > self.max_bytes:
            victim = next((k for k, e in self._entries.items() if e[2] == 0), next(iter(self._entries)))
            self.bytes -= self._entries.pop(victim)[1]
        self._entries[full] = [states, size, 0, np.asarray(full[1], dtype=np.int64)]
        self.bytes += size

    def clear(self) -> None:
        """Forget every entry (the model's weights or adapters changed)."""
        self._entries.clear()
        self.bytes = 0
