"""Which modules a LoRA adapter attaches to when the config names none: the attention projections of the
model's own architecture (``q_proj``/``k_proj``/``v_proj``/``o_proj`` on Llama and Qwen2, ``qkv_proj``/``o_proj``
on Phi-3, ``c_attn``/``c_proj`` on GPT-2), read off the loaded model rather than assumed."""

from __future__ import annotations

from typing import Any

from evotrainer.errors import ModelError

__all__ = ["attention_projections"]

_LINEAR_KINDS = ("Linear", "Conv1D")  # torch.nn.Linear and transformers' GPT-2 Conv1D (PEFT adapts both)


def attention_projections(model: Any) -> list[str]:
    """Names (the last path component) of the linear layers directly inside the model's first attention block.

    Args:
        model: a transformers causal LM (or its PEFT-free base).

    Returns:
        Sorted module names, e.g. ``["k_proj", "o_proj", "q_proj", "v_proj"]``; PEFT matches them in every layer.

    Raises:
        ModelError: no module whose class name ends in ``Attention`` holds a linear layer.
    """
    for _, module in model.named_modules():
        if type(module).__name__.endswith("Attention"):
            names = sorted(name for name, child in module.named_children()
                           if type(child).__name__ in _LINEAR_KINDS)
            if names:
                return names
    raise ModelError(f"no attention block with linear layers found in {type(model).__name__}; "
                     "set lora.target_modules to the module names to adapt")
