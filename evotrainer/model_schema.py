"""The model schema: which model plays a role (``model``, ``mutator``, ``selfevolve.judge``) and how it runs.

The one home of these keys: :mod:`evotrainer.config_schema` nests :class:`ModelConfig` in the run config, and the
backends take it as their settings (:class:`~evotrainer.backends.hf.HFBackend` reads it as it is;
:func:`evotrainer.runtime.build_llm` only resolves ``threads``). A module of its own that imports nothing from
EvoTrainer, so the backends read it without importing the rest of the config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ModelConfig", "OpenAIConfig"]


@dataclass
class OpenAIConfig:
    """The OpenAI-compatible server a role's model runs on (``<role>.backend=openai``; issue 28,
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
    timeout_s: float = 120.0  # seconds per request attempt
    max_retries: int = 4  # retries of 429 / 5xx / connection failures, exponential backoff (the openai client's)
    price_prompt: float | None = None  # USD per million prompt tokens (the cost line, outer.budget.usd); null = none
    price_completion: float | None = None  # USD per million completion tokens; null = none


@dataclass
class ModelConfig:
    """Which model plays a role (policy or mutator) and how it runs."""

    path: str | None = None  # HF folder or hub id; None = the embedded SmolLM2-135M-Instruct GGUF
    gguf_file: str | None = None  # GGUF file name inside `path`, when `path` holds GGUFs
    # "hf" (transformers, CPU or GPU), "vllm" (GPU extra) or "openai" (a server: the `openai` keys below)
    backend: str = "hf"
    dtype: str = "float32"  # fp32 on the CPU path
    batch_size: int = 32  # requests per forward batch (8 policies x 3 meetings fit one batch)
    max_context: int | None = 4096  # tokens; None = the model config's max_position_embeddings
    # torch CPU threads (an override); None = auto: the cores other processes leave free (1-minute load
    # average and a 0.5 s CPU sample) and this job's share of a parallel Hydra sweep, >= 1 (evotrainer.threads)
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
