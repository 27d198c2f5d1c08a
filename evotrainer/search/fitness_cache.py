"""A fitness cache keyed by everything that changes a score.

Key = (kind, genome hash, task batch id, settings key). The genome hash covers prompt sections,
decoding genes and the adapter gene (:attr:`Policy.genome_hash`); the batch id covers the tasks'
content and ground truth (``evotrainer.rollout.batch_id_for``); the settings key covers the rest:
model name, sampling parameters (seed included), adapter/model version, and, for scores, reward
weights and scorer version (:func:`settings_key`). So an identical prompt is never rolled out twice on
the same batch, and a changed setting never reuses a stale score.

``kind`` separates what is stored under a key: the rollout evaluator keeps generated outputs
(``"rollout"``, keyed without reward settings, so a change of reward weights re-scores stored outputs
instead of regenerating them), harness rewards (``"reward"``) and meta-validation scores (``"meta"``).
In memory only; the lineage archive persists scores.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, Generic, TypeVar

__all__ = ["CacheKey", "FitnessCache", "settings_key"]

V = TypeVar("V")


def _plain(obj: Any) -> Any:
    """JSON-ready form of ``obj``: dataclasses as dicts, mappings with sorted keys, floats exact."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return _plain(asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, float):
        return repr(obj) if not math.isfinite(obj) else float.hex(obj)
    return obj


def settings_key(**parts: Any) -> str:
    """Hash (sha256 hex, 16 chars) of named settings that change a score.

    Pass every such setting by name, e.g. ``settings_key(model=llm.name, sampling=params,
    adapter_version=v, reward_weights=w, scorer_version=s)``; dataclasses and mappings are
    normalised (key order does not matter; floats are hashed exactly, so 0.1 and 0.1000001 differ).
    """
    blob = json.dumps(_plain(parts), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class CacheKey:
    """Identity of one cached result.

    Attributes:
        kind: what is stored ("rollout", "reward", "meta", or a caller's own).
        genome_hash: :attr:`Policy.genome_hash`.
        batch_id: identity of the task batch.
        settings: :func:`settings_key` of everything else that changes the result.
    """

    kind: str
    genome_hash: str
    batch_id: str
    settings: str


class FitnessCache(Generic[V]):
    """In-memory map from :class:`CacheKey` to a result record (any immutable value).

    Counts ``hits`` and ``misses`` of :meth:`get`.
    """

    def __init__(self) -> None:
        self._store: dict[CacheKey, V] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> V | None:
        """The stored result, or None (counted as a miss)."""
        value = self._store.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: CacheKey, value: V) -> None:
        """Store ``value`` under ``key`` (replacing any earlier one)."""
        self._store[key] = value

    def __len__(self) -> int:
        return len(self._store)
