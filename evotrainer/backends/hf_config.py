"""Token counters of :class:`~evotrainer.backends.hf.HFBackend`. Its settings are the model schema itself
(:class:`evotrainer.model_schema.ModelConfig`, the ``model.*`` keys), not a copy of it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GenerationStats"]


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
