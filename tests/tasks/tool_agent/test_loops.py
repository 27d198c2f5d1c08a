"""The tool_agent family through the generic loops on the tiny model: the main job (evolve), mode=evaluate
and the archive CLI's trajectory export, with nothing domain-specific outside the family."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from evotrainer.archive.store import ArchiveStore
from evotrainer.browse.cli import app
from evotrainer.config import Config
from evotrainer.evaluate.run import run_evaluate
from evotrainer.evolve.coevolution import run_evolve


def _tool_config(make: Callable[[], Config]) -> Config:
    cfg = make()
    cfg.task.name = "tool_agent"
    cfg.task.validation_path = "validation_set/tool_agent.jsonl"
    cfg.task.difficulty = {}
    cfg.task.options = {"max_steps": 2, "max_new_tokens": 8}
    cfg.evaluation.population_path = "populations/tool_agent.yaml"
    cfg.evaluation.policies = ["terse", "careful_analyst", "calculator_clerk"]
    cfg.inner.task_hint = "answers questions by calling tools"
    cfg.inner.prefill_mutation_share = 0.0
    cfg.inner.llm_mutation_share = 0.0  # model-free operators only: keeps the test fast
    cfg.inner.generations = 1
    cfg.outer.generations = 1
    return cfg


def test_tool_agent_main_job_archives_trajectories(tiny_run_config: Callable[[], Config], tmp_path: Path) -> None:
    cfg = _tool_config(tiny_run_config)
    assert run_evolve(cfg, run_dir=tmp_path).candidates >= 1
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        run_id = store.list_runs()[0].run_id
        events = store.events(run_id, kind="trajectories")
        (setup,) = store.events(run_id, kind="setup")
    assert set(setup.payload["harness_names"]) >= {"steps", "distractors", "magnitude"}
    kinds = {e.payload["kind"] for e in events}
    assert "fitness" in kinds and kinds & {"meta_val", "meta_screen", "race", "heldout"}
    traj = events[0].payload["trajectories"][0]
    assert {"messages", "steps", "stop_reason", "first_wrong_step", "components"} <= set(traj)
    assert 1 <= len(traj["steps"]) <= 2  # the step limit
    out = tmp_path / "new_folder" / "trajectories.jsonl"  # a missing folder is made
    res = CliRunner().invoke(app, ["trajectories", str(tmp_path / "archive.db"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == sum(len(e.payload["trajectories"]) for e in events)
    assert all(r["policy_id"] and r["messages"][0]["role"] == "system" for r in rows)


def test_tool_agent_evaluate_mode(tiny_run_config: Callable[[], Config], tmp_path: Path) -> None:
    cfg = _tool_config(tiny_run_config)
    cfg.evaluate.compare = "best_seed_vs:careful_analyst"
    outcome = run_evaluate(cfg, run_dir=tmp_path)
    assert len(outcome.results) == 3 and outcome.comparison is not None
    doc = json.loads((tmp_path / "evaluate.json").read_text(encoding="utf-8"))
    assert doc["n_items"] == 6


def test_tool_agent_refuses_the_model_judge(tiny_run_config: Callable[[], Config], tmp_path: Path) -> None:
    """The model judge grades minutes: refused up front for episodes."""
    import pytest

    from evotrainer.errors import ConfigError
    from evotrainer.selfevolve.run import run_selfevolve

    cfg = _tool_config(tiny_run_config)
    cfg.mode = "selfevolve"
    cfg.selfevolve.model_judge_weight = 0.3
    with pytest.raises(ConfigError, match="selfevolve.model_judge_weight"):
        run_selfevolve(cfg, run_dir=tmp_path / "se")


def test_adapter_genes_learn_from_episodes_in_the_main_job(tiny_run_config: Callable[[], Config], tmp_path: Path) -> None:
    """With adapter genes on, the Lamarckian fine-tune learns a passing episode's replies (one chat per reply,
    ``training_chats``) and the child's episodes run under its adapter."""
    cfg = _tool_config(tiny_run_config)
    cfg.inner.adapter_mutation_share = 1.0
    cfg.inner.adapter_pass_threshold = 0.0  # the random model never answers: let every episode pass
    cfg.inner.adapter_lora.steps = 2
    run_evolve(cfg, run_dir=tmp_path)
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        run_id = store.list_runs()[0].run_id
        policies = store.policies(run_id)
        evaluated = {e.policy_id for e in store.evaluations(run_id, kind="fitness")}
    tuned = [p for p in policies if p.operator == "mut_adapter/finetune"]
    assert tuned and all(p.adapter and (Path(p.adapter) / "adapter_config.json").exists() for p in tuned)
    assert evaluated & {p.id for p in tuned}
