"""The converted-GGUF cache: a GGUF model de-quantised once, saved as a plain transformers folder, and
checked by a logit fingerprint every time it is loaded from there.

Converting a GGUF (de-quantising every tensor) takes most of a model load, so :class:`~evotrainer.backends.
hf.HFBackend` saves the result once and loads the saved folder afterwards. Two things keep that folder
honest:

- **Only real aliases are dropped.** A tensor is left out of the safetensors file only when it is the same
  storage, offset, shape and stride as one already kept (tied embeddings). The class-level
  ``_tied_weights_keys`` says what a model class *may* tie, not what this instance ties: a GGUF with its own
  ``output.weight`` (Llama-3.1-8B, Mistral-7B, Qwen2.5-7B instruct) loads untied, and dropping
  ``lm_head.weight`` on the strength of the class attribute made every cached load run a randomly
  initialised output layer (transformers PR#42385, PR#43429, issue #48154).
- **A logit fingerprint.** The converted model's next-token logits on a fixed probe prompt (the 16 largest,
  with their token ids) are written next to the weights; a cached load recomputes them, and an entry that
  does not give them back (or has none: written before the fingerprint existed) is reported with a warning
  and converted again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "MARK", "converted_dir", "load_converted", "logit_fingerprint", "save_converted", "save_plain", "save_served_folder",
]

log = logging.getLogger(__name__)

MARK = "evotrainer-converted.json"
_PROBE = "Minutes of the budget meeting: Alice will send the report to Bob by Friday."
_PROBE_MAX_TOKENS = 32  # >= 2 so that attention (queries, keys) shapes the last position
_TOP = 16


def converted_dir(source: str, gguf_file: str | None, dtype: torch.dtype) -> Path | None:
    """Where the transformers form of a GGUF model is cached, or None (not a GGUF, or caching off).

    The folder name carries the GGUF's name, size and modification time, the dtype and the transformers
    version, so any change converts again. ``EVOTRAINER_MODEL_CACHE`` sets the root (default
    ``~/.cache/evotrainer/models``); ``EVOTRAINER_MODEL_CACHE=off`` disables it.
    """
    import transformers

    root = os.environ.get("EVOTRAINER_MODEL_CACHE", str(Path.home() / ".cache" / "evotrainer" / "models"))
    if not gguf_file or root.strip().lower() in ("", "off", "0", "false", "none"):
        return None
    gguf = Path(source) / gguf_file
    if not gguf.is_file():
        return None
    st = gguf.stat()
    tag = f"{gguf.stem}-{st.st_size}-{st.st_mtime_ns}-{str(dtype).removeprefix('torch.')}-tf{transformers.__version__}"
    return Path(root).expanduser() / re.sub(r"[^\w.-]", "_", tag)


def logit_fingerprint(model, tokenizer) -> dict:
    """The model's next-token logits after a fixed probe prompt, as a small JSON-able record.

    Returns:
        ``{"ids": probe token ids (<= 32), "top": [[token id, logit], ...]}``: the 16 largest logits at the
        last position, in float32, largest first.
    """
    ids = list(tokenizer(_PROBE, add_special_tokens=False)["input_ids"])[:_PROBE_MAX_TOKENS]
    logits = _last_logits(model, ids)  # (vocab,)
    values, top = logits.topk(min(_TOP, logits.numel()))
    return {"ids": ids, "top": [[int(i), float(v)] for i, v in zip(top, values, strict=True)]}


def _last_logits(model, ids: list[int]) -> torch.Tensor:
    """Logits at the last position of ``ids``, shape (vocab,), float32 on the CPU."""
    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long, device=device))  # (1, T, vocab)
    return out.logits[0, -1].float().cpu()


def _fingerprint_gap(model, fingerprint: dict, dtype: torch.dtype) -> float:
    """How far ``model`` is from ``fingerprint``: the largest difference at the recorded token ids divided by
    the tolerance of ``dtype`` (<= 1 matches). Float32 allows 1e-4 relative (thread-count rounding); half
    types allow 3e-2 (a few units in the last place of bfloat16)."""
    ids, expected = zip(*fingerprint["top"], strict=True)
    got = _last_logits(model, list(fingerprint["ids"]))[list(ids)]  # (16,)
    expected_t = torch.tensor(expected, dtype=torch.float32)
    rtol = 1e-4 if dtype == torch.float32 else 3e-2
    tolerance = rtol * max(1.0, float(expected_t.abs().max()))
    return float((got - expected_t).abs().max()) / tolerance


def load_converted(folder: Path, dtype: torch.dtype):
    """``(tokenizer, model)`` from a cache entry, or None when it must be converted again.

    None without a word when the entry does not exist; with a warning when it cannot be loaded, has no
    fingerprint, or its probe logits differ from the ones recorded at conversion.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    mark = folder / MARK
    if not mark.is_file():
        return None
    try:
        record = json.loads(mark.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("ignoring the converted-model cache %s (%s); converting the GGUF again", folder, exc)
        return None
    fingerprint = record.get("fingerprint") if isinstance(record, dict) else None
    if not fingerprint:
        log.warning("converted-model cache %s has no logit fingerprint (written by an older version, which could "
                    "leave out an untied output layer); converting the GGUF again", folder)
        return None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
    except (OSError, ValueError) as exc:  # a damaged cache entry
        log.warning("ignoring the converted-model cache %s (%s); converting the GGUF again", folder, exc)
        return None
    try:
        gap = _fingerprint_gap(model, fingerprint, dtype)
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        log.warning("converted-model cache %s: unreadable logit fingerprint (%s); converting the GGUF again",
                    folder, exc)
        return None
    if gap > 1.0:
        log.warning("converted-model cache %s: the probe prompt's logits differ from the converted model's "
                    "fingerprint (%.3g x the tolerance); converting the GGUF again", folder, gap)
        return None
    return tokenizer, model


def save_converted(folder: Path, tokenizer, model) -> None:
    """Save a converted model and its logit fingerprint atomically (a temporary folder renamed into place).

    Args:
        folder: the cache entry, from :func:`converted_dir`.
        tokenizer, model: the GGUF-loaded pair; the model is only read.

    An existing entry is replaced: it failed its fingerprint or could not be loaded, or another process
    converted the same GGUF meanwhile (same content; a reader that has its files open keeps them).

    Failures (read-only home, full disk) only warn: the GGUF is converted again next time.
    """
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        try:
            tokenizer.save_pretrained(str(tmp))
            save_plain(model, tmp)
            record = {"source": model.name_or_path, "fingerprint": logit_fingerprint(model, tokenizer)}
            (tmp / MARK).write_text(json.dumps(record) + "\n", encoding="utf-8")
            if folder.exists():
                old = Path(tempfile.mkdtemp(prefix=".old-", dir=folder.parent))
                folder.rename(old / folder.name)
                shutil.rmtree(old, ignore_errors=True)
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except (OSError, ValueError, TypeError, RuntimeError) as exc:  # the fingerprint forward included
        log.warning("could not cache the converted model in %s: %s", folder, exc)


def save_plain(model, folder: Path) -> None:
    """Save a de-quantised GGUF model as a plain transformers folder (``save_pretrained`` refuses models
    loaded from GGUF): its config without the GGUF quantisation entry, generation config, safetensors.

    A tensor is left out only when it aliases one already kept (same storage, offset, shape, stride: tied
    weights), so the first name in ``state_dict`` order is kept (``model.embed_tokens.weight``, the name
    transformers itself keeps; safetensors' ``save_model`` would keep the alphabetically first). Views that
    merely overlap are copied (safetensors refuses shared memory,
    https://huggingface.co/docs/safetensors/torch_shared_tensors). ``tie_word_embeddings`` is written as the
    instance really is, so a reload ties exactly what was tied.
    """
    from safetensors.torch import save_file

    config = model.config.to_dict()
    config.pop("quantization_config", None)
    inputs, outputs = model.get_input_embeddings(), model.get_output_embeddings()
    if "tie_word_embeddings" in config and inputs is not None and outputs is not None:
        config["tie_word_embeddings"] = _alias_key(inputs.weight) == _alias_key(outputs.weight)
    type(model.config).from_dict(config).save_pretrained(str(folder))
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(str(folder))
    kept: set[tuple] = set()
    storages: set[int] = set()
    state: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        key = _alias_key(tensor)
        if tensor.numel() and key in kept:
            continue  # the same tensor under a second name (tied weights)
        ptr = tensor.untyped_storage().data_ptr()
        state[name] = tensor.clone() if ptr in storages or not tensor.numel() else tensor.contiguous()
        kept.add(key)
        storages.add(ptr)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _alias_key(tensor: torch.Tensor) -> tuple:
    """What makes two tensors the same memory: storage address, offset, shape, stride, dtype."""
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
            tuple(tensor.stride()), tensor.dtype)


def save_served_folder(backend: Any, folder: str | Path) -> Path:
    """Write ``backend``'s (a loaded :class:`~evotrainer.backends.hf.HFBackend`) model as a plain transformers folder another process can serve, e.g.
    ``transformers serve FOLDER`` or ``vllm serve FOLDER``: the embedded GGUF cannot be served as it is (its
    config names no architecture).

    The folder holds the tokenizer with its chat template, the config with ``architectures`` set, the weights
    as safetensors (de-quantised, in the backend's dtype: the same numbers the in-process backend runs), and a
    generation config with ``do_sample: true, top_k: 0`` so that a request with temperature > 0 samples
    (``transformers serve`` applies the temperature without switching sampling on; temperature 0 still decodes
    greedily) with no top-k cut, as the in-process sampler.

    Args:
        backend: the loaded backend.
        folder: where to write (created; existing files are overwritten).

    Returns:
        The folder.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    backend.tokenizer.save_pretrained(str(out))
    save_plain(backend.model, out)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    config["architectures"] = [type(backend.model).__name__]
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    gen_path = out / "generation_config.json"
    generation = json.loads(gen_path.read_text(encoding="utf-8")) if gen_path.is_file() else {}
    generation.update(do_sample=True, top_k=0, eos_token_id=list(backend.stop_token_ids))
    gen_path.write_text(json.dumps(generation, indent=2) + "\n", encoding="utf-8")
    return out
