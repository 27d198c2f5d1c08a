"""The LoRA fine-tune settings record shared by two components' configs (``inner.adapter_lora`` and
``selfevolve.lora``), in a module of its own so that :mod:`evotrainer.config` and
:mod:`evotrainer.search.inner_config` both import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LoraSettings"]


@dataclass
class LoraSettings:
    """LoRA SFT of one self-evolution round; mirrors ``evotrainer.adapters.train.LoraTrainConfig``.

    Defaults follow the LoRA paper's usual setting (Hu et al. 2021: r=16 on the attention projections,
    alpha = 2r) and are sized for a GPU; the CPU experiment lowers ``steps`` and ``max_length``.
    """

    rank: int = 16  # LoRA rank r, >= 1
    alpha: int = 32  # LoRA scaling numerator (scale = alpha / rank)
    dropout: float = 0.0  # LoRA dropout probability in [0, 1)
    lr: float = 2e-4  # AdamW learning rate, absolute (not log10)
    # module names the adapter attaches to (the attention projections of Llama-style models)
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    steps: int = 16  # optimiser steps per round
    batch_size: int = 4  # examples per step
    replay_ratio: float = 0.3  # share of each batch drawn from the replay buffer, in [0, 1)
    max_length: int = 768  # tokens per example (longer ones are cut)
    grad_clip: float = 1.0  # max gradient L2 norm; 0 = off
    weight_decay: float = 0.0  # AdamW weight decay on the adapter weights
