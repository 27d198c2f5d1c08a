"""``selfevolve.judge.backend=openai``: the model judge graded by a server (the scripted local one), its seeds
sent, its usage metered; a server gone for good stops the run instead of falling back to rules (issue 28)."""

from __future__ import annotations

import numpy as np
import pytest

from evotrainer.backends.usage import RunUsage
from evotrainer.config import ModelConfig
from evotrainer.errors import ServerError
from evotrainer.run.runtime import build_llm
from evotrainer.selfevolve.judge import JudgeSettings, judge_samples
from evotrainer.tasks.meeting_minutes import DEFAULT_DIFFICULTY, MeetingMinutes
from tests.backends._fake_openai import FakeServer

FAMILY = MeetingMinutes()
WEIGHTS = {"completeness": 0.5, "format": 0.2, "action_count": 0.3}


def _judge_config(url: str) -> ModelConfig:
    cfg = ModelConfig(backend="openai")
    cfg.openai.base_url, cfg.openai.model, cfg.openai.max_retries = url, "fake-model", 0
    cfg.openai.price_completion = 1.0
    return cfg


def test_the_judge_on_a_server_grades_with_per_request_seeds() -> None:
    task = FAMILY.generate(np.random.default_rng(0), DEFAULT_DIFFICULTY, 1)[0]
    with FakeServer(owned_by="vllm", answer=lambda messages, body: "8") as server:
        cfg = _judge_config(server.url)
        usage = RunUsage()
        judge = usage.wrap(build_llm(cfg, role="selfevolve.judge"), "selfevolve.judge", cfg)
        (v,) = judge_samples(judge, FAMILY, [(task, task.reference_minutes)],
                             JudgeSettings(WEIGHTS, repeats=3, temperature=0.7, model_weight=0.5),
                             np.random.default_rng(0))
        assert v.grades == (8.0, 8.0, 8.0) and v.model == pytest.approx(0.8) and v.error is None
        assert len({b["seed"] for b in server.bodies}) == 3 and all(b["temperature"] == 0.7 for b in server.bodies)
        d = usage.as_dict()["roles"]["selfevolve.judge"]
        assert d["requests"] == 3 and d["completion_tokens"] == server.usage[2] and d["cost_usd"] > 0


def test_a_judge_server_gone_stops_the_run() -> None:
    task = FAMILY.generate(np.random.default_rng(1), DEFAULT_DIFFICULTY, 1)[0]
    with FakeServer(owned_by="vllm", fail="500") as server:
        judge = build_llm(_judge_config(server.url), role="selfevolve.judge")
        with pytest.raises(ServerError, match="selfevolve.judge: the server at .* failed with HTTP 500"):
            judge_samples(judge, FAMILY, [(task, task.reference_minutes)], JudgeSettings(WEIGHTS, repeats=1),
                          np.random.default_rng(0))
