"""The model settings: which model plays a role (``model``, ``mutator``, ``selfevolve.judge``) and how it runs,
and the LoRA settings the trainer takes (``inner.adapter_lora``, ``selfevolve.lora``).

The one home of these keys: :mod:`evotrainer.config_schema` nests :class:`ModelConfig` and :class:`LoraSettings`
in the run config, the backends take :class:`ModelConfig` as their settings (:class:`~evotrainer.backends.hf.HFBackend`
reads it as it is; :func:`evotrainer.run.runtime.build_llm` only resolves ``threads``) and the trainer
:class:`LoraSettings`. A module of its own that imports only :mod:`evotrainer.errors`, so the backends, the search
and the trainers read it without importing the rest of the config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from evotrainer.errors import ConfigError

__all__ = ["LoraSettings", "ModelConfig", "OpenAIConfig"]

@dataclass
class OpenAIConfig:
    """The OpenAI-compatible server a role's model runs on (``<role>.backend=openai``,
    ``evotrainer/backends/openai_compat.py``). The API key itself is never in the config or the archive:
    only the name of the environment variable that holds it."""

    base_url: str | None = None  # e.g. http://127.0.0.1:8000/v1 (vLLM), :8080/v1 (llama.cpp), :11434/v1 (Ollama)
    model: str | None = None  # the served model's name (the requests' `model` field)
    api_key_env: str | None = None  # name of the environment variable holding the key; null = no key (local)
    # which request fields and answer-prefill path the server has: auto (from its /models list) | vllm |
    # llamacpp | ollama | transformers (`transformers serve`) | openai (the hosted API) | generic
    server: str = "auto"
    # answer prefill: auto (the server's own way, else refused) | continue (the server continues a final
    # assistant message) | completions (/completions with the chat template applied here) | none (refused)
    prefill: str = "auto"
    # tokenizer (local folder or cached hub id) for prefill=completions and prompt fitting (model.max_context);
    # null = the served model's name when that is a local folder
    tokenizer: str | None = None
    # decoding fields sent as the server's own variant, the difference archived (repetition_penalty: the
    # server's penalty also counts prompt tokens); any other setting the server lacks is refused up front
    approximate: list[str] = field(default_factory=list)
    concurrency: int = 8  # requests in flight at once
    timeout_s: float = 120.0  # seconds per request attempt; a generation that timed out is not sent again
    # retries of 429 / 5xx / connection failures, exponential backoff; never of a timeout (the server may still
    # be computing the request)
    max_retries: int = 4
    price_prompt: float | None = None  # USD per million prompt tokens (the cost line, outer.budget.usd); null = none
    price_completion: float | None = None  # USD per million completion tokens; null = none


@dataclass
class ModelConfig:
    """Which model plays a role (policy or mutator) and how it runs."""

    # an embedded model's name (qwen2.5-coder-1.5b, the default; smollm2-135m, the tiny model), a GGUF file, an HF
    # folder or a cached hub id; None = the default (for the mutator: the policy model, see `following`)
    path: str | None = None
    gguf_file: str | None = None  # GGUF file name inside `path`, when `path` holds GGUFs
    # "hf" (transformers, CPU or GPU), "vllm" (GPU extra) or "openai" (a server: the `openai` keys below)
    backend: str = "hf"
    # auto = bfloat16 where the hardware computes it natively (a CPU with AMX or AVX512-BF16; most GPUs), else
    # float32 on a CPU and float16 on a GPU (evotrainer/backends/numerics.py); or float32 | bfloat16 | float16
    dtype: str = "auto"
    batch_size: int = 32  # requests per forward batch (8 policies x 3 items fit one batch)
    max_context: int | None = 4096  # tokens; None = the model config's max_position_embeddings
    # torch CPU threads (an override); None = auto: the cores other processes leave free (1-minute load
    # average and a 0.5 s CPU sample) and this job's share of a parallel Hydra sweep, >= 1 (evotrainer.backends.threads)
    threads: int | None = None
    device: str = "cpu"  # torch device of the hf backend: "cpu", "cuda", "cuda:1", ...
    # hf backend: compute a prompt prefix shared by several requests once and reuse its KV states
    prefix_sharing: bool = True
    prefix_min_tokens: int = 32  # shortest shared prefix worth reusing, tokens
    # MiB of prefix KV states kept for the whole run (served entries kept longest; docs/outer_loop_budget.md); 0 = none
    prefix_cache_mb: int = 512
    kv_cache: str = "static"  # hf backend: static (preallocated, written in place) | dynamic (grows each step)
    # cap on rows x (prompt + new tokens) per forward batch, bounds the KV cache's memory; null = rows only
    max_batch_tokens: int | None = 32768
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)  # backend=openai only

    def following(self, policy: ModelConfig) -> ModelConfig:
        """This role's settings (the mutator's) with every key left at its schema default taken from ``policy``.

        A role follows the policy model unless the user sets it: with ``path`` and ``backend`` at their defaults
        the role runs the policy model itself (same file, server, dtype, threads: one load serves both); a role
        given its own ``path`` or ``backend`` keeps its model (``path``, ``gguf_file``, ``backend``, ``openai``)
        and takes only the run settings it leaves at their defaults. Idempotent.
        """
        default = ModelConfig()
        own_model = any(getattr(self, k) != getattr(default, k) for k in ("path", "backend"))
        taken = {}
        for f in fields(self):
            if own_model and f.name in ("path", "gguf_file", "backend", "openai"):
                continue
            if getattr(self, f.name) == getattr(default, f.name):
                taken[f.name] = getattr(policy, f.name)
        return replace(self, **taken)


@dataclass
class LoraSettings:
    """Settings of one LoRA SFT run (a self-evolution round, an adapter gene's short fine-tune).

    Defaults follow the LoRA paper's usual setting (Hu et al. 2021: r=16 on the attention projections,
    alpha = 2r) and the common PEFT/QLoRA SFT settings; the CPU experiment lowers ``steps`` and ``max_length``
    (the cost of a step: docs/selfevolve.md). :meth:`check` gives the ranges.
    """

    rank: int = 16  # LoRA rank r, >= 1 (continuing from a parent adapter keeps the parent's rank)
    alpha: int = 32  # LoRA scaling numerator (scale = alpha / rank), > 0
    dropout: float = 0.0  # LoRA dropout probability on the adapter input while training, in [0, 1)
    lr: float = 2e-4  # AdamW learning rate, absolute (not log10), > 0; constant schedule
    # module names the adapter attaches to; empty = the attention projections read off the model's architecture
    # (q/k/v/o_proj on Llama and Qwen2: evotrainer/adapters/targets.py)
    target_modules: list[str] = field(default_factory=list)
    steps: int = 16  # optimiser steps (one batch each), >= 1
    # the most passes over the new (pool) examples, > 0, or 0 = off: when set, the steps stop at
    # ceil(max_passes x pool examples / pool rows per batch) if that is fewer than ``steps``, so few examples are
    # not repeated until memorised (adapters/batches.py, capped_steps)
    max_passes: float = 0.0
    batch_size: int = 4  # examples per step, >= 1
    replay_ratio: float = 0.3  # share of each batch drawn from the replay buffer, in [0, 1)
    # tokens per example (prompt + answer + end-of-turn), >= 16; a longer prompt loses words from the middle of
    # its longest user message, an answer is never cut
    max_length: int = 768
    grad_clip: float = 1.0  # max global L2 norm of the adapter gradients; 0 = off
    weight_decay: float = 0.0  # AdamW weight decay on the adapter weights, >= 0

    def check(self, key: str = "lora") -> LoraSettings:
        """The one check of LoRA settings; returns ``self``.

        Args:
            key: the config key the error names (``selfevolve.lora``, ``inner.adapter_lora``).

        Raises:
            ConfigError: ``config key '<key>.<field>': expected ..., got ...`` for the first field out of range.
        """
        modules = self.target_modules
        checks: list[tuple[str, bool, str]] = [
            ("rank", self.rank >= 1, ">= 1"),
            ("alpha", self.alpha > 0, "> 0"),
            ("dropout", 0 <= self.dropout < 1, "in [0, 1)"),
            ("lr", self.lr > 0 and math.isfinite(self.lr), "> 0 and finite (absolute, not log10)"),
            ("target_modules", all(isinstance(m, str) and m for m in modules),
             "a list of module names (empty = the model's attention projections)"),
            ("steps", self.steps >= 1, ">= 1"),
            ("max_passes", self.max_passes >= 0 and math.isfinite(self.max_passes), ">= 0 and finite (0 = off)"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("replay_ratio", 0 <= self.replay_ratio < 1, "in [0, 1)"),
            ("max_length", self.max_length >= 16, ">= 16 tokens"),
            ("grad_clip", self.grad_clip >= 0 and math.isfinite(self.grad_clip), ">= 0 and finite (0 = off)"),
            ("weight_decay", self.weight_decay >= 0, ">= 0"),
        ]
        for name, ok, expected in checks:
            if not ok:
                got: Any = getattr(self, name)
                raise ConfigError(f"config key '{key}.{name}': expected {expected}, got {got!r}")
        return self
