"""``mode=selfevolve`` end to end on a tiny random Llama: real backend, real LoRA trainer, real archive."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf
from rich.console import Console

from evotrainer.archive.store import ArchiveStore
from evotrainer.config import Config, to_config
from evotrainer.selfevolve.run import run_selfevolve


def test_selfevolve_run_on_tiny_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    overrides = [
        "mode=selfevolve", f"model.path={tiny_model_dir}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=8",
        "task.validation_limit=2", "selfevolve.rounds=2", "selfevolve.seed_tasks=2",
        "selfevolve.new_tasks_per_round=1", "selfevolve.pool_cap=3", "selfevolve.samples_per_task=1",
        "selfevolve.judge_repeats=2", "selfevolve.dev_size=1", "selfevolve.val_limit=1",
        "selfevolve.pass_threshold=0.0",  # random weights write junk: let everything through to train
        "selfevolve.lora.steps=2", "selfevolve.lora.batch_size=2", "selfevolve.lora.rank=4",
        "selfevolve.lora.max_length=1024", "task.difficulty.length=80",
    ]
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides)))
    console = Console(record=True, width=160)
    summary = run_selfevolve(cfg, run_dir=tmp_path, console=console)
    assert [r.round for r in summary.rounds] == [1, 2]
    for r in summary.rounds:
        assert r.status in ("kept", "reverted") and len(r.losses) == 2 and r.adapter_path
        assert (tmp_path / r.adapter_path / "adapter_config.json").is_file()
        assert set(r.timings) >= {"pool", "rollout", "judge", "train", "dev", "meta-val"}
    text = console.export_text()
    assert "self-evolution rounds" in text and "loss start→end" in text
    with ArchiveStore(summary.archive, read_only=True) as ro:
        assert ro.selfevolve_rounds(summary.run_id) == list(summary.rounds)
        assert len(ro.selfevolve_pool(summary.run_id, round=0)) == 2
        kinds = [e.kind for e in ro.events(summary.run_id)]
        assert "setup" in kinds and "summary" in kinds


def test_selfevolve_trains_on_tool_agent_trajectories(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The same core on multi-step episodes: rollouts are episodes, the rule reward judges them, and the LoRA
    step learns each model reply of a passing episode (observations and prompts masked)."""
    overrides = [
        "mode=selfevolve", f"model.path={tiny_model_dir}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=8",
        "task.name=tool_agent", "task.validation_path=validation_set/tool_agent.jsonl", "task.validation_limit=2",
        "task.options.max_steps=2", "task.options.max_new_tokens=8",
        "evaluation.population_path=populations/tool_agent.yaml", "selfevolve.policy=terse",
        "selfevolve.model_judge_weight=0.0", "selfevolve.rounds=1", "selfevolve.seed_tasks=2",
        "selfevolve.new_tasks_per_round=1", "selfevolve.pool_cap=3", "selfevolve.samples_per_task=1",
        "selfevolve.judge_repeats=1", "selfevolve.dev_size=1", "selfevolve.val_limit=1",
        "selfevolve.pass_threshold=0.0", "selfevolve.lora.steps=2", "selfevolve.lora.batch_size=2",
        "selfevolve.lora.rank=4", "selfevolve.lora.max_length=1024",
    ]
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides)))
    summary = run_selfevolve(cfg, run_dir=tmp_path, console=Console(record=True, width=160))
    (r,) = summary.rounds
    assert r.status in ("kept", "reverted") and len(r.losses) == 2 and r.adapter_path
    assert r.train["examples"] >= 1  # passing episodes (each gives one example per model reply)
    with ArchiveStore(summary.archive, read_only=True) as ro:
        pool = ro.selfevolve_pool(summary.run_id, round=0)
    assert len(pool) == 2 and all("identity" in p.truth for p in pool)
