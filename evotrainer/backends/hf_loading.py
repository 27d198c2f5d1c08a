"""Loading a transformers model for :class:`~evotrainer.backends.hf.HFBackend`: where it is, loading it quietly
(through the converted-GGUF cache, RoPE scaling restored), and what its KV cache allows.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from evotrainer.backends.converted import converted_dir, load_converted, save_converted
from evotrainer.backends.embedded import DEFAULT_MODEL, EMBEDDED_MODELS, embedded_gguf
from evotrainer.backends.gguf_rope import gguf_model_config
from evotrainer.errors import ModelError
from evotrainer.model_schema import ModelConfig

__all__ = ["contiguous_head_input", "load_model"]

log = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@functools.cache
def _cache_kwarg() -> str:
    """The ``generate`` keyword of a user-built KV cache: ``cache`` since transformers renamed
    ``past_key_values`` (5.x deprecation), ``past_key_values`` before."""
    import inspect

    from transformers import LlamaModel

    return "cache" if "cache" in inspect.signature(LlamaModel.forward).parameters else "past_key_values"


def _plain_kv_cache(model: torch.nn.Module) -> bool:
    """True when ``model``'s cache is plain per-layer key/value tensors that rows can share (no sliding
    window, no linear-attention state): the condition for prefix sharing."""
    from transformers import DynamicCache

    try:
        layers = DynamicCache(config=model.config).layers
    except Exception:  # an exotic config: share nothing rather than guess
        return False
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Silence transformers' weight-loading and GGUF de-quantisation progress bars, then restore them."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    old_tqdm = getattr(gguf_utils, "tqdm", None)
    hf_logging.disable_progress_bar()
    if old_tqdm is not None:
        gguf_utils.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        if old_tqdm is not None:
            gguf_utils.tqdm = old_tqdm
        if was_on:
            hf_logging.enable_progress_bar()


def _resolve_source(cfg: ModelConfig) -> tuple[str, str | None]:
    """``(folder or hub id, gguf file name or None)`` for ``from_pretrained``; ModelError if absent."""
    if cfg.path is None or cfg.path in EMBEDDED_MODELS:
        gguf = embedded_gguf(cfg.path or DEFAULT_MODEL)
        return str(gguf.parent), gguf.name
    local = Path(cfg.path).expanduser()
    if local.is_file() and local.suffix == ".gguf":
        return str(local.parent), local.name
    if local.is_dir():
        if cfg.gguf_file is None and not (local / "config.json").is_file():
            ggufs = sorted(local.glob("*.gguf"))
            if len(ggufs) == 1:
                return str(local), ggufs[0].name
        if cfg.gguf_file is not None and not (local / cfg.gguf_file).is_file():
            raise ModelError(f"model.gguf_file {cfg.gguf_file!r} not found in {local}")
        return str(local), cfg.gguf_file
    if local.exists() or not _HUB_ID.match(cfg.path) or cfg.path.startswith((".", "~")):
        raise ModelError(f"model.path does not exist or is not a model folder: {cfg.path}")
    return cfg.path, cfg.gguf_file  # a hub id: resolved from the local cache (offline)


def load_model(source: str, gguf_file: str | None, dtype: torch.dtype) -> tuple[Any, Any]:
    """``(tokenizer, model)`` of ``source`` (a folder or cached hub id, with ``gguf_file`` when it is a GGUF).

    A GGUF is de-quantised once and cached as a plain safetensors folder (:mod:`evotrainer.backends.converted`);
    later loads read that folder. A GGUF's RoPE scaling, which transformers' GGUF loader drops, is restored from the
    file's metadata (:mod:`evotrainer.backends.gguf_rope`); a cached folder without it is converted again.
    Transformers' loading progress bars are silenced.

    Raises:
        ModelError: the model cannot be loaded, has no chat template (not instruction-tuned), or is a GGUF whose
            RoPE scaling cannot be restored.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    config = gguf_model_config(source, gguf_file) if gguf_file else None  # None: transformers' own is right
    converted = converted_dir(source, gguf_file, dtype)
    if converted is not None:  # the GGUF converted once already: a safetensors load, fingerprint-checked
        with _quiet_loading():
            cached = load_converted(converted, dtype)
        if cached is not None and config is not None and cached[1].config.rope_parameters != config.rope_parameters:
            log.warning("converted-model cache %s lacks the GGUF's RoPE scaling; converting the GGUF again", converted)
            cached = None
        if cached is not None:
            return cached
    try:
        with _quiet_loading():
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **kwargs,
                                                         **({"config": config} if config is not None else {}))
    except (OSError, ValueError, ImportError) as exc:
        raise ModelError(
            f"cannot load model {source!r}{f' (gguf_file={gguf_file})' if gguf_file else ''}: {exc}. "
            "Hub ids must already be cached locally (runs are offline, HF_HUB_OFFLINE=1)."
        ) from exc
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError(f"model {source!r} has no chat template; use an instruction-tuned model")
    if converted is not None:
        save_converted(converted, tokenizer, model)
    return tokenizer, model


def contiguous_head_input(model: torch.nn.Module) -> None:
    """Make the output head (``get_output_embeddings()``) read a contiguous input, once per model.

    Generation slices the last position's hidden states, ``(B, 1, H)`` with the stride of the whole prompt. On the CPU,
    torch 2.13's ``linear`` does not fold such a non-contiguous 3-D input into one matrix product when the weight
    does not require grad (PEFT freezes every base weight when it injects an adapter): it expands the ``(V, H)``
    head weight once per row into a batched product, ``B x V x H`` elements (gigabytes for a batch of rows of a
    150k vocabulary; docs/results.md, "Self-evolution and adapter genes"). A pre-hook copies the ``(B, 1, H)`` input
    instead. A model without an output head is left as it is.
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None or getattr(head, "_evotrainer_contiguous", False):
        return
    head.register_forward_pre_hook(lambda _module, args: (args[0].contiguous(), *args[1:]) if args else None)
    head._evotrainer_contiguous = True
