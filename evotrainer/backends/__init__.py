"""LLM and embedder backends.

Importing this package is cheap (no torch): the HF, vLLM and embedder classes load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evotrainer.backends.base import LLM, Embedder, Generation, GenerationRequest, Message, SamplingParams
from evotrainer.backends.embedded import embedded_embedder_dir, embedded_gguf

if TYPE_CHECKING:
    from evotrainer.backends.embedder import MiniLMEmbedder
    from evotrainer.backends.hf import HFBackend
    from evotrainer.backends.vllm import VLLMBackend, VLLMBackendConfig

__all__ = ["LLM", "Embedder", "Generation", "GenerationRequest", "HFBackend", "Message", "MiniLMEmbedder",
           "SamplingParams", "VLLMBackend", "VLLMBackendConfig", "embedded_embedder_dir", "embedded_gguf"]

_LAZY = {
    "HFBackend": "evotrainer.backends.hf",
    "MiniLMEmbedder": "evotrainer.backends.embedder",
    "VLLMBackend": "evotrainer.backends.vllm",
    "VLLMBackendConfig": "evotrainer.backends.vllm",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'evotrainer.backends' has no attribute {name!r}")
