"""Final best vs best seed: paired differences per split, verdicts, the archive payload, pooling over seeds."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.browse.sweep_views import pooled_by_source
from evotrainer.browse.transfer_view import diff_cell
from evotrainer.events.kinds import GeneralisationEvent, PhaseEvent, RollbackEvent, SummaryEvent
from evotrainer.evolve.report import print_summary
from evotrainer.genome import Policy
from evotrainer.stats.bootstrap import paired_difference, rng_for
from evotrainer.stats.generalisation import (
    Generalisation,
    by_source,
    compare,
    format_diff,
    from_payload,
    pool,
    render_table,
    source_of,
    to_payload,
    with_item_ids,
)

SEL_BASE = [0.10, 0.20, 0.30, 0.40, 0.25, 0.15]
SEL_GAIN = [0.15, 0.26, 0.33, 0.45, 0.31, 0.19]  # +0.05 on average, every item better


def _shift(base: list[float], diffs: list[float]) -> list[float]:
    return [b + d for b, d in zip(base, diffs, strict=True)]


HELD_BASE = [0.20, 0.10, 0.30, 0.25, 0.15, 0.35, 0.05, 0.22]


def test_compare_numbers_counts_and_reproducibility() -> None:
    base = [0.1, 0.2, 0.3, 0.4]
    best = [0.2, 0.2, 0.35, 0.3]  # differences +0.1, 0, +0.05, -0.1
    g = compare("seedA", "childB", (SEL_BASE, SEL_GAIN), (base, best), seed=3)
    h = g.heldout
    assert h is not None and h.split == "heldout" and h.n == 4
    assert h.baseline_mean == pytest.approx(0.25) and h.best_mean == pytest.approx(0.2625)
    assert h.diff.mean == pytest.approx(0.0125) and h.diff.n == 4
    assert h.diff.low <= h.diff.mean <= h.diff.high
    assert (h.wins, h.losses, h.ties) == (2, 1, 1)
    expected = paired_difference(base, best, rng=rng_for(3, "generalisation", "seedA", "childB", "heldout"))
    assert h.diff == expected  # the documented generator, so an archive's numbers can be recomputed
    assert compare("seedA", "childB", (SEL_BASE, SEL_GAIN), (base, best), seed=3) == g
    assert g.selection is not None and (g.selection.wins, g.selection.losses, g.selection.ties) == (6, 0, 0)


def test_failed_items_count_zero_and_lengths_must_match() -> None:
    g = compare("a", "b", None, ([0.2, None, math.nan], [0.3, 0.1, 0.4]), seed=0)
    assert g.heldout is not None and g.heldout.baseline == (0.2, 0.0, 0.0)
    assert g.heldout.diff.mean == pytest.approx((0.1 + 0.1 + 0.4) / 3)
    with pytest.raises(ValueError):
        compare("a", "b", None, ([0.1, 0.2], [0.1]), seed=0)
    with pytest.raises(ValueError):
        compare("a", "b", None, ([0.1, 0.2], [0.1, 0.3]), seed=0, heldout_ids=["x"])


def test_verdict_held() -> None:
    g = compare("s", "b", (SEL_BASE, SEL_GAIN),
                (HELD_BASE, _shift(HELD_BASE, [0.04, 0.05, 0.06, 0.05, 0.03, 0.05, 0.04, 0.06])), seed=0)
    assert g.held is True and g.heldout.diff.low > 0
    assert g.verdict.startswith("the gain held on held-out items: held-out difference +0.04")


def test_verdict_not_held() -> None:
    g = compare("s", "b", (SEL_BASE, SEL_GAIN),
                (HELD_BASE, _shift(HELD_BASE, [-0.04, 0.02, -0.03, -0.01, 0.01, -0.05, 0.0, -0.02])), seed=0)
    assert g.held is False and g.heldout.diff.mean < 0
    assert g.verdict.startswith("the gain did not hold: held-out difference -0.0150 [")


def test_verdict_undecided_when_the_interval_touches_zero() -> None:
    g = compare("s", "b", (SEL_BASE, SEL_GAIN),
                (HELD_BASE, _shift(HELD_BASE, [0.10, -0.06, 0.05, -0.04, 0.03, -0.02, 0.04, -0.03])), seed=0)
    assert g.held is None and g.heldout.diff.mean > 0 and g.heldout.diff.low <= 0
    assert g.verdict.startswith("undecided: held-out difference +0.0087") and "touches 0" in g.verdict


def test_verdict_no_gain_on_selection() -> None:
    held_up = _shift(HELD_BASE, [0.05] * 8)
    g = compare("s", "b", (SEL_BASE, SEL_BASE), (HELD_BASE, held_up), seed=0)
    assert g.held is False and g.verdict.startswith("no gain on selection (+0.0000") and "no gain to hold" in g.verdict
    same = compare("s", "s", (SEL_BASE, SEL_BASE), (HELD_BASE, HELD_BASE), seed=0)
    assert same.held is False and "the best seed itself" in same.verdict
    none_held = compare("s", "b", (SEL_BASE, SEL_GAIN), None, seed=0)
    assert none_held.held is None and none_held.heldout is None and "no held-out items" in none_held.verdict


def test_format_diff() -> None:
    d = SimpleNamespace(mean=-0.0135, low=-0.0377, high=0.0119)
    assert format_diff(d) == "-0.0135 [-0.038, +0.012]"


def test_one_item_gives_no_interval_and_no_verdict() -> None:
    g = compare("s", "b", (SEL_BASE, SEL_GAIN), ([0.2], [0.25]), seed=0)
    assert g.heldout is not None and g.heldout.diff.low == g.heldout.diff.high  # the bootstrap of one item
    assert g.held is None and g.verdict == "undecided: one held-out item, held-out difference +0.0500 (one item: no interval)"
    a = _run(0, [0.1, -0.2], ["elitr-a", "mm-1"])
    p = pool([a], seed=0, keep=lambda i: i.startswith("elitr-"))
    assert p.n == 1 and p.held is None and "(one item: no interval)" in p.verdict
    assert format_diff(SimpleNamespace(mean=0.048, low=0.048, high=0.048, n=1)) == "+0.0480 (one item: no interval)"
    assert diff_cell({"mean": 0.048, "low": 0.048, "high": 0.048, "n": 1}).plain == "+0.0480 (one item: no interval)"
    assert diff_cell({"mean": 0.048, "low": 0.01, "high": 0.09, "n": 2}).plain == "+0.0480 [+0.010, +0.090]"


def test_payload_round_trip_is_json_safe_and_keeps_item_values() -> None:
    g = compare("s", "b", (SEL_BASE, SEL_GAIN), (HELD_BASE, _shift(HELD_BASE, [0.01] * 8)), seed=1,
                heldout_ids=[f"t{i}" for i in range(8)])
    payload = to_payload(g)
    assert "kind" not in payload  # rec.event(kind, **payload) must not collide
    text = json.dumps(payload, allow_nan=False)
    back = from_payload(json.loads(text))
    assert back == g
    assert back.heldout.item_ids == tuple(f"t{i}" for i in range(8)) and back.selection.item_ids == ()
    assert list(back.heldout.best) == pytest.approx(_shift(HELD_BASE, [0.01] * 8))
    with pytest.raises(ValueError):
        from_payload({"baseline_id": "s"})
    with pytest.raises(ValueError):
        from_payload({**payload, "heldout": {"n": 3}})
    with pytest.raises(ValueError):
        from_payload({**payload, "version": 99})


def test_with_item_ids_fills_only_matching_counts() -> None:
    g = compare("s", "b", (SEL_BASE, SEL_GAIN), (HELD_BASE, HELD_BASE), seed=0)
    assert with_item_ids(g, "heldout", ["x"]) is g
    filled = with_item_ids(g, "heldout", [f"h{i}" for i in range(8)])
    assert filled.heldout.item_ids[0] == "h0" and with_item_ids(filled, "heldout", ["z"] * 8) is filled


# --- pooling --------------------------------------------------------------------------------------


def _run(seed: int, diffs: list[float], ids: list[str] | None = None) -> Generalisation:
    base = HELD_BASE[: len(diffs)]
    return compare("s", f"b{seed}", (SEL_BASE, SEL_GAIN), (base, _shift(base, diffs)), seed=seed, heldout_ids=ids)


def test_pool_is_a_cluster_bootstrap_over_shared_items() -> None:
    ids = [f"t{i}" for i in range(8)]
    d1 = [0.04, -0.02, 0.05, 0.01, -0.03, 0.02, 0.03, -0.01]
    d2 = [0.02, -0.04, 0.03, 0.03, -0.01, 0.04, 0.01, 0.01]
    p = pool([_run(0, d1, ids), _run(1, d2, ids)], seed=5)
    assert p is not None and (p.runs, p.n, p.pairs, p.by_item) == (2, 8, 16, True)
    item_means = [(a + b) / 2 for a, b in zip(d1, d2, strict=True)]
    ref = paired_difference([0.0] * 8, item_means, rng=rng_for(5, "pool", "heldout"))
    assert (p.mean, p.low, p.high) == pytest.approx((ref.mean, ref.low, ref.high))
    assert p.mean == pytest.approx(np.mean(d1 + d2))
    # Treating the 16 (run, item) pairs as independent would give a narrower interval.
    naive = paired_difference([0.0] * 16, d1 + d2, rng=rng_for(5, "naive"))
    assert naive.high - naive.low < p.high - p.low
    assert p.held is None and p.verdict.startswith("undecided")


def test_pool_with_identical_seeds_is_as_wide_as_one_run() -> None:
    ids = [f"t{i}" for i in range(8)]
    d = [0.04, 0.05, 0.06, 0.05, 0.03, 0.05, 0.04, 0.06]
    one = pool([_run(0, d, ids)], seed=0)
    three = pool([_run(k, d, ids) for k in range(3)], seed=0)
    assert (three.low, three.high) == pytest.approx((one.low, one.high))  # repeats add no information
    assert three.held is True and "held-out items over 3 run(s)" in three.verdict


def test_pool_items_by_id_union_position_fallback_and_empty() -> None:
    a = _run(0, [0.1, 0.1, 0.1], ["x", "y", "z"])
    b = _run(1, [0.3, 0.3], ["y", "w"])
    p = pool([a, b], seed=0)
    assert (p.n, p.pairs, p.by_item) == (4, 5, True)
    assert p.mean == pytest.approx((0.1 + 0.2 + 0.1 + 0.3) / 4)  # y averages its two runs; items weigh equally
    q = pool([_run(0, [0.1, 0.2]), _run(1, [0.3, 0.0])], seed=0)
    assert (q.n, q.by_item) == (2, False) and q.mean == pytest.approx(0.15)
    no_heldout = compare("s", "b", (SEL_BASE, SEL_GAIN), None, seed=0)
    assert pool([no_heldout], seed=0) is None and pool([], seed=0) is None
    sel = pool([a, b], seed=0, split="selection")
    assert sel.held is None and "biased upward" in sel.verdict
    with pytest.raises(ValueError):
        pool([a], seed=0, split="train")


def test_pool_keep_restricts_to_matching_items_and_drops_unnamed_runs() -> None:
    a = _run(0, [0.1, -0.2, 0.3], ["elitr-a", "mm-1", "elitr-b"])
    b = _run(1, [0.5, 0.0, 0.1], ["elitr-a", "mm-1", "elitr-b"])
    unnamed = _run(2, [0.9, 0.9, 0.9])  # items keyed by position cannot match a pattern
    p = pool([a, b, unnamed], seed=0, keep=lambda i: i.startswith("elitr-"))
    assert (p.runs, p.n, p.pairs, p.by_item) == (2, 2, 4, True)
    assert p.mean == pytest.approx(((0.1 + 0.5) / 2 + (0.3 + 0.1) / 2) / 2)
    assert pool([a, b], seed=0) != p  # without keep every item counts
    assert pool([a, b], seed=0, keep=lambda i: i.startswith("qmsum-")) is None


def test_pooled_by_source_splits_a_mixed_set_by_id_prefix() -> None:
    ids = ["elitr-a", "mv-1", "elitr-b", "mv-2"]
    runs = [_run(0, [-0.02, 0.05, -0.01, 0.04], ids), _run(1, [-0.04, 0.03, 0.01, 0.06], ids)]
    by = pooled_by_source(runs, seed=0)
    assert list(by) == ["elitr", "mv"]
    assert by["elitr"]["heldout"]["n"] == 2 and by["elitr"]["heldout"]["mean"] == pytest.approx(-0.015)
    assert by["mv"]["heldout"]["mean"] == pytest.approx(0.045) and by["mv"]["selection"] is None  # no selection ids
    assert pooled_by_source([_run(0, [0.1, 0.2], ["mv-1", "mv-2"])], seed=0) == {}  # one source: nothing to split
    assert pooled_by_source([_run(0, [0.1, 0.2])], seed=0) == {}  # no ids
    assert (source_of("elitr-meeting_en_test_004"), source_of("plain")) == ("elitr", "plain")


def test_by_source_splits_one_run_and_the_table_shows_each_source() -> None:
    ids = ["elitr-a", "mv-1", "elitr-b", "mv-2", "mv-3"]
    g = _run(0, [-0.02, 0.05, -0.01, 0.04, 0.06], ids)
    parts = by_source(g.heldout)
    assert [p.item_ids for p in parts] == [("elitr-a", "elitr-b"), ("mv-1", "mv-2", "mv-3")]
    assert parts[0].diff.mean == pytest.approx(-0.015) and parts[0].losses == 2 and parts[1].wins == 3
    assert by_source(_run(0, [0.1, 0.2], ["mv-1", "mv-2"]).heldout) == () and by_source(_run(0, [0.1]).heldout) == ()
    console = Console(record=True, width=200)
    console.print(render_table(g))
    text = console.export_text()
    assert "  held-out, elitr items" in text and "  held-out, mv items" in text and "-0.0150" in text


def test_pool_says_no_gain_when_the_pooled_selection_gain_is_not_positive() -> None:
    g = compare("s", "b", (SEL_GAIN, SEL_BASE), (HELD_BASE, _shift(HELD_BASE, [0.05] * 8)), seed=0)
    p = pool([g], seed=0)
    assert p.held is False and "no gain to hold" in p.verdict


# --- the closing summary --------------------------------------------------------------------------


def _archive(tmp_path, generalisation: Generalisation | None) -> tuple[ArchiveStore, str]:
    """A finished evolve run as the archive holds it: policies, a summary event, a rollback, usage and totals."""
    seed = Policy.seed("terse", {"role": "You write minutes.", "format": "## Topics"})
    best = seed.child([("role", "You write short minutes."), ("format", "## Topics")], operator="mut_llm",
                      generation=2)
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run-s0-abc")
    rec.start(0, {})
    rec.policies([seed, best])
    rec.emit(RollbackEvent(outer_generation=1, cause="regression", detail="fell", restored_harness_id="h0",
                           restored_policy_id="terse", s_val=0.2, sigma=0.1))
    if generalisation is not None:
        rec.emit(GeneralisationEvent(**to_payload(generalisation)))
    rec.emit(SummaryEvent(
        initial_best=seed.id, initial_s_val=0.2, best=best.id, best_s_val=0.25, best_harness_id="g2c0",
        heldout_s_val=0.21, selection_items=6, heldout_items=8, rollouts=100, s_val_curve=(0.2, 0.25),
        current_curve=(0.2, 0.2375), rollbacks=1, stop_reason="outer.generations", stop_detail="2 of 2",
        candidates=4, generated_tokens=5000, archive=(("g2c0", 0.25),)))
    rec.emit(PhaseEvent(name="totals", fields={"seconds": 9.0, "model_load": 3.0}))
    return store, "run-s0-abc"


def _render(store: ArchiveStore, run_id: str) -> str:
    console = Console(record=True, width=200, force_terminal=False)
    harness = SimpleNamespace(difficulty={"length": 200.0}, extras={}, strategy={}, reward_weights={"format": 1.0})
    print_summary(console, store, run_id, harness)
    return console.export_text()


def test_the_console_summary_is_printed_from_the_archived_summary_event(tmp_path) -> None:
    store, run_id = _archive(tmp_path, None)
    text = _render(store, run_id)
    assert "run run-s0-abc; stopped by outer.generations: 2 of 2" in text
    assert "generation-0 best terse 0.2000" in text and "0.2500 (+0.0500)" in text
    assert "current S_val (the generation's best race estimate) per outer generation: 0.2000, 0.2375" in text
    assert "rollback at outer 1: regression" in text and "[length=200 | w: format=1.00]" in text
    assert "4 harness candidates" in text and "100 rollouts, 5000 generated tokens" in text
    assert "You write short minutes." in text  # the best prompt, read back from the archive
    store.close()


def test_print_summary_shows_the_comparison_and_verdict(tmp_path) -> None:
    g = compare("terse", "child[x]", (SEL_BASE, SEL_GAIN),
                (HELD_BASE, _shift(HELD_BASE, [-0.04, 0.02, -0.03, -0.01, 0.01, -0.05, 0.0, -0.02])), seed=0)
    store, run_id = _archive(tmp_path, g)
    text = _render(store, run_id)
    store.close()
    assert "final best on the held-out part" in text  # the existing lines stay
    assert "difference [95% CI]" in text and "wins/losses/ties" in text
    held_row = next(line for line in text.splitlines() if "held-out" in line and "│" in line)
    assert format_diff(g.heldout.diff) in held_row and "2/5/1" in held_row
    assert "child[x]" in text  # markup-escaped ids print as written
    assert "generalisation: the gain did not hold: held-out difference -0.0150 [" in text


def test_print_summary_without_generalisation_keeps_the_old_lines(tmp_path) -> None:
    store, run_id = _archive(tmp_path, None)
    text = _render(store, run_id)
    store.close()
    assert "held-out part (8 items" in text and "difference [" not in text and "generalisation" not in text
