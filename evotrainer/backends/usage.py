"""Tokens and cost of a run's model calls, per role.

:class:`UsageMeter` wraps one role's backend and adds up its answers' ``prompt_tokens`` and
``generated_tokens`` (a server's ``usage`` figures with the openai backend, the in-process counts otherwise),
answers replayed from the call log included: a resumed run counts what the whole run used, so its cost and
``outer.budget.usd`` stop exactly where an uninterrupted run's would. ``sent`` counts the requests this process
sent to the backend (the rest came from the call log). :class:`RunUsage` holds the meters of a run, prices
them (``<role>.openai.price_prompt`` / ``price_completion``, USD per million tokens) and formats the summary's
usage lines and the archive's ``usage`` phase event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evotrainer.backends.base import Generation, GenerationRequest

__all__ = ["Prices", "RunUsage", "UsageMeter", "describe_backend", "unwrap", "usage_lines"]


@dataclass(frozen=True)
class Prices:
    """A role's price table: USD per million tokens; None = unpriced (no cost line)."""

    prompt: float | None = None
    completion: float | None = None

    @property
    def priced(self) -> bool:
        return self.prompt is not None or self.completion is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """US dollars for those tokens, None when unpriced (an unpriced side counts 0)."""
        if not self.priced:
            return None
        return (prompt_tokens * (self.prompt or 0.0) + completion_tokens * (self.completion or 0.0)) / 1e6


class UsageMeter:
    """An LLM wrapper counting one role's requests, prompt and completion tokens (all else passed through).

    Args:
        llm: the role's backend, possibly behind the call log.
        role: the role's config prefix ("model", "mutator", "selfevolve.judge").
        prices: its price table.
    """

    def __init__(self, llm: Any, role: str, prices: Prices | None = None) -> None:
        self._llm = llm
        self.role = role
        self.prices = prices or Prices()
        self.name = getattr(llm, "name", type(llm).__name__)
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    @property
    def wrapped(self) -> Any:
        """The backend this meter counts for."""
        return self._llm

    @property
    def cost_usd(self) -> float | None:
        return self.prices.cost(self.prompt_tokens, self.completion_tokens)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = self._llm.generate(requests)
        self.requests += len(out)
        self.prompt_tokens += sum(max(int(g.prompt_tokens), 0) for g in out)
        self.completion_tokens += sum(max(int(g.generated_tokens), 0) for g in out)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The role's figures: backend name, requests, sent (None when unknown), tokens, cost (None unpriced)."""
        sent = getattr(self._llm, "generated", None)  # LoggedLLM: requests it sent to the backend
        return {"backend": self.name, "requests": self.requests, "sent": sent, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd}

    def __getattr__(self, item: str) -> Any:
        return getattr(self._llm, item)


def unwrap(llm: Any) -> Any:
    """The backend under any meters (``wrapped``) and call log (``inner``)."""
    while (inner := getattr(llm, "wrapped", None) or getattr(llm, "inner", None)) is not None:
        llm = inner
    return llm


def describe_backend(llm: Any) -> dict[str, Any]:
    """What the archive records about a role's backend: its own ``describe()`` (a server: kind, URL, key variable,
    the decoding fields it was sent, the prefill path) or its name."""
    llm = unwrap(llm)
    describe = getattr(llm, "describe", None)
    return describe() if callable(describe) else {"backend": getattr(llm, "name", type(llm).__name__)}


class RunUsage:
    """The usage meters of one run (one per backend role)."""

    def __init__(self) -> None:
        self.meters: list[UsageMeter] = []

    def wrap(self, llm: Any, role: str, model_cfg: Any = None) -> UsageMeter:
        """``llm`` metered as ``role``, priced from ``model_cfg.openai`` when its backend is openai."""
        prices = Prices()
        if model_cfg is not None and getattr(model_cfg, "backend", None) == "openai":
            o = model_cfg.openai
            prices = Prices(o.price_prompt, o.price_completion)
        meter = UsageMeter(llm, role, prices)
        self.meters.append(meter)
        return meter

    def cost_usd(self) -> float:
        """US dollars of every priced role so far (0.0 when none is priced)."""
        return sum(m.cost_usd or 0.0 for m in self.meters)

    def requests(self) -> int:
        """Generation requests of every role so far (a long input read in windows: each window and the merge)."""
        return sum(m.requests for m in self.meters)

    def prompt_tokens(self) -> int:
        """Prompt tokens read by every role so far (``outer.budget.prompt_tokens``)."""
        return sum(m.prompt_tokens for m in self.meters)

    def completion_tokens(self) -> int:
        """Tokens generated by every role so far (``budget.tokens``; the events' ``generated_tokens``)."""
        return sum(m.completion_tokens for m in self.meters)

    def as_dict(self) -> dict[str, Any]:
        """``roles`` (each :meth:`UsageMeter.as_dict`), the totals, and ``cost_usd`` (None when unpriced)."""
        priced = any(m.prices.priced for m in self.meters)
        return {"roles": {m.role: m.as_dict() for m in self.meters},
                "requests": self.requests(),
                "prompt_tokens": self.prompt_tokens(),
                "completion_tokens": self.completion_tokens(),
                "cost_usd": self.cost_usd() if priced else None}

    def lines(self) -> list[str]:
        """The summary's usage lines (:func:`usage_lines`)."""
        return usage_lines(self.as_dict())


def usage_lines(usage: dict[str, Any]) -> list[str]:
    """One line per role of a :meth:`RunUsage.as_dict` (as archived in the ``usage`` phase event): backend,
    requests (how many were sent by the last process when some came from the call log), prompt and completion
    tokens, cost when priced; then the total cost when any role is priced."""
    out = []
    for role, d in usage.get("roles", {}).items():
        sent = d.get("sent")
        replay = "" if sent is None or sent == d["requests"] else f" ({sent} sent, the rest from the call log)"
        cost = "" if d.get("cost_usd") is None else f", ${d['cost_usd']:.4f}"
        out.append(f"{role} ({d['backend']}): {d['requests']} requests{replay}, {d['prompt_tokens']:,} prompt + "
                   f"{d['completion_tokens']:,} completion tokens{cost}")
    if usage.get("cost_usd") is not None:
        out.append(f"cost: ${usage['cost_usd']:.4f} (the configured prices, USD per million tokens)")
    return out
