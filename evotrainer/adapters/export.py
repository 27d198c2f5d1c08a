"""Export a policy as a self-contained folder: its system prompt and, optionally, its PEFT adapter."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evotrainer.backends.adapter_files import ADAPTER_META_FILE, read_adapter
from evotrainer.errors import ConfigError

__all__ = ["EXPORT_FILES", "export_policy"]

EXPORT_FILES = ("prompt.md", "policy.json")
"""Files every export holds; an adapter adds ``adapter_config.json`` and ``adapter_model.safetensors``."""

_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", ADAPTER_META_FILE)


def export_policy(
    system_prompt: str, adapter_dir: str | Path | None, out_dir: str | Path, *, meta: Mapping[str, Any],
    policy: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``prompt.md`` (the system prompt), ``policy.json`` (``meta`` + format + adapter info) and the
    adapter's PEFT files into ``out_dir``.

    The adapter files sit at the folder's top level, so ``PeftModel.from_pretrained(base, out_dir)`` loads
    it directly (``base``: the same base model the adapter was trained on, e.g. the embedded SmolLM2-135M).

    Args:
        system_prompt: the policy's rendered system prompt.
        adapter_dir: a PEFT LoRA adapter folder, or None for a prompt-only policy.
        out_dir: the export folder; created, must be empty if it exists.
        meta: JSON-serialisable facts to record (policy id, scores, run id, base model name, ...).
        policy: the genome as ``policy.json``'s ``policy`` object (``id``, ``sections`` as ``[{name, text}]``,
            ``adapter``, ...: the fields :func:`evotrainer.run.policy_refs.load_exported_policy` reads, so a
            ``mode=evaluate`` reference to the folder rebuilds the policy; ``"adapter": "."`` names this folder's
            own adapter files); None leaves it out.

    Returns:
        ``out_dir`` as a Path.

    Raises:
        ConfigError: ``out_dir`` is a file or a non-empty folder, ``meta`` is not JSON-serialisable, or the
            export cannot be written. ModelError: ``adapter_dir`` is not a readable plain LoRA adapter.
    """
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"export folder {out} exists and is not an empty folder")
    adapter_info: dict[str, Any] | None = None
    if adapter_dir is not None:
        factors = read_adapter(adapter_dir)  # validates before anything is written
        adapter_info = {"source": str(adapter_dir), "r": factors.config.get("r"),
                        "lora_alpha": factors.config.get("lora_alpha"),
                        "target_modules": factors.config.get("target_modules"), "modules": len(factors.modules)}
    copied = [n for n in _ADAPTER_FILES if adapter_dir is not None and (Path(adapter_dir) / n).is_file()]
    doc = {"format": 1, "meta": dict(meta), "adapter": adapter_info, "files": [*EXPORT_FILES, *copied],
           **({"policy": dict(policy)} if policy is not None else {})}
    try:
        text = json.dumps(doc, indent=2, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"export_policy: meta is not JSON-serialisable ({exc})") from exc
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "prompt.md").write_text(system_prompt + "\n", encoding="utf-8")
        (out / "policy.json").write_text(text + "\n", encoding="utf-8")
        for name in copied:
            shutil.copyfile(Path(str(adapter_dir)) / name, out / name)
    except OSError as exc:
        raise ConfigError(f"export folder {out}: cannot be written ({exc})") from exc
    return out
