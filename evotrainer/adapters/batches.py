"""Replay-mixing batch plans for LoRA SFT: every batch holds a fixed share of replay rows.

Replay (seed or earlier-round samples mixed into each batch) keeps self-training from drifting away from
what the model already did well; the share is ``replay_ratio`` (default 0.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evotrainer.errors import ConfigError, DataError
from evotrainer.model_schema import LoraSettings

__all__ = ["BatchRow", "capped_steps", "plan_batches", "replay_share"]


@dataclass(frozen=True)
class BatchRow:
    """One row of a planned batch: ``source`` "pool" or "replay", ``index`` into that list."""

    source: str
    index: int


class _Cycler:
    """Draw indices from ``range(n)`` without replacement, reshuffling after each full pass (epochs)."""

    def __init__(self, n: int, rng: np.random.Generator) -> None:
        self._n, self._rng, self._queue = n, rng, []

    def take(self, k: int) -> list[int]:
        out: list[int] = []
        while len(out) < k:
            if not self._queue:
                self._queue = list(self._rng.permutation(self._n))
            out.append(int(self._queue.pop()))
        return out


def plan_batches(
    n_pool: int,
    n_replay: int,
    *,
    steps: int,
    batch_size: int,
    replay_ratio: float,
    rng: np.random.Generator,
) -> list[list[BatchRow]]:
    """Plan ``steps`` batches of ``batch_size`` rows mixing pool and replay examples.

    Over all batches, ``round(replay_ratio * steps * batch_size)`` rows are replay rows; each batch
    holds ``floor`` or ``ceil`` of ``replay_ratio * batch_size`` of them (which batches get the extra row is
    random), so the ratio holds in every batch to within one row and overall to within one row in
    ``steps * batch_size``. Within a source, examples are drawn without replacement, reshuffled each
    pass. Row order inside a batch is shuffled. Without replay examples every row is a pool row.

    Args:
        n_pool: number of pool (new, passing) examples, >= 1.
        n_replay: number of replay examples, >= 0.
        steps: batches, >= 1.
        batch_size: rows per batch, >= 1.
        replay_ratio: share of replay rows, in [0, 1).
        rng: the only source of randomness.

    Returns:
        ``steps`` lists of ``batch_size`` :class:`BatchRow`.

    Raises:
        ConfigError: a size or ratio out of range. DataError: no pool examples.
    """
    if steps < 1 or batch_size < 1:
        raise ConfigError(f"steps and batch_size must be >= 1, got steps={steps}, batch_size={batch_size}")
    if not 0.0 <= replay_ratio < 1.0 or not math.isfinite(replay_ratio):
        raise ConfigError(f"replay_ratio must be in [0, 1), got {replay_ratio}")
    if n_pool < 1:
        raise DataError("no training examples: the pool is empty")
    if n_replay < 0:
        raise ConfigError(f"n_replay must be >= 0, got {n_replay}")
    ratio = replay_ratio if n_replay else 0.0
    total = round(ratio * steps * batch_size)
    per = np.full(steps, total // steps, dtype=int)
    per[rng.permutation(steps)[: total % steps]] += 1  # (steps,) replay rows per batch
    pool, replay = _Cycler(n_pool, rng), _Cycler(max(n_replay, 1), rng)
    plan: list[list[BatchRow]] = []
    for k in per:
        k = min(int(k), batch_size - 1)  # ratio < 1: every batch keeps at least one pool row
        rows = [BatchRow("replay", i) for i in replay.take(k)]
        rows += [BatchRow("pool", i) for i in pool.take(batch_size - k)]
        plan.append([rows[j] for j in rng.permutation(len(rows))])
    return plan


def capped_steps(n_pool: int, n_replay: int, cfg: LoraSettings) -> int:
    """The steps to plan: ``cfg.steps``, or fewer when ``cfg.max_passes`` > 0 and ``cfg.steps`` batches would show
    each pool example more than ``cfg.max_passes`` times.

    A batch holds ``batch_size x (1 - replay_ratio)`` pool rows (all ``batch_size`` without replay examples), so
    ``ceil(max_passes x n_pool / pool rows per batch)`` steps make ``max_passes`` passes over the pool; the
    result is in ``[1, cfg.steps]``.

    Args:
        n_pool / n_replay: pool and replay examples, >= 0.
        cfg: the run's LoRA settings (``steps`` >= 1, ``batch_size`` >= 1, ``replay_ratio`` in [0, 1),
            ``max_passes``: 0 or less leaves ``steps`` as it is).
    """
    if cfg.max_passes <= 0 or n_pool < 1:
        return cfg.steps
    pool_rows = cfg.batch_size * (1.0 - (cfg.replay_ratio if n_replay else 0.0))  # > 0: the ratio is < 1
    return max(1, min(cfg.steps, math.ceil(cfg.max_passes * n_pool / pool_rows - 1e-9)))


def replay_share(plan: list[list[BatchRow]]) -> float:
    """Measured share of replay rows in ``plan``, in [0, 1] (0.0 for an empty plan)."""
    rows = [row for batch in plan for row in batch]
    return sum(row.source == "replay" for row in rows) / len(rows) if rows else 0.0
