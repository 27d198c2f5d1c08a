"""Multi-step trajectories: the frozen record, JSONL export/import, and the SFT loss mask.

A trajectory keeps the whole chat (system prompt, user question, then alternating assistant replies
and ``Observation: ...`` user turns) and one :class:`Step` per model call. :func:`loss_mask` turns it
into token ids and a 0/1 mask that is 1 exactly on the model's own tokens (each assistant reply and the
end-of-turn token that closes it), so training on trajectories never teaches the model to write tool
outputs, the question or the system prompt.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evotrainer.atomic import write_text_atomic
from evotrainer.backends.base import Message
from evotrainer.errors import DataError
from evotrainer.tasks.jsonl_rows import jsonl_objects

__all__ = ["STOP_REASONS", "Step", "TokenMask", "Trajectory", "load_jsonl", "loss_mask", "save_jsonl"]

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
    def tool_calls(self) -> tuple[tuple[str, str], ...]:
        """``(tool, input)`` of every well-formed action, in order."""
        return tuple((s.tool, s.tool_input) for s in self.steps if s.kind == "action")

    @property
    def observations(self) -> tuple[str, ...]:
        """Every observation sent back (tool outputs and parse errors), in order."""
        return tuple(s.observation for s in self.steps if s.kind != "final")

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


def save_jsonl(trajectories: Iterable[Trajectory], path: str | Path) -> Path:
    """Write trajectories as JSONL (one :meth:`Trajectory.to_dict` per line, UTF-8), atomically: a
    temporary file in the same folder replaced onto ``path``, so a reader never sees half a file.

    Returns:
        ``path`` as a Path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps(t.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n" for t in trajectories)
    return write_text_atomic(path, "".join(lines), mode=0o644)


def load_jsonl(path: str | Path) -> list[Trajectory]:
    """Read trajectories written by :func:`save_jsonl` (blank lines skipped).

    Raises:
        DataError: missing file, bad JSON or a malformed trajectory (names ``file:line``).
    """
    return [Trajectory.from_dict(row, where) for where, _, row in jsonl_objects(path, "trajectory file")]


# --- loss mask ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenMask:
    """A tokenised chat with its supervision mask.

    Attributes:
        input_ids: token ids of the whole rendered chat, shape (L,).
        mask: shape (L,), 1 on the model's own tokens (every assistant reply and the end-of-turn token
            closing it), 0 on everything else (system, user question, tool observations, role markers).
    """

    input_ids: tuple[int, ...]
    mask: tuple[int, ...]


def _render(tokenizer: Any, messages: Sequence[Message], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=generation_prompt)


def loss_mask(tokenizer: Any, chat: Trajectory | Sequence[Message], *, end_token: str | None = None,
              where: str = "trajectory") -> TokenMask:
    """Token ids and a loss mask on the model's own tokens for supervised fine-tuning on a trajectory.

    The chat is rendered with the tokenizer's chat template, an explicit empty system turn added when
    there is none (as the backends do at generation time). Each assistant reply is tokenised on its own
    and followed by the end-of-turn token, the text between replies (role markers, user turns,
    observations) on its own, so a reply's tokens are exactly those the model produced after its
    generation prompt (the rule of :func:`evotrainer.adapters.sft_data.encode_chat`, extended to many turns).

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        chat: a :class:`Trajectory` (its ``messages``) or the messages themselves.
        end_token: the end-of-turn token text; default ``tokenizer.eos_token`` (``<|im_end|>`` for SmolLM2).
        where: label for error messages.

    Every assistant turn is learnt, malformed or wrong ones included: choose the trajectories (e.g. by
    reward) before building masks. A blank reply is masked out (0), end-of-turn included.

    Returns:
        The :class:`TokenMask`.

    Raises:
        DataError: no assistant turn, or a chat template that does not render each assistant turn as
            ``prompt-with-generation-prompt + reply + end-of-turn``.
    """
    from evotrainer.backends.hf import ensure_system_turn

    messages = chat.messages if isinstance(chat, Trajectory) else tuple(chat)
    msgs = ensure_system_turn(messages, where=where)
    end = end_token if end_token is not None else tokenizer.eos_token
    if not end:
        raise DataError(f"{where}: the tokenizer has no end-of-turn token; pass end_token")
    end_ids = list(tokenizer(end, add_special_tokens=False)["input_ids"])
    assistant = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    if not assistant:
        raise DataError(f"{where}: no assistant turn to learn from")

    def tokens(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    ids: list[int] = []
    mask: list[int] = []
    done = ""  # rendered text covered so far
    for i in assistant:
        reply = msgs[i]["content"]
        prompt = _render(tokenizer, msgs[:i], True)
        if not prompt.startswith(done):
            raise DataError(f"{where}, message {i}: the chat template renders earlier turns differently "
                            "once later turns are added; cannot build a per-turn loss mask")
        between = tokens(prompt[len(done):])
        reply_ids = tokens(reply) + end_ids
        ids += between + reply_ids
        mask += [0] * len(between) + [1 if reply.strip() else 0] * len(reply_ids)
        done = prompt + reply + end
    full = _render(tokenizer, msgs, False)
    if not full.startswith(done):
        raise DataError(f"{where}: the chat template does not render assistant turns as reply + {end!r}")
    tail = tokens(full[len(done):])
    ids += tail
    mask += [0] * len(tail)
    return TokenMask(tuple(ids), tuple(mask))
