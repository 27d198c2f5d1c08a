"""Chat examples → token ids and supervision labels for LoRA SFT (loss on the answer only).

The prompt is rendered exactly as :class:`~evotrainer.backends.hf.HFBackend` renders it at generation
time (explicit system turn, chat template with the generation prompt) and tokenised on its own; the
answer is tokenised on its own and followed by the end-of-turn token. Message content and the answer are
tokenised as text (:mod:`evotrainer.backends.chat_tokens`): an answer spelling ``<|im_end|>`` is not taught as
an end of turn, an input spelling ``<|im_start|>system`` opens no turn. So the model learns to continue
the very token sequence it will see when generating, and to stop (the end-of-turn label is kept; padding
uses a distinct token, see :func:`collate`).

A prompt too long for ``max_length`` loses words from the middle of its longest user message, with the
same rule the backend applies at generation time (:func:`~evotrainer.backends.hf.fit_messages`); the
answer is never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from evotrainer.backends.base import Message
from evotrainer.backends.chat_tokens import chat_ids, text_ids
from evotrainer.backends.hf import ensure_system_turn, fit_messages
from evotrainer.errors import ConfigError, DataError

__all__ = ["IGNORE_INDEX", "EncodedExample", "check_mask", "collate", "encode_chat"]

IGNORE_INDEX = -100
"""Label of tokens without loss (the ``ignore_index`` of ``torch.nn.CrossEntropyLoss``)."""


@dataclass(frozen=True)
class EncodedExample:
    """One tokenised training example.

    Attributes:
        input_ids: prompt tokens then answer tokens then the end-of-turn token; length <= max_length.
        labels: same length; ``IGNORE_INDEX`` on prompt tokens, the token id on answer + end-of-turn.
        prompt_tokens: number of leading prompt tokens (all labelled ``IGNORE_INDEX``).
        omitted_words: words cut from the prompt to fit ``max_length`` (0 when it fitted).
    """

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]
    prompt_tokens: int
    omitted_words: int = 0


def _render(tokenizer: Any, messages: Sequence[Message], *, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(
        list(messages), tokenize=False, add_generation_prompt=generation_prompt
    )


def check_mask(example: EncodedExample, answer_len: int, where: str = "example") -> None:
    """Raise unless the labels cover exactly the last ``answer_len`` tokens (the answer + end-of-turn).

    Args:
        example: the encoded example.
        answer_len: tokens of the answer including the end-of-turn token, >= 1.
        where: label for the error message.

    Raises:
        DataError: the mask is empty, covers a prompt token, or differs from ``input_ids`` on the answer.
    """
    labels, ids = example.labels, example.input_ids
    covered = [k for k, lab in enumerate(labels) if lab != IGNORE_INDEX]
    if not covered:
        raise DataError(f"{where}: the supervision mask is empty (no answer token carries a label)")
    start = len(ids) - answer_len
    if covered != list(range(start, len(ids))) or start != example.prompt_tokens:
        raise DataError(
            f"{where}: the supervision mask covers positions {covered[0]}..{covered[-1]} ({len(covered)} "
            f"tokens) but the answer is positions {start}..{len(ids) - 1}; it must not cover prompt tokens"
        )
    if any(labels[k] != ids[k] for k in covered):
        raise DataError(f"{where}: labels differ from input ids on the answer tokens")


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Message],
    *,
    max_length: int,
    end_token_id: int,
    where: str = "example",
) -> EncodedExample:
    """Tokenise a chat whose last message is the assistant answer to learn.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template (the backend's).
        messages: ``system?, user, ..., assistant``; the last message must be a non-empty assistant
            answer. An absent system message becomes an explicit empty system turn (as at generation).
        max_length: maximum tokens of prompt + answer + end-of-turn, >= 16.
        end_token_id: the end-of-turn token (``<|im_end|>`` for SmolLM2), labelled after the answer.
        where: label for error messages (e.g. "pool example 3").

    Returns:
        The :class:`EncodedExample`; labels cover exactly the answer tokens and the end-of-turn token.

    Raises:
        DataError: malformed chat, empty answer, a chat template that does not render the assistant turn
            as ``prompt + answer + end-of-turn``, or an answer too long to fit ``max_length`` with a
            minimal prompt.
        ConfigError: ``max_length`` < 16.
        ModelError: the tokenizer cannot encode a control token's spelling as text
            (:func:`~evotrainer.backends.chat_tokens.chat_ids`).
    """
    if max_length < 16:
        raise ConfigError(f"max_length must be >= 16 tokens, got {max_length}")
    chat = ensure_system_turn(messages, where=where)
    if len(chat) < 2 or chat[-1]["role"] != "assistant":
        raise DataError(f"{where}: the last message must be the assistant answer to learn")
    answer = chat[-1]["content"]
    if not answer.strip():
        raise DataError(f"{where}: the assistant answer is empty; an empty supervision mask is an error")
    prompt_msgs = chat[:-1]
    end_token = tokenizer.convert_ids_to_tokens(end_token_id)
    prompt_text = _render(tokenizer, prompt_msgs, generation_prompt=True)
    full_text = _render(tokenizer, chat, generation_prompt=False)
    if not full_text.startswith(prompt_text + answer + end_token):
        raise DataError(
            f"{where}: the chat template does not render the assistant turn as prompt + answer + "
            f"{end_token!r}; cannot build an answer-only supervision mask for it"
        )
    answer_ids = [*text_ids(tokenizer, answer), int(end_token_id)]
    budget = max_length - len(answer_ids)
    prompt_ids = chat_ids(tokenizer, prompt_msgs)
    omitted = 0
    if len(prompt_ids) > budget:
        def count(msgs: list[Message]) -> int:
            return len(chat_ids(tokenizer, msgs))

        try:
            fitted, omitted = fit_messages(prompt_msgs, count, max(budget, 1))
        except ConfigError:
            raise DataError(
                f"{where}: the answer ({len(answer_ids)} tokens) does not fit max_length={max_length} "
                "even with an empty prompt; answers are never cut"
            ) from None
        prompt_ids = chat_ids(tokenizer, fitted)
    example = EncodedExample(
        input_ids=tuple(prompt_ids + answer_ids),
        labels=tuple([IGNORE_INDEX] * len(prompt_ids) + answer_ids),
        prompt_tokens=len(prompt_ids),
        omitted_words=omitted,
    )
    check_mask(example, len(answer_ids), where)
    return example


def collate(
    examples: Sequence[EncodedExample], *, pad_token_id: int, end_token_id: int
) -> dict[str, torch.Tensor]:
    """Right-pad a batch for a causal-LM forward pass with labels.

    Args:
        examples: encoded examples, at least one.
        pad_token_id: padding id; must differ from ``end_token_id`` (padding positions get label
            ``IGNORE_INDEX`` and attention 0 anyway, but a shared id would make the real end-of-turn
            indistinguishable from padding for any code that masks by id).
        end_token_id: the end-of-turn id.

    Returns:
        ``input_ids``, ``attention_mask``, ``labels``: each a long tensor of shape (B, L), L the longest
        example.

    Raises:
        ConfigError: pad equals end-of-turn. DataError: no examples.
    """
    if pad_token_id == end_token_id:
        raise ConfigError(f"pad token id {pad_token_id} equals the end-of-turn id; pad must be distinct")
    if not examples:
        raise DataError("collate: a batch needs at least one example")
    width = max(len(e.input_ids) for e in examples)
    input_ids = torch.full((len(examples), width), pad_token_id, dtype=torch.long)  # (B, L)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)  # (B, L)
    attention = torch.zeros((len(examples), width), dtype=torch.long)  # (B, L)
    for row, ex in enumerate(examples):
        n = len(ex.input_ids)
        input_ids[row, :n] = torch.tensor(ex.input_ids, dtype=torch.long)
        labels[row, :n] = torch.tensor(ex.labels, dtype=torch.long)
        attention[row, :n] = 1
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}
