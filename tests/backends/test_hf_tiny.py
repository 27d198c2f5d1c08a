"""HFBackend on a tiny random Llama with SmolLM2's tokenizer: padding, templates, batching, budgets."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from evotrainer.backends.base import LLM, GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend, ensure_system_turn, fit_messages
from evotrainer.backends.logits import build_processors
from evotrainer.errors import ConfigError, DataError, ModelError
from evotrainer.model_schema import ModelConfig


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=4))


def _req(text: str, system: str | None = None, **params: float) -> GenerationRequest:
    msgs = ({"role": "system", "content": system},) if system is not None else ()
    params.setdefault("max_new_tokens", 12)
    return GenerationRequest((*msgs, {"role": "user", "content": text}), SamplingParams(**params))


def test_backend_satisfies_protocol(tiny: HFBackend) -> None:
    assert isinstance(tiny, LLM)
    assert tiny.name.startswith("hf:")


def test_pad_token_is_distinct_from_end_of_turn(tiny: HFBackend) -> None:
    assert tiny.pad_token_id not in tiny.stop_token_ids
    assert tiny.tokenizer.convert_ids_to_tokens(tiny.pad_token_id) == "<|endoftext|>"
    assert tiny.tokenizer.convert_ids_to_tokens(tiny.stop_token_ids[0]) == "<|im_end|>"
    assert len(tiny.tokenizer) == tiny.model.get_input_embeddings().weight.shape[0]  # nothing added


def test_empty_system_turn_is_explicit(tiny: HFBackend) -> None:
    for chat in (
        [{"role": "user", "content": "hi"}],
        [{"role": "system", "content": ""}, {"role": "user", "content": "hi"}],
    ):
        prompt = tiny.render(chat)
        assert prompt.startswith("<|im_start|>system\n<|im_end|>\n<|im_start|>user\nhi<|im_end|>")
        assert "SmolLM" not in prompt
        assert prompt.endswith("<|im_start|>assistant\n")


def test_ensure_system_turn_copies_and_validates() -> None:
    chat = [{"role": "user", "content": "x"}]
    out = ensure_system_turn(chat)
    assert out == [{"role": "system", "content": ""}, {"role": "user", "content": "x"}]
    assert chat == [{"role": "user", "content": "x"}]
    with pytest.raises(DataError, match="request 3, message 0"):
        ensure_system_turn([{"role": "user", "content": 5}], where="request 3")
    with pytest.raises(DataError):
        ensure_system_turn([])


def test_batched_greedy_equals_sequential(tiny: HFBackend) -> None:
    requests = [
        _req("hi"),
        _req("a much longer prompt about a meeting on budgets " * 30, max_new_tokens=9),
        _req("medium prompt " * 8, system="Be brief.", max_new_tokens=15, no_repeat_ngram_size=0),
        _req("another one " * 3, repetition_penalty=1.3),
        _req("x " * 90, max_new_tokens=5),
    ]
    batched = tiny.generate(requests)
    sequential = [tiny.generate([r])[0] for r in requests]
    assert batched == sequential
    assert len({g.prompt_tokens for g in batched}) == len(requests)  # very different lengths
    for g, r in zip(batched, requests, strict=True):
        assert g.generated_tokens <= r.params.max_new_tokens
        assert g.finish_reason in {"stop", "length"}


def test_sampled_request_same_alone_and_in_mixed_batch(tiny: HFBackend) -> None:
    sampled = _req("tell me a story", temperature=0.9, top_p=0.95, seed=123, max_new_tokens=16)
    others = [
        _req("a different and much longer prompt " * 20, temperature=1.0, seed=7),
        _req("greedy neighbour"),
        _req("a", temperature=0.5, seed=123),
    ]
    alone = tiny.generate([sampled])[0]
    mixed = tiny.generate([others[0], sampled, *others[1:]])
    assert mixed[1] == alone
    assert (
        tiny.generate(
            [
                sampled.__class__(
                    sampled.messages, SamplingParams(temperature=0.9, top_p=0.95, seed=124, max_new_tokens=16)
                )
            ]
        )[0].text
        != alone.text
    )


def test_each_row_keeps_its_own_budget(tiny: HFBackend) -> None:
    budgets = [3, 17, 8]
    outs = tiny.generate([_req("same prompt", max_new_tokens=b) for b in budgets])
    for g, b in zip(outs, budgets, strict=True):
        if g.finish_reason == "length":
            assert g.generated_tokens == b
        else:
            assert g.generated_tokens <= b


def test_finish_counts_stop_token(tiny: HFBackend) -> None:
    prepared = tiny._prepare(0, _req("hi"))
    eot, pad = tiny.stop_token_ids[0], tiny.pad_token_id
    stop = tiny._finish([100, 101, eot, pad, pad], prepared, budget=5)
    assert (stop.finish_reason, stop.generated_tokens) == ("stop", 3)
    last = tiny._finish([100, 101, eot], prepared, budget=3)  # end-of-turn as the last allowed token
    assert (last.finish_reason, last.generated_tokens) == ("stop", 3)
    cut = tiny._finish([100, 101, 102, eot], prepared, budget=3)  # a forced stop does not count
    assert (cut.finish_reason, cut.generated_tokens) == ("length", 3)
    assert "<|im_end|>" not in stop.text


class _FavourFewTokens(LogitsProcessor):
    """Pushes generation onto tokens 10-12 so that, unblocked, it must repeat bigrams."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores.clone()
        scores[:, 10:13] += 1000.0
        return scores


def test_ngram_blocking_on_generated_ids(tiny: HFBackend) -> None:
    enc = tiny.tokenizer(tiny.render([{"role": "user", "content": "go on"}]), return_tensors="pt")
    width = enc["input_ids"].shape[1]

    def run(size: int) -> list[int]:
        params = [SamplingParams(max_new_tokens=40, no_repeat_ngram_size=size)]
        processors = LogitsProcessorList(
            [_FavourFewTokens(), *build_processors(width, params, tiny.stop_token_ids[0])]
        )
        with torch.inference_mode():
            out = tiny.model.generate(
                **enc,
                do_sample=False,
                max_new_tokens=40,
                pad_token_id=tiny.pad_token_id,
                eos_token_id=None,
                logits_processor=processors,
            )
        return out[0, width:].tolist()

    def bigrams(ids: list[int]) -> list[tuple[int, int]]:
        return list(zip(ids, ids[1:], strict=False))

    free, blocked = run(0), run(2)
    assert set(free) <= {10, 11, 12} and len(set(bigrams(free))) < len(bigrams(free))
    assert len(blocked) == 40 and len(set(bigrams(blocked))) == len(bigrams(blocked))
    assert set(bigrams(blocked)) >= set(bigrams(free))  # the favoured bigrams were used once each


def test_prompt_is_cut_to_fit_a_small_context(tiny_model_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    small = HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", max_context=96))
    assert small.context_length == 96
    long_text = "alpha " * 20 + "middle " * 300 + "omega " * 20
    with caplog.at_level(logging.WARNING, logger="evotrainer.backends.hf"):
        outs = small.generate([_req(long_text, max_new_tokens=16), _req("short", max_new_tokens=16)])
    assert outs[0].prompt_truncated and not outs[1].prompt_truncated
    assert outs[0].prompt_tokens + 16 <= 96
    assert outs[0].prompt_tokens > 96 - 16 - 8  # the cut is tight
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "1 of 2 prompts" in warnings[0].getMessage()
    with pytest.raises(ConfigError, match="max_new_tokens"):
        small.generate([_req("x", max_new_tokens=96)])


def test_fit_messages_cuts_middle_of_longest_user_message() -> None:
    chat = [
        {"role": "system", "content": "sys " * 5},
        {"role": "user", "content": " ".join(f"w{i}" for i in range(100))},
        {"role": "user", "content": "short question"},
    ]
    words = lambda msgs: sum(len(m["content"].split()) for m in msgs)  # noqa: E731
    fitted, omitted = fit_messages(chat, words, budget=60)
    assert words(fitted) <= 60 and omitted > 0
    text = fitted[1]["content"]
    assert text.startswith("w0 w1") and text.endswith("w99") and f"[... {omitted} words omitted ...]" in text
    assert fitted[0] == chat[0] and fitted[2] == chat[2]
    assert fit_messages(chat, words, budget=1000) == (chat, 0)
    with pytest.raises(ConfigError):
        fit_messages(chat, lambda msgs: 50, budget=10)


def test_adapter_request_with_a_missing_folder_is_a_model_error(tiny: HFBackend, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not a PEFT adapter folder"):
        tiny.generate([GenerationRequest(({"role": "user", "content": "x"},), adapter=str(tmp_path / "missing"))])


def test_missing_path_raises_model_error(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_model"
    with pytest.raises(ModelError, match=str(missing)):
        HFBackend(ModelConfig(path=str(missing)))
    with pytest.raises(ModelError, match="not-a-cached/model-id"):
        HFBackend(ModelConfig(path="not-a-cached/model-id"))


def test_bad_config_values_raise_config_error(tiny_model_dir: Path) -> None:
    with pytest.raises(ConfigError, match="dtype"):
        HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float8"))
    with pytest.raises(ConfigError, match="batch_size"):
        HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=0))


def test_progress_bar_runs(tiny_model_dir: Path) -> None:
    backend = HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=1), progress=True)
    assert len(backend.generate([_req("a", max_new_tokens=2), _req("b", max_new_tokens=2)])) == 2


def test_source_resolution_for_gguf_files_and_folders(tmp_path: Path) -> None:
    from evotrainer.backends.embedded import embedded_gguf
    from evotrainer.backends.hf_loading import _resolve_source

    gguf = embedded_gguf("smollm2-135m")
    assert _resolve_source(ModelConfig(path="smollm2-135m")) == (str(gguf.parent), gguf.name)
    default = embedded_gguf()
    assert _resolve_source(ModelConfig()) == (str(default.parent), default.name)
    assert _resolve_source(ModelConfig(path=str(gguf))) == (str(gguf.parent), gguf.name)
    assert _resolve_source(ModelConfig(path=str(gguf.parent))) == (str(gguf.parent), gguf.name)
    assert _resolve_source(ModelConfig(path="HuggingFaceTB/SmolLM2-135M-Instruct")) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        None,
    )
    with pytest.raises(ModelError, match="gguf_file"):
        _resolve_source(ModelConfig(path=str(tmp_path), gguf_file="missing.gguf"))
    with pytest.raises(ModelError, match="does not exist"):
        _resolve_source(ModelConfig(path="./relative/missing"))


def test_the_output_head_reads_a_contiguous_input_with_frozen_weights(tiny: HFBackend) -> None:
    """PEFT freezes the base weights; torch's CPU ``linear`` then expands a frozen head weight per row for a
    non-contiguous ``(B, 1, H)`` input (gigabytes on a real vocabulary). The backend's head copies its input first."""
    from evotrainer.backends.hf_loading import contiguous_head_input

    head = tiny.model.get_output_embeddings()
    seen: list[bool] = []
    handle = head.register_forward_hook(lambda _m, args, _out: seen.append(args[0].is_contiguous()))
    flags = {n: p.requires_grad for n, p in tiny.model.named_parameters()}
    try:
        for p in tiny.model.parameters():
            p.requires_grad_(False)  # as after PEFT injects an adapter
        rows = [GenerationRequest(messages=({"role": "user", "content": f"Note {i}: the budget is due."},),
                                  params=SamplingParams(max_new_tokens=3)) for i in range(3)]
        tiny.generate(rows)
        hidden = torch.randn(3, 5, head.in_features)[:, -1:, :]  # (B, 1, H), the stride of the whole prompt
        head(hidden)
    finally:
        handle.remove()
        for n, p in tiny.model.named_parameters():
            p.requires_grad_(flags[n])
    assert seen and all(seen)
    hooks = len(head._forward_pre_hooks)
    contiguous_head_input(tiny.model)  # once per model
    assert len(head._forward_pre_hooks) == hooks
