"""Tool-agent rollouts on the real embedded model (SmolLM2-135M-Instruct GGUF): they complete and every
trajectory is well-formed. What the model achieves is printed (run with ``-s``), not asserted."""

from __future__ import annotations

import json
import math

import pytest

from evotrainer.config import PACKAGE_DATA, ModelConfig
from evotrainer.genome import load_population, render_system_prompt
from evotrainer.run.runtime import build_llm
from evotrainer.tasks.tool_agent import (
    STOP_REASONS,
    Episode,
    ToolRolloutConfig,
    Trajectory,
    load_tasks,
    run_episodes,
)

pytestmark = pytest.mark.real_model


def test_two_seed_policies_on_three_validation_tasks() -> None:
    llm = build_llm(ModelConfig(path="smollm2-135m", dtype="float32"))
    seeds = load_population(PACKAGE_DATA / "populations" / "tool_agent.yaml")[:2]
    tasks = [t for t in load_tasks(PACKAGE_DATA / "validation_set" / "tool_agent.jsonl") if len(t.plan) <= 2][::7][:3]
    episodes = [Episode(p.id, render_system_prompt(p.sections), t) for p in seeds for t in tasks]
    cfg = ToolRolloutConfig(max_steps=4)
    trajs = run_episodes(llm, episodes, cfg)
    assert len(trajs) == 6
    for traj, ep in zip(trajs, episodes, strict=True):
        assert (traj.policy_id, traj.task_id) == (ep.policy_id, ep.task.task_id)
        assert traj.stop_reason in STOP_REASONS and traj.stop_reason != "error", traj.error
        assert 1 <= len(traj.steps) <= 4 and [s.index for s in traj.steps] == list(range(len(traj.steps)))
        assert math.isfinite(traj.reward) and 0.0 <= traj.reward <= 1.0
        assert all(0.0 <= v <= 1.0 for v in traj.components.values())
        assert all(s.reward in (0.0, 1.0) for s in traj.steps)
        assert (traj.stop_reason == "final_answer") == (traj.final_answer is not None)
        assert traj.messages[0]["role"] == "system" and traj.messages[1]["role"] == "user"
        assert sum(m["role"] == "assistant" for m in traj.messages) == len(traj.steps)
        assert traj.first_wrong_step is None or 0 <= traj.first_wrong_step < len(traj.steps)
    assert [Trajectory.from_dict(json.loads(json.dumps(t.to_dict()))) for t in trajs] == trajs
    for t in trajs:  # what the model did, for the record
        kinds = [s.kind for s in t.steps]
        print(f"\n{t.policy_id} {t.task_id}: stop={t.stop_reason} steps={kinds} calls={[(s.tool, s.tool_input) for s in t.steps if s.kind == 'action']} "
              f"answer={t.final_answer!r} reward={t.reward:.3f} {dict(t.components)} first_wrong={t.first_wrong_step}")
        print("  first reply:", repr(t.steps[0].reply[:300]))
