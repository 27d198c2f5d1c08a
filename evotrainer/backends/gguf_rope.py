"""The RoPE scaling of a GGUF model, which transformers' GGUF loader leaves out, read back from the file.

llama.cpp's converter (``convert_hf_to_gguf.py``) writes a model's RoPE scaling as metadata:
``{arch}.rope.scaling.type`` ("none", "linear", "yarn", "longrope"), ``{arch}.rope.scaling.factor`` and, for YaRN,
``{arch}.rope.scaling.original_context_length`` and ``yarn_beta_fast`` / ``yarn_beta_slow`` (key names:
``gguf.Keys.Rope``). transformers' GGUF loader (``modeling_gguf_pytorch_utils.load_gguf_checkpoint``, mapping in
``integrations/ggml.py``) reads them for gpt-oss only: a Gemma-3 4B/12B/27B GGUF, whose global-attention layers
use linear scaling x8, loads with plain RoPE there, and every position past the first few thousand is rotated
wrongly. :func:`gguf_model_config` builds the config transformers would and restores the scaling: on the
``full_attention`` layers for a config with per-layer-type RoPE (Gemma-3; llama.cpp applies it to the global layers
only, as transformers' ``Gemma3TextConfig`` does with ``rope_scaling``), on the whole model otherwise. A scaling
this module cannot restore refuses the file with one line naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evotrainer.errors import ModelError

__all__ = ["gguf_model_config", "gguf_rope_metadata", "gguf_rope_scaling", "with_rope_scaling"]

_YARN_OPTIONAL = {"yarn_beta_fast": "beta_fast", "yarn_beta_slow": "beta_slow"}


def gguf_rope_metadata(path: str | Path) -> dict[str, Any]:
    """``general.architecture`` and the scalar ``{arch}.rope.scaling.*`` keys of the GGUF file at ``path`` (strings
    decoded, numbers as Python numbers), read with the ``gguf`` package (memory-mapped; tensors are not read)."""
    from gguf import GGUFReader, GGUFValueType

    def value(field: Any) -> Any:
        part = field.parts[field.data[0]]
        return bytes(part).decode("utf-8") if field.types[0] == GGUFValueType.STRING else part.tolist()[0]

    fields = GGUFReader(str(path)).fields
    arch = value(fields["general.architecture"]) if "general.architecture" in fields else ""
    keys = [k for k, f in fields.items() if (k == "general.architecture" or k.startswith(f"{arch}.rope.scaling."))
            and f.types and f.types[0] != GGUFValueType.ARRAY]
    return {k: value(fields[k]) for k in keys}


def gguf_rope_scaling(metadata: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """The transformers ``rope_scaling`` entries that the GGUF metadata states, or None when it states none.

    Args:
        metadata: GGUF keys and values (at least ``general.architecture`` and the ``{arch}.rope.scaling.*`` keys).
        where: what the error line names (the file).

    Returns:
        ``{"rope_type": "linear", "factor": f}`` or ``{"rope_type": "yarn", "factor": f,
        "original_max_position_embeddings": n, ...}`` (``beta_fast`` / ``beta_slow`` when stated); None for
        type "none" or no type.

    Raises:
        ModelError: a scaling type other than linear or yarn, or one without the fields it needs (the line names
            the field).
    """
    arch = metadata.get("general.architecture", "")
    key = f"{arch}.rope.scaling."
    kind = metadata.get(key + "type")
    if kind is None or str(kind) == "none":
        return None
    kind = str(kind)
    if kind not in ("linear", "yarn"):
        raise ModelError(f"{where}: {key}type={kind!r} is dropped by transformers' GGUF loader and only linear and "
                         "yarn scaling are restored here; load the model's transformers folder instead")
    factor = metadata.get(key + "factor")
    if factor is None or not float(factor) > 0:
        raise ModelError(f"{where}: {key}type={kind!r} but {key}factor is "
                         f"{'missing' if factor is None else repr(factor)}; expected a factor > 0")
    scaling: dict[str, Any] = {"rope_type": kind, "factor": float(factor)}
    if kind == "yarn":
        original = metadata.get(key + "original_context_length")
        if original is None:
            raise ModelError(f"{where}: {key}type='yarn' but {key}original_context_length is missing")
        scaling["original_max_position_embeddings"] = int(original)
        scaling.update({name: float(metadata[key + k]) for k, name in _YARN_OPTIONAL.items() if key + k in metadata})
    return scaling


def with_rope_scaling(config: Any, scaling: Mapping[str, Any], where: str) -> Any:
    """``config`` with ``scaling`` in its ``rope_parameters`` (a new config, validated by its class).

    A config whose RoPE already has a type other than "default" where the scaling goes is returned as it is (the
    loader read the scaling itself, as for gpt-oss).

    Args:
        config: a transformers ``PretrainedConfig`` with ``rope_parameters`` (transformers >= 5).
        scaling: from :func:`gguf_rope_scaling`.
        where: what the error line names.

    Raises:
        ModelError: the config has per-layer-type RoPE without ``full_attention`` layers to scale.
    """
    params = dict(getattr(config, "rope_parameters", None) or {})
    nested = bool(params) and all(isinstance(v, dict) for v in params.values())
    if nested and "full_attention" not in params:
        raise ModelError(f"{where}: the file states RoPE scaling, but {type(config).__name__} has no full_attention "
                         f"layers to apply it to (layer types: {sorted(params)})")
    target = dict(params["full_attention"]) if nested else params
    if target.get("rope_type", "default") != "default":
        return config
    target.update(scaling)
    patched = {**params, "full_attention": target} if nested else target
    return type(config).from_dict({**config.to_dict(), "rope_parameters": patched})


def gguf_model_config(source: str, gguf_file: str) -> Any | None:
    """The config to load the GGUF ``gguf_file`` of ``source`` with: transformers' own with the file's RoPE
    scaling restored (:func:`with_rope_scaling`), or None when the file states no scaling (transformers' config
    is right as it is).

    Args:
        source: a local folder or a cached hub id (runs are offline).
        gguf_file: the GGUF file's name in it.

    Raises:
        ModelError: the file cannot be read, or states a scaling that cannot be restored (:func:`gguf_rope_scaling`).
    """
    from transformers import AutoConfig
    from transformers.utils import cached_file

    try:
        path = cached_file(source, gguf_file)
        where = f"model file {path}"
        scaling = gguf_rope_scaling(gguf_rope_metadata(path), where)
        if scaling is None:
            return None
        config = AutoConfig.from_pretrained(source, gguf_file=gguf_file)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"cannot read the metadata of {gguf_file} in {source}: {exc}") from None
    return with_rope_scaling(config, scaling, where)
