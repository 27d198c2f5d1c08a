"""Shared-prefix planning and a KV-cache store for prompts that start with the same tokens.

Every policy of a generation reads the same transcripts; with the transcript laid out before the
policy's own text (``prompt_layout="transcript_first"`` of the meeting-minutes family), all rows that read
one transcript share a long token prefix. Its key/value states are computed once and reused by each
row; only the differing suffix goes through the model per row. The same idea is vLLM's automatic prefix
caching (https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html) and transformers'
"re-use a prompt cache" recipe (https://huggingface.co/docs/transformers/kv_cache). This module holds
the model-free part: which rows share which prefix (:func:`plan_prefixes`) and a byte-bounded LRU store
of computed prefix states (:class:`PrefixStore`); :mod:`evotrainer.backends.hf` does the tensor work.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

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
    """Least-recently-used store of computed prefix states, bounded in bytes.

    An entry is the per-layer ``(keys, values)`` of one prefix, each tensor shaped
    ``(1, kv_heads, length, head_dim)``, stored under ``(key, token ids)``.

    Args:
        max_bytes: total tensor bytes kept, >= 0 (0 keeps nothing: each call recomputes its prefixes).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._entries: OrderedDict[tuple, tuple[list[tuple[torch.Tensor, torch.Tensor]], int]] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, ids: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """The stored states of prefix ``ids`` under ``key``, or None (counted as a hit or a miss)."""
        entry = self._entries.get((key, tuple(ids)))
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end((key, tuple(ids)))
        self.hits += 1
        return entry[0]

    def put(self, key: Hashable, ids: Sequence[int], states: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Keep ``states`` for prefix ``ids`` under ``key``, evicting the least recently used entries."""
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in states)
        if size > self.max_bytes:
            return
        full = (key, tuple(ids))
        old = self._entries.pop(full, None)
        if old is not None:
            self.bytes -= old[1]
        while self._entries and self.bytes + size > self.max_bytes:
            _, (_, freed) = self._entries.popitem(last=False)
            self.bytes -= freed
        self._entries[full] = (states, size)
        self.bytes += size

    def clear(self) -> None:
        """Forget every entry (the model's weights or adapters changed)."""
        self._entries.clear()
        self.bytes = 0
