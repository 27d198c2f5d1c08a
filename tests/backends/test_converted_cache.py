"""The converted-GGUF cache on a model whose output layer is not tied to its embeddings (issue 26, line 1).

A tiny random Llama is written as a float32 GGUF (its config in the GGUF metadata, as llama.cpp writes it)
with its own ``output.weight``, as the Llama-3.1-8B, Mistral-7B and Qwen2.5-7B instruct GGUFs have; the
backend converts it on the first load and reads the cached safetensors folder afterwards. Before the fix the save dropped
``lm_head.weight`` because it trusted the class-level ``_tied_weights_keys`` (transformers PR#42385,
PR#43429, issue #48154), so the second load ran a randomly initialised output layer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from evotrainer.backends.hf import HFBackend
from evotrainer.model_schema import ModelConfig

_HIDDEN, _FFN, _LAYERS, _HEADS, _KV_HEADS = 64, 128, 2, 4, 2
_CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _write_untied_gguf(path: Path) -> None:
    """A float32 GGUF of a 2-layer Llama with random weights and a separate output layer.

    Its tokenizer is a byte-level BPE of 261 tokens (3 ChatML specials, the 256 byte symbols, 2 merges):
    SmolLM2's 49k-token vocabulary would make each GGUF read take seconds for nothing this test checks.
    """
    import gguf
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = bytes_to_unicode()
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *(symbols[b] for b in range(256)), "\u0120t", "he"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * 3 + [1] * (len(tokens) - 3))  # 3 = control, 1 = normal
    writer.add_token_merges(["\u0120 t", "h e"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)  # pad = eos, as SmolLM2's GGUF ships it
    writer.add_chat_template(_CHATML)
    vocab = len(tokens)
    writer.add_block_count(_LAYERS)
    writer.add_context_length(1024)
    writer.add_embedding_length(_HIDDEN)
    writer.add_feed_forward_length(_FFN)
    writer.add_head_count(_HEADS)
    writer.add_head_count_kv(_KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_rope_dimension_count(_HIDDEN // _HEADS)
    writer.add_file_type(0)  # all F32
    rng = np.random.default_rng(0)
    head = _HIDDEN // _HEADS

    def weight(rows: int, cols: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    tensors = {"token_embd.weight": weight(vocab, _HIDDEN), "output_norm.weight": np.ones(_HIDDEN, np.float32),
               "output.weight": weight(vocab, _HIDDEN)}  # not the embeddings: an untied output layer
    for i in range(_LAYERS):
        tensors |= {
            f"blk.{i}.attn_norm.weight": np.ones(_HIDDEN, np.float32),
            f"blk.{i}.ffn_norm.weight": np.ones(_HIDDEN, np.float32),
            f"blk.{i}.attn_q.weight": weight(_HIDDEN, _HIDDEN),
            f"blk.{i}.attn_k.weight": weight(_KV_HEADS * head, _HIDDEN),
            f"blk.{i}.attn_v.weight": weight(_KV_HEADS * head, _HIDDEN),
            f"blk.{i}.attn_output.weight": weight(_HIDDEN, _HIDDEN),
            f"blk.{i}.ffn_gate.weight": weight(_FFN, _HIDDEN),
            f"blk.{i}.ffn_up.weight": weight(_FFN, _HIDDEN),
            f"blk.{i}.ffn_down.weight": weight(_HIDDEN, _FFN),
        }
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def untied_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("untied") / "tiny-untied.gguf"
    _write_untied_gguf(path)
    return path


def _probe_logits(backend: HFBackend) -> torch.Tensor:
    """Next-token logits, shape (T, vocab), of a fixed chat prompt."""
    ids = backend.tokenizer(backend.render([{"role": "user", "content": "Summarise the meeting."}]),
                            add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        return backend.model(input_ids=ids).logits[0].float()


def _load(gguf_path: Path) -> HFBackend:
    return HFBackend(ModelConfig(path=str(gguf_path), prefix_sharing=False))


def test_untied_gguf_cache_keeps_lm_head(untied_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", str(tmp_path / "cache"))
    converted = _load(untied_gguf)  # de-quantises the GGUF and fills the cache
    assert converted.model.config.tie_word_embeddings is False
    assert converted.model.lm_head.weight.data_ptr() != converted.model.model.embed_tokens.weight.data_ptr()
    entries = list((tmp_path / "cache").iterdir())
    assert len(entries) == 1 and (entries[0] / "evotrainer-converted.json").is_file()
    cached = _load(untied_gguf)  # from the cache entry
    torch.testing.assert_close(_probe_logits(cached), _probe_logits(converted), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cached.model.lm_head.weight, converted.model.lm_head.weight, rtol=0, atol=0)
    request = [{"role": "user", "content": "Who owns the budget?"}]
    from evotrainer.backends.base import GenerationRequest, SamplingParams

    same = [GenerationRequest(tuple(request), SamplingParams(max_new_tokens=8))]
    assert cached.generate(same) == converted.generate(same)


def test_cache_entry_with_wrong_logits_is_converted_again(
    untied_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache entry whose weights no longer give the converted model's logits (one written by the old save,
    which left out ``lm_head``) is noticed by the probe fingerprint, reported and replaced."""
    from safetensors.torch import load_file, save_file

    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", str(tmp_path / "cache"))
    reference = _probe_logits(_load(untied_gguf))
    (entry,) = (tmp_path / "cache").iterdir()
    weights = load_file(str(entry / "model.safetensors"))
    del weights["lm_head.weight"]  # what the old save wrote for an untied model
    save_file(weights, str(entry / "model.safetensors"), metadata={"format": "pt"})
    with caplog.at_level(logging.WARNING, logger="evotrainer.backends"):
        again = _load(untied_gguf)
    assert any("fingerprint" in r.getMessage() for r in caplog.records), caplog.text
    torch.testing.assert_close(_probe_logits(again), reference, rtol=1e-5, atol=1e-5)
    assert "lm_head.weight" in load_file(str(entry / "model.safetensors"))  # the entry was rewritten
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="evotrainer.backends"):
        torch.testing.assert_close(_probe_logits(_load(untied_gguf)), reference, rtol=1e-5, atol=1e-5)
    assert not [r for r in caplog.records if "fingerprint" in r.getMessage()]


def test_cache_entry_without_a_fingerprint_is_converted_again(
    untied_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Entries written before the fingerprint existed cannot be checked: they are converted once more."""
    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", str(tmp_path / "cache"))
    reference = _probe_logits(_load(untied_gguf))
    (entry,) = (tmp_path / "cache").iterdir()
    (entry / "evotrainer-converted.json").write_text(json.dumps({"source": "old"}) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="evotrainer.backends"):
        again = _load(untied_gguf)
    assert any("fingerprint" in r.getMessage() for r in caplog.records), caplog.text
    torch.testing.assert_close(_probe_logits(again), reference, rtol=1e-5, atol=1e-5)
    assert "fingerprint" in json.loads((entry / "evotrainer-converted.json").read_text(encoding="utf-8"))
