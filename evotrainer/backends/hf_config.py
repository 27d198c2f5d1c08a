"""Settings and token counters of :class:`~evotrainer.backends.hf.HFBackend` (a module of their own so the
loading helpers read the settings without importing the backend)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GenerationStats", "HFBackendConfig"]


@dataclass(frozen=True)
class HFBackendConfig:
    """Settings of :class:`HFBackend`.

    Attributes:
        path: None for the embedded SmolLM2-135M-Instruct GGUF; else a local HF model folder, a local
            ``.gguf`` file, or a hub id (hub ids must already be in the local cache: runs are offline,
            ``HF_HUB_OFFLINE=1``).
        gguf_file: GGUF file name inside ``path`` (None: auto-detected when the folder holds exactly
            one ``.gguf`` file and no ``config.json``).
        dtype: "float32" (CPU default), "bfloat16" or "float16".
        batch_size: requests per ``generate`` call, >= 1 (a population generation of 8 policies x 3
            meetings fits one call at the default).
        max_context: cap on the context window in tokens (prompt + generated); None uses the model's
            ``max_position_embeddings``.
        threads: ``torch.set_num_threads`` value (process-wide); None leaves torch's default.
        progress: show a progress bar over batches (off by default).
        device: torch device for the model ("cpu", "cuda", "cuda:1", ...).
        prefix_sharing: compute a token prefix shared by several requests of one ``generate`` call
            once and reuse its key/value states for each of them (:mod:`evotrainer.backends.prefix`);
            False runs every request's whole prompt (the per-pair path). Greedy text is the same either
            way up to floating-point rounding.
        prefix_min_tokens: shortest shared prefix worth reusing, tokens, >= 1.
        prefix_cache_mb: MiB of computed prefix states kept across calls for the backend's life (entries
            never served dropped first, then the least recently used; :class:`~evotrainer.backends.prefix.
            PrefixStore`), >= 0; 0 keeps none (prefixes are still shared inside one call). SmolLM2-135M in
            fp32 takes 45 KiB per prompt token (30 layers x keys and values x 3 heads x 64 x 4 bytes).
        kv_cache: "dynamic" (transformers' ``DynamicCache``: grows by concatenation each step) or
            "static" (a ``StaticCache`` preallocated to the chunk's prompt width + max new tokens and
            written in place; same text, no per-step copy of the whole cache).
        max_batch_tokens: cap on a chunk's padded size, rows x (prompt width + max new tokens), tokens;
            a chunk closes before it would pass the cap or ``batch_size`` rows (a single row is always
            allowed). None: rows only. Bounds memory when long prompts meet large batches.
    """

    path: str | None = None
    gguf_file: str | None = None
    dtype: str = "float32"
    batch_size: int = 32
    max_context: int | None = None
    threads: int | None = None
    progress: bool = False
    device: str = "cpu"
    prefix_sharing: bool = True
    prefix_min_tokens: int = 32
    prefix_cache_mb: int = 512
    max_batch_tokens: int | None = 32768
    kv_cache: str = "static"


@dataclass
class GenerationStats:
    """Running token counts of one backend, for benchmarks and the run summary.

    Attributes:
        requests: requests generated.
        prompt_tokens: prompt tokens of those requests (after context fitting).
        prefix_tokens_reused: prompt tokens not run through the model because a shared prefix's states
            were computed once (or found in the prefix store) and reused.
        prefix_tokens_computed: prompt tokens of shared prefixes that were run through the model.
        generated_tokens: tokens generated, end-of-turn included.
    """

    requests: int = 0
    prompt_tokens: int = 0
    prefix_tokens_reused: int = 0
    prefix_tokens_computed: int = 0
    generated_tokens: int = 0
