"""The inner loop with an embedder: phrase substitution, decoding genes, near-duplicates, diversity,
operator statistics and adaptive probabilities."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from evotrainer.errors import ConfigError
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import run_inner_loop
from evotrainer.search.operator_stats import OperatorStats, operator_kind
from evotrainer.search.operators import is_valid
from evotrainer.search.phrases import PhraseBank
from evotrainer.search.toolbox import build_toolbox

from ._fakes import FakeEmbedder, FakeMutator, keyword_fitness, seed_population


def _evaluate(policies):
    return [keyword_fitness(p) + 0.01 * dict(p.decoding).get("repetition_penalty", 1.0) for p in policies]


def _run(seed, cfg=None, generations=4, *, toolbox=None, mutator=None, embedder=None, phrase_bank=None, **kw):
    """The loop on the seed population; the toolbox built here (``mutator``, a phrase bank over ``embedder``
    unless ``phrase_bank`` is given) unless one is given."""
    reports = []
    cfg = replace(cfg or InnerConfig(), generations=generations)
    bank = phrase_bank if phrase_bank is not None else (PhraseBank(embedder) if embedder is not None else None)
    toolbox = toolbox or build_toolbox(cfg, mutator=mutator, phrases=bank, seed_prompts=seed_population())
    result = run_inner_loop(seed_population(), toolbox, kw.pop("evaluate", _evaluate), cfg, random.Random(seed),
                            on_generation=reports.append, **kw)
    return result, reports


def test_embedder_enables_phrase_substitution_and_decoding_genes() -> None:
    cfg = InnerConfig(mut_prob=1.0, max_prompt_words=60)
    bank = PhraseBank(FakeEmbedder())
    result, reports = _run(0, cfg, generations=5, phrase_bank=bank)
    kinds = {operator_kind(c.operator) for r in reports for c in r.children}
    assert {"mut_phrase_substitution", "mut_decoding", "mut_structural"} <= kinds
    assert all(is_valid(p, max_words=60) for r in reports for p in r.population + r.children)
    assert len(bank) > 12 and all(isinstance(r.record["diversity"], float) for r in reports)
    # without an embedder: no phrase substitution, no diversity, same loop otherwise
    _, plain = _run(0, cfg, generations=3)
    assert "mut_phrase_substitution" not in {operator_kind(c.operator) for r in plain for c in r.children}
    assert all(r.record["diversity"] is None for r in plain)
    assert set(plain[1].mutation_probabilities) == {"mut_structural", "mut_decoding", "mut_prefill"}


def test_run_is_deterministic_with_an_embedder() -> None:
    def ids(seed):
        result, reports = _run(seed, embedder=FakeEmbedder(), mutator=FakeMutator())
        return [p.id for p in result.population], [[c.id for c in r.children] for r in reports]

    assert ids(3) == ids(3)


def test_operator_stats_count_every_evaluated_child() -> None:
    result, reports = _run(1, InnerConfig(cx_prob=0.7), generations=5, embedder=FakeEmbedder(),
                           mutator=FakeMutator())
    total = OperatorStats()
    for r in reports[1:]:
        scored = [c for c in r.children if r.child_fitness[c.id] is not None]
        assert sum(t for t, _ in r.operator_stats.counts.values()) == len(scored)
        assert sum(t for t, _ in r.operator_stats.detail.values()) == len(scored)
        total = total.merged(r.operator_stats)
    assert result.operator_stats == total
    assert any(i > 0 for _, i in total.counts.values())
    assert reports[0].operator_stats == OperatorStats()


def test_near_duplicates_are_rejected() -> None:
    cfg = InnerConfig(mut_prob=1.0, cx_prob=0.0, near_duplicate_cosine=-1.0)  # everything "means the same"
    bank = PhraseBank(FakeEmbedder())
    toolbox = build_toolbox(cfg, phrases=bank)
    result, reports = _run(2, cfg, generations=2, phrase_bank=bank, toolbox=toolbox)
    for r in reports[1:]:
        # only edits that change the number of sentences (add, drop) or decoding survive
        assert all(c.operator.split("/")[1] in {"add", "drop"} or c.operator.startswith("mut_decoding")
                   for c in r.children)
        assert r.rejected > 0


def test_adaptive_probabilities_move_away_from_the_configured_ones() -> None:
    cfg = InnerConfig(adaptive_operators=True, mut_prob=1.0)
    _, reports = _run(0, cfg, generations=5, embedder=FakeEmbedder())
    first = reports[1].mutation_probabilities
    assert first == pytest.approx({"mut_structural": 0.3, "mut_phrase_substitution": 0.4, "mut_decoding": 0.05,
                                   "mut_prefill": 0.25})
    assert any(r.mutation_probabilities != pytest.approx(first) for r in reports[2:])
    assert all(sum(r.mutation_probabilities.values()) == pytest.approx(1.0) for r in reports[1:])


@pytest.mark.parametrize(
    ("kw", "key"),
    [({"phrase_mutation_share": 0.9, "decoding_mutation_share": 0.2}, "inner.decoding_mutation_share"),
     ({"phrase_band": [0.95, 0.9]}, "inner.phrase_band"),
     ({"min_diversity": 3.0}, "inner.min_diversity"),
     ({"adaptive_operators": "yes"}, "inner.adaptive_operators")],
)
def test_new_settings_are_validated(kw, key) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        InnerConfig(**kw).validate()
