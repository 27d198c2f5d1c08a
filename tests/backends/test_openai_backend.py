"""The openai backend against a scripted local server (tests/backends/_fake_openai.py): request fields per
server kind, concurrency, usage, prefill and adapter paths, and one clear line for each way a server fails."""

from __future__ import annotations

import logging
import shutil
import socket
from dataclasses import replace
from pathlib import Path

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.call_log import CallLog, LoggedLLM, call_key, model_identity
from evotrainer.backends.openai_compat import OpenAIBackend
from evotrainer.backends.openai_fields import PROFILES, detect_server, request_fields, unsupported
from evotrainer.config import ModelConfig
from evotrainer.errors import AdapterLoadError, ConfigError, ModelError, ServerError
from evotrainer.model_schema import OpenAIConfig
from evotrainer.rollout import RolloutEvaluator, _handling_code
from tests.backends._fake_openai import FakeServer, fake_answer
from tests.test_rollout import TASKS, WEIGHTS, KeywordFamily, _policy

GREEDY = SamplingParams(max_new_tokens=32, no_repeat_ngram_size=0)


def _req(text: str, params: SamplingParams = GREEDY, prefill: str | None = None,
         adapter: str | None = None) -> GenerationRequest:
    messages = [{"role": "user", "content": text}]
    if prefill is not None:
        messages.append({"role": "assistant", "content": prefill})
    return GenerationRequest(tuple(messages), params, adapter)


def _backend(fake: FakeServer, max_context: int | None = None, **kw) -> OpenAIBackend:
    kw.setdefault("max_retries", 1)
    return OpenAIBackend(OpenAIConfig(base_url=fake.url, model=fake.model, **kw), max_context=max_context)


def _tokenizer(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def _adapter(folder: Path, weights: bytes = b"lora weights") -> Path:
    """A folder with an adapter's two files (the fake server reads only their path)."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return folder


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and len(text) < 600, text
    return text


# ---------------------------------------------------------------------------------------------- fields


def test_request_fields_per_server_kind() -> None:
    greedy = request_fields(SamplingParams(max_new_tokens=40), PROFILES["vllm"], frozenset())
    assert greedy.body == {"temperature": 0.0, "max_tokens": 40, "top_p": 1.0, "seed": 0, "frequency_penalty": 0.0,
                           "presence_penalty": 0.0}  # every field set, greedy included
    assert greedy.extra == {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}  # vLLM's own, neutral
    assert greedy.dropped == ("no_repeat_ngram_size",)  # the default 4: no server has it
    sampled = request_fields(SamplingParams(temperature=0.7, top_p=0.9, seed=5, no_repeat_ngram_size=0,
                                            repetition_penalty=1.2), PROFILES["vllm"], frozenset({"repetition_penalty"}))
    assert {k: sampled.body[k] for k in ("temperature", "max_tokens", "top_p", "seed")} == {
        "temperature": 0.7, "max_tokens": 160, "top_p": 0.9, "seed": 5}
    assert sampled.extra["repetition_penalty"] == 1.2 and sampled.approximated == ("repetition_penalty",)
    assert "repetition_penalty" not in sampled.neutral
    tf = request_fields(SamplingParams(repetition_penalty=1.2, no_repeat_ngram_size=0), PROFILES["transformers"],
                        frozenset({"repetition_penalty"}))
    assert tf.body["frequency_penalty"] == pytest.approx(0.2)  # transformers serve: 1 + f
    assert not tf.extra and "top_k" not in tf.body  # it refuses fields it does not know (HTTP 422)
    tf_sampled = request_fields(SamplingParams(temperature=0.5), PROFILES["transformers"], frozenset())
    assert tf_sampled.extra == {"generation_config": '{"top_k": 0}'} and tf_sampled.body["frequency_penalty"] == 0.0
    no_consent = request_fields(SamplingParams(repetition_penalty=1.2), PROFILES["vllm"], frozenset())
    assert no_consent.dropped == ("repetition_penalty", "no_repeat_ngram_size")
    assert no_consent.extra["repetition_penalty"] == 1.0  # dropped: neutral, not the server's default
    hosted = request_fields(SamplingParams(max_new_tokens=9), PROFILES["openai"], frozenset())
    assert hosted.body["max_completion_tokens"] == 9 and "max_tokens" not in hosted.body and not hosted.extra
    llama = request_fields(SamplingParams(), PROFILES["llamacpp"], frozenset())
    assert llama.extra["top_k"] == 0 and llama.extra["min_p"] == 0.0 and llama.extra["repeat_penalty"] == 1.0


def test_unsupported_settings_name_the_reason() -> None:
    assert unsupported("no_repeat_ngram_size", 0, PROFILES["vllm"], frozenset()) is None
    assert "n-grams of the generated text" in unsupported("no_repeat_ngram_size", 4, PROFILES["vllm"], frozenset())
    assert "openai.approximate" in unsupported("repetition_penalty", 1.1, PROFILES["vllm"], frozenset())
    assert unsupported("repetition_penalty", 1.1, PROFILES["vllm"], frozenset({"repetition_penalty"})) is None
    assert "no repetition penalty" in unsupported("repetition_penalty", 1.1, PROFILES["ollama"],
                                                  frozenset({"repetition_penalty"}))
    assert unsupported("max_new_tokens", 12, PROFILES["generic"], frozenset()) is None


def test_server_kind_from_the_model_list() -> None:
    assert detect_server({"vllm"}, set(), "http://h/v1") == "vllm"
    assert detect_server({"llamacpp"}, set(), "http://h/v1") == "llamacpp"
    assert detect_server({"library"}, set(), "http://h/v1") == "ollama"
    assert detect_server({"local"}, {"status"}, "http://h/v1") == "transformers"
    assert detect_server({"system"}, set(), "https://api.openai.com/v1") == "openai"
    assert detect_server({"someone"}, set(), "http://h/v1") == "generic"


# ---------------------------------------------------------------------------------------------- generation


def test_answers_in_order_with_the_servers_usage_and_a_concurrency_limit() -> None:
    with FakeServer(owned_by="vllm", delay_s=0.3) as server:
        llm = _backend(server, concurrency=3)
        requests = [_req(f"Meeting:\nAna: we agreed the plan number {i} today") for i in range(9)]
        out = llm.generate(requests)
        assert 2 <= server.max_in_flight <= 3
        assert [g.text for g in out] == [fake_answer([{"role": "system", "content": ""}, dict(r.messages[0])],
                                                     {"temperature": 0}) for r in requests]
        assert sum(g.prompt_tokens for g in out) == server.usage[1]  # the server's usage, not a local count
        assert sum(g.generated_tokens for g in out) == server.usage[2]
        assert all(b["messages"][0] == {"role": "system", "content": ""} for b in server.bodies)  # explicit empty turn
        d = llm.describe()
        assert d["server"] == "vllm" and d["requests"] == 9 and d["dropped"] == {}
        assert d["sent"] == {"temperature": 9, "max_new_tokens": 9, "top_p": 9, "seed": 9} and d["api_key_env"] is None


def test_sampled_requests_send_their_seed() -> None:
    with FakeServer(owned_by="llamacpp") as server:
        llm = _backend(server)
        a, b = llm.generate([_req("x", SamplingParams(temperature=0.8, seed=3)),
                             _req("x", SamplingParams(temperature=0.8, seed=4))])
        assert {body["seed"] for body in server.bodies} == {3, 4} and a.text != b.text
        assert llm.describe()["seed"] == "per_request"


def test_answer_prefill_paths(tiny_model_dir: Path) -> None:
    with FakeServer(owned_by="vllm") as server:  # continues the final assistant message
        (g,) = _backend(server).generate([_req("List two fruits.", prefill="- Apple")])
        assert server.bodies[-1]["continue_final_message"] is True
        assert server.bodies[-1]["add_generation_prompt"] is False
        assert g.text.startswith("- Apple continued")
    with FakeServer(owned_by="someone") as server:  # generic: no way to continue
        llm = _backend(server)
        assert llm.prefill_mode is None and "prefill" in llm.prefill_refusal
        with pytest.raises(ModelError, match="starts its answer with a prefill"):
            llm.generate([_req("List two fruits.", prefill="- Apple")])
        assert server.attempts == 0  # refused before sending
        llm = _backend(server, prefill="completions", tokenizer=str(tiny_model_dir))  # the template applied here
        (g,) = llm.generate([_req("List two fruits.", prefill="- Apple")])
        prompt = server.bodies[-1]["prompt"]
        assert prompt.endswith("<|im_start|>assistant\n- Apple") and "<|im_start|>system\n<|im_end|>" in prompt
        assert g.text.startswith("- Apple Summary:") and llm.describe()["prefilled"] == {"completions": 1}
    with FakeServer(owned_by="someone") as server, pytest.raises(ConfigError, match="openai.tokenizer"):
        _backend(server, prefill="completions")
    with FakeServer(owned_by="local") as server, pytest.raises(ConfigError, match="finished turn"):
        _backend(server, server="transformers", prefill="continue")


def test_prompts_are_fitted_to_the_context_window_with_a_tokenizer(tiny_model_dir: Path) -> None:
    with FakeServer(tokenizer=_tokenizer(tiny_model_dir)) as server:  # counts as a server counts: same tokenizer
        llm = _backend(server, tokenizer=str(tiny_model_dir), max_context=300)
        long = "Meeting:\n" + " ".join(f"word{i}" for i in range(2000))
        (g,) = llm.generate([_req(long, SamplingParams(max_new_tokens=100))])
        sent = server.bodies[-1]["messages"][1]["content"]
        assert g.prompt_truncated and "words omitted" in sent and len(sent) < len(long) / 2
        assert g.omitted_words > 1000 and _handling_code(g).startswith("cut")
        assert g.prompt_tokens <= 300 - 100 and llm.describe()["server_cut"] == 0  # fitted here, not cut there


def test_a_server_that_cuts_long_prompts_silently_is_caught_and_recorded(tiny_model_dir: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Ollama cuts a prompt over its context window keeping the end, the evolved instructions first, and reports
    the cut prompt's tokens (ollama#5902, #6026)."""
    instructions = "Write the minutes as bullets and name the owner of every action item."
    long = "Meeting:\n" + " ".join(f"word{i}" for i in range(600))
    request = GenerationRequest(({"role": "system", "content": instructions}, {"role": "user", "content": long}),
                                GREEDY)
    # its window set by OLLAMA_CONTEXT_LENGTH (not reported), no tokenizer here: the usage it reports tells
    with FakeServer(owned_by="library", context=200, num_ctx_shown=False) as server:
        llm = _backend(server)
        with caplog.at_level(logging.WARNING, logger="evotrainer.backends.openai_compat"):
            (g,) = llm.generate([request])
        assert g.prompt_tokens == 200 and g.prompt_truncated and _handling_code(g) == "cut"  # a cut, share unknown
        assert llm.describe()["server_cut"] == 1 and "cut request 0's prompt without saying so" in caplog.text
        assert llm.profile.kind == "ollama" and llm.server_context is None
    # num_ctx in the Modelfile (/api/show) and a tokenizer: the prompt is fitted here, the instructions kept
    with FakeServer(owned_by="library", context=200, tokenizer=_tokenizer(tiny_model_dir)) as server:
        llm = _backend(server, tokenizer=str(tiny_model_dir), max_context=4096)
        assert llm.server_context == 200 and llm.describe()["server_parameters"] == {"num_ctx": "200"}
        (g,) = llm.generate([request])
        sent = server.bodies[-1]["messages"]
        assert sent[0]["content"] == instructions and "words omitted" in sent[1]["content"]
        assert g.prompt_truncated and g.omitted_words > 0 and g.prompt_tokens <= 200 - GREEDY.max_new_tokens
        assert llm.describe()["server_cut"] == 0
    # vLLM states its window in /v1/models (it refuses longer prompts instead of cutting them)
    with FakeServer(owned_by="vllm", context=512) as server:
        assert _backend(server).server_context == 512


def test_server_side_sampling_defaults_never_fill_fields_the_request_leaves_out() -> None:
    """vLLM fills a field the request leaves out from the model's generation_config.json (Qwen2.5: a repetition
    penalty of 1.05, top_k 20, top_p 0.8; NeMo-RL#3497, prime-rl PR#886)."""
    qwen = {"repetition_penalty": 1.05, "top_k": 20, "top_p": 0.8, "min_p": 0.05}
    with FakeServer(owned_by="vllm", defaults=qwen) as server:
        llm = _backend(server)
        (g,) = llm.generate([_req("Meeting:\nAna: we agreed the plan for the launch today")])
        (used,) = server.effective
        assert {k: used[k] for k in qwen} == {"repetition_penalty": 1.0, "top_k": -1, "top_p": 1.0, "min_p": 0.0}
        assert used["seed"] == 0 and used["frequency_penalty"] == 0.0 and "penalised" not in g.text
        d = llm.describe()  # archived in the run's `backend` phase event
        assert d["neutral"] == {"frequency_penalty": 0.0, "presence_penalty": 0.0, "top_k": -1, "min_p": 0.0,
                                "repetition_penalty": 1.0}
        assert d["neutral_sent"]["repetition_penalty"] == 1 and d["not_settable"] == []
    # Ollama's OpenAI endpoint takes no top_k or repeat_penalty: the Modelfile's apply, and the archive says which
    with FakeServer(owned_by="library", defaults={"repeat_penalty": 1.1, "top_k": 40}) as server:
        llm = _backend(server)
        (g,) = llm.generate([_req("Meeting:\nAna: we agreed the plan for the launch today")])
        d = llm.describe()
        assert d["not_settable"] == ["top_k", "min_p", "repeat_penalty"]
        assert d["server_parameters"] == {"repeat_penalty": "1.1", "top_k": "40"} and "penalised 1.1" in g.text


def test_an_adapter_the_server_already_holds_is_used_not_failed(tmp_path: Path) -> None:
    """vLLM refuses to load a name it holds with HTTP 400 "has already been loaded" (vllm PR#31326): a rerun or a
    second process against a long-lived server finds its adapters there."""
    folder = _adapter(tmp_path / "adapter")
    with FakeServer(owned_by="vllm") as server:
        _backend(server).generate([_req("a", adapter=str(folder))])  # an earlier process
        again = _backend(server)  # a rerun against the same server
        (g,) = again.generate([_req("b", adapter=str(folder))])
        first, second = server.lora_loads
        assert first["lora_name"] == second["lora_name"] and server.bodies[-1]["model"] == first["lora_name"]
        assert g.text and again.describe()["adapters_already_held"] == 1
        copy = shutil.copytree(folder, tmp_path / "copy")  # the same files elsewhere: the same adapter
        again.generate([_req("c", adapter=str(copy))])
        assert server.lora_loads[-1]["lora_name"] == first["lora_name"]
        changed = _adapter(tmp_path / "changed", weights=b"other weights")  # other bytes: another name
        again.generate([_req("d", adapter=str(changed))])
        assert server.lora_loads[-1]["lora_name"] != first["lora_name"]


def test_a_failed_adapter_load_fails_that_policys_requests_only(tmp_path: Path) -> None:
    good, bad = _adapter(tmp_path / "good"), _adapter(tmp_path / "bad", weights=b"unreadable here")
    with FakeServer(owned_by="vllm", lora_missing={str(bad.resolve())}) as server:  # vLLM's 404 for that path
        llm = _backend(server)
        with pytest.raises(AdapterLoadError) as err:
            llm.generate([_req("a", adapter=str(good)), _req("b", adapter=str(bad)), _req("c")])
        assert err.value.adapters == {str(bad)} and "No adapter found" in _one_line(err.value)
        assert server.attempts == 0  # refused before anything was sent
        base = _policy("base")
        on_good = replace(_policy("good", "Other rules."), adapter=str(good))
        on_bad = replace(_policy("bad", "Third rules."), adapter=str(bad))
        plain, fine, failed = RolloutEvaluator(llm, KeywordFamily()).evaluate([base, on_good, on_bad], TASKS, WEIGHTS)
        assert plain.fitness is not None and fine.fitness is not None  # its batch mates
        assert failed.fitness is None and "No adapter found" in failed.error


def test_adapters_load_once_into_vllm_and_are_refused_elsewhere(tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    with FakeServer(owned_by="vllm") as server:
        llm = _backend(server)
        llm.generate([_req("a", adapter=str(folder)), _req("b", adapter=str(folder)), _req("c")])
        (load,) = server.lora_loads
        assert load["lora_path"] == str(folder.resolve()) and load["lora_name"].startswith("evo-")
        assert sorted(b["model"] for b in server.bodies) == sorted([load["lora_name"]] * 2 + [server.model])
    with FakeServer(owned_by="someone") as server:
        llm = _backend(server)
        assert "loads LoRA adapters while it runs" in llm.adapter_refusal
        with pytest.raises(ModelError, match="adapter"):
            llm.generate([_req("a", adapter=str(folder))])


# ---------------------------------------------------------------------------------------------- failures


def test_unreachable_server_is_one_line() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ModelError) as err:
        OpenAIBackend(OpenAIConfig(base_url=url, model="m", max_retries=0), role="mutator")
    line = _one_line(err.value)
    assert line.startswith(f"mutator: the server at {url} cannot be reached") and "mutator.openai.base_url" in line


def test_bad_key_is_one_line_and_never_shows_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVO_TEST_KEY", "sk-wrong-secret-1234567890")
    with FakeServer(key="sk-right") as server:
        with pytest.raises(ModelError) as err:
            _backend(server, api_key_env="EVO_TEST_KEY")
        line = _one_line(err.value)
        assert "refused the key in $EVO_TEST_KEY (HTTP 401)" in line
        assert "sk-wrong-secret" not in line and "***" in line  # the server echoed it; scrubbed
        monkeypatch.setenv("EVO_TEST_KEY", "sk-right")
        llm = _backend(server, api_key_env="EVO_TEST_KEY")
        assert "sk-right" not in str(llm.describe())
    monkeypatch.delenv("EVO_TEST_KEY")
    with FakeServer() as server, pytest.raises(ConfigError, match="EVO_TEST_KEY is not set"):
        _backend(server, api_key_env="EVO_TEST_KEY")


def test_wrong_model_name_lists_what_the_server_serves() -> None:
    with FakeServer(model="served-one") as server, pytest.raises(ModelError) as err:
        OpenAIBackend(OpenAIConfig(base_url=server.url, model="typo-model"))
    assert "does not serve 'typo-model'; it serves 'served-one'" in _one_line(err.value)


def test_a_generation_that_timed_out_is_not_sent_again() -> None:
    """The openai client resends a request that timed out (max_retries); a server that does not cancel it computes
    it twice (llama.cpp#24496)."""
    with FakeServer(delay_s=1.5) as server:
        llm = _backend(server, timeout_s=0.3, max_retries=3)
        with pytest.raises(ServerError) as err:
            llm.generate([_req("a")])
        assert server.attempts == 1
        line = _one_line(err.value)
        assert "did not answer within model.openai.timeout_s=0.3 s" in line and "not sent again" in line
    with FakeServer(fail="504") as server:  # a gateway that stopped waiting: the server may still be computing
        with pytest.raises(ServerError, match="HTTP 504"):
            _backend(server, max_retries=3).generate([_req("a")])
        assert server.attempts == 1


def test_a_429_storm_ends_in_one_line_after_the_retries() -> None:
    with FakeServer(fail="429") as server:
        llm = _backend(server, max_retries=2, concurrency=1)
        with pytest.raises(ModelError) as err:
            llm.generate([_req("a")])
        assert "kept refusing with HTTP 429" in _one_line(err.value) and "model.openai.concurrency" in str(err.value)
        assert server.attempts == 3  # the request and 2 retries (each after the server's retry-after-ms)


def test_a_short_429_burst_is_retried_through() -> None:
    with FakeServer(fail="429", fail_from=0, fail_until=2) as server:
        (g,) = _backend(server, max_retries=3, concurrency=1).generate([_req("a")])
        assert g.text and server.attempts == 3  # refused twice, answered the third time


def test_a_failure_mid_call_keeps_the_answers_already_paid_for(tmp_path: Path) -> None:
    with FakeServer(fail="500", fail_from=2) as server:
        llm = _backend(server, max_retries=0, concurrency=1)
        requests = [_req(f"item {i}") for i in range(5)]
        with pytest.raises(ServerError) as err:
            llm.generate(requests)
        assert "failed with HTTP 500" in _one_line(err.value) and sorted(err.value.done) == [0, 1]
        # through the call log: the two answers are logged, and the next call sends only what is missing
        log = CallLog(tmp_path / "calls.db")
        logged = LoggedLLM(llm, log, model_identity(ModelConfig(backend="openai")))
        server.fail_from = server.attempts + 2
        with pytest.raises(ModelError):
            logged.generate(requests)
        assert len(log) == 2
        server.fail = None
        sent_before = server.attempts
        out = logged.generate(requests + requests[:1])  # a repeated request is sent once
        assert server.attempts - sent_before == 3 and len(out) == 6 and out[5] == out[0]
        assert len(log) == 5
        before = server.attempts
        assert logged.generate(requests) == out[:5] and server.attempts == before  # all replayed: nothing sent
        log.close()


def test_call_log_identity_of_a_server_model() -> None:
    a = ModelConfig(backend="openai")
    a.openai.model, a.openai.base_url = "m1", "http://one/v1"
    b = ModelConfig(backend="openai")
    b.openai.model, b.openai.base_url, b.openai.concurrency = "m1", "http://one/v1", 3
    c = ModelConfig(backend="openai")
    c.openai.model, c.openai.base_url = "m2", "http://one/v1"
    assert model_identity(a) == model_identity(b) != model_identity(c)  # the name counts, the concurrency does not
    b.openai.base_url = "http://two/v1"
    assert model_identity(a) != model_identity(b)  # the server counts too (tests/backends/test_call_log.py)
    assert "openai" not in model_identity(ModelConfig())  # in-process identities unchanged
    assert call_key(model_identity(a), _req("x")) != call_key(model_identity(c), _req("x"))
