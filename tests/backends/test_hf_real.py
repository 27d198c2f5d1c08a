"""HFBackend on the tiny embedded model, SmolLM2-135M-Instruct GGUF, in float32 (one model load for the module)."""

from __future__ import annotations

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.model_schema import ModelConfig

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def real() -> HFBackend:
    return HFBackend(ModelConfig(path="smollm2-135m", dtype="float32", batch_size=8, max_context=None))  # the model's own window


def _req(text: str, system: str = "", **params: float) -> GenerationRequest:
    return GenerationRequest(
        ({"role": "system", "content": system}, {"role": "user", "content": text}), SamplingParams(**params)
    )


def test_embedded_model_setup(real: HFBackend) -> None:
    tok = real.tokenizer
    assert real.name == "hf:SmolLM2-135M-Instruct.Q4_1.gguf (float32)"
    assert tok.convert_ids_to_tokens(real.pad_token_id) == "<|endoftext|>"  # not <|im_end|>
    assert tok.convert_ids_to_tokens(list(real.stop_token_ids)) == ["<|im_end|>"]
    assert real.context_length == 8192  # max_position_embeddings, not the tokenizer's 1e30
    assert "SmolLM" not in real.render([{"role": "user", "content": "hi"}])


def test_stops_at_end_of_turn_and_batches_like_sequential(real: HFBackend) -> None:
    transcript = " ".join(
        f"Speaker {i % 3}: we agreed that item {i} moves to next week and Dana owns the budget."
        for i in range(25)
    )
    requests = [
        _req("What is the capital of France?", max_new_tokens=24),
        _req(f"Summarise this meeting in one sentence.\n\n{transcript}", max_new_tokens=24),
        _req("Say OK.", system="You are a concise assistant.", max_new_tokens=20),
    ]
    batched = real.generate(requests)
    answer = batched[0]  # measured: "The capital of France is Paris." then <|im_end|> (8 tokens)
    assert answer.finish_reason == "stop" and answer.generated_tokens < 24
    assert "Paris" in answer.text and answer.text == answer.text.strip()
    for marker in ("<|im_end|>", "<|im_start|>", "assistant", "<|endoftext|>"):
        assert marker not in answer.text
    assert batched[1].prompt_tokens > 10 * batched[0].prompt_tokens
    sequential = [real.generate([r])[0] for r in requests]
    assert batched == sequential


def test_seeded_sample_is_batch_independent(real: HFBackend) -> None:
    sampled = _req("Name three fruits.", temperature=0.8, top_p=0.95, seed=11, max_new_tokens=16)
    alone = real.generate([sampled])[0]
    mixed = real.generate([_req("Count to five.", temperature=1.0, seed=3, max_new_tokens=10), sampled])
    assert mixed[1] == alone
