"""Shared fixtures: a tiny random Llama model folder with the embedded SmolLM2 tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a 2-layer random Llama (hidden 64) and SmolLM2's tokenizer and chat template.

    The config mimics the GGUF's flaw ``pad = eos = <|im_end|>`` so the pad fix is exercised.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from evotrainer.backends.embedded import embedded_gguf

    gguf = embedded_gguf()
    folder = tmp_path_factory.mktemp("tiny_llama")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        tie_word_embeddings=True,
        initializer_range=0.2,  # spread logits so greedy picks are far from ties
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder
