"""Adapter mutation by Gaussian noise on the LoRA factors, scaled to each factor's own norm."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from evotrainer.backends.adapter_files import read_adapter, write_adapter
from evotrainer.errors import ConfigError, ModelError

__all__ = ["mut_adapter_noise"]


def mut_adapter_noise(
    parent: str | Path, out_dir: str | Path, *, rng: np.random.Generator, scale: float = 0.05
) -> str:
    """Write a copy of ``parent`` whose every ``lora_A`` and ``lora_B`` factor got relative Gaussian noise.

    Each factor T (shape (r, in) or (out, r)) becomes ``T + scale · ‖T‖_F / sqrt(T.numel()) · N(0, I)``: the
    noise's expected Frobenius norm is ``scale · ‖T‖_F``, so ``scale`` is a relative step size that means the
    same for small and large factors and for any model width. Factors that are exactly zero stay zero.

    Args:
        parent: adapter folder (not modified).
        out_dir: the child's folder; gets ``evotrainer_adapter.json`` (operator, parent, scale).
        rng: the only source of randomness (factors are visited in sorted module order, A before B).
        scale: relative noise level, > 0 (0.05: about 5% of each factor's norm).

    Returns:
        ``out_dir`` as a string.

    Raises:
        ConfigError: ``scale`` not > 0. ModelError: an unreadable parent, or one whose every ``lora_B`` is zero
            (an untrained adapter: its update is zero and relative noise could not change it).
    """
    if not scale > 0 or not math.isfinite(scale):
        raise ConfigError(f"mut_adapter_noise: scale must be > 0, got {scale}")
    src = read_adapter(parent)
    if all(not torch.any(b) for _, b in src.modules.values()):
        raise ModelError(f"adapter {parent}: every lora_B is zero; noise relative to the norm cannot change it")
    modules: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name in sorted(src.modules):
        modules[name] = tuple(_noisy(t, rng, scale) for t in src.modules[name])  # type: ignore[assignment]
    meta = {"operator": "mut_adapter_noise", "parents": [str(parent)], "scale": scale}
    return write_adapter(out_dir, {**src.config, "inference_mode": True}, modules, meta)


def _noisy(t: torch.Tensor, rng: np.random.Generator, scale: float) -> torch.Tensor:
    """``t`` plus relative Gaussian noise (a new tensor of ``t``'s dtype)."""
    base = t.double().numpy()
    sigma = scale * float(np.linalg.norm(base)) / math.sqrt(base.size)
    return torch.from_numpy(base + sigma * rng.standard_normal(base.shape)).to(t.dtype)
