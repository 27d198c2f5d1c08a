"""The context window an OpenAI-compatible server states, and prompts it cut without saying so.

Ollama's OpenAI endpoint cuts a prompt longer than its context window (``num_ctx``; 2,048 or 4,096 tokens by
default, by version) silently: it keeps a few tokens of the start and the end, and the answer reports the
cut prompt's tokens (ollama#5902, #6026). The evolved instructions in the system turn, or an input's
start, vanish and nothing says so. Two defences, both in
:class:`~evotrainer.backends.openai_compat.OpenAIBackend`:

- **up front**: the window the server states (:func:`context_from_model_entry`: vLLM's ``max_model_len`` in
  ``/v1/models``; :func:`ollama_parameters`: ``num_ctx`` in Ollama's ``/api/show`` when the Modelfile sets it)
  caps ``<role>.max_context``, and with a tokenizer the prompt is cut here, middle first, as the in-process
  backends cut it (recorded as a cut, with the words omitted);
- **after the answer**: :func:`cut_by_server` compares the prompt tokens the server reports with what was sent;
  a cut found there is recorded on the item as a cut of unknown share.

vLLM and recent llama.cpp refuse a prompt over their window (HTTP 400) instead of cutting it; the refusal fails
that request. Ollama's window set by ``OLLAMA_CONTEXT_LENGTH`` or its default is not reported by the server:
only the check after the answer sees a cut there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["context_from_model_entry", "cut_by_server", "ollama_parameters"]


def context_from_model_entry(entry: Mapping[str, Any]) -> int | None:
    """The context window in tokens a ``/v1/models`` entry states (vLLM's ``max_model_len``), or None."""
    value = entry.get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def ollama_parameters(show: Mapping[str, Any]) -> dict[str, str]:
    """The Modelfile parameters of an Ollama ``/api/show`` answer (its ``parameters`` text: one ``name value``
    line each; a name given several times, like ``stop``, keeps its values joined by ``; ``)."""
    out: dict[str, str] = {}
    text = show.get("parameters")
    for line in (text if isinstance(text, str) else "").splitlines():
        name, _, value = line.strip().partition(" ")
        if name:
            value = value.strip()
            out[name] = f"{out[name]}; {value}" if name in out else value
    return out


def cut_by_server(reported: int, *, sent_tokens: int | None, words: int, context: int | None) -> bool:
    """Whether a server cut a prompt it answered, from the prompt tokens it reports.

    Args:
        reported: the answer's ``usage.prompt_tokens``; 0 or less says nothing (a server not counting), never a cut.
        sent_tokens: the prompt's tokens counted here with the served model's tokenizer (chat template
            included), or None without a tokenizer. A report lower by more than max(8, 2%) is a cut (the
            margin covers a server's template differing by a few tokens).
        words: whitespace-separated words of the prompt's messages; without a tokenizer a report below it is
            a cut (each word is at least one token for the BPE and SentencePiece tokenizers served models use;
            small cuts go unseen).
        context: the window the server states, or None; without a tokenizer a report that fills it is a cut
            (Ollama cuts to exactly ``num_ctx``).
    """
    if reported <= 0:
        return False
    if sent_tokens is not None:
        return reported < sent_tokens - max(8, sent_tokens // 50)
    return reported < words or (context is not None and reported >= context)
