"""The vLLM backend (GPU): same contract as :class:`~evotrainer.backends.hf.HFBackend`, much faster.

vLLM is an optional dependency (``pip install 'evotrainer[gpu]'``) imported inside the constructor.
Prompts are built exactly as in the HF backend (explicit empty system turn, chat template, middle-cut
of the longest user message when the context is short, content tokenized as text) and sent as token ids.
Decoding:

- temperature / top_p / per-request ``seed`` / ``max_tokens`` map to vLLM's own ``SamplingParams``
  (vLLM seeds a per-request generator when ``seed`` is set);
- repetition penalty and n-gram blocking must see *generated* tokens only; vLLM's built-in
  ``repetition_penalty`` also counts the prompt, so both run in a request-level processor wrapped with
  vLLM's ``AdapterLogitsProcessor`` (vLLM docs, "Custom Logits Processors"), reusing the tensor code of
  :mod:`evotrainer.backends.logits`. That API is marked unstable by vLLM; when it is missing the backend
  falls back to no repetition control and logs a warning.

Not yet exercised on a GPU in this repository: treat it as a first version.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evotrainer.backends.base import Generation, GenerationRequest, Message, split_prefill
from evotrainer.backends.chat_tokens import chat_ids
from evotrainer.errors import ConfigError, ModelError

__all__ = ["VLLMBackend", "VLLMBackendConfig"]

log = logging.getLogger(__name__)

_EXTRA_KEY = "evotrainer_repetition"  # SamplingParams.extra_args key read by our logits processor


@dataclass(frozen=True)
class VLLMBackendConfig:
    """Settings of :class:`VLLMBackend`.

    Attributes:
        path: a Hugging Face model id (in the local cache: runs are offline) or model folder.
        dtype: vLLM dtype ("auto", "bfloat16", "float16", "float32").
        max_context: cap on the context window (vLLM ``max_model_len``); None uses the model's.
        gpu_memory_utilization: fraction of GPU memory vLLM may reserve, in (0, 1].
        tensor_parallel_size: GPUs per model, >= 1.
        enable_lora: start the engine with LoRA support (for adapters; not wired yet).
        max_lora_rank: largest adapter rank the engine accepts.
        max_loras: adapters resident in one batch.
        seed: engine seed (per-request seeds come from SamplingParams).
    """

    path: str = ""
    dtype: str = "auto"
    max_context: int | None = None
    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1
    enable_lora: bool = False
    max_lora_rank: int = 16
    max_loras: int = 8
    seed: int = 0


def _request_processor_class() -> type | None:
    """A vLLM batch-level processor applying our generated-only repetition controls, or None."""
    try:
        from vllm.v1.sample.logits_processor import AdapterLogitsProcessor
    except ImportError:
        return None
    import torch

    from evotrainer.backends.logits import GeneratedNgramBlocker, GeneratedRepetitionPenalty

    def make(params: Any) -> Any:
        extra = (getattr(params, "extra_args", None) or {}).get(_EXTRA_KEY)
        if not extra:
            return None
        penalty, ngram = float(extra[0]), int(extra[1])

        def apply(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
            ids = torch.tensor([output_ids], dtype=torch.long, device=logits.device)  # (1, L) generated only
            row = logits.unsqueeze(0)  # (1, V)
            row = GeneratedRepetitionPenalty(0, [penalty])(ids, row)
            row = GeneratedNgramBlocker(0, [ngram])(ids, row)
            return row[0]

        return apply

    class GeneratedOnlyRepetition(AdapterLogitsProcessor):
        """Repetition penalty + n-gram blocking over each request's generated tokens."""

        def is_argmax_invariant(self) -> bool:
            return False

        def new_req_logits_processor(self, params: Any) -> Any:
            return make(params)

        req_logits_processor = new_req_logits_processor  # the name used by some vLLM releases

    return GeneratedOnlyRepetition


class VLLMBackend:
    """Batched chat completion with vLLM (implements :class:`~evotrainer.backends.base.LLM`).

    Args:
        cfg: backend settings; the engine starts once, here.

    Raises:
        ModelError: vLLM is not installed, or the model cannot be loaded.
        ConfigError: ``cfg.path`` is empty.
    """

    def __init__(self, cfg: VLLMBackendConfig) -> None:
        try:
            import vllm
        except ImportError as exc:
            raise ModelError("vLLM is not installed: pip install 'evotrainer[gpu]'") from exc
        if not cfg.path:
            raise ConfigError("model.path must name a Hugging Face model id or folder for the vLLM backend")
        self.cfg = cfg
        self.name = f"vllm:{cfg.path}"
        self._vllm = vllm
        processor = _request_processor_class()
        self._repetition_supported = processor is not None
        kwargs: dict[str, Any] = {
            "model": cfg.path,
            "dtype": cfg.dtype,
            "gpu_memory_utilization": cfg.gpu_memory_utilization,
            "tensor_parallel_size": cfg.tensor_parallel_size,
            "seed": cfg.seed,
            "enable_lora": cfg.enable_lora,
        }
        if cfg.enable_lora:
            kwargs.update(max_lora_rank=cfg.max_lora_rank, max_loras=cfg.max_loras)
        if cfg.max_context:
            kwargs["max_model_len"] = cfg.max_context
        if processor is not None:
            kwargs["logits_processors"] = [processor]
        try:
            self.llm = vllm.LLM(**kwargs)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelError(f"vLLM cannot load model {cfg.path!r}: {exc}") from exc
        self.tokenizer = self.llm.get_tokenizer()
        self.context_length = int(self.llm.llm_engine.model_config.max_model_len)
        ids = [self.tokenizer.eos_token_id]
        try:
            gen_eos = self.llm.llm_engine.model_config.try_get_generation_config().get("eos_token_id")
        except AttributeError:  # vLLM releases without this helper
            gen_eos = None
        ids += gen_eos if isinstance(gen_eos, list) else [gen_eos]
        self.stop_token_ids = tuple(dict.fromkeys(int(i) for i in ids if i is not None))

    def _encode(self, messages: list[Message], prefill: str = "") -> list[int]:
        """Prompt ids, content and prefill as text (:func:`~evotrainer.backends.chat_tokens.chat_ids`); vLLM
        takes them as they are (no BOS added, nothing parsed)."""
        return chat_ids(self.tokenizer, messages, prefill)

    @staticmethod
    def _lora_request(adapter: str | None) -> Any:
        """The vLLM ``LoRARequest`` for ``adapter``: the one place adapters plug in."""
        if adapter is not None:
            raise NotImplementedError("model.backend=vllm: adapter genes are not wired yet; use model.backend=hf")
        return None

    def _sampling_params(self, request: GenerationRequest) -> Any:
        p = request.params
        extra = None
        if p.repetition_penalty != 1.0 or p.no_repeat_ngram_size:
            if self._repetition_supported:
                extra = {_EXTRA_KEY: [p.repetition_penalty, p.no_repeat_ngram_size]}
            else:
                log.warning("this vLLM lacks AdapterLogitsProcessor: repetition controls are ignored")
        return self._vllm.SamplingParams(
            temperature=p.temperature,
            top_p=p.top_p if p.temperature > 0 else 1.0,
            seed=p.seed if p.temperature > 0 else None,
            max_tokens=p.max_new_tokens,
            stop_token_ids=list(self.stop_token_ids),
            skip_special_tokens=True,
            extra_args=extra,
        )

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Run all requests in one vLLM call; the i-th result answers the i-th request.

        Raises:
            DataError: a malformed chat. ConfigError: ``max_new_tokens`` outside the context window.
            NotImplementedError: a request names an adapter.
        """
        from evotrainer.backends.hf import ensure_system_turn, fit_messages

        requests = list(requests)
        loras = [self._lora_request(r.adapter) for r in requests]
        prompts, truncated, prefills = [], [], []
        for i, r in enumerate(requests):
            messages, prefill = split_prefill(ensure_system_turn(r.messages, where=f"request {i}"))
            prefills.append(prefill)
            budget = self.context_length - r.params.max_new_tokens
            if r.params.max_new_tokens < 1 or budget < 1:
                raise ConfigError(
                    f"request {i}: max_new_tokens={r.params.max_new_tokens} must be in "
                    f"[1, {self.context_length - 1}] (context window {self.context_length} tokens)"
                )
            ids = self._encode(messages, prefill)
            truncated.append(len(ids) > budget)
            if truncated[-1]:
                messages, _ = fit_messages(messages, lambda m, pre=prefill: len(self._encode(m, pre)), budget)
                ids = self._encode(messages, prefill)
            prompts.append({"prompt_token_ids": ids})
        if any(truncated):
            log.warning(
                "%d of %d prompts were cut to fit the %d-token context window",
                sum(truncated),
                len(requests),
                self.context_length,
            )
        outputs = self.llm.generate(
            prompts,
            [self._sampling_params(r) for r in requests],
            lora_request=loras if any(lr is not None for lr in loras) else None,
            use_tqdm=False,
        )
        results = []
        for out, prompt, cut, prefill in zip(outputs, prompts, truncated, prefills, strict=True):
            completion = out.outputs[0]
            results.append(
                Generation(
                    text=(prefill + completion.text).strip() if completion.text.strip() else "",
                    prompt_tokens=len(prompt["prompt_token_ids"]),
                    generated_tokens=len(completion.token_ids),
                    finish_reason="stop" if completion.finish_reason == "stop" else "length",
                    prompt_truncated=cut,
                )
            )
        return results
