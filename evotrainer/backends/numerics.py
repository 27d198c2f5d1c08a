"""``model.dtype=auto``: the number format a model computes in, chosen from what the hardware does natively.

On a CPU, bfloat16 where it has native bf16 arithmetic (Intel AMX ``amx_bf16`` or ``avx512_bf16``, as Linux
lists them in ``/proc/cpuinfo``), float32 elsewhere (emulated bf16 is slower than fp32). On a CUDA device,
bfloat16 where :func:`torch.cuda.is_bf16_supported` says so, else float16.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["DTYPES", "auto_reason", "cpu_bf16_flags", "resolve_dtype"]

DTYPES = ("auto", "float32", "bfloat16", "float16")
"""Every value ``model.dtype`` takes."""

_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.cache
def cpu_bf16_flags(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """The native-bf16 CPU flags present (``amx_bf16``, ``avx512_bf16``); empty where there are none or the
    file cannot be read (not Linux)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
            break
    return tuple(f for f in _BF16_FLAGS if f in flags)


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """The concrete dtype name for ``dtype`` on ``device``; names other than ``auto`` are returned as they are.

    Args:
        dtype: one of :data:`DTYPES`.
        device: a torch device string (``cpu``, ``cuda``, ``cuda:1``).

    Returns:
        ``float32``, ``bfloat16`` or ``float16``.
    """
    if dtype != "auto":
        return dtype
    if device.startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    return "bfloat16" if cpu_bf16_flags() else "float32"


def auto_reason(device: str = "cpu") -> str:
    """Why ``auto`` resolves as it does on ``device``: a short clause for the run's log, e.g. ``"this CPU lists
    avx512_bf16"`` or ``"this CPU lists neither amx_bf16 nor avx512_bf16: emulated bfloat16 is slower than
    float32"``."""
    if device.startswith("cuda"):
        return "the CUDA device's bf16 support"
    flags = cpu_bf16_flags()
    if flags:
        return f"this CPU lists {', '.join(flags)}"
    return f"this CPU lists neither {' nor '.join(_BF16_FLAGS)}: emulated bfloat16 is slower than float32"
