"""The run's LLM call log: answers come back from the log; a call with any miss runs whole on the backend."""

from __future__ import annotations

from evotrainer.backends.base import Generation, GenerationRequest, SamplingParams
from evotrainer.backends.call_log import CallLog, LoggedLLM, call_key, model_identity
from evotrainer.config import ModelConfig


class Counting:
    """A deterministic backend that records each call's batch."""

    name = "counting"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, requests):
        self.calls.append([r.messages[-1]["content"] for r in requests])
        return [Generation(f"answer to {r.messages[-1]['content']} seed {r.params.seed}", 5, 3, "stop")
                for r in requests]


def _req(text: str, seed: int = 0) -> GenerationRequest:
    return GenerationRequest(({"role": "user", "content": text},), SamplingParams(temperature=0.7, seed=seed))


def test_logged_calls_replay_without_the_backend(tmp_path) -> None:
    ident = model_identity(ModelConfig(path="m"))
    log = CallLog(tmp_path / "llm_calls.db")
    first = LoggedLLM(Counting(), log, ident)
    out = first.generate([_req("a"), _req("b")])
    log.close()

    log = CallLog(tmp_path / "llm_calls.db")  # a new process
    backend = Counting()
    again = LoggedLLM(backend, log, ident)
    assert again.generate([_req("a"), _req("b")]) == out and backend.calls == [] and again.replayed == 2
    # one request missing: the whole call runs on the backend, the logged answer is kept for the other
    mixed = again.generate([_req("a"), _req("c")])
    assert backend.calls == [["a", "c"]] and mixed[0] == out[0] and again.generated == 2
    assert len(log) == 3
    # the seed, the sampling settings and the model are part of the key
    assert call_key(ident, _req("a")) != call_key(ident, _req("a", seed=1))
    assert call_key(ident, _req("a")) != call_key(model_identity(ModelConfig(path="other")), _req("a"))
    # thread and batch settings are not (the text does not depend on them)
    assert model_identity(ModelConfig(path="m", threads=3, batch_size=2)) == ident
    log.close()
