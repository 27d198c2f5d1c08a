"""What a failed call to an OpenAI-compatible server means: whether it is sent again, whether the run can go on,
and the one line that says so.

**Retries, never after a timeout.** The ``openai`` client retries a request whose answer did not come within its
timeout as it retries one refused with 429 or 5xx. Most servers do not stop computing a request whose client went
away (llama.cpp#24496), so a resent request is computed again beside the first. Generation calls therefore go
through a client with ``max_retries=0`` and :func:`send` retries what is safe to resend: no connection, HTTP 408,
409, 429 and 5xx answers, except 504 (a gateway that stopped waiting for a server that may still be computing). A
timeout, or a 504, ends the call at once. Cheap calls (the model list, adapter loads) keep the client's own
retries. The wait follows the ``openai`` client's schedule (its ``_base_client``: 0.5 s doubling to at most 8 s,
less up to 25 % jitter), or the server's ``retry-after-ms`` / ``retry-after`` when it gives one of at most 60 s;
``x-should-retry: false`` is obeyed.

**Systemic or not.** No connection, a timeout after the retries, HTTP 401/403/404/429/5xx mean the server is
unusable for the run (:func:`is_systemic`; :class:`~evotrainer.errors.ServerError`); any other refusal fails one
request. :func:`error_line` says which, on one line with the key scrubbed from it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from evotrainer.backends.urls import redact_url, redact_urls
from evotrainer.model_schema import OpenAIConfig

__all__ = ["error_line", "is_systemic", "retry_delay", "retryable", "scrub", "send"]

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


def scrub(text: str, secret: str | None) -> str:
    """``text`` on one line, at most 300 characters, with ``secret`` replaced by ``***`` and the credentials of
    any URL in it masked."""
    if secret:
        text = text.replace(secret, "***")
    text = redact_urls(text)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def is_systemic(exc: BaseException) -> bool:
    """Whether an ``openai`` error means the server is unusable for the run (no connection, timeouts after the
    retries, HTTP 401/403/404/429/5xx), not that one request was refused."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
        return True
    status = getattr(exc, "status_code", None)
    return status is not None and (status in (401, 403, 404, 429) or status >= 500)


def error_line(exc: BaseException, cfg: OpenAIConfig, secret: str | None = None, where: str = "",
               role: str = "model") -> str:
    """One line saying what a failed ``openai`` call means for the run (the key scrubbed from it).

    Args:
        exc: the ``openai`` exception (another exception is described by its type and text).
        cfg: the role's ``openai`` settings (the URL, model, key variable and retry count the line names).
        secret: the key, removed from the server's message.
        where: what was being done ("request 3", "listing the models").
        role: the config prefix the line names ("model", "mutator", "selfevolve.judge").
    """
    import openai

    at = f"{role}: the server at {redact_url(cfg.base_url)}"
    what = f" ({where})" if where else ""
    detail = scrub(str(getattr(exc, "message", None) or exc), secret)
    if isinstance(exc, openai.APITimeoutError):
        return (f"{at} did not answer within {role}.openai.timeout_s={cfg.timeout_s:g} s{what}; not sent again "
                f"(the server may still be computing it): raise {role}.openai.timeout_s or lower "
                f"{role}.openai.concurrency")
    if isinstance(exc, openai.APIConnectionError):
        return (f"{at} cannot be reached after {cfg.max_retries} retries{what}: {detail}; is it running? "
                f"({role}.openai.base_url)")
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.AuthenticationError) or status == 401:
        key = (f"the key in ${cfg.api_key_env}" if cfg.api_key_env
               else f"no key (set {role}.openai.api_key_env to the name of the variable holding one)")
        return f"{at} refused {key} (HTTP 401){what}: {detail}"
    if isinstance(exc, openai.PermissionDeniedError):
        return f"{at} denied access to model {cfg.model!r} (HTTP 403){what}: {detail}"
    if isinstance(exc, openai.NotFoundError):
        return (f"{at} does not know model {cfg.model!r} or this endpoint (HTTP 404){what}: {detail} "
                f"({role}.openai.model)")
    if isinstance(exc, openai.RateLimitError):
        return (f"{at} kept refusing with HTTP 429 (rate limit or quota) after {cfg.max_retries} retries{what}: "
                f"{detail}; lower {role}.openai.concurrency or raise {role}.openai.max_retries")
    if isinstance(exc, openai.InternalServerError) or (status is not None and status >= 500):
        return f"{at} failed with HTTP {status} after {cfg.max_retries} retries{what}: {detail}"
    if isinstance(exc, openai.APIStatusError):
        return f"{at} refused the request (HTTP {status}){what}: {detail}"
    return f"{at}: {type(exc).__name__}{what}: {detail}"
