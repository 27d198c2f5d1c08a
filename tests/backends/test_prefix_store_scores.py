"""Issue 25: a run-long prefix store changes what is computed, never a score.

A run's meta-validation calls, as a run makes them: generation 0 screens several seeds on the screening items
in one call (the meeting prefix shared inside the call), the best seed alone on the rest (each prompt stored),
then a candidate's racers on the screening items and its leader alone on more items, both served from the
store. The same calls on a backend without prefix sharing (every prompt computed whole, the state before issue
14) give the same per-item S_val values, outputs and S_val; the store really served the later calls.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evotrainer.backends.base import SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.config import Config
from evotrainer.model_schema import ModelConfig
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.runtime import build_family, load_seed_population


def _calls(backend: HFBackend, cfg: Config) -> list[list[tuple]]:
    family = build_family(cfg)
    items = family.generate(np.random.default_rng(3), {**cfg.task.difficulty, "length": 90.0}, 4)
    screen, rest = items[:2], items[2:]
    seeds = load_seed_population(cfg)
    evaluator = RolloutEvaluator(backend, family, sampling=SamplingParams(max_new_tokens=6))
    calls = [(seeds[:3], screen), (seeds[:1], rest), (seeds[3:5], screen), (seeds[4:5], rest)]
    return [[(e.per_item, e.outputs, e.s_val) for e in evaluator.meta_evaluate(list(p), t)] for p, t in calls]


def test_scores_are_identical_with_a_run_long_prefix_store(tiny_model_dir: Path) -> None:
    cfg = Config()
    cfg.evaluation.policies = ["terse", "secretary_markdown", "inline_example", "plain_summary", "decisions_focus"]
    base = {"path": str(tiny_model_dir), "dtype": "float32", "max_context": 1024, "prefix_min_tokens": 16}
    stored = HFBackend(ModelConfig(**base, prefix_cache_mb=64))
    whole = HFBackend(ModelConfig(**base, prefix_sharing=False, prefix_cache_mb=0))

    with_store = _calls(stored, cfg)
    assert stored.prefix_store.hits > 0 and stored.stats.prefix_tokens_reused > 0
    computed_before_candidate = stored.stats.prefix_tokens_computed
    assert with_store == _calls(whole, cfg)
    assert whole.stats.prefix_tokens_reused == 0
    again = _calls(stored, cfg)  # a second pass (a fresh evaluator: no fitness cache) is served from the store
    assert again == with_store
    assert stored.stats.prefix_tokens_computed == computed_before_candidate
