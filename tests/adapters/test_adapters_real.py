"""LoRA mechanics on the embedded SmolLM2-135M (one model load for the module)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from evotrainer.adapters import LoraSettings, SFTExample, cx_adapters, train_lora
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.chat_tokens import chat_ids
from evotrainer.backends.hf import HFBackend
from evotrainer.model_schema import ModelConfig

pytestmark = pytest.mark.real_model

QUESTION = {"role": "user", "content": "What is the capital of France?"}


@pytest.fixture(scope="module")
def real() -> HFBackend:
    return HFBackend(ModelConfig(path="smollm2-135m", dtype="float32", batch_size=8))


def test_two_step_training_changes_outputs_and_never_the_base(real: HFBackend, tmp_path: Path) -> None:
    examples = [SFTExample((QUESTION, {"role": "assistant", "content": "BANANA BANANA BANANA."}))] * 2
    req = GenerationRequest((QUESTION,), SamplingParams(max_new_tokens=12))
    x = torch.tensor([chat_ids(real.tokenizer, [{"role": "system", "content": ""}, QUESTION])])
    with torch.no_grad():
        logits = real.model(x).logits
    base = real.generate([req])[0]
    assert "Paris" in base.text  # measured: "The capital of France is Paris."
    # lr 5e-3: measured to flip the greedy answer in 2 steps (2e-4 and 1e-3 do not)
    cfg = LoraSettings(steps=2, batch_size=2, lr=5e-3, max_length=128)
    result = train_lora(real, examples, [], cfg, tmp_path / "a", rng=np.random.default_rng(0))
    assert result.trainable_params == 30 * 16 * (576 + 576 + 576 + 192 + 576 + 192 + 576 + 576)
    assert result.losses[1] < result.losses[0]
    lora_b = {k: v for k, v in load_file(str(tmp_path / "a" / "adapter_model.safetensors")).items() if "lora_B" in k}
    assert len(lora_b) == 30 * 4 and all(torch.any(v != 0) for v in lora_b.values())
    with torch.no_grad():
        assert torch.equal(real.model(x).logits, logits)
    tuned = real.generate([replace(req, adapter=str(tmp_path / "a")), req])
    assert tuned[0].text != base.text and "BANANA" in tuned[0].text.upper()
    assert tuned[1] == base  # a base row in the same batch is untouched
    # crossover of the trained adapter with itself behaves like it
    same = cx_adapters(tmp_path / "a", tmp_path / "a", tmp_path / "aa")
    assert real.generate([replace(req, adapter=same)])[0].text == tuned[0].text
    real.unload_adapters()
    assert real.generate([req])[0] == base
