"""Chat messages made ready for a chat template: an explicit system turn, and a prompt cut to fit the context.

Shared by every backend that applies a chat template itself (:mod:`evotrainer.backends.hf`,
:mod:`evotrainer.backends.vllm`, :mod:`evotrainer.backends.openai_compat` with a tokenizer) and by the SFT data
builder, so a prompt is rendered and cut the same way at generation and at training time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from evotrainer.backends.base import Message
from evotrainer.errors import ConfigError, DataError

__all__ = ["ensure_system_turn", "fit_messages"]


def ensure_system_turn(messages: Sequence[Message], where: str = "request") -> list[Message]:
    """Return a copy of ``messages`` that starts with a system message (empty one inserted if absent).

    Args:
        messages: chat messages ``{"role": ..., "content": str}``, at least one.
        where: label used in error messages (e.g. "request 3").

    Raises:
        DataError: no messages, or a message without a string ``role``/``content``.
    """
    if not messages:
        raise DataError(f"{where}: a chat needs at least one message")
    out: list[Message] = []
    for j, msg in enumerate(messages):
        if not isinstance(msg.get("role"), str) or not isinstance(msg.get("content"), str):
            raise DataError(f"{where}, message {j}: expected {{'role': str, 'content': str}}, got {msg!r}")
        out.append({"role": msg["role"], "content": msg["content"]})
    if out[0]["role"] != "system":
        out.insert(0, {"role": "system", "content": ""})
    return out


def _cut_middle(text: str, omit: int) -> str:
    """``text`` with ``omit`` whitespace-separated words removed from its middle and a marker in their place."""
    words = re.findall(r"\S+\s*", text)  # keeps each word's trailing whitespace (line breaks survive)
    if omit <= 0:
        return text
    omit = min(omit, len(words))
    keep = len(words) - omit
    head = "".join(words[: (keep + 1) // 2]).rstrip()
    tail = "".join(words[len(words) - keep // 2 :]) if keep // 2 else ""
    return f"{head}\n[... {omit} words omitted ...]\n{tail}"


def fit_messages(
    messages: Sequence[Message], count_tokens: Callable[[list[Message]], int], budget: int
) -> tuple[list[Message], int]:
    """Shorten ``messages`` until their rendered prompt has at most ``budget`` tokens.

    The longest user message loses words from its middle (a "[... N words omitted ...]" marker takes
    their place), found by binary search on the number of omitted words; if emptying it is not enough,
    the next longest user message follows, then the other messages (system last).

    Args:
        messages: the chat (not modified).
        count_tokens: prompt length in tokens of a chat, chat template included.
        budget: allowed prompt tokens (context window minus ``max_new_tokens``), >= 1.

    Returns:
        ``(messages, omitted_words)``; the same content and 0 when it already fits.

    Raises:
        ConfigError: the chat cannot fit even with every message emptied (``max_new_tokens`` too large
            for the context window).
    """
    msgs = [dict(m) for m in messages]
    if count_tokens(msgs) <= budget:
        return msgs, 0
    order = sorted(
        range(len(msgs)),
        key=lambda j: (msgs[j]["role"] != "user", msgs[j]["role"] == "system", -len(msgs[j]["content"])),
    )
    omitted = 0
    for j in order:
        original = msgs[j]["content"]
        n_words = len(original.split())
        if n_words == 0:
            continue

        def fits(omit: int, j: int = j, original: str = original) -> bool:
            trial = [*msgs[:j], {**msgs[j], "content": _cut_middle(original, omit)}, *msgs[j + 1 :]]
            return count_tokens(trial) <= budget

        if not fits(n_words):
            msgs[j]["content"] = _cut_middle(original, n_words)
            omitted += n_words
            continue
        lo, hi = 1, n_words  # smallest omit in [lo, hi] that fits; hi is known to fit
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid + 1
        msgs[j]["content"] = _cut_middle(original, lo)
        return msgs, omitted + lo
    raise ConfigError(
        f"the prompt does not fit in {budget} tokens even with every message emptied; "
        "lower max_new_tokens (SamplingParams) or raise max_context"
    )
