"""A tiny OpenAI-compatible test server (standard library only), for the openai backend's tests.

It answers ``GET /v1/models``, ``POST /v1/chat/completions``, ``/v1/completions`` and ``/v1/load_lora_adapter``
on 127.0.0.1 from a thread, with a deterministic fake model (the answer depends only on the request), ``usage``
counts that are words (or tokens of a given tokenizer, counted as a server counts them: the chat template
rendered, then tokenized), and scripted failures: a key check (401), a rate-limit storm (429 with a
``retry-after-ms`` of a few milliseconds), server errors (500), all from a given request on; or going away
(the port closed). It records every request body, counts attempts and the most requests in flight at once.

Where the real servers differ on a point a test checks, the fake does what they do:

- **sampling defaults**: a field the request leaves out takes the server's default (``defaults``, as vLLM takes
  the model's ``generation_config.json``), and a repetition penalty other than 1 shows in the answer;
- **a context window** (``context``): Ollama (``owned_by="library"``) cuts a longer prompt silently, keeping its
  end, and reports the cut prompt's tokens (ollama#5902); ``POST /api/show`` gives its Modelfile
  ``parameters`` (``num_ctx`` when ``num_ctx_shown``); vLLM lists ``max_model_len`` in ``/v1/models``;
- **runtime LoRA** (vLLM): loading a name it already holds is refused with vLLM's HTTP 400 body ("... has already
  been loaded ..."), a path listed in ``lora_missing`` with its 404 ("Loading lora ... failed: No adapter found
  for ..."), success is vLLM's plain-text line, and a request naming an adapter it does not hold gets 404.

Given the served model's ``tokenizer``, ``/v1/completions`` reads its prompt as the real servers do: a text prompt is
tokenized there, control-token spellings parsed and special tokens (a BOS) added unless the request sets vLLM's
``add_special_tokens`` false (its default for ``/completions`` is true; ``transformers serve`` always adds them); a
prompt of token ids is taken as it is by a vLLM or llama.cpp server and refused with HTTP 400 by others
(``transformers serve``: "prompt must be a string."). The ids the model would read are recorded; ``usage`` counts
them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeServer", "fake_answer"]


def fake_answer(messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """The fake model's answer: minutes built from the last user message's first speaker lines (so a
    meeting-minutes rollout scores something), plus a sampled word when the request samples (its seed), and a
    mark when a repetition penalty other than 1 applies (``params``: the sampling settings in effect)."""
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    lines = [ln.strip() for ln in last.splitlines() if ":" in ln and len(ln.split()) > 3][:3]
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:6]
    body = "\n".join(f"- {ln.split(':', 1)[1].strip()}" for ln in lines) or f"- Noted item {digest}."
    text = f"Summary:\n{body}\nAction items:\n- Follow up on item {digest}."
    if float(params.get("temperature") or 0) > 0:
        text += f" (draw {int(params.get('seed') or 0) % 97})"
    penalty = params.get("repetition_penalty", params.get("repeat_penalty", 1.0))
    if float(penalty) != 1.0:
        text += f" (penalised {float(penalty):g})"
    return text


def _words(text: str) -> int:
    return len(text.split())


@dataclass
class FakeServer:
    """The server (start with :meth:`start`, or use as a context manager).

    Attributes:
        model: the one model it serves. owned_by: its ``/models`` entry's ``owned_by`` ("vllm", "llamacpp", ...).
        root: the entry's ``root`` (vLLM: the served weights' folder or hub id), left out when None.
        key: the API key it wants (None: any). fail: "429", "500", "504", "401" or None, from request ``fail_from`` on
        (counted over generation requests, 0-based) until ``fail_until`` (exclusive; None: for good).
        delay_s: seconds each generation takes.
        bodies: every generation request body received (accepted or refused), in arrival order.
        attempts: generation requests received. max_in_flight: most generation requests handled at once.
        lora_loads: the bodies of ``/v1/load_lora_adapter`` calls.
        usage: answers sent, and the prompt and completion tokens their ``usage`` reported, in all.
        answer: ``(messages, sampling settings in effect) -> text``, the fake model (:func:`fake_answer` by default).
        defaults: the server's sampling defaults, taken for fields a request leaves out.
        effective: the sampling settings each answered generation request ran with (defaults filled in).
        context: the context window in tokens (None: unbounded); Ollama cuts longer prompts keeping the end.
        num_ctx_shown: Ollama's ``/api/show`` lists ``num_ctx`` (set in the Modelfile) among its parameters.
        tokenizer: the served model's tokenizer: prompt tokens are counted with it (chat template applied)
            instead of words, and ``/completions`` reads its prompt with it (None: words, text prompts only).
        prompt_ids: per ``/completions`` answer with a tokenizer or a token-id prompt, the ids the model read.
        lora_missing: adapter paths vLLM finds nothing at. lora_loaded: names of the adapters it holds.
    """

    model: str = "fake-model"
    owned_by: str = "fake"
    root: str | None = None
    key: str | None = None
    fail: str | None = None
    fail_from: int = 0
    fail_until: int | None = None
    delay_s: float = 0.0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    max_in_flight: int = 0
    lora_loads: list[dict[str, Any]] = field(default_factory=list)
    usage: list[int] = field(default_factory=lambda: [0, 0, 0])  # answers, prompt and completion tokens reported
    answer: Callable[[list[dict[str, str]], dict[str, Any]], str] = fake_answer  # the fake model
    defaults: dict[str, Any] = field(default_factory=dict)
    effective: list[dict[str, Any]] = field(default_factory=list)
    context: int | None = None
    num_ctx_shown: bool = True
    tokenizer: Any = None
    lora_missing: set[str] = field(default_factory=set)
    lora_loaded: set[str] = field(default_factory=set)
    prompt_ids: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._server: ThreadingHTTPServer | None = None

    def _count_chat(self, messages: list[dict[str, str]]) -> int:
        if self.tokenizer is None:
            return sum(_words(m["content"]) for m in messages)
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _count_text(self, text: str) -> int:
        return _words(text) if self.tokenizer is None else len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _cut(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """Ollama's silent cut: the fewest leading words dropped (system turn first) to fit ``context``."""
        if self.context is None or self.owned_by != "library" or self._count_chat(messages) <= self.context:
            return messages
        words = [(j, w) for j, m in enumerate(messages) for w in m["content"].split()]

        def keep_last(n: int) -> list[dict[str, str]]:
            kept = words[len(words) - n:] if n else []
            return [{**m, "content": " ".join(w for k, w in kept if k == j)} for j, m in enumerate(messages)]

        lo, hi = 0, len(words)  # the most trailing words that fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self._count_chat(keep_last(mid)) <= self.context else (lo, mid - 1)
        return keep_last(lo)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                got = self.headers.get("Authorization", "")
                if fake.key is None or got == f"Bearer {fake.key}":
                    return True
                shown = got.removeprefix("Bearer ")  # a careless server echoes the key: the client must scrub it
                self._send(401, {"error": {"message": f"Incorrect API key provided: {shown}", "type": "auth"}})
                return False

            def _text(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.rstrip("/") != "/v1/models":
                    self._send(404, {"detail": "Not Found"})
                elif self._authorised():
                    entry = {"id": fake.model, "object": "model", "created": 0, "owned_by": fake.owned_by}
                    if fake.owned_by == "vllm" and fake.context is not None:
                        entry["max_model_len"] = fake.context
                    if fake.root is not None:
                        entry |= {"root": fake.root, "parent": None}
                    self._send(200, {"object": "list", "data": [entry]})

            def _load_lora(self, body: dict[str, Any]) -> None:
                """vLLM's /v1/load_lora_adapter (vllm/entrypoints/openai/models/serving.py)."""
                name, path = str(body.get("lora_name", "")), str(body.get("lora_path", ""))
                fake.lora_loads.append(body)
                if name in fake.lora_loaded and not body.get("load_inplace"):
                    self._send(400, {"error": {"message": f"The lora adapter '{name}' has already been loaded. If "
                                                          "you want to load the adapter in place, set 'load_inplace' "
                                                          "to True.", "type": "InvalidUserInput", "param": None,
                                               "code": 400}})
                elif path in fake.lora_missing:
                    self._send(404, {"error": {"message": f"Loading lora {name} failed: No adapter found for {path}",
                                               "type": "NotFoundError", "param": None, "code": 404}})
                else:
                    fake.lora_loaded.add(name)
                    self._text(200, f"Success: LoRA adapter '{name}' added successfully.")

            def _show(self, body: dict[str, Any]) -> None:
                """Ollama's /api/show: the Modelfile's parameters as ``name value`` lines."""
                lines = [f"{k} {v}" for k, v in fake.defaults.items()]
                if fake.context is not None and fake.num_ctx_shown:
                    lines.append(f"num_ctx {fake.context}")
                self._send(200, {"parameters": "\n".join(lines), "model_info": {"llama.context_length": 131072},
                                 "details": {"family": "llama"}})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                extras = {"/v1/load_lora_adapter": ("vllm", self._load_lora), "/api/show": ("library", self._show)}
                if self.path in extras:  # an endpoint only one kind of server has
                    owner, handle = extras[self.path]
                    if fake.owned_by == owner:
                        handle(body)
                    else:
                        self._send(404, {"detail": "Not Found"})
                    return
                if self.path not in ("/v1/chat/completions", "/v1/completions"):
                    self._send(404, {"error": {"message": "not found"}})  # as a real server's router
                    return
                with fake._lock:
                    index = fake.attempts
                    fake.attempts += 1
                    fake.bodies.append(body)
                    fake._in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake._in_flight)
                try:
                    self._generate(index, body)
                finally:
                    with fake._lock:
                        fake._in_flight -= 1

            def _generate(self, index: int, body: dict[str, Any]) -> None:
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                failing = fake.fail is not None and index >= fake.fail_from and (
                    fake.fail_until is None or index < fake.fail_until)
                if failing and fake.fail == "401":
                    self._send(401, {"error": {"message": "Incorrect API key provided: key revoked", "type": "auth"}})
                    return
                if not self._authorised():
                    return
                if failing and fake.fail in ("429", "500", "504"):
                    self._send(int(fake.fail), {"error": {"message": f"fake {fake.fail}", "type": "fake"}},
                               {"retry-after-ms": "5"} if fake.fail == "429" else None)
                    return
                if body.get("model") != fake.model and body.get("model") not in fake.lora_loaded:
                    self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                    return
                params = {**fake.defaults, **body}  # a field left out takes the server's default
                with fake._lock:
                    fake.effective.append({k: v for k, v in params.items() if k not in ("messages", "prompt")})
                if self.path == "/v1/completions":
                    prompt, ids = self._completion_prompt(body)
                    if prompt is None:
                        self._send(400, {"error": {"message": "prompt must be a string."}})
                        return
                    text = fake.answer([{"role": "user", "content": prompt}], params)
                    choice: dict[str, Any] = {"index": 0, "text": " " + text, "finish_reason": "stop"}
                    obj, prompt_words = "text_completion", fake._count_text(prompt) if ids is None else len(ids)
                else:
                    messages = fake._cut(body.get("messages", []))
                    if messages and messages[-1]["role"] == "assistant" and body.get("continue_final_message"):
                        text = " continued " + fake.answer(messages[:-1], params)  # continues the prefill
                    else:
                        text = fake.answer(messages, params)
                    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    obj, prompt_words = "chat.completion", fake._count_chat(messages)
                words = len(text.split()) + 1
                with fake._lock:
                    fake.usage[0] += 1
                    fake.usage[1] += prompt_words
                    fake.usage[2] += words
                self._send(200, {"id": f"x{index}", "object": obj, "created": 0, "model": body.get("model"),
                                 "choices": [choice], "usage": {"prompt_tokens": prompt_words,
                                                                "completion_tokens": words,
                                                                "total_tokens": prompt_words + words}})

            def _completion_prompt(self, body: dict[str, Any]) -> tuple[str | None, list[int] | None]:
                """``(prompt text, ids the model reads)``; text None: refused; ids None: no tokenizer, text."""
                tok, prompt = fake.tokenizer, body.get("prompt", "")
                if isinstance(prompt, list):  # token ids: taken as they are, nothing added
                    if fake.owned_by not in ("vllm", "llamacpp") or not all(isinstance(t, int) for t in prompt):
                        return None, None
                    ids = [int(t) for t in prompt]
                    text = tok.decode(ids) if tok is not None else " ".join(map(str, ids))
                elif tok is not None:  # tokenized there: spellings of control tokens parsed, a BOS added
                    text = str(prompt)
                    ids = list(tok(text, add_special_tokens=bool(body.get("add_special_tokens", True)))["input_ids"])
                else:
                    return str(prompt), None
                with fake._lock:
                    fake.prompt_ids.append(ids)
                return text, ids

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True).start()
        return self

    def stop(self) -> None:
        """Close the port (idempotent): later requests find nobody listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
