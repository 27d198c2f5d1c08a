"""The one LoRA fine-tune settings record: the ``inner.adapter_lora`` and ``selfevolve.lora`` config keys and
the trainer's argument (:func:`evotrainer.adapters.train.train_lora`), with its one check.

A module of its own so that :mod:`evotrainer.config`, :mod:`evotrainer.search.inner_config` and
:mod:`evotrainer.adapters.train` all import it without importing each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evotrainer.errors import ConfigError

__all__ = ["LoraSettings"]


@dataclass
class LoraSettings:
    """Settings of one LoRA SFT run (a self-evolution round, an adapter gene's short fine-tune).

    Defaults follow the LoRA paper's usual setting (Hu et al. 2021: r=16 on the attention projections,
    alpha = 2r) and the common PEFT/QLoRA SFT settings; the CPU experiment lowers ``steps`` and ``max_length``.
    Measured for SmolLM2-135M fp32 at batch 4 with every row a full 768 tokens, on 2 CPU cores shared with other
    jobs: 60-97 s/step wall, 44 CPU-seconds/step (so ~22-30 s/step on 2 free cores, ~6-8 min for 16 steps);
    shorter rows cost proportionally less. :meth:`check` gives the ranges.
    """

    rank: int = 16  # LoRA rank r, >= 1 (continuing from a parent adapter keeps the parent's rank)
    alpha: int = 32  # LoRA scaling numerator (scale = alpha / rank), > 0
    dropout: float = 0.0  # LoRA dropout probability on the adapter input while training, in [0, 1)
    lr: float = 2e-4  # AdamW learning rate, absolute (not log10), > 0; constant schedule
    # module names the adapter attaches to (the attention projections of Llama-style models)
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    steps: int = 16  # optimiser steps (one batch each), >= 1
    batch_size: int = 4  # examples per step, >= 1
    replay_ratio: float = 0.3  # share of each batch drawn from the replay buffer, in [0, 1)
    # tokens per example (prompt + answer + end-of-turn), >= 16; a longer prompt loses words from the middle of
    # its longest user message, an answer is never cut
    max_length: int = 768
    grad_clip: float = 1.0  # max global L2 norm of the adapter gradients; 0 = off
    weight_decay: float = 0.0  # AdamW weight decay on the adapter weights, >= 0

    def check(self, key: str = "lora") -> LoraSettings:
        """The one check of LoRA settings; returns ``self``.

        Args:
            key: the config key the error names (``selfevolve.lora``, ``inner.adapter_lora``).

        Raises:
            ConfigError: ``config key '<key>.<field>': expected ..., got ...`` for the first field out of range.
        """
        modules = self.target_modules
        checks: list[tuple[str, bool, str]] = [
            ("rank", self.rank >= 1, ">= 1"),
            ("alpha", self.alpha > 0, "> 0"),
            ("dropout", 0 <= self.dropout < 1, "in [0, 1)"),
            ("lr", self.lr > 0 and math.isfinite(self.lr), "> 0 and finite (absolute, not log10)"),
            ("target_modules", bool(modules) and all(isinstance(m, str) and m for m in modules),
             "a non-empty list of module names"),
            ("steps", self.steps >= 1, ">= 1"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("replay_ratio", 0 <= self.replay_ratio < 1, "in [0, 1)"),
            ("max_length", self.max_length >= 16, ">= 16 tokens"),
            ("grad_clip", self.grad_clip >= 0 and math.isfinite(self.grad_clip), ">= 0 and finite (0 = off)"),
            ("weight_decay", self.weight_decay >= 0, ">= 0"),
        ]
        for name, ok, expected in checks:
            if not ok:
                got: Any = getattr(self, name)
                raise ConfigError(f"config key '{key}.{name}': expected {expected}, got {got!r}")
        return self
