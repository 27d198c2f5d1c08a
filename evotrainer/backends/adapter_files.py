"""Read and write PEFT LoRA adapter folders as plain tensors (no model needed).

A PEFT LoRA save is ``adapter_config.json`` + ``adapter_model.safetensors`` whose keys are
``<module path>.lora_A.weight`` (shape (r, in)) and ``<module path>.lora_B.weight`` (shape (out, r)); the
module's update is ``ΔW = scaling · B @ A`` with ``scaling = lora_alpha / r`` (``lora_alpha / sqrt(r)`` with
rsLoRA). Source: https://huggingface.co/docs/peft/package_reference/lora and PEFT's ``LoraLayer``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evotrainer.errors import ConfigError, ModelError

__all__ = ["ADAPTER_META_FILE", "LoraFactors", "adapter_digest", "check_fits", "read_adapter", "write_adapter"]

ADAPTER_META_FILE = "evotrainer_adapter.json"
"""Provenance file written next to the PEFT files of every adapter EvoTrainer makes (PEFT ignores it)."""

_CONFIG, _WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
_SUFFIX_A, _SUFFIX_B = ".lora_A.weight", ".lora_B.weight"


@dataclass(frozen=True)
class LoraFactors:
    """A LoRA adapter as data.

    Attributes:
        folder: where it was read from.
        config: the parsed ``adapter_config.json``.
        modules: ``{module path: (A, B)}`` with A of shape (r, in) and B of shape (out, r).
    """

    folder: str
    config: dict[str, Any]
    modules: dict[str, tuple[torch.Tensor, torch.Tensor]]

    def scaling(self, rank: int) -> float:
        """The factor on ``B @ A`` for a module of rank ``rank`` (alpha / r, or alpha / sqrt(r) for rsLoRA)."""
        alpha = float(self.config["lora_alpha"])
        return alpha / math.sqrt(rank) if self.config.get("use_rslora") else alpha / rank

    def delta(self, module: str) -> torch.Tensor:
        """The module's weight update ``ΔW``, float64, shape (out, in)."""
        a, b = self.modules[module]
        return self.scaling(a.shape[0]) * (b.double() @ a.double())


def read_adapter(folder: str | Path) -> LoraFactors:
    """Load a plain LoRA adapter folder.

    Raises:
        ModelError: missing files, or an adapter that is not plain LoRA on linear layers (DoRA, biases,
            ``modules_to_save``, embedding LoRA, per-module rank/alpha patterns are not supported).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(folder)
    if not (path / _CONFIG).is_file() or not (path / _WEIGHTS).is_file():
        raise ModelError(f"adapter {path}: expected {_CONFIG} and {_WEIGHTS}")
    try:
        config = json.loads((path / _CONFIG).read_text(encoding="utf-8"))
        tensors = load_file(str(path / _WEIGHTS))
    except (OSError, ValueError, SafetensorError) as exc:
        raise ModelError(f"adapter {path}: unreadable ({exc})") from exc
    unsupported = [k for k in ("use_dora", "rank_pattern", "alpha_pattern", "modules_to_save") if config.get(k)]
    if config.get("peft_type") != "LORA" or config.get("bias", "none") != "none" or unsupported:
        raise ModelError(f"adapter {path}: only plain LoRA adapters are supported (found "
                         f"peft_type={config.get('peft_type')}, bias={config.get('bias')}, {unsupported})")
    modules: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for key in tensors:
        if key.endswith(_SUFFIX_A):
            prefix = key[: -len(_SUFFIX_A)]
            b_key = prefix + _SUFFIX_B
            if b_key not in tensors:
                raise ModelError(f"adapter {path}: {key} has no matching {b_key}")
            a, b = tensors[key], tensors[b_key]
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
                raise ModelError(f"adapter {path}: {prefix} has shapes A {tuple(a.shape)}, B {tuple(b.shape)}")
            modules[prefix] = (a, b)
        elif not key.endswith(_SUFFIX_B):
            raise ModelError(f"adapter {path}: unsupported tensor {key} (only lora_A/lora_B weights)")
    if not modules:
        raise ModelError(f"adapter {path}: no LoRA weights")
    return LoraFactors(str(path), config, modules)


def adapter_digest(folder: str | Path) -> str:
    """sha256 (hex) of an adapter folder's contents: its files' names and bytes, in name order (subfolders
    are not read). Two folders with the same files have the same digest; any changed byte changes it.

    Raises:
        ModelError: ``folder`` is not a folder holding files, or a file cannot be read.
    """
    path = Path(folder)
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else []
    if not files:
        raise ModelError(f"adapter {path}: expected a folder holding the adapter's files")
    digest = hashlib.sha256()
    try:
        for f in files:
            digest.update(f"{f.name}\0{f.stat().st_size}\0".encode())
            with f.open("rb") as fh:
                for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    digest.update(chunk)
    except OSError as exc:
        raise ModelError(f"adapter {path}: unreadable ({exc})") from None
    return digest.hexdigest()


def check_fits(model: torch.nn.Module, adapter: LoraFactors) -> None:
    """Raise unless every module ``adapter`` adapts is a layer of ``model`` with a matching (out, in) weight.

    Works on a plain model and on one with PEFT layers injected (their ``weight`` is the base layer's).

    Raises:
        ModelError: a module is missing or has another shape (an adapter for another base model).
    """
    for name, (a, b) in adapter.modules.items():
        path = name.removeprefix("base_model.model.")
        try:
            weight = model.get_submodule(path).weight
        except AttributeError:
            raise ModelError(f"adapter {adapter.folder}: module {path} is not in this model") from None
        if tuple(weight.shape) != (b.shape[0], a.shape[1]):
            raise ModelError(f"adapter {adapter.folder}: {path} is {tuple(weight.shape)} in this model but "
                             f"{(b.shape[0], a.shape[1])} in the adapter (an adapter for another base model?)")


def write_adapter(folder: str | Path, config: dict[str, Any],
                  modules: dict[str, tuple[torch.Tensor, torch.Tensor]], meta: dict[str, Any]) -> str:
    """Write a PEFT-loadable adapter folder (config, safetensors weights, provenance file).

    Args:
        folder: output folder (created; must not be a file).
        config: the ``adapter_config.json`` content (``r`` must equal every A's first dimension).
        modules: ``{module path: (A (r, in), B (out, r))}``.
        meta: provenance for ``evotrainer_adapter.json`` (JSON-serialisable).

    Returns:
        The folder as a string.

    Raises:
        ConfigError: ``folder`` is a file or cannot be written.
    """
    from safetensors.torch import save_file

    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"adapter output {path} exists and is not a folder")
    tensors: dict[str, torch.Tensor] = {}
    for prefix, (a, b) in modules.items():
        tensors[prefix + _SUFFIX_A] = a.contiguous()
        tensors[prefix + _SUFFIX_B] = b.contiguous()
    try:
        path.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path / _WEIGHTS), metadata={"format": "pt"})
        (path / _CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (path / ADAPTER_META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"adapter output {path}: cannot be written ({exc})") from exc
    return str(path)
