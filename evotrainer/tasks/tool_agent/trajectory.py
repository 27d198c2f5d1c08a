"""Multi-step trajectories: the frozen record of one episode and its JSON form.

A trajectory keeps the whole chat (system prompt, user question, then alternating assistant replies
and ``Observation: ...`` user turns) and one :class:`Step` per model call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from evotrainer.backends.base import Message
from evotrainer.errors import DataError

__all__ = ["STOP_REASONS", "Step", "Trajectory"]

STOP_REASONS = ("final_answer", "max_steps", "repeated", "error")
"""Why an episode ended: the model gave a final answer; the step limit was reached; a greedy reply repeated
the previous one (see :class:`~evotrainer.tasks.tool_agent.rollout.ToolRolloutConfig`); the backend failed."""


@dataclass(frozen=True)
class Step:
    """One model call of an episode.

    Attributes:
        index: 0-based position in the episode.
        reply: the model's whole generated text.
        text: the part kept as the assistant message (an invented observation after the action cut off).
        kind: "action", "final" or "malformed" (see :mod:`~evotrainer.tasks.tool_agent.parse`).
        tool: tool called ("" unless kind is "action").
        tool_input: its input ("" unless kind is "action").
        observation: what was sent back: the tool's output, or for a malformed reply the parser's error
            ("" after a final answer).
        value: the number the tool returned; None on a tool error or when no tool ran.
        answer: the final answer ("" unless kind is "final").
        reward: process reward of the step in [0, 1]: 1.0 when it matched the gold plan (its tool value is
            one of the gold values, or its final answer is correct), else 0.0.
        generated_tokens: tokens the model generated for it.
    """

    index: int
    reply: str
    text: str
    kind: str
    tool: str = ""
    tool_input: str = ""
    observation: str = ""
    value: float | None = None
    answer: str = ""
    reward: float = 0.0
    generated_tokens: int = 0


@dataclass(frozen=True)
class Trajectory:
    """One episode of a policy on a task.

    Attributes:
        task_id: the task.
        policy_id: the policy (its system prompt).
        messages: the chat, in order: system, user question, then assistant / user ``Observation:`` turns.
        steps: one per model call, in order (at most the rollout's ``max_steps``).
        final_answer: the answer given, or None when none was given.
        stop_reason: one of :data:`STOP_REASONS`.
        reward: total reward in [0, 1], higher is better.
        components: reward components by name, each in [0, 1].
        first_wrong_step: index of the first step that went wrong (step-level credit), or None.
        error: the backend failure, for stop reason "error"; else None.
        meta: free-form extra fields (not part of identity).
    """

    task_id: str
    policy_id: str
    messages: tuple[Message, ...]
    steps: tuple[Step, ...]
    final_answer: str | None
    stop_reason: str
    reward: float
    components: Mapping[str, float]
    first_wrong_step: int | None
    error: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def malformed(self) -> int:
        """Number of malformed replies."""
        return sum(s.kind == "malformed" for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (one line of the JSONL export)."""
        out = asdict(self)
        out["messages"] = [dict(m) for m in self.messages]
        out["components"] = dict(self.components)
        out["meta"] = dict(self.meta)
        return out

    @classmethod
    def from_dict(cls, row: Mapping[str, Any], where: str = "trajectory") -> Trajectory:
        """Inverse of :meth:`to_dict`.

        Raises:
            DataError: a missing or mistyped field, or an unknown stop reason (names ``where``).
        """
        try:
            steps = tuple(Step(**{**s, "value": None if s.get("value") is None else float(s["value"])})
                          for s in row["steps"])
            messages = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in row["messages"])
            traj = cls(
                task_id=str(row["task_id"]), policy_id=str(row["policy_id"]), messages=messages, steps=steps,
                final_answer=None if row.get("final_answer") is None else str(row["final_answer"]),
                stop_reason=str(row["stop_reason"]), reward=float(row["reward"]),
                components={str(k): float(v) for k, v in dict(row.get("components", {})).items()},
                first_wrong_step=None if row.get("first_wrong_step") is None else int(row["first_wrong_step"]),
                error=row.get("error"), meta=dict(row.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: malformed trajectory ({type(exc).__name__}: {exc})") from None
        if traj.stop_reason not in STOP_REASONS:
            raise DataError(f"{where}: stop_reason {traj.stop_reason!r} is not one of {list(STOP_REASONS)}")
        if not (math.isfinite(traj.reward) and 0.0 <= traj.reward <= 1.0):
            raise DataError(f"{where}: reward {traj.reward!r} is not in [0, 1]")
        return traj
