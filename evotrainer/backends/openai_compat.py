"""The OpenAI-compatible backend: a role's model served by vLLM, llama.cpp, Ollama, ``transformers serve`` or a
hosted API, through the official ``openai`` client (user guide: docs/scaling_out.md, "Any model a server runs").

Same contract as the in-process backends (:class:`~evotrainer.backends.base.LLM`). Requests run concurrently, at
most ``concurrency`` in flight, and come back in request order; each is independent, so the call log sends only
the requests it has no answer for, and a failed call's error carries the answers already received (``done``:
request index -> answer). Retries and what a failure means: :mod:`evotrainer.backends.openai_errors` (a
:class:`~evotrainer.errors.ServerError` stops the run; a refused request raises ``ModelError`` and fails that
evaluation only). The key is read from the variable named by ``api_key_env`` and never stored, logged or shown;
a credential in ``base_url`` is masked wherever the URL is shown (:func:`~evotrainer.backends.urls.redact_url`).
Decoding fields per server kind: :mod:`evotrainer.backends.openai_fields`. Chat turns are sent as the in-process
backend renders them (an explicit empty system turn), and with a tokenizer and ``max_context`` a prompt too long
for the window is cut here as in process (:func:`~evotrainer.backends.prompt_fit.fit_messages`); a prompt the
server cut itself, seen from the prompt tokens it reports, is recorded as cut too. An answer prefill goes as the
last chat message (``continue``) or through ``/completions`` with the chat template applied here
(:meth:`OpenAIBackend._completion_prompt`). Adapters load into a vLLM server at run time
(:mod:`evotrainer.backends.openai_adapters`). ``Generation`` token counts are the server's ``usage`` figures (a
local count, or words without a tokenizer, when a server leaves ``usage`` out).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evotrainer import progress
from evotrainer.backends.base import Generation, GenerationRequest, Message, split_prefill
from evotrainer.backends.chat_tokens import chat_ids, control_text, render_chat
from evotrainer.backends.openai_adapters import RuntimeAdapters
from evotrainer.backends.openai_errors import error_line, is_systemic, scrub, send
from evotrainer.backends.openai_fields import (
    PROFILES,
    ServerProfile,
    detect_server,
    request_fields,
    unsupported,
)
from evotrainer.backends.server_window import context_from_model_entry, cut_by_server, ollama_parameters
from evotrainer.backends.urls import redact_url
from evotrainer.errors import ConfigError, ModelError, ServerError
from evotrainer.model_schema import OpenAIConfig

__all__ = ["OpenAIBackend"]

log = logging.getLogger(__name__)

_NO_KEY = "no-key"  # sent when no key is configured (the client needs one; local servers ignore it)
_STANDARD_KEYS = {"id", "object", "created", "owned_by"}
_WEIGHT_KEYS = ("root", "parent", "meta")  # a /models entry's fields naming the weights (vLLM; llama.cpp's meta)


def _adds_bos(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` puts its BOS first when tokenizing with special tokens (as servers tokenize a text
    prompt: vLLM's ``/completions`` default, ``transformers serve``, llama.cpp with ``add_bos_token``)."""
    bos = getattr(tokenizer, "bos_token_id", None)
    ids = tokenizer("a")["input_ids"]
    return bos is not None and len(ids) > len(tokenizer("a", add_special_tokens=False)["input_ids"]) and ids[0] == bos


@dataclass
class _Tally:
    """What the backend did, for the archive: requests, per-field handling, prefill paths, prompts cut here and
    by the server, missing usage."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    sent: Counter = field(default_factory=Counter)
    approximated: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    neutral: Counter = field(default_factory=Counter)
    prefill: Counter = field(default_factory=Counter)
    truncated: int = 0
    server_cut: int = 0
    usage_missing: int = 0

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": self.requests, "sent": dict(self.sent), "approximated": dict(self.approximated),
                    "dropped": dict(self.dropped), "neutral_sent": dict(self.neutral),
                    "prefilled": dict(self.prefill), "truncated": self.truncated, "server_cut": self.server_cut,
                    "usage_missing": self.usage_missing}


class OpenAIBackend:
    """Chat completion on an OpenAI-compatible server (implements :class:`~evotrainer.backends.base.LLM`).

    Args:
        cfg: the role's ``openai`` keys as they are (:class:`~evotrainer.model_schema.OpenAIConfig`; ``base_url``
            and ``model`` must be set; the prices are not read). The server is asked for its model list here (one
            request): an unreachable server, a refused key or a model it does not serve fail now, before the run
            spends anything.
        max_context: the role's ``max_context``: context window in tokens for prompt fitting (needs a
            tokenizer); None = no fitting.
        role: the config prefix errors name ("model", "mutator", "selfevolve.judge").
        client: an ``openai.OpenAI``-like client to use instead of building one (tests).

    Attributes:
        name: ``openai:<server kind>:<model>``.
        profile: what the server kind offers (:class:`~evotrainer.backends.openai_fields.ServerProfile`).
        prefill_mode: "continue", "completions", or None (prefills refused: :attr:`prefill_refusal`).
        independent_requests: True: each request is sent on its own (the call log sends only missing ones).
        batch_invariant: the server kind promises a request's text whatever runs beside it
            (:attr:`ServerProfile.batch_invariant`); resume warns where it does not.
        server_context: the context window the server states in tokens, or None (not stated).
        server_parameters: an Ollama model's Modelfile parameters (its sampling defaults), else empty.

    Raises:
        ConfigError: the key variable is named but not set; ``prefill`` asks for a path the server or the
            config lacks; ``server`` names an unknown kind.
        ModelError: the server cannot be reached, refuses the key, or does not serve ``model`` (one line).
    """

    independent_requests = True

    def __init__(self, cfg: OpenAIConfig, *, max_context: int | None = None, role: str = "model",
                 client: Any = None) -> None:
        if not cfg.base_url or not cfg.model:
            raise ConfigError(f"{role}.openai.base_url and {role}.openai.model name the server and its model for "
                              "the openai backend")
        self.cfg, self.max_context, self.role = cfg, max_context, role
        self.approximate = frozenset(cfg.approximate)
        self._secret: str | None = None
        if cfg.api_key_env:
            self._secret = os.environ.get(cfg.api_key_env) or None
            if self._secret is None:
                raise ConfigError(f"{role}.openai.api_key_env: the environment variable {cfg.api_key_env} is not "
                                  "set (export it with the server's key)")
        if client is None:
            try:
                import openai
            except ImportError as exc:  # a dependency; an environment may lack it
                raise ModelError("the openai package is not installed: pip install openai") from exc
            client = openai.OpenAI(base_url=cfg.base_url, api_key=self._secret or _NO_KEY, timeout=cfg.timeout_s,
                                   max_retries=cfg.max_retries)
        self.client = client
        # generations: retried by openai_errors.send, never after a timeout (the client would resend those)
        self._gen_client = client.with_options(max_retries=0) if hasattr(client, "with_options") else client
        self.tally = _Tally()
        self._lock = threading.Lock()
        self._adapters = RuntimeAdapters(
            lambda path, body: self.client.post(path, cast_to=str, body=body),
            lambda exc, what: error_line(exc, self.cfg, self._secret, what, self.role))
        self._tok: Any = None
        self.server_context: int | None = None
        self.server_parameters: dict[str, str] = {}
        self._served: dict[str, Any] = {}  # the /models entry's fields naming the weights (served_model)
        if cfg.server != "auto" and cfg.server not in PROFILES:
            raise ConfigError(f"{role}.openai.server: expected one of {sorted(PROFILES)} or auto, "
                              f"got {cfg.server!r}")
        detected = self._probe()  # a reachable server, the key accepted, the model served
        kind = detected if cfg.server == "auto" else cfg.server
        self.profile: ServerProfile = PROFILES[kind]
        self.batch_invariant = self.profile.batch_invariant
        if kind == "ollama":
            self._ollama_show()
        self.name = f"openai:{kind}:{cfg.model}"
        self.prefill_mode, self.prefill_refusal = self._prefill_mode()
        self._pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="openai")

    # ------------------------------------------------------------------ set-up
    def _probe(self) -> str:
        """List the served models; check ``model`` is among them; the server kind they suggest."""
        import openai

        cfg = self.cfg
        try:
            page = self.client.models.list()
            entries = list(getattr(page, "data", page))
        except openai.NotFoundError:  # a server without /models: nothing to check
            return "generic"
        except openai.APIError as exc:
            raise ServerError(error_line(exc, cfg, self._secret, "listing the models", self.role)) from None
        ids = [str(getattr(m, "id", "")) for m in entries]
        if ids and cfg.model not in ids:
            shown = ", ".join(repr(i) for i in ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            raise ServerError(f"{self.role}.openai.model: the server at {redact_url(cfg.base_url)} does not serve "
                              f"{cfg.model!r}; it serves {shown}")
        owned = {str(getattr(m, "owned_by", "")) for m in entries}
        extra: set[str] = set()
        for m in entries:
            dumped = m.model_dump() if hasattr(m, "model_dump") else dict(getattr(m, "__dict__", {}))
            extra |= set(dumped) - _STANDARD_KEYS
            if str(dumped.get("id", "")) == cfg.model:
                self.server_context = context_from_model_entry(dumped)  # vLLM's max_model_len
                self._served = {k: dumped[k] for k in _WEIGHT_KEYS if dumped.get(k) is not None}
        return detect_server(owned, extra, cfg.base_url)

    def _ollama_show(self) -> None:
        """Read the model's Modelfile parameters from Ollama's ``/api/show`` (beside ``/v1``): its sampling
        defaults, archived, and ``num_ctx``, the window, when set there. An older or stricter server without it
        leaves both unknown."""
        import openai

        root = self.cfg.base_url.rstrip("/").removesuffix("/v1")
        try:
            show = self.client.post(f"{root}/api/show", cast_to=object,
                                    body={"model": self.cfg.model, "name": self.cfg.model})
        except openai.APIError as exc:
            log.warning("%s", error_line(exc, self.cfg, self._secret, "reading the model's parameters (/api/show): "
                                         "its context window is unknown", self.role))
            return
        self.server_parameters = ollama_parameters(show if isinstance(show, dict) else {})
        num_ctx = self.server_parameters.get("num_ctx", "")
        self.server_context = int(num_ctx) if num_ctx.isdigit() and int(num_ctx) > 0 else None

    def _tokenizer_source(self) -> str | None:
        if self.cfg.tokenizer:
            return self.cfg.tokenizer
        return self.cfg.model if Path(self.cfg.model).expanduser().is_dir() else None

    def _prefill_mode(self) -> tuple[str | None, str | None]:
        """``(mode, refusal)``: how an answer prefill is sent, or None and why it cannot be."""
        cfg, p = self.cfg, self.profile
        key = f"{self.role}.openai.prefill"
        source = self._tokenizer_source()
        if cfg.prefill == "continue" and p.kind in ("transformers", "openai"):
            raise ConfigError(f"{key}=continue: a {p.kind} server ends a final assistant message as a finished "
                              "turn instead of continuing it; use completions (transformers) or none")
        if cfg.prefill == "completions":
            if not p.completions and p.kind != "generic":
                raise ConfigError(f"{key}=completions: a {p.kind} server has no raw-prompt /completions endpoint")
            if source is None:
                raise ConfigError(f"{key}=completions needs {self.role}.openai.tokenizer (the served model's "
                                  "tokenizer folder, to apply its chat template here)")
        mode = cfg.prefill
        if mode == "auto":
            mode = ("continue" if p.continue_prefill else "completions" if p.completions and source else "none")
        if mode != "none":
            return mode, None
        why = (f"the answer prefill gene needs a server that continues the assistant turn (vLLM, llama.cpp) or "
               f"/completions with the chat template applied here; this {p.kind} server has "
               + ("/completions but no tokenizer: set " + f"{self.role}.openai.tokenizer" if p.completions
                  else "neither") + f" ({key}={cfg.prefill})")
        return None, why

    def tokenizer(self) -> Any:
        """The served model's tokenizer (loaded once, offline), or None without a source.

        Raises:
            ModelError: the source names no loadable tokenizer.
        """
        source = self._tokenizer_source()
        if source is None:
            return None
        with self._lock:
            if self._tok is None:
                from transformers import AutoTokenizer

                try:
                    self._tok = AutoTokenizer.from_pretrained(source)
                except (OSError, ValueError) as exc:
                    raise ModelError(f"{self.role}.openai.tokenizer: cannot load a tokenizer from {source!r} "
                                     f"(runs are offline: a local folder or a cached hub id): {exc}") from None
        return self._tok

    # ------------------------------------------------------------------ what the server honours
    def unsupported(self, name: str, value: float) -> str | None:
        """Why the decoding setting ``name=value`` is not honoured by this server, or None (sent or approximated
        with the role's consent; :func:`~evotrainer.backends.openai_fields.unsupported`)."""
        return unsupported(name, value, self.profile, self.approximate)

    @property
    def adapter_refusal(self) -> str | None:
        """Why adapters cannot run on this server, or None (vLLM: loaded at first use)."""
        if self.profile.runtime_lora:
            return None
        return (f"adapter genes need a server that loads LoRA adapters while it runs (vLLM's "
                f"/v1/load_lora_adapter); a {self.profile.kind} server has none")

    def served_model(self) -> dict[str, Any]:
        """What the server's model list says about the weights behind ``model``: vLLM's ``root`` (the weights'
        folder or hub id) and ``parent`` (an adapter's base), llama.cpp's ``meta`` (the GGUF's sizes); empty where
        the list says nothing more than the name (Ollama, ``transformers serve``, the hosted API). Part of the call
        log's identity (:func:`~evotrainer.backends.call_log.model_identity`)."""
        return dict(self._served)

    def describe(self) -> dict[str, Any]:
        """What the archive records about this backend: server kind, model, URL (credentials masked), key
        variable (never the key), how decoding fields are mapped, the prefill path, seeds, and the counts so far
        (:class:`_Tally`)."""
        p = self.profile
        return {
            "backend": "openai", "server": p.kind, "model": self.cfg.model,
            "base_url": redact_url(self.cfg.base_url),
            "api_key_env": self.cfg.api_key_env, "seed": p.seed, "prefill": self.prefill_mode,
            "prefill_refusal": self.prefill_refusal, "max_tokens_field": p.max_tokens_field,
            "approximate": {"repetition_penalty": p.repetition[1]} if p.repetition and self.approximate else {},
            "adapters": "runtime LoRA loading" if p.runtime_lora else None, "notes": list(p.notes),
            "neutral": {name: value for name, value, _ in p.neutral}, "not_settable": list(p.not_settable),
            "server_parameters": dict(self.server_parameters), "server_context": self.server_context,
            "batch_invariant": p.batch_invariant, "invariance": p.invariance,
            "adapters_already_held": self._adapters.already_held,
            "concurrency": self.cfg.concurrency, **self.tally.as_dict(),
        }

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Run all requests, ``concurrency`` at a time; the i-th result answers the i-th request.

        Raises:
            DataError: a malformed chat. ConfigError: ``max_new_tokens`` leaves no room in ``max_context``.
            AdapterLoadError: adapters that could not be loaded (nothing was sent; names them).
            ServerError: the server is unusable (one line, :func:`error_line`). ModelError: it refused a request,
            or a prefill / adapter it cannot take. Either carries ``done``: the answers received before it.
        """
        requests = list(requests)
        adapters = [r.adapter for r in requests if r.adapter is not None]
        if adapters:  # all loaded before anything is sent: one that fails fails its own requests only
            if self.adapter_refusal is not None:
                raise ModelError(f"{self.role}: adapter {adapters[0]}: {self.adapter_refusal}")
            self._adapters.load(adapters)
        futures: dict[Future, int] = {self._pool.submit(self._one, i, r): i for i, r in enumerate(requests)}
        results: dict[int, Generation] = {}
        pending = set(futures)
        failure: BaseException | None = None
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in done:
                exc = fut.exception()
                if exc is None:
                    results[futures[fut]] = fut.result()
                    progress.advance(1)  # the phase's progress line (evotrainer.progress), if one is open
                elif failure is None:
                    failure = exc
            if failure is not None:
                for fut in pending:
                    fut.cancel()  # not started yet: never sent
                wait(pending)  # those in flight finish (their answers are kept)
                for fut in pending:
                    if not fut.cancelled() and fut.exception() is None:
                        results[futures[fut]] = fut.result()
                break
        if failure is not None:
            failure.done = results  # type: ignore[attr-defined]  # paid for: the call log keeps them
            raise failure
        return [results[i] for i in range(len(requests))]

    def _one(self, i: int, request: GenerationRequest) -> Generation:
        """One request: fit, send (chat, or completions for a prefill), read text and usage."""
        import openai

        from evotrainer.backends.hf import ensure_system_turn

        chat, prefill = split_prefill(ensure_system_turn(request.messages, where=f"request {i}"))
        if prefill and self.prefill_mode is None:
            raise ModelError(f"{self.role}: request {i} starts its answer with a prefill: {self.prefill_refusal}")
        params = request.params
        chat, omitted, sent_tokens = self._fit(chat, prefill, params.max_new_tokens, i)
        fields = request_fields(params, self.profile, self.approximate)
        model = self._adapter_model(request.adapter)
        extra = dict(fields.extra)
        gen = self._gen_client
        try:
            if prefill and self.prefill_mode == "completions":
                prompt = self._completion_prompt(chat, prefill, i)
                resp = send(lambda: gen.completions.create(
                    model=model, prompt=prompt, **fields.body, extra_body=extra or None), self.cfg.max_retries)
                choice = resp.choices[0]
                text = choice.text or ""
            else:
                messages: list[Message] = [*chat, {"role": "assistant", "content": prefill}] if prefill else chat
                if prefill:
                    extra.update(dict(self.profile.continue_fields))
                resp = send(lambda: gen.chat.completions.create(
                    model=model, messages=messages, **fields.body, extra_body=extra or None), self.cfg.max_retries)
                choice = resp.choices[0]
                text = choice.message.content or ""
        except openai.APIError as exc:
            kind = ServerError if is_systemic(exc) else ModelError
            raise kind(error_line(exc, self.cfg, self._secret, f"request {i}", self.role)) from None
        except (IndexError, AttributeError, TypeError) as exc:  # an answer without a choice or a message
            raise ModelError(f"{self.role}: the server at {redact_url(self.cfg.base_url)} sent a malformed answer "
                             f"(request {i}): {type(exc).__name__}: {scrub(str(exc), self._secret)}") from None
        usage = getattr(resp, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        server_cut = prompt_tokens is not None and self._server_cut(int(prompt_tokens), chat, prefill, i, sent_tokens)
        if prompt_tokens is None or completion_tokens is None:
            prompt_tokens, completion_tokens = self._count(chat, prefill, text)
        # with a prefill the continuation's leading space belongs to the answer; a prefill the model did not
        # continue is an empty answer (as in process: evotrainer/backends/hf.py, _finish)
        text = (prefill + text).strip() if prefill and text.strip() else text.strip()
        with self.tally.lock:
            self.tally.requests += 1
            self.tally.sent.update(fields.sent)
            self.tally.approximated.update(fields.approximated)
            self.tally.dropped.update(fields.dropped)
            self.tally.neutral.update(fields.neutral)
            if prefill:
                self.tally.prefill[self.prefill_mode or "none"] += 1
            self.tally.truncated += omitted is not None
            self.tally.server_cut += server_cut
            self.tally.usage_missing += usage is None or getattr(usage, "prompt_tokens", None) is None
        # a cut by the server: words lost unknown (0), so the item reads as a cut of unknown share
        return Generation(text=text, prompt_tokens=int(prompt_tokens), generated_tokens=int(completion_tokens),
                          finish_reason="length" if choice.finish_reason == "length" else "stop",
                          prompt_truncated=omitted is not None or server_cut,
                          omitted_words=0 if server_cut else (omitted or 0))

    def _completion_prompt(self, chat: list[Message], prefill: str, i: int) -> list[int] | str:
        """The ``/completions`` prompt of a chat and its prefill, the chat template applied here.

        A server that takes token ids (vLLM, llama.cpp) gets the ids, content as text and the template's BOS only
        (:func:`~evotrainer.backends.chat_tokens.chat_ids`); it adds nothing to them. Another gets the text, which
        it tokenizes itself: a leading BOS is left out when its tokenizer adds one (so one reaches the model, not
        two: vllm#7382), and a request whose content spells a control token is refused, since the server would
        read the spelling as the token.

        Raises:
            ModelError: the content spells a control token and the server takes text only.
        """
        tok = self.tokenizer()
        if self.profile.token_prompts:
            return chat_ids(tok, chat, prefill)
        spelled = control_text(tok, chat, prefill)
        if spelled is not None:
            raise ModelError(f"{self.role}: request {i} spells {spelled!r} in its content, which a {self.profile.kind} "
                             "server given a text prompt on /completions reads as a control token; not sent (a "
                             "vLLM or llama.cpp server takes the prompt as token ids)")
        text = render_chat(tok, chat, prefill)
        bos = tok.bos_token
        if bos and text.startswith(bos) and _adds_bos(tok):
            text = text[len(bos):]
        return text

    def _count(self, chat: list[Message], prefill: str, text: str) -> tuple[int, int]:
        """Prompt and answer tokens counted here when the server gave no ``usage`` (words without a tokenizer)."""
        tok = self.tokenizer()
        if tok is None:
            return sum(len(m["content"].split()) for m in chat) + len(prefill.split()), len(text.split())
        return len(chat_ids(tok, chat, prefill)), len(tok(text, add_special_tokens=False)["input_ids"])

    def _fit(self, chat: list[Message], prefill: str, max_new_tokens: int, i: int
             ) -> tuple[list[Message], int | None, int | None]:
        """``chat`` cut to leave ``max_new_tokens`` in ``max_context`` capped by the server's stated window (as the
        in-process backends cut), when a tokenizer is known; as is otherwise. Also the words omitted (None: not
        cut) and the returned chat's prompt tokens (None: not counted here)."""
        windows = [w for w in (self.max_context, self.server_context) if w is not None]
        if not windows:
            return chat, None, None
        window = min(windows)
        if max_new_tokens < 1 or window - max_new_tokens < 1:
            where = (f"{self.role}.max_context={self.max_context} tokens" if window == self.max_context
                     else f"the server's context window, {window} tokens")
            raise ConfigError(f"request {i}: max_new_tokens={max_new_tokens} must be in [1, {window - 1}] ({where})")
        tok = self.tokenizer()
        if tok is None:
            return chat, None, None
        from evotrainer.backends.hf import fit_messages

        def count(messages: list[Message]) -> int:
            return len(chat_ids(tok, messages, prefill))

        budget = window - max_new_tokens
        if (n := count(chat)) <= budget:
            return chat, None, n
        fitted, omitted = fit_messages(chat, count, budget)
        log.warning("%s: request %d was cut to fit %d tokens (%d words omitted)", self.role, i, window, omitted)
        return fitted, omitted, None

    def _server_cut(self, reported: int, chat: list[Message], prefill: str, i: int, sent: int | None = None) -> bool:
        """Whether the server cut the prompt it answered (:func:`~evotrainer.backends.server_window.cut_by_server`),
        warned once per request; ``sent``: the prompt's tokens when already counted."""
        tok = self.tokenizer() if sent is None else None
        sent = sent if tok is None else len(chat_ids(tok, chat, prefill))
        words = sum(len(m["content"].split()) for m in chat) + len(prefill.split())
        if not cut_by_server(reported, sent_tokens=sent, words=words, context=self.server_context):
            return False
        said = f"{sent} tokens" if sent is not None else f"{words} words"
        log.warning("%s: the server at %s cut request %d's prompt without saying so: it read %d tokens of %s sent; "
                    "recorded as cut (raise the server's context window, e.g. num_ctx on Ollama, or set "
                    "%s.openai.tokenizer so prompts are fitted here)", self.role, redact_url(self.cfg.base_url), i, reported,
                    said, self.role)
        return True

    def _adapter_model(self, adapter: str | None) -> str:
        """The model name to request: the base model, or the name of the adapter loaded by :meth:`generate`."""
        return self.cfg.model if adapter is None else self._adapters.name(adapter)

    def close(self) -> None:
        """Stop the request threads and close the HTTP client (idempotent)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        closer = getattr(self.client, "close", None)
        if closer is not None:
            closer()
