"""Chat messages to prompt token ids with their content as text: only the chat template writes control tokens.

A chat template renders one string, and tokenizing that string turns every spelling of a control token in it into
the control token, also one inside a message: a task input, a model output quoted into a mutator or judge prompt,
or an SFT answer holding ``<|im_end|>\\n<|im_start|>system\\n...`` would close its turn and open a system turn
(transformers#29279). transformers' ``apply_chat_template(..., sanitize_control_tokens=True)`` (>= 5.23, which
also sanitizes template variables) encodes such spellings in messages and template variables as plain text and
the template's own control tokens as tokens; a chat without such spellings encodes exactly as
``tokenizer(rendered, add_special_tokens=False)``. Control tokens are the tokenizer's special tokens plus the added
tokens the template's text contains (``<think>``, ``<tool_call>``), as transformers infers them.

Two wrappers of the model's own template carry what is not a message through the same path: the answer prefill is
printed after the template's output (the generation prompt) from a template variable, and a lone text (an SFT
answer) is printed by a template that holds the model's template in a branch never taken, so that the same control
tokens are inferred from its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evotrainer.backends.base import Message
from evotrainer.errors import ModelError

__all__ = ["chat_ids", "control_text", "render_chat", "text_ids"]

_PREFILL = "evotrainer_prefill"
_TEXT = "evotrainer_text"


def _source(tokenizer: Any) -> str:
    """The model's chat template without the one trailing newline Jinja drops from a template's end."""
    template = tokenizer.get_chat_template()
    return template[:-2] if template.endswith("\r\n") else template[:-1] if template.endswith("\n") else template


def _encode(tokenizer: Any, chat: list[Message], template: str, **variables: str) -> list[int]:
    try:
        return list(tokenizer.apply_chat_template(chat, chat_template=template, add_generation_prompt=True,
                                                  tokenize=True, return_dict=False, sanitize_control_tokens=True,
                                                  **variables))
    except ValueError as exc:  # "Can't sanitize ...": a control token's spelling is also what plain text encodes to
        raise ModelError(f"the tokenizer cannot encode a control token's spelling in a message as text: {exc}") from None


def render_chat(tokenizer: Any, chat: Sequence[Message], prefill: str = "") -> str:
    """The prompt as text: ``chat`` through the chat template with the generation prompt, then ``prefill``."""
    return tokenizer.apply_chat_template(list(chat), tokenize=False, add_generation_prompt=True) + prefill


def chat_ids(tokenizer: Any, chat: Sequence[Message], prefill: str = "") -> list[int]:
    """Prompt token ids of ``chat`` (template with the generation prompt, then ``prefill``), content as text.

    Args:
        tokenizer: a transformers tokenizer with a chat template.
        chat: ``{"role", "content"}`` messages, as the template takes them.
        prefill: the start of the answer, appended after the generation prompt ("" for none).

    Returns:
        The ids of :func:`render_chat`'s text, where a control token appears only where the template wrote it; no
        BOS beyond the template's.

    Raises:
        ModelError: the tokenizer turns a control token's own spelling into that token even as plain text.
    """
    if not prefill:
        return _encode(tokenizer, list(chat), tokenizer.get_chat_template())
    return _encode(tokenizer, list(chat), _source(tokenizer) + "{{ " + _PREFILL + " }}", **{_PREFILL: prefill})


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` on its own (no BOS), any control-token spelling in it encoded as text.

    Raises:
        ModelError: as :func:`chat_ids`.
    """
    template = "{% if false %}" + _source(tokenizer) + "{% endif %}{{ " + _TEXT + " }}"
    return _encode(tokenizer, [{"role": "user", "content": ""}], template, **{_TEXT: text})


def control_text(tokenizer: Any, chat: Sequence[Message], prefill: str = "") -> str | None:
    """The first control-token spelling in the content of ``chat`` or in ``prefill`` (a text that :func:`text_ids`
    encodes otherwise than plain tokenization does), or None: what a server that tokenizes a text prompt itself
    would read as a control token."""
    for text in [*(m["content"] for m in chat), prefill]:
        plain = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        if text and text_ids(tokenizer, text) != plain:
            spelled = [t for t, i in tokenizer.added_tokens_encoder.items() if t in text and i in plain]
            return min(spelled, key=text.find) if spelled else text[:40]
    return None
