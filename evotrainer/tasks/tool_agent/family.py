"""The tool-agent task family in one object: generation, multi-step rollout, rewards, meta metric, loader.

Not yet registered in :func:`evotrainer.tasks.get_task_family`: the loops still expect the single-turn
:class:`~evotrainer.tasks.base.TaskFamily` (``build_messages`` + ``reward(output, task)``). This object
holds what a domain-neutral protocol needs from the family (see the package docstring for the wiring).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from evotrainer.backends.base import LLM, SamplingParams
from evotrainer.errors import ConfigError
from evotrainer.tasks.base import MetaScore
from evotrainer.tasks.tool_agent import generator as _generator
from evotrainer.tasks.tool_agent import reward as _reward
from evotrainer.tasks.tool_agent import tasks as _tasks
from evotrainer.tasks.tool_agent.rollout import Episode, ToolRolloutConfig, run_episodes
from evotrainer.tasks.tool_agent.tasks import ToolTask
from evotrainer.tasks.tool_agent.trajectory import Trajectory

__all__ = ["SCORER_VERSION", "ToolAgent"]

SCORER_VERSION = "tool_agent-1"
"""Changes whenever reward, answer checking or meta-metric code changes scores."""

_GREEDY = SamplingParams()


class ToolAgent:
    """Questions answered by calling a calculator, a unit converter and a facts lookup over several turns.

    Args:
        rollout: step limit, token budget and reward weights of an episode.
        explore_share: share of generated tasks that come from exploration walks
            (:func:`~evotrainer.tasks.tool_agent.generator.explore_tasks`) instead of templates, in [0, 1].

    Raises:
        ConfigError: ``explore_share`` outside [0, 1] (names ``task.explore_share``).
    """

    name = "tool_agent"
    scorer_version = SCORER_VERSION

    def __init__(self, rollout: ToolRolloutConfig | None = None, explore_share: float = 0.25) -> None:
        if isinstance(explore_share, bool) or not isinstance(explore_share, (int, float)) or not 0 <= explore_share <= 1:
            raise ConfigError(f"task.explore_share: must be a number in [0, 1], got {explore_share!r}")
        self.rollout_cfg = rollout if rollout is not None else ToolRolloutConfig()
        self.explore_share = float(explore_share)

    def __repr__(self) -> str:
        return f"ToolAgent(rollout={self.rollout_cfg}, explore_share={self.explore_share})"

    @property
    def difficulty_bounds(self) -> Mapping[str, tuple[float, float]]:
        """Knob -> (low, high) in natural units (:data:`~evotrainer.tasks.tool_agent.generator.DIFFICULTY_BOUNDS`)."""
        return dict(_generator.DIFFICULTY_BOUNDS)

    @property
    def default_difficulty(self) -> Mapping[str, float]:
        return {"steps": 2.0, "distractors": 3.0, "magnitude": 2.0}

    @property
    def reward_components(self) -> tuple[str, ...]:
        return _reward.REWARD_COMPONENTS

    @property
    def default_reward_weights(self) -> Mapping[str, float]:
        return dict(_reward.DEFAULT_WEIGHTS)

    def generate(self, rng: np.random.Generator, difficulty: Mapping[str, float], n: int) -> list[ToolTask]:
        """``n`` tasks at ``difficulty``: ``round(n * explore_share)`` from exploration walks, the rest from
        templates, templates first. Deterministic given the state of ``rng`` (one draw seeds a
        ``random.Random``)."""
        local = random.Random(int(rng.integers(0, 2**63 - 1)))
        n_walk = int(round(n * self.explore_share))
        return [*_generator.generate_tasks(local, difficulty, n - n_walk),
                *_generator.explore_tasks(local, difficulty, n_walk)]

    def rollout(self, llm: LLM, system_prompts: Sequence[tuple[str, str]], tasks: Sequence[ToolTask], *,
                sampling: SamplingParams = _GREEDY) -> list[Trajectory]:
        """Every (policy id, system prompt) on every task, policy-major: ``len(system_prompts) * len(tasks)``
        scored trajectories (see :func:`~evotrainer.tasks.tool_agent.rollout.run_episodes`)."""
        episodes = [Episode(pid, prompt, task) for pid, prompt in system_prompts for task in tasks]
        return run_episodes(llm, episodes, self.rollout_cfg, sampling=sampling)

    def meta_score(self, trajectory: Trajectory, task: ToolTask) -> MetaScore:
        """Fixed meta-validation score: 1.0 for a correct final answer, else 0.0; no reward weight touches
        it. Parts: ``correct``, ``efficiency``, ``format`` (unweighted, see
        :func:`~evotrainer.tasks.tool_agent.reward.score_episode`)."""
        score = _reward.score_episode(trajectory.steps, task)
        return MetaScore(score.breakdown.components["correct"], dict(score.breakdown.components))

    def load_validation(self, path: str | Path, limit: int | None = None) -> list[ToolTask]:
        """The first ``limit`` tasks (all when None) of a JSONL file
        (:func:`~evotrainer.tasks.tool_agent.tasks.load_tasks`)."""
        tasks = _tasks.load_tasks(path)
        return tasks if limit is None else tasks[:limit]
