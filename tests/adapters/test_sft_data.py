"""The supervision mask covers exactly the answer and the closing end-of-turn token."""

from __future__ import annotations

import pytest

from evotrainer.adapters.sft_data import IGNORE_INDEX, EncodedExample, check_mask, collate, encode_chat
from evotrainer.backends.chat_tokens import chat_ids
from evotrainer.backends.hf import HFBackend
from evotrainer.errors import ConfigError, DataError

CHAT = (
    {"role": "system", "content": "You write meeting minutes."},
    {"role": "user", "content": "Ann: I will send the budget by Friday."},
    {"role": "assistant", "content": "- Ann: send the budget (due Friday)"},
)


def _encode(backend: HFBackend, chat, max_length: int = 512) -> EncodedExample:
    return encode_chat(backend.tokenizer, chat, max_length=max_length, end_token_id=backend.stop_token_ids[0])


def test_mask_covers_exactly_the_answer_and_end_of_turn(tiny_backend: HFBackend) -> None:
    tok = tiny_backend.tokenizer
    ex = _encode(tiny_backend, CHAT)
    covered = [k for k, lab in enumerate(ex.labels) if lab != IGNORE_INDEX]
    assert covered == list(range(ex.prompt_tokens, len(ex.input_ids)))  # one contiguous tail
    assert tok.decode([ex.input_ids[k] for k in covered]) == CHAT[-1]["content"] + "<|im_end|>"
    assert ex.labels[-1] == tiny_backend.stop_token_ids[0] != tiny_backend.pad_token_id
    # the prompt is token for token what the backend feeds the model at generation time
    assert list(ex.input_ids[: ex.prompt_tokens]) == chat_ids(tiny_backend.tokenizer, list(CHAT[:-1]))
    # and prompt + answer is the chat template's rendering of the whole chat (minus the final newline)
    full = tok.apply_chat_template(list(CHAT), tokenize=False)
    assert tok.decode(list(ex.input_ids)) + "\n" == full


def test_missing_system_turn_is_explicit_like_at_generation(tiny_backend: HFBackend) -> None:
    ex = _encode(tiny_backend, CHAT[1:])
    assert tiny_backend.tokenizer.decode(list(ex.input_ids[: ex.prompt_tokens])) == tiny_backend.render([CHAT[1]])


def test_bad_chats_raise(tiny_backend: HFBackend) -> None:
    with pytest.raises(DataError, match="empty"):
        _encode(tiny_backend, (*CHAT[:2], {"role": "assistant", "content": "  "}))
    with pytest.raises(DataError, match="last message"):
        _encode(tiny_backend, CHAT[:2])
    with pytest.raises(ConfigError):
        _encode(tiny_backend, CHAT, max_length=8)


def test_check_mask_rejects_empty_and_over_covering_masks() -> None:
    ids = (5, 6, 7, 8, 2)
    good = EncodedExample(ids, (IGNORE_INDEX, IGNORE_INDEX, 7, 8, 2), prompt_tokens=2)
    check_mask(good, answer_len=3)
    with pytest.raises(DataError, match="empty"):
        check_mask(EncodedExample(ids, (IGNORE_INDEX,) * 5, prompt_tokens=5), answer_len=3)
    with pytest.raises(DataError, match="prompt tokens"):
        check_mask(EncodedExample(ids, (IGNORE_INDEX, 6, 7, 8, 2), prompt_tokens=2), answer_len=3)
    with pytest.raises(DataError, match="differ"):
        check_mask(EncodedExample(ids, (IGNORE_INDEX, IGNORE_INDEX, 9, 8, 2), prompt_tokens=2), answer_len=3)


def test_long_prompt_is_cut_in_the_transcript_never_the_answer(tiny_backend: HFBackend) -> None:
    transcript = " ".join(f"Speaker{i % 3}: point number {i} was discussed." for i in range(200))
    chat = (CHAT[0], {"role": "user", "content": transcript}, CHAT[2])
    ex = _encode(tiny_backend, chat, max_length=128)
    text = tiny_backend.tokenizer.decode(list(ex.input_ids))
    assert len(ex.input_ids) <= 128 and ex.omitted_words > 0
    assert "words omitted" in text and "You write meeting minutes." in text
    assert text.endswith(CHAT[2]["content"] + "<|im_end|>")
    with pytest.raises(DataError, match="never cut"):
        _encode(tiny_backend, (*CHAT[:2], {"role": "assistant", "content": "word " * 300}), max_length=64)


def test_collate_pads_right_with_a_distinct_pad(tiny_backend: HFBackend) -> None:
    eot, pad = tiny_backend.stop_token_ids[0], tiny_backend.pad_token_id
    a, b = _encode(tiny_backend, CHAT), _encode(tiny_backend, CHAT[1:])
    batch = collate([a, b], pad_token_id=pad, end_token_id=eot)
    assert batch["input_ids"].shape == batch["labels"].shape == (2, max(len(a.input_ids), len(b.input_ids)))
    short = 1 if len(b.input_ids) < len(a.input_ids) else 0
    n = len((a, b)[short].input_ids)
    assert batch["attention_mask"][short, n:].sum() == 0 and (batch["input_ids"][short, n:] == pad).all()
    assert (batch["labels"][short, n:] == IGNORE_INDEX).all() and batch["labels"][short, n - 1] == eot
    with pytest.raises(ConfigError, match="distinct"):
        collate([a], pad_token_id=eot, end_token_id=eot)
