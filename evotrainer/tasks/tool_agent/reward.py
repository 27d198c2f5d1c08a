"""Rule rewards of a tool-agent episode and step-level credit (which step first went wrong).

Components, each in [0, 1], higher is better:

- ``correct``: 1.0 when the final answer is right (:func:`~evotrainer.tasks.tool_agent.tasks.check_answer`).
- ``efficiency``: steps used by a correct answer, against the gold plan: ``min(1, (len(plan) + 1) /
  n_steps)`` (the gold plan's tool calls plus the answer turn, over the model calls made); 0.0 when the
  answer is wrong or missing, so answering fast and wrong earns nothing from it.
- ``format``: ``1 - malformed / n_steps``, the share of replies that parsed (the malformed-call penalty).

The total is ``sum_i w_i * component_i`` with weights on the simplex, so it lies in [0, 1].

A step is *right* when its tool returned a value within ``rel_tol`` of one of the gold plan's values
(intermediate or final), or when it gave a correct final answer; it is *wrong* when it was malformed,
its tool returned an error or a value matching no gold value, or its final answer is wrong. The credit
is the index of the first wrong step, or None when no step was wrong (an episode that ran out of steps
with only right steps gets None: its failure is the missing answer, seen in its stop reason).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from evotrainer.tasks.base import RewardBreakdown
from evotrainer.tasks.tool_agent.tasks import ANSWER_REL_TOL, ToolTask, check_answer
from evotrainer.tasks.tool_agent.trajectory import Step

__all__ = ["DEFAULT_WEIGHTS", "REWARD_COMPONENTS", "EpisodeScore", "score_episode"]

REWARD_COMPONENTS: tuple[str, ...] = ("correct", "efficiency", "format")
"""Reward component names, in a fixed order."""

DEFAULT_WEIGHTS: Mapping[str, float] = {"correct": 0.7, "efficiency": 0.15, "format": 0.15}
"""Default reward weights (on the simplex): correctness dominates; speed and clean calls break ties."""


@dataclass(frozen=True)
class EpisodeScore:
    """The reward of one episode.

    Attributes:
        breakdown: total in [0, 1] and the components (:data:`REWARD_COMPONENTS`).
        steps: the episode's steps with their per-step ``reward`` set (1.0 right, 0.0 wrong).
        first_wrong_step: index of the first wrong step, or None.
    """

    breakdown: RewardBreakdown
    steps: tuple[Step, ...]
    first_wrong_step: int | None


def _step_right(step: Step, task: ToolTask, rel_tol: float) -> bool:
    if step.kind == "final":
        return check_answer(step.answer, task, rel_tol=rel_tol)
    if step.kind != "action" or step.value is None or not math.isfinite(step.value):
        return False
    return any(math.isclose(step.value, g, rel_tol=rel_tol, abs_tol=1e-9) for g in task.gold_values)


def score_episode(steps: Sequence[Step], task: ToolTask, *, weights: Mapping[str, float] = DEFAULT_WEIGHTS,
                  rel_tol: float = ANSWER_REL_TOL) -> EpisodeScore:
    """Rule rewards and step-level credit of one episode.

    Args:
        steps: the episode's steps in order (>= 0; an empty episode scores 0 on every component).
        task: the task it attempted (gold plan and answer).
        weights: reward weights by component, on the simplex (checked once by their owner:
            :func:`~evotrainer.tasks.reward_weights.check_reward_weights`).
        rel_tol: relative tolerance for matching values and answers, >= 0.

    Returns:
        The :class:`EpisodeScore`. Never raises for any model output.
    """
    w = weights
    right = [_step_right(s, task, rel_tol) for s in steps]
    scored = tuple(replace(s, reward=1.0 if ok else 0.0) for s, ok in zip(steps, right, strict=True))
    first_wrong = next((i for i, ok in enumerate(right) if not ok), None)
    n = len(steps)
    final = next((s for s in steps if s.kind == "final"), None)
    correct = 1.0 if final is not None and check_answer(final.answer, task, rel_tol=rel_tol) else 0.0
    components = {
        "correct": correct,
        "efficiency": correct * min(1.0, (len(task.plan) + 1) / n) if n else 0.0,
        "format": 1.0 - sum(s.kind == "malformed" for s in steps) / n if n else 0.0,
    }
    total = sum(w.get(k, 0.0) * v for k, v in components.items())
    return EpisodeScore(RewardBreakdown(min(max(total, 0.0), 1.0), components), scored, first_wrong)
