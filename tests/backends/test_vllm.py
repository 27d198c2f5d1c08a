"""VLLMBackend: a clear error without vLLM; a GPU smoke test when vLLM and CUDA are present."""

from __future__ import annotations

import importlib.util

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.vllm import VLLMBackend, VLLMBackendConfig
from evotrainer.errors import ModelError

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed: the missing-vLLM error cannot be shown")
def test_missing_vllm_names_the_install_command() -> None:
    with pytest.raises(ModelError, match=r"pip install 'evotrainer\[gpu\]'"):
        VLLMBackend(VLLMBackendConfig(path="HuggingFaceTB/SmolLM2-135M-Instruct"))


@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (pip install 'evotrainer[gpu]')")
@pytest.mark.skipif(HAS_VLLM and not _has_cuda(), reason="vLLM needs a CUDA GPU")
def test_vllm_generates_and_stops() -> None:
    backend = VLLMBackend(
        VLLMBackendConfig(path="HuggingFaceTB/SmolLM2-135M-Instruct", gpu_memory_utilization=0.3)
    )
    chat = ({"role": "user", "content": "What is the capital of France?"},)
    greedy = GenerationRequest(chat, SamplingParams(max_new_tokens=24))
    sampled = GenerationRequest(chat, SamplingParams(temperature=0.8, seed=5, max_new_tokens=24))
    first = backend.generate([greedy, sampled])
    again = backend.generate([sampled, greedy])
    assert first[0].finish_reason == "stop" and "Paris" in first[0].text
    assert "<|im_end|>" not in first[0].text
    assert first[1] == again[0] and first[0] == again[1]
