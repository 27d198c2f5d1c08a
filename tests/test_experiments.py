"""Every shipped experiment bundle composes into a valid config; the GPU bundle carries the seed sizes."""

from __future__ import annotations

import math

import pytest
from hydra import compose, initialize_config_dir

from evotrainer.config import PACKAGE_DATA, Config, register_configs, to_config

EXPERIMENTS = sorted(p.stem for p in (PACKAGE_DATA / "conf" / "experiment").glob("*.yaml"))


def _compose(name: str) -> Config:
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        return to_config(compose(config_name="config", overrides=[f"+experiment={name}"]))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes(name: str) -> None:
    assert isinstance(_compose(name), Config)


def test_gpu_bundle_has_the_seed_articles_sizes() -> None:
    """shared/seeds/000: 32 new tasks a round, 8 parallel rollouts, LoRA r16 alpha32 lr 2e-4, 96 steps at batch 8."""
    c = _compose("selfevolve_gpu")
    lora = c.selfevolve.lora
    assert (c.selfevolve.new_tasks_per_round, c.model.batch_size) == (32, 8)
    assert (lora.rank, lora.alpha, lora.lr, lora.steps, lora.batch_size) == (16, 32, 2e-4, 96, 8)
    assert c.selfevolve.pass_threshold == 0.7


def test_main_job_keeps_a_run_long_prefix_store_and_a_population_its_budget_can_tell() -> None:
    """Issue 25: the prefix store is the experiment's (sized in docs/outer_loop_budget.md), the mutator still reuses
    the policy model, and CMA-ES's population fits the budget at least twice (on the 1.5B the 40-minute budget bought
    7 candidates, docs/results.md), so CMA-ES is told; pycma's default (10 for 10 parameters) would never be told.
    The generations are not the limit: the budget is."""
    c = _compose("meeting_minutes")
    assert c.outer.popsize * 2 <= 7 <= c.outer.generations * c.outer.popsize
    assert c.model.prefix_cache_mb == 2048 and c.mutator == c.model
    assert _compose_with("meeting_minutes", "model.prefix_cache_mb=0").mutator.prefix_cache_mb == 0


def _compose_with(name: str, *overrides: str) -> Config:
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        return to_config(compose(config_name="config", overrides=[f"+experiment={name}", *overrides]))


def test_real_meeting_bundle_selects_on_real_windows_apart_from_transfer_and_training() -> None:
    """+experiment=meeting_minutes_real: 48 QMSum windows to select on, none from a transfer or training meeting;
    everything else is the main job's."""
    from evotrainer.run.runtime import build_family, load_training, load_transfer, load_validation

    cfg, main = _compose("meeting_minutes_real"), _compose("meeting_minutes")
    family = build_family(cfg)
    validation = load_validation(cfg, family)
    transfer = load_transfer(cfg, family, validation)
    train = load_training(cfg, family, validation, transfer)
    assert len(validation) == 48 and {t.source for t in validation} == {"qmsum"}
    groups = {t.meta["meeting"] for t in validation}
    assert not groups & {t.meta["meeting"] for t in [*transfer, *train]}
    assert (cfg.inner, cfg.outer, cfg.decoding, cfg.task.reward_weights) == (
        main.inner, main.outer, main.decoding, main.task.reward_weights)


def test_cpu_selfevolve_bundle_trains_and_gates_on_real_windows_from_the_plain_prompt() -> None:
    """conf/experiment/selfevolve_cpu.yaml: 3 rounds at the seed's 4 samples and 3 judge repeats, every pool task and
    the dev set real training windows, the content judge, the plain prompt; its LoRA steps read at most 30 minutes
    of tokens at the measured 110 tokens/s (docs/selfevolve.md)."""
    c = _compose("selfevolve_cpu")
    s, lora = c.selfevolve, c.selfevolve.lora
    assert c.mode == "selfevolve" and c.model.backend == "hf"
    assert (s.rounds, s.samples_per_task, s.judge_repeats, s.real_share, s.dev_source) == (3, 4, 3, 1.0, "real")
    assert s.policy == "plain_summary" and 0 < s.pass_threshold < 0.7
    assert {k: v for k, v in c.task.reward_weights.items() if v} == {"content": 1.0}
    assert (lora.rank, lora.alpha, lora.lr, lora.replay_ratio) == (16, 32, 2e-4, 0.3)
    assert c.task.train_path and c.task.transfer_path and s.transfer_limit is None
    assert lora.steps * lora.batch_size * lora.max_length / 110 <= 30 * 60


def test_real_training_bundle_trains_on_real_windows_with_the_content_reward() -> None:
    """+experiment=meeting_minutes_real_train: every task of a batch is a real training window, the reward is content
    alone and stays so, the seeds are ranked on 18 selection items, and every racer runs its whole race."""
    c = _compose("meeting_minutes_real_train")
    share = c.outer.extras["real_share"]
    n = c.task.tasks_per_generation
    assert math.floor(share.low * n + 0.5) == n and c.task.train_path
    assert {k: v for k, v in c.task.reward_weights.items() if v} == {"content": 1.0}
    assert not c.outer.evolve_reward_weights and c.outer.seed_screen_size == 18
    assert c.task.validation_path == _compose("meeting_minutes_real").task.validation_path
    assert c.outer.race.survivors >= c.outer.screen_top_k  # no racer is cut for a sibling's early lead


def test_adapter_gene_bundle_is_the_real_training_bundle_plus_adapters() -> None:
    """+experiment=meeting_minutes_real_train_adapters: the prompt-only bundle with the same budget, plus adapter
    mutations whose threshold a content score on real windows can reach and whose rows keep part of the transcript."""
    plain, genes = _compose("meeting_minutes_real_train"), _compose("meeting_minutes_real_train_adapters")
    assert genes.outer.budget == plain.outer.budget and genes.task == plain.task
    assert plain.inner.adapter_mutation_share == 0 and genes.inner.adapter_mutation_share > 0
    assert genes.inner.adapter_pass_threshold <= 0.25 and genes.inner.adapter_lora.max_length >= 1024
