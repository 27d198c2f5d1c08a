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


def _server_identity(url: str) -> str:
    cfg = ModelConfig(backend="openai")
    cfg.openai.model, cfg.openai.base_url = "served-model", url
    return model_identity(cfg)


def test_a_call_logged_from_another_server_is_not_replayed(tmp_path, caplog) -> None:
    """Two runs sharing a call log (one archive path), or a resume pointed at another server: the same model
    name and settings on another server never get the first server's answers, and a warning line says why."""
    log = CallLog(tmp_path / "llm_calls.db")
    first = LoggedLLM(Counting(), log, _server_identity("http://evo:key-1@gpu-a:8000/v1"))
    first.generate([_req("a"), _req("b")])
    backend = Counting()
    with caplog.at_level("WARNING", logger="evotrainer.backends.call_log"):
        other = LoggedLLM(backend, log, _server_identity("http://evo:key-1@gpu-b:8000/v1"))
        other.generate([_req("a"), _req("b")])
    assert backend.calls == [["a", "b"]] and other.replayed == 0  # sent to the server this run talks to
    (line,) = [r.getMessage() for r in caplog.records]
    assert "another server" in line and "gpu-a" in line and "gpu-b" in line and "\n" not in line
    assert "key-1" not in line  # the identity holds the URL with its credential masked
    caplog.clear()
    again = LoggedLLM(Counting(), log, _server_identity("http://evo:key-1@gpu-a:8000/v1"))  # the first server
    assert again.generate([_req("a")]) and again.replayed == 1 and not caplog.records
    log.close()


def test_a_server_serving_other_weights_at_the_same_url_is_not_replayed(tmp_path, caplog) -> None:
    """A server restarted at the same URL with other weights behind the same served name (vLLM's /models
    ``root``): the run's call log tells them apart (evotrainer/run/resume.py, ``RunFiles.logged``)."""
    from evotrainer.backends.openai_compat import OpenAIBackend
    from evotrainer.config import Config
    from evotrainer.run.resume import RunFiles
    from tests.backends._fake_openai import FakeServer

    cfg = Config()
    cfg.model = ModelConfig(backend="openai")
    cfg.archive.path = str(tmp_path / "archive.db")
    request = GenerationRequest(({"role": "user", "content": "Minutes please."},), SamplingParams(max_new_tokens=8))
    with FakeServer(owned_by="vllm", root="/models/qwen-a") as server:
        cfg.model.openai.base_url, cfg.model.openai.model = server.url, server.model
        texts = []
        for root in ("/models/qwen-a", "/models/qwen-b", "/models/qwen-a"):
            server.root = root
            files = RunFiles.open(cfg, tmp_path, None)
            backend = OpenAIBackend(cfg.model.openai)
            with caplog.at_level("WARNING", logger="evotrainer.backends.call_log"):
                texts.append(files.logged(backend, cfg.model).generate([request])[0].text)
            backend.close()
            files.close()
        assert server.attempts == 2  # qwen-b was asked, not answered from qwen-a's log; qwen-a again was replayed
    (line,) = [r.getMessage() for r in caplog.records]
    assert "qwen-a" in line and "qwen-b" in line


def test_greedy_answers_are_shared_across_root_seeds_and_sampled_ones_are_not() -> None:
    """A study's runs differ in their root seed, which reaches every request's decoding seed; greedy decoding
    ignores it, so a shared log must serve one run's greedy answer to another."""
    ident = model_identity(ModelConfig(path="m"))
    greedy = [GenerationRequest(({"role": "user", "content": "a"},), SamplingParams(temperature=0.0, seed=s))
              for s in (0, 7)]
    assert call_key(ident, greedy[0]) == call_key(ident, greedy[1])
    assert call_key(ident, _req("a", seed=0)) != call_key(ident, _req("a", seed=7))


def test_runs_naming_one_call_log_share_it(tmp_path) -> None:
    from types import SimpleNamespace

    from evotrainer.run.resume import RunFiles

    def cfg(call_log):
        return SimpleNamespace(inner=SimpleNamespace(adapter_mutation_share=0.0),
                               archive=SimpleNamespace(path="archive.db", call_log=call_log))

    own = RunFiles.open(cfg(None), tmp_path / "run0", None)
    assert own.calls.path == tmp_path / "run0" / "llm_calls.db"
    a = RunFiles.open(cfg("../shared_calls.db"), tmp_path / "run1", None)
    b = RunFiles.open(cfg("../shared_calls.db"), tmp_path / "run2", None)
    assert a.calls.path.resolve() == b.calls.path.resolve() == (tmp_path / "shared_calls.db").resolve()
    for files in (own, a, b):
        files.calls.close()


def test_with_adapter_genes_only_adapter_free_calls_are_logged(tmp_path) -> None:
    """Adapter genes train their adapters in the run, so a request naming one is never served from the log; a
    call holding one runs whole (the batch an unlogged run sends), and its adapter-free answers are logged for
    runs sharing the file."""
    from dataclasses import replace as with_

    ident = model_identity(ModelConfig(path="m"))
    log = CallLog(tmp_path / "llm_calls.db")
    backend = Counting()
    llm = LoggedLLM(backend, log, ident, log_adapters=False)
    tuned = with_(_req("b"), adapter=str(tmp_path / "adapter"))
    out = llm.generate([_req("a"), tuned])
    assert backend.calls == [["a", "b"]] and len(log) == 1  # "a" logged, the adapter's answer not
    again = llm.generate([_req("a"), tuned])
    assert backend.calls == [["a", "b"]] * 2 and again[0] == out[0]  # whole call again; a's logged answer kept
    assert llm.generate([_req("a")]) == [out[0]] and llm.replayed == 1 and len(backend.calls) == 2
    log.close()


def test_an_adapter_run_opens_a_call_log_of_its_adapter_free_calls(tmp_path) -> None:
    from types import SimpleNamespace

    import pytest

    from evotrainer.errors import ConfigError
    from evotrainer.run.resume import RunFiles

    cfg = SimpleNamespace(mode="evolve", inner=SimpleNamespace(adapter_mutation_share=0.3),
                          archive=SimpleNamespace(path="archive.db", call_log=None))
    files = RunFiles.open(cfg, tmp_path / "run", None)
    assert files.calls is not None and files.logged(Counting(), ModelConfig(path="m")).log_adapters is False
    files.close()
    with pytest.raises(ConfigError, match="adapter genes"):
        RunFiles.open(cfg, tmp_path / "run", SimpleNamespace())
