"""LoRA SFT on a backend's model: the answer-only loss, replay-mixed batches, a PEFT adapter folder out.

One readable function, :func:`train_lora`: encode → plan batches → wrap the backend's model with a
trainable LoRA adapter (fresh, or continuing from a parent folder) → train → save → unload the wrapper.
The base weights never change; afterwards ``GenerationRequest(adapter=out_dir)`` uses the new adapter.

Method: LoRA (Hu et al. 2021, https://arxiv.org/abs/2106.09685) through PEFT
(https://huggingface.co/docs/peft/package_reference/lora). Defaults (rank 16, alpha 32, lr 2e-4, the
attention projections, read off the architecture) are the common PEFT/QLoRA SFT settings.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from evotrainer.adapters.batches import BatchRow, capped_steps, plan_batches, replay_share
from evotrainer.adapters.sft_data import IGNORE_INDEX, EncodedExample, collate, encode_chat
from evotrainer.adapters.targets import attention_projections
from evotrainer.backends.adapter_files import ADAPTER_META_FILE, check_fits, read_adapter
from evotrainer.backends.base import Message
from evotrainer.errors import ConfigError, DataError, ModelError
from evotrainer.model_schema import LoraSettings
from evotrainer.progress import advance

if TYPE_CHECKING:
    from evotrainer.backends.hf import HFBackend

__all__ = ["SFTExample", "TrainResult", "train_lora"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class SFTExample:
    """One supervised example.

    Attributes:
        messages: system?, user, assistant; the answer learnt is the last (assistant) message.
        source: "pool" | "replay" | free text, for batch accounting.
    """

    messages: tuple[Message, ...]
    source: str = "pool"


@dataclass(frozen=True)
class TrainResult:
    """What one :func:`train_lora` call did.

    Attributes:
        adapter_dir: the saved PEFT adapter folder.
        losses: per step, mean cross-entropy (nats/token) over the batch's answer tokens; lower is better.
        seconds: wall time of the whole call (encoding, training, saving).
        trainable_params: adapter parameters trained (> 0).
        steps: optimiser steps taken.
        replay_share: measured share of replay rows in the built batches, in [0, 1].
        skipped_examples: examples dropped because they could not be encoded (e.g. answer too long).
        seconds_per_step: mean wall time of one optimiser step.
        answer_tokens: supervised tokens seen over all steps.
        input_tokens: tokens the model read over all steps (prompt and answer, padding excluded).
        padded_tokens: positions computed over all steps (batch rows x padded length), >= ``input_tokens``.
    """

    adapter_dir: str
    losses: tuple[float, ...]
    seconds: float
    trainable_params: int
    steps: int
    replay_share: float
    skipped_examples: int = 0
    seconds_per_step: float = 0.0
    answer_tokens: int = 0
    input_tokens: int = 0
    padded_tokens: int = 0


def _encode_all(tokenizer: Any, examples: Sequence[SFTExample], cfg: LoraSettings, end_id: int,
                label: str) -> tuple[list[EncodedExample], int]:
    """Encode examples, skipping (with a warning) those that cannot be; returns (encoded, skipped)."""
    out: list[EncodedExample] = []
    skipped = 0
    for i, ex in enumerate(examples):
        try:
            out.append(encode_chat(tokenizer, ex.messages, max_length=cfg.max_length, end_token_id=end_id,
                                   where=f"{label} example {i}"))
        except DataError as exc:
            skipped += 1
            log.warning("skipping a training example: %s", exc)
    return out, skipped


def _wrap(model: torch.nn.Module, cfg: LoraSettings, parent: Path | None) -> Any:
    """A trainable PEFT wrapper around ``model``: a fresh adapter, or the parent's loaded trainable."""
    from peft import LoraConfig, PeftModel, get_peft_model

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)  # transformers deprecations PEFT triggers
        if parent is not None:
            check_fits(model, read_adapter(parent))  # before PEFT injects anything into the model
            try:
                return PeftModel.from_pretrained(model, str(parent), is_trainable=True)
            except (OSError, ValueError, KeyError, RuntimeError) as exc:
                raise ModelError(f"parent adapter {parent}: cannot be loaded: {exc}") from exc
        targets = list(cfg.target_modules) or attention_projections(model)
        config = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                            target_modules=targets, bias="none", task_type="CAUSAL_LM")
        try:
            return get_peft_model(model, config)
        except ValueError as exc:  # e.g. no module matches target_modules
            raise ConfigError(f"lora.target_modules {targets}: {exc}") from exc


def _answer_loss(peft_model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over labelled positions (nats/token), logits only where needed.

    The LM head runs on the answer positions only (a (N, H) @ (H, V) product instead of (B*L, H) @ (H, V)),
    which saves most of the head's time and memory; models whose forward post-processes logits (soft-capping)
    use the plain forward with ``labels`` instead.
    """
    causal_lm = peft_model.get_base_model()
    decoder = causal_lm.get_decoder() if hasattr(causal_lm, "get_decoder") else None
    head = causal_lm.get_output_embeddings()
    if decoder is None or head is None or getattr(causal_lm.config, "final_logit_softcapping", None):
        out = peft_model(**batch, use_cache=False)
        return out.loss
    hidden = decoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     use_cache=False).last_hidden_state  # (B, L, H)
    targets = batch["labels"][:, 1:]  # (B, L-1): token t+1 is predicted at position t
    keep = targets != IGNORE_INDEX  # (B, L-1)
    logits = head(hidden[:, :-1][keep])  # (N, V)
    return torch.nn.functional.cross_entropy(logits.float(), targets[keep])


def _fit(peft_model: Any, plan: list[list[BatchRow]], data: dict[str, list[EncodedExample]],
         cfg: LoraSettings, pad_id: int, end_id: int) -> tuple[list[float], dict[str, int]]:
    """Run the optimiser over ``plan``; returns (per-step losses, token counts: answer, input, padded)."""
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    device = next(iter(params)).device
    losses: list[float] = []
    tokens = {"answer": 0, "input": 0, "padded": 0}
    peft_model.train()
    for step, rows in enumerate(plan):
        batch = collate([data[r.source][r.index] for r in rows], pad_token_id=pad_id, end_token_id=end_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = _answer_loss(peft_model, batch)
        if not torch.isfinite(loss):
            raise ModelError(f"LoRA training: non-finite loss {loss.item()} at step {step}; lower lora.lr")
        optim.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optim.step()
        losses.append(float(loss.detach()))
        tokens["answer"] += int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
        tokens["input"] += int(batch["attention_mask"].sum())
        tokens["padded"] += int(batch["input_ids"].numel())
        advance(1, unit="steps")  # an open progress task counting steps (a self-evolution round's train phase)
    return losses, tokens


def train_lora(
    backend: HFBackend,
    examples: Sequence[SFTExample],
    replay: Sequence[SFTExample],
    cfg: LoraSettings,
    out_dir: str | Path,
    *,
    rng: np.random.Generator,
    parent_adapter: str | Path | None = None,
) -> TrainResult:
    """Fine-tune a LoRA adapter on ``examples`` (+ replay) and save it to ``out_dir``.

    Loss only on the answer tokens and the closing end-of-turn token (see :func:`encode_chat`). Every batch
    mixes in ``cfg.replay_ratio`` replay rows (see :func:`plan_batches`); ``cfg.max_passes`` > 0 caps the steps at
    that many passes over ``examples`` (see :func:`capped_steps`). The backend's resident inference
    adapters are unloaded first; the model is wrapped by PEFT, trained in ``train()`` mode, saved with
    ``save_pretrained``, unwrapped (``unload()``) and put back in ``eval()`` mode, so the base weights, their
    ``requires_grad`` flags and the backend's outputs are exactly as before. Training runs in the model's
    dtype (float32 or bfloat16 on the CPU; PEFT keeps the adapter weights in float32 either way).

    Args:
        backend: the policy model's backend; its model is trained through a wrapper, never changed.
        examples: the new samples to learn (e.g. passing rollouts), at least one encodable.
        replay: seed or earlier-round samples mixed into every batch; may be empty (then no replay).
        cfg: training settings (:meth:`~evotrainer.model_schema.LoraSettings.check` first).
        out_dir: folder for the adapter (created; existing adapter files in it are overwritten). It also
            gets ``evotrainer_adapter.json`` (operator, parent, config, losses).
        rng: the only source of randomness (batch plan, adapter init and dropout via a seeded, forked
            torch RNG: the global torch RNG state is left as it was).
        parent_adapter: continue training this saved adapter (Lamarckian mutation); its rank, alpha and
            target modules are kept and ``cfg``'s are ignored. None starts a fresh adapter.

    Returns:
        A :class:`TrainResult`.

    Raises:
        DataError: no encodable pool example. ConfigError: a setting out of range (``lora.<field>``), a
        float16 model on the CPU, or target modules that match nothing. ModelError: an unloadable parent, no trainable parameters, or a
        non-finite loss.
    """
    cfg.check("lora")
    start = time.perf_counter()
    out = Path(out_dir)
    parent = Path(parent_adapter).expanduser().resolve() if parent_adapter is not None else None
    tokenizer, end_id, pad_id = backend.tokenizer, backend.stop_token_ids[0], backend.pad_token_id
    pool, skipped_pool = _encode_all(tokenizer, examples, cfg, end_id, "pool")
    old, skipped_replay = _encode_all(tokenizer, replay, cfg, end_id, "replay")
    if not pool:
        raise DataError(f"train_lora: none of the {len(examples)} pool examples could be encoded")
    steps = capped_steps(len(pool), len(old), cfg)
    plan = plan_batches(len(pool), len(old), steps=steps, batch_size=cfg.batch_size,
                        replay_ratio=cfg.replay_ratio, rng=rng)
    torch_seed = int(rng.integers(2**31 - 1))

    backend.unload_adapters()
    model = backend.model
    dtype = next(model.parameters()).dtype
    if model.device.type == "cpu" and dtype == torch.float16:
        raise ConfigError("model.dtype=float16 cannot train LoRA on the CPU; use float32 or bfloat16 (auto)")
    grad_flags = {name: p.requires_grad for name, p in model.named_parameters()}
    devices = [model.device.index or 0] if model.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(torch_seed)
        peft_model = _wrap(model, cfg, parent)
        try:
            trainable = {n: p for n, p in peft_model.named_parameters() if p.requires_grad}
            n_trainable = sum(p.numel() for p in trainable.values())
            if n_trainable == 0:
                raise ModelError("LoRA training: the adapter has no trainable parameters")
            frozen_lora = [n for n in trainable if "lora_" not in n]
            if frozen_lora:
                raise ModelError(f"LoRA training would update non-adapter weights: {frozen_lora[:3]}")
            step_start = time.perf_counter()
            losses, tokens = _fit(peft_model, plan, {"pool": pool, "replay": old}, cfg, pad_id, end_id)
            step_seconds = (time.perf_counter() - step_start) / steps
            peft_model.eval()
            out.mkdir(parents=True, exist_ok=True)
            peft_model.save_pretrained(str(out), save_embedding_layers=False)  # only LoRA factors train
        finally:
            peft_model.unload()
            for name, p in model.named_parameters():
                p.requires_grad_(grad_flags.get(name, False))
            model.eval()
    result = TrainResult(
        adapter_dir=str(out),
        losses=tuple(losses),
        seconds=time.perf_counter() - start,
        trainable_params=n_trainable,
        steps=steps,
        replay_share=replay_share(plan),
        skipped_examples=skipped_pool + skipped_replay,
        seconds_per_step=step_seconds,
        answer_tokens=tokens["answer"],
        input_tokens=tokens["input"],
        padded_tokens=tokens["padded"],
    )
    saved = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    meta = {
        "operator": "train_lora",
        "parents": [str(parent)] if parent else [],
        "config": asdict(cfg),
        "adapter": {k: saved.get(k) for k in ("r", "lora_alpha", "target_modules")},  # a parent's, if any
        **{k: v for k, v in asdict(result).items() if k != "adapter_dir"},
    }
    (out / ADAPTER_META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return result
