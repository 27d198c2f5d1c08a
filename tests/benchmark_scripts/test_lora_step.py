"""benchmarks/lora_step.py: the FLOP count of a frozen-base LoRA step and its training data (no model)."""

from __future__ import annotations

import pytest

from benchmarks.fig_roofline import ModelFacts
from benchmarks.lora_step import examples, main, step_flops

FACTS = ModelFacts(params=1000, weight_bytes=2000, embedding_params=100, layers=2, hidden=8, heads=2, kv_heads=1,
                   head_dim=4, intermediate=16, vocab=50, dtype_bytes=2, tied=True)


def test_a_step_counts_forward_and_activation_gradients_of_the_frozen_linears() -> None:
    # no answer tokens, one token per row: only the linears (4 x 900 per token) and one attention pair per token
    flops = step_flops(FACTS, input_tokens=10, padded_tokens=10, answer_tokens=0, rows=10)
    assert flops == 4.0 * 900 * 10 + 3 * 4.0 * 2 * 2 * 4 * 10 * 1


def test_the_head_runs_on_answer_positions_only() -> None:
    base = step_flops(FACTS, input_tokens=64, padded_tokens=64, answer_tokens=0, rows=2)
    assert step_flops(FACTS, input_tokens=64, padded_tokens=64, answer_tokens=5, rows=2) - base == 4.0 * 50 * 8 * 5


def test_training_examples_are_real_windows_with_their_human_summary() -> None:
    rows = examples(3)
    assert len(rows) == 3
    assert [m["role"] for m in rows[0].messages] == ["system", "user", "assistant"]
    assert all(m["content"].strip() for m in rows[0].messages)


def test_a_size_below_one_is_refused_before_the_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--batch", "0"])
    assert "--batch must be >= 1" in capsys.readouterr().err
