"""Deterministic stand-ins for the policy model, the judge, the embedder and the LoRA trainer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from evotrainer.adapters.train import SFTExample, TrainResult
from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS


def _gen(text: str) -> Generation:
    return Generation(text=text, prompt_tokens=10, generated_tokens=max(1, len(text.split())), finish_reason="stop")


class FakeLLM:
    """Answers a minutes request by ``answer(task, adapter)`` and a judge request with ``grade``.

    Args:
        tasks: every task the fake may be asked about (looked up by transcript in the user message).
        answer: ``(task, adapter folder or None) -> minutes``; default: the task's reference minutes.
        grade: the judge reply.
    """

    name = "fake-llm"

    def __init__(self, tasks: Sequence[MeetingTask],
                 answer: Callable[[MeetingTask, str | None], str] | None = None, grade: str = "8") -> None:
        self.tasks = list(tasks)
        self.answer = answer or (lambda task, adapter: task.reference_minutes)
        self.grade = grade
        self.requests: list[GenerationRequest] = []

    def _task(self, user: str) -> MeetingTask:
        for t in self.tasks:
            if t.transcript.strip() in user:
                return t
        raise KeyError("unknown transcript")

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.requests += list(requests)
        out = []
        for r in requests:
            if r.messages[0]["content"] == MEETING_TEXTS.judge_prompt[0]:
                out.append(_gen(self.grade))
            else:
                out.append(_gen(self.answer(self._task(r.messages[-1]["content"]), r.adapter)))
        return out


class FakeEmbedder:
    """Random unit vectors per text (a sha256-seeded RNG), or the vectors given in ``fixed``."""

    name = "fake-embedder"

    def __init__(self, fixed: Mapping[str, np.ndarray] | None = None, dim: int = 16) -> None:
        self.fixed = dict(fixed or {})
        self.dim = dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for t in texts:
            if t in self.fixed:
                v = np.asarray(self.fixed[t], dtype=np.float64)
            else:
                seed = int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
                v = np.random.default_rng(seed).normal(size=self.dim)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32)


class FakeTrainer:
    """Records its calls and writes a stand-in adapter folder; losses fall linearly; each step reads 100 tokens
    (20 supervised; 120 positions with padding) in 0.005 s."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, backend, examples: Sequence[SFTExample], replay: Sequence[SFTExample], cfg, out_dir, *,
                 rng: np.random.Generator, parent_adapter=None) -> TrainResult:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "adapter_config.json").write_text(json.dumps({"r": cfg.rank}), encoding="utf-8")
        self.calls.append({"examples": list(examples), "replay": list(replay), "parent": parent_adapter,
                           "out_dir": str(out), "cfg": cfg})
        losses = tuple(float(x) for x in np.linspace(2.0, 1.0, cfg.steps))
        return TrainResult(adapter_dir=str(out), losses=losses, seconds=0.01, trainable_params=1234,
                           steps=cfg.steps, replay_share=0.25, seconds_per_step=0.005, answer_tokens=20 * cfg.steps,
                           input_tokens=100 * cfg.steps, padded_tokens=120 * cfg.steps)
