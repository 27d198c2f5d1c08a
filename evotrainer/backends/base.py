"""The LLM and embedder protocols every backend implements, and their request/response records."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "Generation", "GenerationRequest", "LLM", "Message", "SamplingParams", "request_hash",
           "split_prefill", "with_answer"]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""


def split_prefill(messages: Sequence[Message]) -> tuple[list[Message], str]:
    """``(chat, prefill)``: a trailing assistant message is a *prefill*, the start of the answer.

    Backends render ``chat`` with the generation prompt and append ``prefill`` verbatim, so the model
    continues it; their :class:`Generation` text is then prefill + continuation. Without a trailing
    assistant message ``prefill`` is ``""`` and ``chat`` is ``messages``.
    """
    if messages and messages[-1].get("role") == "assistant":
        return list(messages[:-1]), str(messages[-1].get("content", ""))
    return list(messages), ""


def with_answer(messages: Sequence[Message], answer: str) -> tuple[Message, ...]:
    """The chat ``messages`` (a prefill dropped: ``answer`` is the whole answer) closed by ``answer``,
    e.g. a supervised fine-tuning example."""
    chat, _ = split_prefill(messages)
    return (*chat, {"role": "assistant", "content": answer})


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings of one request.

    Attributes:
        temperature: 0.0 means greedy decoding (deterministic; used for fitness). > 0 samples with
            the request's own ``seed``, so the text does not depend on what else shares the batch.
        top_p: nucleus mass in (0, 1]; only used when sampling.
        max_new_tokens: generated-token budget (tokens, not words), >= 1.
        seed: per-request sampling seed (ignored when greedy).
        repetition_penalty: CTRL-style penalty (Keskar et al. 2019) applied to *generated* tokens
            only, >= 1.0; 1.0 disables it. Penalising prompt tokens makes the model misspell names
            it must copy from the input.
        no_repeat_ngram_size: block any n-gram that already occurs in the *generated* text (not the
            prompt); 0 disables. Stops degenerate loops while still letting the model copy names
            and figures from the input.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 160
    seed: int = 0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 4


@dataclass(frozen=True)
class GenerationRequest:
    """One chat completion to run.

    Attributes:
        messages: the chat, system message first when present. An empty system message is sent
            as an explicit empty system turn (chat templates otherwise inject a default persona).
            A trailing assistant message is a prefill the answer continues (:func:`split_prefill`).
        params: decoding settings.
        adapter: optional LoRA adapter folder (a PEFT save); None runs the base model.
    """

    messages: tuple[Message, ...]
    params: SamplingParams = SamplingParams()
    adapter: str | None = None


def request_hash(request: GenerationRequest) -> str:
    """sha256 hex of a request's messages, decoding settings and adapter (its identity)."""
    blob = json.dumps({"messages": list(request.messages), "params": asdict(request.params), "adapter": request.adapter},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Generation:
    """The result of one request.

    Attributes:
        text: the completion, without role markers or the end-of-turn token; with a prefill it is
            the prefill followed by the continuation (the whole answer), or ``""`` when the
            continuation is blank (a prefill alone is not an answer).
        prompt_tokens: tokens in the (possibly truncated) prompt.
        generated_tokens: tokens generated, end-of-turn included when reached.
        finish_reason: "stop" (end-of-turn reached) or "length" (``max_new_tokens`` hit).
        prompt_truncated: True when the prompt was shortened to fit the context window.
        omitted_words: words the backend cut from the prompt to fit it, >= 0 (0 when nothing was cut or
            the backend does not count them).
        handling: how the task family fed the item to the model, an
            :class:`~evotrainer.input_handling.InputHandling` code (``"whole"``, ``"windowed:4"``,
            ``"cut:0.230"``); ``""`` when the family does not say.
    """

    text: str
    prompt_tokens: int
    generated_tokens: int
    finish_reason: str
    prompt_truncated: bool = False
    omitted_words: int = 0
    handling: str = ""


@runtime_checkable
class LLM(Protocol):
    """A batched chat-completion backend."""

    name: str

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Run all requests, batching internally; the i-th result answers the i-th request.

        Greedy results equal those of running each request alone; sampled results depend only on
        the request and its seed.
        """
        ...


@runtime_checkable
class Embedder(Protocol):
    """Sentence embeddings."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return shape (len(texts), dim) float32, each row L2-normalised (dot product = cosine)."""
        ...
