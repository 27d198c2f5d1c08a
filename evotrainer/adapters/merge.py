"""Adapter crossover: a weighted sum of two adapters' low-rank updates, re-factorised by truncated SVD.

For every adapted module, ``ΔW_child = w · ΔW_a + (1 − w) · ΔW_b`` with ``ΔW = scaling · B @ A``; the sum has
rank <= r_a + r_b and is cut back to rank r by its best rank-r approximation in Frobenius norm
(Eckart–Young). This is the "merge the low-rank updates, re-factorise by SVD" operator of the design
brief (cf. PEFT's ``add_weighted_adapter(combination_type="svd")``,
https://huggingface.co/docs/peft/developer_guides/model_merging), done on the saved tensors without a
model. The SVD of the (out, in) sum is taken through QR factors of its (out, r_a + r_b) and
(r_a + r_b, in) factors, so the cost is O((out + in) · r²), not O(out · in · min(out, in)).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from evotrainer.backends.adapter_files import LoraFactors, read_adapter, write_adapter
from evotrainer.errors import ConfigError, ModelError

__all__ = ["cx_adapters", "truncated_factors"]


def truncated_factors(
    left: torch.Tensor, right: torch.Tensor, rank: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Best rank-``rank`` factorisation of ``M = left @ right`` without forming ``M``.

    Args:
        left: shape (out, k). right: shape (k, in). rank: >= 1.

    Returns:
        ``(U, S, Vh)`` with shapes (out, q), (q,), (q, in), q = min(rank, k, out, in); ``U diag(S) Vh`` is the
        truncated SVD of ``M``, singular values descending.
    """
    q_left, r_left = torch.linalg.qr(left)  # (out, k'), (k', k)
    q_right, r_right = torch.linalg.qr(right.T)  # (in, k''), (k'', k)
    core = r_left @ r_right.T  # (k', k'')
    u, s, vh = torch.linalg.svd(core, full_matrices=False)
    q = min(rank, s.shape[0])
    return q_left @ u[:, :q], s[:q], vh[:q] @ q_right.T


def _child_target_modules(a: LoraFactors, b: LoraFactors) -> list[str] | str:
    ta, tb = a.config.get("target_modules"), b.config.get("target_modules")
    if ta == tb or tb is None:
        return ta
    if isinstance(ta, list) and isinstance(tb, list):
        return sorted(set(ta) | set(tb))
    raise ModelError(f"adapters {a.folder} and {b.folder} have incompatible target_modules: {ta!r} vs {tb!r}")


def cx_adapters(
    a: str | Path, b: str | Path, out_dir: str | Path, *, weight: float = 0.5, rank: int | None = None
) -> str:
    """Cross two LoRA adapters of the same base model into a new adapter folder.

    Args:
        a: first parent adapter folder (its lora_alpha, rsLoRA flag and other config fields are kept).
        b: second parent adapter folder; modules only one parent adapts count as a zero update in the other.
        out_dir: the child's folder (PEFT ``save_pretrained`` layout plus ``evotrainer_adapter.json``
            recording parents, weight, rank and the share of the merged update's energy kept).
        weight: w in [0, 1], the share of ``a``; 0.5 averages, 1.0 returns ``a``'s update.
        rank: the child's rank, >= 1; None uses ``a``'s rank. Modules whose merged update has lower rank
            get zero-padded factors (the update is unchanged).

    Returns:
        ``out_dir`` as a string; ``PeftModel.from_pretrained(base, out_dir)`` loads it.

    Raises:
        ConfigError: ``weight`` or ``rank`` out of range. ModelError: an unreadable or non-plain-LoRA parent,
            or parents whose shared modules differ in shape (different base models).
    """
    if not (0.0 <= weight <= 1.0) or not math.isfinite(weight):
        raise ConfigError(f"cx_adapters: weight must be in [0, 1], got {weight}")
    pa, pb = read_adapter(a), read_adapter(b)
    r_child = int(rank if rank is not None else pa.config["r"])
    if r_child < 1:
        raise ConfigError(f"cx_adapters: rank must be >= 1, got {rank}")
    config = {**pa.config, "r": r_child, "target_modules": _child_target_modules(pa, pb), "inference_mode": True}
    child_scaling = LoraFactors(str(out_dir), config, {}).scaling(r_child)
    modules: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    kept = total = 0.0
    for name in sorted(set(pa.modules) | set(pb.modules)):
        lefts, rights, dtype, shape = [], [], None, None
        for parent, w in ((pa, weight), (pb, 1.0 - weight)):
            if name not in parent.modules:
                continue
            fa, fb = parent.modules[name]
            if shape is not None and (fb.shape[0], fa.shape[1]) != shape:
                raise ModelError(f"adapters {pa.folder} and {pb.folder}: module {name} has shapes {shape} "
                                 f"and {(fb.shape[0], fa.shape[1])} (different base models?)")
            shape, dtype = (fb.shape[0], fa.shape[1]), dtype or fa.dtype
            lefts.append(w * parent.scaling(fa.shape[0]) * fb.double())  # (out, r_p)
            rights.append(fa.double())  # (r_p, in)
        left, right = torch.cat(lefts, dim=1), torch.cat(rights, dim=0)  # (out, Σr), (Σr, in)
        u, s, vh = truncated_factors(left, right, r_child)
        root = torch.sqrt(s / child_scaling)  # (q,)
        new_b = torch.zeros(shape[0], r_child, dtype=torch.float64)
        new_a = torch.zeros(r_child, shape[1], dtype=torch.float64)
        new_b[:, : s.shape[0]] = u * root  # (out, q)
        new_a[: s.shape[0]] = root[:, None] * vh  # (q, in)
        modules[name] = (new_a.to(dtype), new_b.to(dtype))
        kept += float((s**2).sum())
        total += _energy(left, right)
    meta = {
        "operator": "cx_adapters",
        "parents": [str(a), str(b)],
        "weight": weight,
        "rank": r_child,
        "energy_kept": kept / total if total > 0 else 1.0,
    }
    return write_adapter(out_dir, config, modules, meta)


def _energy(left: torch.Tensor, right: torch.Tensor) -> float:
    """Squared Frobenius norm of ``left @ right`` via the small Gram matrices (trace(LᵀL · R Rᵀ))."""
    return float(torch.sum((left.T @ left) * (right @ right.T)))
