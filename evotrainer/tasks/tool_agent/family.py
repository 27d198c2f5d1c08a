"""The tool-agent task family in one object: generation, multi-step rollout, rewards, meta metric, loader.

Implements :class:`~evotrainer.tasks.base.TaskFamily` (``task=tool_agent``) with the datasets, self-evolution and
exemplar capabilities: ``roll_out`` runs each
(policy, task) pair as a multi-step episode and returns the whole trajectory as JSON in the generation's
text, which the evaluator caches and archives like any output and ``reward`` / ``meta_score`` read back
(``json.loads`` of text this module wrote; a text that is not a trajectory scores 0 as degenerate).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evotrainer.backends.base import LLM, Generation, Message
from evotrainer.errors import ConfigError, DataError
from evotrainer.genome import render_system_prompt
from evotrainer.tasks.base import FamilySpec, MetaScore, RewardBreakdown, RolloutRequest
from evotrainer.tasks.tool_agent import generator as _generator
from evotrainer.tasks.tool_agent import reward as _reward
from evotrainer.tasks.tool_agent import tasks as _tasks
from evotrainer.tasks.tool_agent.rollout import Episode, ToolRolloutConfig, run_episodes
from evotrainer.tasks.tool_agent.rollout import build_messages as _build_messages
from evotrainer.tasks.tool_agent.tasks import ToolTask
from evotrainer.tasks.tool_agent.texts import TOOL_AGENT_TEXTS
from evotrainer.tasks.tool_agent.trajectory import Trajectory

__all__ = ["SCORER_VERSION", "ToolAgent"]

SCORER_VERSION = "tool_agent-2"
"""Changes whenever reward, answer checking or meta-metric code changes scores."""


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
    spec = FamilySpec(
        scorer_version=SCORER_VERSION, difficulty_bounds=_generator.DIFFICULTY_BOUNDS,
        difficulty={"steps": 2.0, "distractors": 3.0, "magnitude": 2.0}, reward_weights=_reward.DEFAULT_WEIGHTS,
        space={"steps": {"low": 1.0, "high": 4.0, "integer": True},  # the generator's whole range
               "distractors": {"low": 0.0, "high": 12.0, "integer": True},
               "magnitude": {"low": 1.0, "high": 5.0}},
        multi_step=True, texts=TOOL_AGENT_TEXTS,
        report_parts=(("correct", "correct"), ("efficiency", "efficiency"), ("format", "format")))
    """Knobs (:mod:`~evotrainer.tasks.tool_agent.generator`), reward weights, episodes as outputs, and what the
    mutator reads about tool-agent policies (:mod:`evotrainer.tasks.tool_agent.texts`)."""

    def __init__(self, rollout: ToolRolloutConfig | None = None, explore_share: float = 0.25) -> None:
        if isinstance(explore_share, bool) or not isinstance(explore_share, (int, float)) or not 0 <= explore_share <= 1:
            raise ConfigError(f"task.explore_share: must be a number in [0, 1], got {explore_share!r}")
        self.rollout_cfg = rollout if rollout is not None else ToolRolloutConfig()
        self.explore_share = float(explore_share)

    def __repr__(self) -> str:
        return f"ToolAgent(rollout={self.rollout_cfg}, explore_share={self.explore_share})"

    def generate(self, rng: np.random.Generator, difficulty: Mapping[str, float], n: int) -> list[ToolTask]:
        """``n`` tasks at ``difficulty``: ``round(n * explore_share)`` from exploration walks, the rest from
        templates, templates first. Deterministic given the state of ``rng`` (one draw seeds a
        ``random.Random``)."""
        local = random.Random(int(rng.integers(0, 2**63 - 1)))
        n_walk = int(round(n * self.explore_share))
        return [*_generator.generate_tasks(local, difficulty, n - n_walk),
                *_generator.explore_tasks(local, difficulty, n_walk)]

    @classmethod
    def from_config(cls, task: Any) -> ToolAgent:
        """The family from ``task.options``: ``max_steps``, ``max_new_tokens``, ``observation_chars``,
        ``prefill``, ``stop_on_repeat`` (:class:`~evotrainer.tasks.tool_agent.rollout.ToolRolloutConfig`) and
        ``explore_share``.

        Raises:
            ConfigError: an unknown option or a bad value (names ``task.options.<key>``).
        """
        options = dict(task.options)
        rollout_keys = {"max_steps", "max_new_tokens", "observation_chars", "prefill", "stop_on_repeat"}
        unknown = sorted(set(options) - rollout_keys - {"explore_share"})
        if unknown:
            raise ConfigError(f"task.options.{unknown[0]}: unknown tool_agent option; expected one of "
                              f"{sorted(rollout_keys | {'explore_share'})}")
        try:
            rollout = ToolRolloutConfig(**{k: v for k, v in options.items() if k in rollout_keys})
            return cls(rollout, explore_share=options.get("explore_share", 0.25))
        except ConfigError as exc:  # the constructors name rollout.<key> / task.<key>: name the config key
            message = str(exc).replace("rollout.", "task.options.", 1).replace("task.explore_share",
                                                                                "task.options.explore_share", 1)
            raise ConfigError(message) from None

    def build_messages(self, sections: Sequence[tuple[str, str]], task: ToolTask) -> tuple[Message, ...]:
        """The opening chat of an episode: the policy's system prompt, then the tools, the reply format and
        the question (:func:`~evotrainer.tasks.tool_agent.rollout.build_messages`)."""
        return _build_messages(render_system_prompt(sections), task)

    def roll_out(self, llm: LLM, requests: Sequence[RolloutRequest]) -> list[Generation]:
        """Each request as one multi-step episode (all episodes advance together: one batched ``generate``
        per step). A generation's ``text`` is the trajectory as JSON (:meth:`Trajectory.to_dict`); its
        ``generated_tokens`` are summed over the episode's replies. Each request's adapter runs its episode.
        """
        episodes = [Episode(r.policy_id, render_system_prompt(r.sections), r.task, r.params, r.adapter)
                    for r in requests]
        trajectories = run_episodes(llm, episodes, self.rollout_cfg)
        out = []
        for traj in trajectories:
            if traj.stop_reason == "error":
                raise RuntimeError(traj.error or "the backend failed")
            text = json.dumps(traj.to_dict(), ensure_ascii=False, separators=(",", ":"))
            tokens = sum(int(s.generated_tokens) for s in traj.steps)
            out.append(Generation(text, 0, tokens, traj.stop_reason))
        return out

    def reward(self, output: str, task: ToolTask, weights: Mapping[str, float]) -> RewardBreakdown:
        """Rule reward of the episode in ``output`` (JSON of a trajectory) under ``weights`` (normalised onto
        the simplex): correct final answer, efficiency (gold steps over steps used), format (no malformed
        call); :func:`~evotrainer.tasks.tool_agent.reward.score_episode`. Not a trajectory: 0, degenerate
        ``"not_a_trajectory"``."""
        traj = _trajectory(output, task)
        if traj is None:
            return RewardBreakdown(0.0, dict.fromkeys(_reward.REWARD_COMPONENTS, 0.0), "not_a_trajectory")
        total = sum(float(w) for w in weights.values())
        norm = {k: float(w) / total for k, w in weights.items()} if total > 0 else dict(_reward.DEFAULT_WEIGHTS)
        norm = {k: norm.get(k, 0.0) for k in _reward.REWARD_COMPONENTS}
        return _reward.score_episode(traj.steps, task, weights=norm).breakdown

    def meta_score(self, output: str, task: ToolTask) -> MetaScore:
        """Fixed meta-validation score: 1.0 for a correct final answer, else 0.0; no reward weight touches
        it. Parts: ``correct``, ``efficiency``, ``format`` (unweighted, see
        :func:`~evotrainer.tasks.tool_agent.reward.score_episode`); 0 for a text that is not a trajectory."""
        traj = _trajectory(output, task)
        if traj is None:
            return MetaScore(0.0, dict.fromkeys(_reward.REWARD_COMPONENTS, 0.0))
        score = _reward.score_episode(traj.steps, task)
        return MetaScore(score.breakdown.components["correct"], dict(score.breakdown.components))

    def load_validation(self, path: str | Path, limit: int | None = None,
                        field_map: Mapping[str, str] | None = None) -> list[ToolTask]:
        """The first ``limit`` tasks (all when None) of a JSONL file
        (:func:`~evotrainer.tasks.tool_agent.tasks.load_tasks`).

        Raises:
            ConfigError: a non-empty ``field_map`` (the tool-task schema has no renamed fields).
            DataError: a bad line (names ``file:line``).
        """
        if field_map:
            raise ConfigError(f"task.field_map: tool_agent files use their own schema, got {dict(field_map)}")
        tasks = _tasks.load_tasks(path)
        return tasks if limit is None else tasks[:limit]

    def load_dataset(
        self, path: str | Path, *, fmt: str = "auto", field_map: Mapping[str, str] | None = None,
        limit: int | None = None, field_map_key: str = "task.field_map",
    ) -> tuple[list[ToolTask], str]:
        """Tasks of a JSONL file (:meth:`load_validation`) and the shape ``"jsonl"``.

        Raises:
            ConfigError: ``fmt`` other than auto/jsonl, or a non-empty field map (names the key).
            DataError: a missing file or a bad line (``file:line``).
        """
        if fmt not in ("auto", "jsonl"):
            raise ConfigError(f"evaluate.format: tool_agent reads JSONL only, got {fmt!r}")
        if field_map:
            raise ConfigError(f"{field_map_key}: tool_agent files use their own schema, got {dict(field_map)}")
        if not Path(path).is_file():
            raise DataError(f"{path}: dataset not found; expected a tool-task .jsonl file")
        return self.load_validation(path, limit), "jsonl"

    def strata(self, task: ToolTask) -> dict[str, str]:
        """Source (generated / explored / file), template (as ``domain``) and the gold plan's steps (as ``length``)."""
        return {"source": task.source, "domain": str(task.meta.get("template", "")) if task.meta else "",
                "length": f"{len(task.plan)} step{'s' if len(task.plan) != 1 else ''}"}

    def describe_items(self, items: Sequence[ToolTask]) -> tuple[list[str], dict[str, Any]]:
        """Nothing to add (no lines, no facts)."""
        return [], {}

    def training_chats(self, sections: Sequence[tuple[str, str]], task: ToolTask,
                       output: str) -> list[tuple[Message, ...]]:
        """Supervised chats of the episode in ``output``: one per model reply, the reply last (what the loss
        covers) and everything before it as context: the opening chat under ``sections`` (the *current*
        policy's prompt), then the episode's earlier replies and observations. Every reply of the model is
        supervised once; tool observations and prompts never are. Not a trajectory: none."""
        traj = _trajectory(output, task)
        if traj is None:
            return []
        opening = self.build_messages(sections, task)
        turns = list(traj.messages[2:])
        return [(*opening, *turns[:k], turn) for k, turn in enumerate(turns) if turn["role"] == "assistant"]

    def reference_answer(self, task: ToolTask) -> str | None:
        """None: a tool task has no written reference episode (its gold plan is not a model reply)."""
        return None

    def experience(self, task: ToolTask, output: str) -> str | None:
        """The episode in ``output`` as an exemplar text when it solved ``task`` (correct final answer, no
        malformed reply): its question, tool calls, observations and answer; else None (experience
        retrieval, :class:`~evotrainer.search.exemplars.ExperiencePool`)."""
        traj = _trajectory(output, task)
        if traj is None or traj.malformed:
            return None
        final = next((s for s in traj.steps if s.kind == "final"), None)
        if final is None or not _tasks.check_answer(final.answer, task):
            return None
        return _solved_text(traj, task)

    def ground_truth(self, task: ToolTask) -> dict[str, Any]:
        """What the self-evolution pool archives as the task's truth: ``{"identity": task.identity()}``."""
        return {"identity": task.identity()}

    def exemplar(self, task: ToolTask, max_items: int = 2) -> str | None:
        """A worked episode of a generated task from its gold plan (Thought / Action / Observation lines,
        then the final answer), or None when the plan has more than ``max_items + 1`` steps."""
        if len(task.plan) > max_items + 1:
            return None
        lines = ["Example of a solved question (a different one):", f"Question: {task.question}"]
        for step in task.plan:
            lines += [f"Action: {step.tool}[{step.tool_input}]", f"Observation: {step.output}"]
        lines.append(f"Final Answer: {task.answer}")
        return "\n".join(lines)


def _solved_text(traj: Trajectory, task: ToolTask) -> str:
    lines = ["A solved question like yours (an earlier attempt):", f"Question: {task.question}"]
    for step in traj.steps:
        if step.kind == "action":
            lines += [f"Action: {step.tool}[{step.tool_input}]", f"Observation: {step.observation}"]
        elif step.kind == "final":
            lines.append(f"Final Answer: {step.answer}")
    return "\n".join(lines)


def _trajectory(output: str, task: ToolTask) -> Trajectory | None:
    """The trajectory in ``output`` when it is one of ``task`` (JSON this family wrote), else None."""
    try:
        traj = Trajectory.from_dict(json.loads(output), where=f"output of {task.task_id}")
    except (ValueError, TypeError, DataError):
        return None
    return traj if traj.task_id == task.task_id else None
