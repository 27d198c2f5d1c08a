"""What an OpenAI-compatible server can do with a request, per kind of server, and the request fields of one.

Pure tables and functions (no network): :mod:`evotrainer.backends.openai_compat` sends what they say, and
:mod:`evotrainer.evolve.gene_support` refuses a run whose genes a server cannot honour. Each
:class:`~evotrainer.backends.base.SamplingParams` field is handled one of three ways per server:

- **sent** as the request field of the same meaning: ``temperature``; ``top_p`` and ``seed`` when sampling
  (greedy ignores them, as the in-process backends do); ``max_new_tokens`` as ``max_tokens``
  (``max_completion_tokens`` for the hosted OpenAI API, whose newer models refuse ``max_tokens``);
- **approximated**: ``repetition_penalty`` only, and only when the role's ``openai.approximate`` lists it:
  ours counts generated tokens only (:mod:`evotrainer.backends.logits`); each server's own penalty also
  counts the prompt (vLLM's ``repetition_penalty``, llama.cpp's ``repeat_penalty`` over its last 64 tokens,
  ``transformers serve``'s ``frequency_penalty`` turned into ``repetition_penalty = 1 + f``), which the
  archive names;
- **dropped**, counted and archived: ``no_repeat_ngram_size`` (no server blocks n-grams of the generated
  text only) and an unapproximated ``repetition_penalty``. The mutator and the judge send built-in values
  of these; a policy setting that would be dropped is refused before the run starts instead.

Sources: vLLM's OpenAI-compatible server docs ("Extra Parameters": ``repetition_penalty``,
``continue_final_message``, ``add_generation_prompt``; "Dynamically serving LoRA Adapters":
``/v1/load_lora_adapter``), llama.cpp's ``tools/server/README.md`` (``repeat_penalty``, ``seed``, a final
assistant message continued as a prefill), ``transformers serve`` (transformers 5.x
``cli/serving/chat_completion.py``: ``frequency_penalty`` -> ``repetition_penalty``, the seed set process-wide),
Ollama's OpenAI compatibility page, and the OpenAI API reference (``max_completion_tokens``, ``seed`` "best
effort"). Only ``transformers serve`` is exercised by this repository's tests; the rest follow those docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evotrainer.backends.base import SamplingParams

__all__ = ["PROFILES", "RequestFields", "ServerProfile", "detect_server", "request_fields", "unsupported"]


@dataclass(frozen=True)
class ServerProfile:
    """What one kind of OpenAI-compatible server offers.

    Attributes:
        kind: "vllm", "llamacpp", "ollama", "transformers", "openai" or "generic".
        seed: how the request's ``seed`` is honoured: "per_request" (same seed, same text whatever runs
            beside it), "process" (a process-wide RNG reseeded per request: reproducible only one request at
            a time), "best_effort" or "unknown".
        continue_prefill: the chat endpoint continues a final assistant message (extra fields in
            ``continue_fields``), so an answer prefill needs no local chat template.
        continue_fields: extra request fields that switch continuation on (vLLM's), else empty.
        completions: ``/completions`` takes a raw prompt string (the chat template applied here).
        repetition: ``(request field, how it differs from ours)`` for an approximated repetition penalty,
            or None when the server has none.
        runtime_lora: adapters can be loaded while the server runs (vLLM's ``/v1/load_lora_adapter``).
        max_tokens_field: the request field of the token budget.
        notes: differences worth archiving (sampling, seeds).
        token_prompts: ``/completions`` takes a prompt of token ids and adds nothing to it (vLLM's
            ``CompletionRequest.prompt``; llama.cpp's server, "direct token input"); others get text.
    """

    kind: str
    seed: str
    continue_prefill: bool
    continue_fields: tuple[tuple[str, Any], ...]
    completions: bool
    repetition: tuple[str, str] | None
    runtime_lora: bool
    max_tokens_field: str = "max_tokens"
    notes: tuple[str, ...] = ()
    token_prompts: bool = False


PROFILES: dict[str, ServerProfile] = {
    "vllm": ServerProfile(
        "vllm", "per_request", True, (("continue_final_message", True), ("add_generation_prompt", False)), True,
        ("repetition_penalty", "vLLM's repetition_penalty also counts prompt tokens"), True, token_prompts=True),
    "llamacpp": ServerProfile(
        "llamacpp", "per_request", True, (), True,
        ("repeat_penalty", "llama.cpp's repeat_penalty covers its last 64 tokens, prompt tokens included"), False,
        token_prompts=True),
    "ollama": ServerProfile("ollama", "per_request", False, (), False, None, False),
    "transformers": ServerProfile(
        "transformers", "process", False, (), True,
        ("frequency_penalty", "transformers serve turns frequency_penalty f into repetition_penalty 1+f over "
                              "prompt and generated tokens"), False,
        notes=("temperature > 0 samples only when the served model's generation_config.json sets do_sample: "
               "true (transformers serve applies the temperature without switching sampling on)",
               "the seed reseeds one process-wide torch RNG per request: reproducible at concurrency 1 only")),
    "openai": ServerProfile("openai", "best_effort", False, (), False, None, False,
                            max_tokens_field="max_completion_tokens"),
    "generic": ServerProfile("generic", "unknown", False, (), False, None, False),
}
"""The profile of each server kind (``<role>.openai.server``)."""


def detect_server(owned_by: set[str], extra_keys: set[str], base_url: str) -> str:
    """The server kind from its ``/models`` answer: the entries' ``owned_by`` values and the keys beyond
    OpenAI's (``transformers serve`` adds ``status``); "generic" when nothing tells.

    Args:
        owned_by: ``owned_by`` of every listed model.
        extra_keys: keys of the listed entries other than ``id``, ``object``, ``created``, ``owned_by``.
        base_url: the configured URL (the hosted API is recognised by its host).
    """
    if "vllm" in owned_by:
        return "vllm"
    if "llamacpp" in owned_by:
        return "llamacpp"
    if "library" in owned_by:  # Ollama lists its models as owned by "library"
        return "ollama"
    if "status" in extra_keys:
        return "transformers"
    if "api.openai.com" in base_url:
        return "openai"
    return "generic"


@dataclass(frozen=True)
class RequestFields:
    """One request's decoding fields.

    Attributes:
        body: standard request fields (``temperature``, ``top_p``, ``seed``, the token budget).
        extra: server-specific fields (sent through the client's ``extra_body``).
        sent: names of the :class:`SamplingParams` fields sent as they are.
        approximated: names sent as the server's own variant.
        dropped: names whose non-default value was not sent.
    """

    body: dict[str, Any]
    extra: dict[str, Any]
    sent: tuple[str, ...]
    approximated: tuple[str, ...]
    dropped: tuple[str, ...]


def request_fields(params: SamplingParams, profile: ServerProfile, approximate: frozenset[str]) -> RequestFields:
    """The request fields of ``params`` on a ``profile`` server (module docstring).

    Args:
        params: the request's decoding settings.
        profile: the server's kind.
        approximate: setting names the role allows to approximate (``openai.approximate``).
    """
    body: dict[str, Any] = {"temperature": float(params.temperature), profile.max_tokens_field: int(params.max_new_tokens)}
    extra: dict[str, Any] = {}
    sent = ["temperature", "max_new_tokens"]
    approximated: list[str] = []
    dropped: list[str] = []
    if params.temperature > 0:
        body["top_p"] = float(params.top_p)
        body["seed"] = int(params.seed)
        sent += ["top_p", "seed"]
    if params.repetition_penalty != 1.0:
        if "repetition_penalty" in approximate and profile.repetition is not None:
            name = profile.repetition[0]
            value = params.repetition_penalty - 1.0 if name == "frequency_penalty" else params.repetition_penalty
            (body if name == "frequency_penalty" else extra)[name] = float(value)
            approximated.append("repetition_penalty")
        else:
            dropped.append("repetition_penalty")
    if params.no_repeat_ngram_size:
        dropped.append("no_repeat_ngram_size")
    return RequestFields(body, extra, tuple(sent), tuple(approximated), tuple(dropped))


def unsupported(name: str, value: float, profile: ServerProfile, approximate: frozenset[str]) -> str | None:
    """Why the decoding setting ``name=value`` cannot be honoured on a ``profile`` server, or None when it is
    sent (or approximated with the role's consent).

    Args:
        name: a :class:`SamplingParams` field (``seed`` excluded: it is never refused, its handling is archived).
        value: the setting's value.
        profile: the server's kind.
        approximate: ``openai.approximate`` of the role.
    """
    if name == "no_repeat_ngram_size" and value:
        return (f"no_repeat_ngram_size={value:g}: no OpenAI-compatible server blocks n-grams of the generated text "
                "only")
    if name == "repetition_penalty" and value != 1.0:
        if profile.repetition is None:
            return f"repetition_penalty={value:g}: a {profile.kind} server has no repetition penalty field"
        if "repetition_penalty" not in approximate:
            return (f"repetition_penalty={value:g}: only approximated here ({profile.repetition[1]}); list it in "
                    "openai.approximate to accept that")
    return None
