"""Replay-mixing batch plans: the replay ratio holds in every batch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evotrainer.adapters.batches import capped_steps, plan_batches, replay_share
from evotrainer.errors import ConfigError, DataError
from evotrainer.model_schema import LoraSettings


@pytest.mark.parametrize(("steps", "batch", "ratio"), [(16, 4, 0.3), (96, 8, 0.3), (12, 4, 0.5), (7, 3, 0.25)])
def test_replay_ratio_holds_in_every_batch(steps: int, batch: int, ratio: float) -> None:
    plan = plan_batches(10, 5, steps=steps, batch_size=batch, replay_ratio=ratio, rng=np.random.default_rng(0))
    assert len(plan) == steps and all(len(b) == batch for b in plan)
    per = [sum(r.source == "replay" for r in b) for b in plan]
    assert set(per) <= {math.floor(ratio * batch), math.ceil(ratio * batch)}
    assert abs(replay_share(plan) - ratio) <= 0.5 / (steps * batch) + 1e-12
    assert all(0 <= r.index < (5 if r.source == "replay" else 10) for b in plan for r in b)


def test_sources_are_drawn_without_replacement_per_pass() -> None:
    plan = plan_batches(6, 3, steps=3, batch_size=4, replay_ratio=0.25, rng=np.random.default_rng(1))
    pool = [r.index for b in plan for r in b if r.source == "pool"]
    assert sorted(pool[:6]) == list(range(6))


def test_no_replay_examples_means_pool_only_and_plans_are_reproducible() -> None:
    plan = plan_batches(3, 0, steps=4, batch_size=2, replay_ratio=0.3, rng=np.random.default_rng(2))
    assert replay_share(plan) == 0.0
    again = plan_batches(3, 0, steps=4, batch_size=2, replay_ratio=0.3, rng=np.random.default_rng(2))
    assert plan == again


def test_bad_arguments_raise() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(DataError):
        plan_batches(0, 3, steps=2, batch_size=2, replay_ratio=0.3, rng=rng)
    with pytest.raises(ConfigError):
        plan_batches(3, 3, steps=2, batch_size=2, replay_ratio=1.0, rng=rng)
    with pytest.raises(ConfigError):
        plan_batches(3, 3, steps=0, batch_size=2, replay_ratio=0.3, rng=rng)


@pytest.mark.parametrize(("n_pool", "n_replay", "max_passes", "expected"), [
    (5, 6, 2.0, 8),     # 2 x 1.4 pool rows a batch of 2 at ratio 0.3: ceil(10 / 1.4) = 8
    (5, 0, 2.0, 5),     # no replay: every row a pool row, ceil(10 / 2)
    (40, 6, 2.0, 36),   # enough examples: the configured steps stand
    (5, 6, 0.0, 36),    # 0 = off
    (1, 0, 0.1, 1),     # at least one step
])
def test_capped_steps_stop_at_max_passes_over_the_pool(n_pool: int, n_replay: int, max_passes: float,
                                                       expected: int) -> None:
    cfg = LoraSettings(steps=36, batch_size=2, replay_ratio=0.3, max_passes=max_passes)
    steps = capped_steps(n_pool, n_replay, cfg)
    assert steps == expected
    plan = plan_batches(n_pool, n_replay, steps=steps, batch_size=2, replay_ratio=0.3, rng=np.random.default_rng(0))
    pool_rows = sum(r.source == "pool" for b in plan for r in b)
    if max_passes > 0 and steps < 36:
        assert pool_rows <= max_passes * n_pool + 2  # within one batch of max_passes passes
