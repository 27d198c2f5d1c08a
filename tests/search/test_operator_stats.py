"""Operator statistics: counting, merging, JSON round trip, summary rows, adaptive probabilities."""

from __future__ import annotations

import json

import pytest

from evotrainer.search.operator_stats import (
    OperatorStats,
    adapted_probabilities,
    format_operator_stats,
    operator_kind,
)

from ._fakes import seed_population


def _children():
    a, b = seed_population()[:2]
    kids = [a.child(a.sections, operator=op, generation=1 + i) for i, op in
            enumerate(["mut_structural/add", "mut_structural/drop", "cx_sections", "mut_decoding/top_p",
                       "mut_structural/add"])]
    return kids


def test_counts_children_that_beat_their_best_parent() -> None:
    kids = _children()
    fitness = {kids[0].id: 0.6, kids[1].id: 0.4, kids[2].id: 0.5, kids[3].id: None, kids[4].id: 0.9}
    parent_best = {kids[0].id: 0.5, kids[1].id: 0.5, kids[2].id: 0.5, kids[3].id: 0.1}  # kids[4]: unknown
    stats = OperatorStats.from_children(kids, fitness, parent_best)
    # ties do not count as improvements; failed evaluations and unknown parents are not counted
    assert stats.counts == {"cx_sections": (1, 0), "mut_structural": (2, 1)}
    assert stats.detail == {"cx_sections": (1, 0), "mut_structural/add": (1, 1), "mut_structural/drop": (1, 0)}
    assert stats.rate("mut_structural") == 0.5 and stats.rate("mut_decoding") is None
    assert operator_kind("mut_llm_rewrite/stricter") == "mut_llm_rewrite"


def test_merge_round_trip_and_rows() -> None:
    s1 = OperatorStats({"mut_structural": (2, 1)}, {"mut_structural/add": (2, 1)})
    s2 = OperatorStats({"mut_structural": (1, 1), "cx_sections": (4, 1)},
                       {"mut_structural/drop": (1, 1), "cx_sections": (4, 1)})
    total = s1.merged(s2)
    assert total.counts == {"cx_sections": (4, 1), "mut_structural": (3, 2)}
    assert OperatorStats.from_dict(json.loads(json.dumps(total.to_dict()))) == total
    assert format_operator_stats(total) == [("cx_sections", 4, 1, 0.25), ("mut_structural", 3, 2, 2 / 3)]
    assert format_operator_stats(OperatorStats()) == []
    with pytest.raises(ValueError, match="improved <= tried"):
        OperatorStats.from_dict({"counts": {"x": [1, 2]}})


def test_adapted_probabilities_favour_successful_operators() -> None:
    base = {"mut_structural": 0.5, "mut_phrase_substitution": 0.5, "mut_decoding": 0.0}
    stats = OperatorStats({"mut_structural": (20, 1), "mut_phrase_substitution": (20, 10)})
    probs = adapted_probabilities(base, stats, mix=0.3)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert probs["mut_phrase_substitution"] > 0.5 > probs["mut_structural"] > 0.15 * 0.5
    assert probs["mut_decoding"] == 0.0
    assert adapted_probabilities(base, stats, mix=1.0) == pytest.approx(base)
    assert adapted_probabilities(base, OperatorStats(), mix=0.0) == pytest.approx(base)  # no data: no change
