"""A trained adapter on a Qwen2-shaped model (the default 1.5B's architecture: biased q/k/v projections, an output
layer of its own as in the converted folder) exports to a folder that PEFT loads and whose tensors carry the
names and shapes a LoRA server (vLLM's PEFT loader) reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from evotrainer.adapters.export import export_policy
from evotrainer.adapters.train import train_lora
from evotrainer.backends.hf import HFBackend
from evotrainer.model_schema import LoraSettings, ModelConfig

from .conftest import POOL

LORA_KEY = "base_model.model.model.layers.{layer}.self_attn.{proj}.lora_{ab}.weight"


@pytest.fixture(scope="module")
def tiny_qwen2_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    folder = tmp_path_factory.mktemp("tiny_qwen2")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tokenizer.save_pretrained(folder)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2, tie_word_embeddings=False)
    torch.manual_seed(1)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder


def test_adapter_trained_on_a_qwen2_model_loads_with_peft_and_has_server_names(tiny_qwen2_dir: Path,
                                                                                 tmp_path: Path) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    backend = HFBackend(ModelConfig(path=str(tiny_qwen2_dir), dtype="float32", batch_size=4))
    cfg = LoraSettings(steps=2, batch_size=2, max_length=128, replay_ratio=0.0, lr=1e-2)
    result = train_lora(backend, POOL, [], cfg, tmp_path / "adapter", rng=np.random.default_rng(0))
    assert result.steps == 2 and result.input_tokens >= result.answer_tokens > 0
    assert result.padded_tokens >= result.input_tokens
    out = export_policy("Write the minutes.", result.adapter_dir, tmp_path / "export", meta={"policy_id": "q"})

    base = AutoModelForCausalLM.from_pretrained(str(tiny_qwen2_dir)).eval()
    assert base.get_output_embeddings().weight.data_ptr() != base.get_input_embeddings().weight.data_ptr()
    x = torch.tensor([[1, 7, 42, 99]])
    with torch.no_grad():
        plain = base(x).logits
        tuned = PeftModel.from_pretrained(base, str(out)).eval()(x).logits
    assert not torch.allclose(plain, tuned)

    config = json.loads((out / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and not config.get("modules_to_save")
    tensors = load_file(str(out / "adapter_model.safetensors"))
    rank, hidden = config["r"], 64
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        a = tensors[LORA_KEY.format(layer=0, proj=proj, ab="A")]
        b = tensors[LORA_KEY.format(layer=1, proj=proj, ab="B")]
        assert a.shape == (rank, hidden) and b.shape[1] == rank
    assert all(".lora_A." in k or ".lora_B." in k for k in tensors)  # no embedding or head copies
