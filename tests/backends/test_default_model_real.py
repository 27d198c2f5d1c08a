"""The default policy model, Qwen2.5-Coder-1.5B-Instruct, on the real weights (one load for the module):
it loads from the model store in the dtype ``auto`` picks, and writes minutes about the meeting it is given."""

from __future__ import annotations

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.backends.numerics import resolve_dtype
from evotrainer.model_schema import ModelConfig

pytestmark = pytest.mark.real_model

_MEETING = ("Priya: The venue for the March workshop is booked, the Harbour Room. "
            "Tom: Good. I will send the invitations to all forty members by Monday. "
            "Priya: And the catering budget is capped at two thousand euros, agreed? Tom: Agreed.")


@pytest.fixture(scope="module")
def default() -> HFBackend:
    return HFBackend(ModelConfig(batch_size=4))


def test_default_is_the_1_5b_in_the_native_dtype(default: HFBackend) -> None:
    dtype = resolve_dtype("auto")
    assert default.name == f"hf:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf ({dtype})"
    assert str(default.model.dtype) == f"torch.{dtype}"
    assert default.model.config.model_type == "qwen2" and default.model.config.num_hidden_layers == 28
    from evotrainer.adapters.targets import attention_projections

    assert attention_projections(default.model) == ["k_proj", "o_proj", "q_proj", "v_proj"]  # LoRA's default targets
    assert default.tokenizer.convert_ids_to_tokens(list(default.stop_token_ids))[0] in ("<|im_end|>", "<|endoftext|>")


def test_writes_minutes_about_the_meeting(default: HFBackend) -> None:
    request = GenerationRequest(
        ({"role": "system", "content": "Write the minutes of the meeting: decisions and action items with owners."},
         {"role": "user", "content": _MEETING}), SamplingParams(max_new_tokens=96))
    alone = default.generate([request])[0]
    text = alone.text.lower()
    assert alone.generated_tokens > 10
    assert sum(word in text for word in ("workshop", "catering", "invitation", "harbour", "march")) >= 2
    start = GenerationRequest(request.messages, SamplingParams(max_new_tokens=16))  # enough for 40 characters
    mixed = default.generate([GenerationRequest(({"role": "user", "content": "Say OK."},),
                                                SamplingParams(max_new_tokens=4)), start])
    assert mixed[1].text[:40] == alone.text[:40]  # a batch mate does not change the answer's start
