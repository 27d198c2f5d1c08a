"""The per-row logits processors, checked directly on tensors."""

from __future__ import annotations

import torch

from evotrainer.backends.base import SamplingParams
from evotrainer.backends.logits import (
    GeneratedNgramBlocker,
    GeneratedRepetitionPenalty,
    RowBudget,
    SeededSampler,
    build_processors,
)

VOCAB = 12


def test_ngram_blocker_bans_repeats_of_generated_ngrams_only() -> None:
    prompt = [5, 6, 7, 5]  # the prompt holds bigram (5, 6): copying it must stay allowed
    generated = [8, 9, 8]  # bigram (8, 9) generated once: after "8", token 9 is banned
    ids = torch.tensor([prompt + generated])
    out = GeneratedNgramBlocker(prompt_length=len(prompt), sizes=[2])(ids, torch.zeros(1, VOCAB))
    assert out[0, 9] == -float("inf")
    assert torch.isfinite(out[0, [i for i in range(VOCAB) if i != 9]]).all()

    ids = torch.tensor([prompt + [5]])  # last generated token 5: prompt bigram (5, 6) is not banned
    out = GeneratedNgramBlocker(prompt_length=len(prompt), sizes=[2])(ids, torch.zeros(1, VOCAB))
    assert torch.isfinite(out).all()


def test_ngram_blocker_is_per_row_and_leaves_input_alone() -> None:
    ids = torch.tensor([[0, 1, 2, 1], [0, 1, 2, 1]])  # prompt [0], generated [1, 2, 1]
    scores = torch.zeros(2, VOCAB)
    out = GeneratedNgramBlocker(prompt_length=1, sizes=[2, 0])(ids, scores)
    assert out[0, 2] == -float("inf") and torch.isfinite(out[1]).all()
    assert torch.isfinite(scores).all()
    out = GeneratedNgramBlocker(prompt_length=1, sizes=[1, 3])(ids, torch.zeros(2, VOCAB))
    assert torch.isinf(out[0, [1, 2]]).all() and torch.isfinite(out[0, 3:]).all()
    assert torch.isfinite(out[1]).all()  # trigram prefix (2, 1) never seen before


def test_repetition_penalty_touches_generated_tokens_only() -> None:
    ids = torch.tensor([[3, 4, 5, 6]])  # prompt [3, 4], generated [5, 6]
    scores = torch.tensor([[0.0, 0, 0, 2.0, 2.0, 2.0, -2.0, 0, 0, 0, 0, 0]])
    out = GeneratedRepetitionPenalty(prompt_length=2, penalties=[2.0])(ids, scores)
    assert out[0, 3] == 2.0 and out[0, 4] == 2.0  # prompt tokens untouched
    assert out[0, 5] == 1.0 and out[0, 6] == -4.0  # generated: positive halved, negative doubled
    same = GeneratedRepetitionPenalty(prompt_length=2, penalties=[1.0])(ids, scores)
    assert torch.equal(same, scores)


def test_seeded_sampler_depends_only_on_row_seed() -> None:
    torch.manual_seed(0)
    logits = torch.randn(1, VOCAB)
    alone = SeededSampler([1.0], [1.0], [42])
    mixed = SeededSampler([0.0, 1.0, 0.7], [1.0, 1.0, 0.5], [1, 42, 9])
    batch = torch.cat([torch.randn(1, VOCAB), logits, torch.randn(1, VOCAB)])
    for _ in range(20):  # the same sequence of draws step after step
        a = alone(torch.zeros(1, 1, dtype=torch.long), logits.clone())
        m = mixed(torch.zeros(3, 1, dtype=torch.long), batch.clone())
        assert a.argmax() == m[1].argmax()
        assert torch.isfinite(a).sum() == 1 and torch.isfinite(m[1]).sum() == 1
        assert torch.equal(m[0], batch[0])  # the greedy row passes through


def test_seeded_sampler_respects_top_p() -> None:
    logits = torch.tensor([[5.0, 4.9, 0.0, -1.0] + [-9.0] * (VOCAB - 4)])
    sampler = SeededSampler([1.0], [0.5], [0])
    picks = {int(sampler(torch.zeros(1, 1, dtype=torch.long), logits).argmax()) for _ in range(50)}
    assert picks <= {0, 1} and len(picks) >= 1


def test_row_budget_forces_stop_per_row() -> None:
    budget = RowBudget(prompt_length=2, budgets=[1, 3], stop_token_id=2)
    ids = torch.tensor([[7, 7, 9], [7, 7, 9]])  # one token generated
    out = budget(ids, torch.zeros(2, VOCAB))
    assert out[0].argmax() == 2 and torch.isinf(out[0]).sum() == VOCAB - 1
    assert torch.isfinite(out[1]).all()


def test_build_processors_order() -> None:
    procs = build_processors(4, [SamplingParams(), SamplingParams(temperature=1.0)], stop_token_id=2)
    names = [type(p).__name__ for p in procs]
    assert names == ["GeneratedRepetitionPenalty", "GeneratedNgramBlocker", "SeededSampler", "RowBudget"]
