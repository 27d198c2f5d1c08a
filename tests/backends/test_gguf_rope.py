"""A GGUF's RoPE scaling survives loading (issue 42, line 12): a tiny random Gemma-3 GGUF written with the ``gguf``
package, stating linear scaling x8 as llama.cpp's converter does for Gemma-3 4B/12B/27B, loads with it on its
global-attention layers (transformers' GGUF loader drops it), and a scaling that cannot be restored is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evotrainer.backends.hf_loading import load_model
from evotrainer.errors import ModelError

gguf = pytest.importorskip("gguf")

_HIDDEN, _LAYERS, _FFN, _HEADS, _KV_HEADS, _HEAD_DIM = 32, 6, 64, 2, 1, 16  # layer 6 is global
_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
             "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def _tiny_gemma3(folder: Path, scaling: dict[str, object] | None) -> str:
    """Write a 6-layer random Gemma-3 GGUF (five local layers, one global) (hidden 32, a byte-fallback vocabulary) into ``folder``; its name."""
    import numpy as np

    name = "tiny-gemma3.gguf"
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n", "▁",
              *(f"<0x{i:02X}>" for i in range(256)), *"abcdefghijklmnopqrstuvwxyz"]
    w = gguf.GGUFWriter(str(folder / name), "gemma3")
    w.add_context_length(131072)
    w.add_block_count(_LAYERS)
    w.add_feed_forward_length(_FFN)
    w.add_embedding_length(_HIDDEN)
    w.add_head_count(_HEADS)
    w.add_head_count_kv(_KV_HEADS)
    w.add_key_length(_HEAD_DIM)
    w.add_value_length(_HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_sliding_window(512)
    for key, value in (scaling or {}).items():
        w.add_string(key, value) if isinstance(value, str) else w.add_float32(key, float(value))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 264 + [-float(i) for i in range(26)])
    w.add_token_types([3, 3, 3, 2, 3, 3, 1, 1] + [6] * 256 + [1] * 26)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_chat_template(_TEMPLATE)
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (len(tokens), _HIDDEN), "output_norm.weight": (_HIDDEN,)}
    for i in range(_LAYERS):
        q, kv = _HEADS * _HEAD_DIM, _KV_HEADS * _HEAD_DIM
        shapes |= {f"blk.{i}.{k}.weight": v for k, v in {
            "attn_norm": (_HIDDEN,), "attn_q": (q, _HIDDEN), "attn_k": (kv, _HIDDEN), "attn_v": (kv, _HIDDEN),
            "attn_output": (_HIDDEN, q), "attn_q_norm": (_HEAD_DIM,), "attn_k_norm": (_HEAD_DIM,),
            "post_attention_norm": (_HIDDEN,), "ffn_norm": (_HIDDEN,), "ffn_gate": (_FFN, _HIDDEN),
            "ffn_up": (_FFN, _HIDDEN), "ffn_down": (_HIDDEN, _FFN), "post_ffw_norm": (_HIDDEN,)}.items()}
    for tensor, shape in shapes.items():
        w.add_tensor(tensor, (rng.standard_normal(shape) * 0.1).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return name


LINEAR_X8 = {"gemma3.rope.scaling.type": "linear", "gemma3.rope.scaling.factor": 8.0}


def _assert_scaled(model: torch.nn.Module) -> None:
    rope = model.config.rope_parameters
    assert rope["full_attention"]["rope_type"] == "linear" and rope["full_attention"]["factor"] == 8.0
    assert rope["sliding_attention"]["rope_type"] == "default"  # local layers keep plain RoPE (10k base)
    rotary = model.model.rotary_emb
    plain = 1.0 / (1e6 ** (torch.arange(0, _HEAD_DIM, 2, dtype=torch.float32) / _HEAD_DIM))
    assert torch.allclose(rotary.full_attention_inv_freq.float().cpu(), plain / 8.0)


def test_a_gemma3_gguf_keeps_its_rope_scaling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", "off")
    name = _tiny_gemma3(tmp_path, LINEAR_X8)
    _, model = load_model(str(tmp_path), name, torch.float32)
    _assert_scaled(model)


def test_a_converted_gemma3_gguf_keeps_its_rope_scaling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", str(tmp_path / "cache"))
    (tmp_path / "model").mkdir()
    name = _tiny_gemma3(tmp_path / "model", LINEAR_X8)
    load_model(str(tmp_path / "model"), name, torch.float32)  # converts and caches
    assert any((tmp_path / "cache").iterdir())
    _, model = load_model(str(tmp_path / "model"), name, torch.float32)  # from the cache
    _assert_scaled(model)


def test_a_gguf_rope_scaling_that_cannot_be_restored_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    from evotrainer.backends.gguf_rope import gguf_rope_scaling

    arch = {"general.architecture": "gemma3"}
    with pytest.raises(ModelError, match=r"gemma3\.rope\.scaling\.factor is missing"):
        gguf_rope_scaling({**arch, "gemma3.rope.scaling.type": "linear"}, "model file x.gguf")
    with pytest.raises(ModelError, match=r"gemma3\.rope\.scaling\.type='longrope'"):
        gguf_rope_scaling({**arch, "gemma3.rope.scaling.type": "longrope", "gemma3.rope.scaling.factor": 4.0}, "x")
    with pytest.raises(ModelError, match=r"original_context_length is missing"):
        gguf_rope_scaling({**arch, "gemma3.rope.scaling.type": "yarn", "gemma3.rope.scaling.factor": 4.0}, "x")
    assert gguf_rope_scaling({**arch, "gemma3.rope.scaling.type": "none"}, "x") is None
    assert gguf_rope_scaling({"general.architecture": "qwen2", "qwen2.rope.scaling.type": "yarn",
                              "qwen2.rope.scaling.factor": 4.0, "qwen2.rope.scaling.original_context_length": 32768},
                             "x") == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", "off")
    name = _tiny_gemma3(tmp_path, {"gemma3.rope.scaling.type": "linear"})  # the factor left out
    with pytest.raises(ModelError, match=r"tiny-gemma3\.gguf: gemma3\.rope\.scaling\.type='linear' but "
                                         r"gemma3\.rope\.scaling\.factor is missing") as err:
        load_model(str(tmp_path), name, torch.float32)
    assert "\n" not in str(err.value)
