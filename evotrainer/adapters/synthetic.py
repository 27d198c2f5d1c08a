"""A random LoRA adapter for a backend's model: a real PEFT save with non-zero factors, for tests and
benchmarks that need adapters without training one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["random_adapter"]


def random_adapter(backend: Any, folder: Path, *, seed: int, rank: int = 8, scale: float = 0.02,
                   targets: tuple[str, ...] = ()) -> Path:
    """Save a PEFT LoRA adapter with random ``lora_A`` and ``lora_B`` (``scale`` * N(0, 1), seeded by
    ``seed``) of rank ``rank`` on ``targets`` for ``backend.model`` in ``folder`` and return ``folder``.

    The backend's resident adapters are unloaded first (they load again on demand); the model's weights
    and ``requires_grad`` flags are left as they were.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    backend.unload_adapters()
    flags = [p.requires_grad for p in backend.model.parameters()]
    from evotrainer.adapters.targets import attention_projections

    modules = list(targets) or attention_projections(backend.model)
    peft_model = get_peft_model(backend.model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=modules))
    try:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in peft_model.named_parameters():
                if "lora_" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * scale)
        peft_model.save_pretrained(str(folder))
    finally:
        peft_model.unload()
        for p, flag in zip(backend.model.parameters(), flags, strict=True):
            p.requires_grad_(flag)
    return folder
