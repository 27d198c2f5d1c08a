"""What an OpenAI-compatible server can do with a request, per kind of server, and the request fields of one.

Pure tables and functions (no network): :mod:`evotrainer.backends.openai_compat` sends what they say, and
:mod:`evotrainer.run.gene_support` refuses a run whose genes a server cannot honour (user guide:
docs/scaling_out.md, "Genes" and "Sampling defaults of the server"). Each
:class:`~evotrainer.backends.base.SamplingParams` field is **sent** (``temperature``, ``top_p``, ``seed``;
``max_new_tokens`` as ``max_tokens``, or ``max_completion_tokens`` for the hosted API), **approximated**
(``repetition_penalty``, only when the role's ``openai.approximate`` lists it: each server's penalty also counts
the prompt) or **dropped** and counted (``no_repeat_ngram_size``, an unapproximated ``repetition_penalty``).
Every other sampling field a server takes is sent at its neutral value (:attr:`ServerProfile.neutral`), since a
server fills a field left out from its own defaults (vLLM and ``transformers serve`` from the model's
``generation_config.json``, llama.cpp from its command line, Ollama from the Modelfile).

Sources: vLLM's OpenAI-compatible server docs ("Extra Parameters"; "Dynamically serving LoRA Adapters";
``--generation-config``), llama.cpp's ``tools/server/README.md``, ``transformers serve`` (transformers 5.x
``cli/serving/utils.py`` and ``chat_completion.py``: unknown fields refused with HTTP 422, ``frequency_penalty`` ->
``repetition_penalty``, a ``generation_config`` JSON field, the seed set process-wide), Ollama's OpenAI
compatibility page, the OpenAI API reference (``max_completion_tokens``, ``seed`` "best effort"); batch invariance:
vllm#23138, llama.cpp#7052. Only ``transformers serve`` is exercised by this repository's tests.
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
        seed: how the request's ``seed`` is honoured: "per_request" (each request draws from its own seeded
            RNG), "process" (a process-wide RNG reseeded per request: reproducible only one request at a time),
            "best_effort" or "unknown".
        continue_prefill: the chat endpoint continues a final assistant message (extra fields in
            ``continue_fields``), so an answer prefill needs no local chat template.
        continue_fields: extra request fields that switch continuation on (vLLM's), else empty.
        completions: ``/completions`` takes a raw prompt string (the chat template applied here).
        repetition: ``(request field, how it differs from ours)`` for an approximated repetition penalty,
            or None when the server has none.
        runtime_lora: adapters can be loaded while the server runs (vLLM's ``/v1/load_lora_adapter``).
        max_tokens_field: the request field of the token budget.
        notes: differences worth archiving (sampling, seeds).
        neutral: ``(field, value, where)`` sent with every request so no server-side default applies
            (``where``: "body", a standard field; "extra", a server-specific one; "sampled", a server-specific
            one sent only when sampling, as ``transformers serve``'s ``generation_config`` JSON).
        not_settable: sampling settings the server has but its endpoint does not take (its own values apply).
        batch_invariant: True when a request's text does not depend on the requests the server runs beside
            it (what resume and the fitness cache rely on); ``invariance`` says why or why not.
        invariance: one line on what holds for this kind of server.
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
    neutral: tuple[tuple[str, Any, str], ...] = ()
    not_settable: tuple[str, ...] = ()
    batch_invariant: bool = False
    invariance: str = "unknown server: the same text whatever runs beside a request is not promised"
    token_prompts: bool = False


_PENALTIES_OFF = (("frequency_penalty", 0.0, "body"), ("presence_penalty", 0.0, "body"))

PROFILES: dict[str, ServerProfile] = {
    "vllm": ServerProfile(
        "vllm", "per_request", True, (("continue_final_message", True), ("add_generation_prompt", False)), True,
        ("repetition_penalty", "vLLM's repetition_penalty also counts prompt tokens"), True,
        neutral=(*_PENALTIES_OFF, ("top_k", -1, "extra"), ("min_p", 0.0, "extra"),
                 ("repetition_penalty", 1.0, "extra")), token_prompts=True,
        invariance="continuous batching: a request's text, greedy included, can change with the requests running "
                   "beside it (vllm#23138) unless the server runs with VLLM_BATCH_INVARIANT=1"),
    "llamacpp": ServerProfile(
        "llamacpp", "per_request", True, (), True,
        ("repeat_penalty", "llama.cpp's repeat_penalty covers its last 64 tokens, prompt tokens included"), False,
        neutral=(*_PENALTIES_OFF, ("top_k", 0, "extra"), ("min_p", 0.0, "extra"), ("typical_p", 1.0, "extra"),
                 ("repeat_penalty", 1.0, "extra"), ("dry_multiplier", 0.0, "extra"),
                 ("xtc_probability", 0.0, "extra"), ("mirostat", 0, "extra")), token_prompts=True,
        invariance="parallel slots share one batch: a request's text can change with the batch (llama.cpp#7052) "
                   "unless the server runs one slot (--parallel 1)"),
    "ollama": ServerProfile(
        "ollama", "per_request", False, (), False, None, False, neutral=_PENALTIES_OFF,
        not_settable=("top_k", "min_p", "repeat_penalty"),
        notes=("the OpenAI endpoint takes no top_k, min_p or repeat_penalty: the model's Modelfile values apply "
               "(archived as server_parameters)",),
        invariance="llama.cpp underneath: with OLLAMA_NUM_PARALLEL > 1 a request's text can change with the "
                   "requests beside it (llama.cpp#7052)"),
    "transformers": ServerProfile(
        "transformers", "process", False, (), True,
        ("frequency_penalty", "transformers serve turns frequency_penalty f into repetition_penalty 1+f over "
                              "prompt and generated tokens"), False,
        notes=("temperature > 0 samples only when the served model's generation_config.json sets do_sample: "
               "true (transformers serve applies the temperature without switching sampling on)",
               "the seed reseeds one process-wide torch RNG per request: reproducible at concurrency 1 only"),
        neutral=(("frequency_penalty", 0.0, "body"), ("generation_config", '{"top_k": 0}', "sampled")),
        not_settable=("min_p",), batch_invariant=True,
        invariance="one generate call per request (without --continuous-batching): the text does not depend on "
                   "other requests (tested against the in-process backend)"),
    "openai": ServerProfile("openai", "best_effort", False, (), False, None, False,
                            max_tokens_field="max_completion_tokens", neutral=_PENALTIES_OFF,
                            invariance="a hosted API: the same text for the same request is not promised"),
    "generic": ServerProfile("generic", "unknown", False, (), False, None, False, neutral=_PENALTIES_OFF,
                             not_settable=("top_k", "min_p", "repetition_penalty")),
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
        body: standard request fields (``temperature``, ``top_p``, ``seed``, the token budget, penalties off).
        extra: server-specific fields (sent through the client's ``extra_body``).
        sent: names of the :class:`SamplingParams` fields sent as they are.
        approximated: names sent as the server's own variant.
        dropped: names whose non-default value was not sent.
        neutral: names of the server's fields sent at their neutral value (:attr:`ServerProfile.neutral`).
    """

    body: dict[str, Any]
    extra: dict[str, Any]
    sent: tuple[str, ...]
    approximated: tuple[str, ...]
    dropped: tuple[str, ...]
    neutral: tuple[str, ...] = ()


def request_fields(params: SamplingParams, profile: ServerProfile, approximate: frozenset[str]) -> RequestFields:
    """The request fields of ``params`` on a ``profile`` server (module docstring): every decoding field the
    server takes is set, the genome's value where it has one, the neutral value otherwise.

    Args:
        params: the request's decoding settings.
        profile: the server's kind.
        approximate: setting names the role allows to approximate (``openai.approximate``).
    """
    body: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, value, where in profile.neutral:
        if where == "body":
            body[name] = value
        elif where == "extra" or params.temperature > 0:  # "sampled": a server field only sampling reads
            extra[name] = value
    neutral = [*body, *extra]
    body.update({"temperature": float(params.temperature), profile.max_tokens_field: int(params.max_new_tokens),
                 "top_p": float(params.top_p), "seed": int(params.seed)})
    sent = ["temperature", "max_new_tokens", "top_p", "seed"]
    approximated: list[str] = []
    dropped: list[str] = []
    if params.repetition_penalty != 1.0:
        if "repetition_penalty" in approximate and profile.repetition is not None:
            name = profile.repetition[0]
            value = params.repetition_penalty - 1.0 if name == "frequency_penalty" else params.repetition_penalty
            (body if name == "frequency_penalty" else extra)[name] = float(value)
            if name in neutral:  # the genome's value, not the neutral one
                neutral.remove(name)
            approximated.append("repetition_penalty")
        else:
            dropped.append("repetition_penalty")
    if params.no_repeat_ngram_size:
        dropped.append("no_repeat_ngram_size")
    return RequestFields(body, extra, tuple(sent), tuple(approximated), tuple(dropped), tuple(neutral))


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
