"""Retries of a generation call on an OpenAI-compatible server: never after a timeout.

The ``openai`` client retries a request whose answer did not come within its timeout as it retries one refused
with 429 or 5xx (``max_retries``; 2 by default). Most servers do not stop computing a request whose client went
away (llama.cpp#24496), so a resent request is computed again beside the first: a server too slow for the
timeout gets slower, and it computes more than the run counts. Generation calls therefore go through a client
with ``max_retries=0`` and :func:`send` retries here what is safe to resend: no connection, HTTP 408, 409, 429
and 5xx answers, except 504 (a gateway that stopped waiting for a server that may still be computing). A
timeout, or a 504, ends the call at once. Cheap calls (the model list, adapter loads) keep the client's own
retries.

The wait before a retry follows the ``openai`` client's schedule (its ``_base_client``: 0.5 s doubling to at
most 8 s, less up to 25 % jitter), or the server's ``retry-after-ms`` / ``retry-after`` (seconds) when it gives
one of at most 60 s; ``x-should-retry: false`` is obeyed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["retry_delay", "retryable", "send"]

T = TypeVar("T")

_MAX_SERVER_DELAY_S = 60.0


def retryable(exc: BaseException) -> bool:
    """Whether an ``openai`` error may be sent again without the server computing the request twice."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return False
    if isinstance(exc, openai.APIConnectionError):
        return True
    if not isinstance(exc, openai.APIStatusError):
        return False
    told = exc.response.headers.get("x-should-retry")
    if told in ("true", "false"):
        return told == "true"
    status = exc.status_code
    return status in (408, 409, 429) or (status >= 500 and status != 504)


def retry_delay(attempt: int, headers: Mapping[str, str] | None = None, rng: Callable[[], float] = random.random
                ) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based), >= 0 (module docstring)."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        raw = (headers or {}).get(name)
        try:
            told = float(raw) * scale if raw is not None else None
        except ValueError:
            told = None
        if told is not None and 0 < told <= _MAX_SERVER_DELAY_S:
            return told
    return min(0.5 * 2.0 ** min(attempt, 16), 8.0) * (1.0 - 0.25 * rng())


def send(call: Callable[[], T], max_retries: int, *, sleep: Callable[[float], Any] = time.sleep) -> T:
    """``call()``, retried at most ``max_retries`` times where :func:`retryable` allows.

    Raises:
        The last ``openai`` error: one not retryable (a timeout among them), or one left after the retries.
    """
    import openai

    attempt = 0
    while True:
        try:
            return call()
        except openai.APIError as exc:
            if attempt >= max_retries or not retryable(exc):
                raise
            response = getattr(exc, "response", None)
            sleep(retry_delay(attempt, getattr(response, "headers", None)))
            attempt += 1
