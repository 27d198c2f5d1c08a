"""The transfer report pooled over runs: cluster bootstrap by item id, the pooled verdict, and reading a run's event."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from evotrainer.stats.bootstrap import paired_difference, rng_for
from evotrainer.stats.transfer import compare_transfer, to_event
from evotrainer.stats.transfer_pool import pool_transfer, read_run

ITEMS = [f"q{i}" for i in range(8)]
SEED = [0.10, 0.12, 0.08, 0.15, 0.11, 0.09, 0.13, 0.10]


def _report(seed: int, gain: list[float], plain_gap: float = 0.03, items: list[str] = ITEMS, best: str | None = None,
            plain: bool = True):
    base = SEED[:len(items)]
    ids = {"final_best": best or f"p{seed}", "best_seed": "terse", **({"plain_prompt": "plain_prompt"} if plain else {})}
    values = {"final_best": [v + g for v, g in zip(base, gain, strict=True)], "best_seed": base,
              **({"plain_prompt": [v - plain_gap for v in base]} if plain else {})}
    return compare_transfer(ids, values, items, seed=seed)


def _by(p, a: str, b: str):
    return next(c for c in p.comparisons if (c.a, c.b) == (a, b))


def test_a_clear_gain_over_three_runs_transfers() -> None:
    reports = [_report(s, [0.02 + 0.004 * ((i + s) % 3) for i in range(8)]) for s in range(3)]
    p = pool_transfer(reports, seed=0)
    assert p is not None and (p.runs, p.items, p.transfers, p.level) == (3, 8, True, 0.95)
    assert p.verdict.startswith("gain transfers (pooled over 3 runs): final best − best seed +0.0240 [")
    assert "final best − plain prompt +0.0540" in p.verdict
    fb = _by(p, "final_best", "best_seed")
    assert (fb.n, fb.runs, fb.wins, fb.losses, fb.ties) == (8, 3, 24, 0, 0)  # 8 clusters, not 24 draws
    assert [(c.a, c.b) for c in p.comparisons] == [("final_best", "best_seed"), ("final_best", "plain_prompt"),
                                                   ("best_seed", "plain_prompt")]
    assert _by(p, "best_seed", "plain_prompt").mean == pytest.approx(0.03)


def test_the_interval_resamples_items_averaged_over_runs() -> None:
    gains = [[0.05, -0.02, 0.04, 0.01, -0.03, 0.02, 0.00, 0.03], [0.01, -0.04, 0.03, 0.03, -0.01, 0.04, 0.02, 0.00]]
    p = pool_transfer([_report(s, g) for s, g in enumerate(gains)], seed=7, level=0.9, n_resamples=500)
    item_means = np.mean(gains, axis=0)  # (n_items,): each item's difference averaged over the runs
    expected = paired_difference([0.0] * 8, list(item_means), rng=rng_for(7, "transfer_pool", "final_best", "best_seed"),
                                 n_resamples=500, level=0.9)
    fb = _by(p, "final_best", "best_seed")
    assert (fb.mean, fb.low, fb.high) == pytest.approx((expected.mean, expected.low, expected.high))
    assert p.level == 0.9


def test_a_mixed_sweep_shows_no_transfer_gain_and_names_the_failing_pair() -> None:
    reports = [_report(0, [0.04] * 8), _report(1, [-0.05] * 8), _report(2, [0.01 * (i % 2) for i in range(8)])]
    p = pool_transfer(reports, seed=0)
    assert p is not None and not p.transfers
    assert p.verdict.startswith("no transfer gain shown: final best − best seed ")
    assert p.verdict.endswith(", pooled over 3 runs") and "plain prompt" not in p.verdict  # that pair passes
    assert _by(p, "final_best", "plain_prompt").low > 0


def test_a_run_whose_final_best_is_its_best_seed_counts_zero_gain() -> None:
    same = _report(1, [0.0] * 8, best="terse")
    assert not any((c.a, c.b) == ("final_best", "best_seed") for c in same.comparisons)  # not in its own report
    p = pool_transfer([_report(0, [0.04] * 8), same], seed=0)
    fb = _by(p, "final_best", "best_seed")
    assert fb.runs == 2 and fb.mean == pytest.approx(0.02) and fb.ties == 8


def test_items_are_keyed_by_id_and_other_items_add_clusters() -> None:
    other = _report(1, [0.02] * 4, items=["x0", "x1", "x2", "x3"])
    p = pool_transfer([_report(0, [0.02] * 8), other], seed=0)
    assert p.items == 12 and _by(p, "final_best", "best_seed").n == 12


def test_without_a_plain_prompt_it_says_so_and_none_without_reports() -> None:
    p = pool_transfer([_report(s, [0.03] * 8, plain=False) for s in range(2)], seed=0)
    assert p.transfers and p.verdict.endswith("(no plain prompt compared: no run has one)")
    assert [(c.a, c.b) for c in p.comparisons] == [("final_best", "best_seed")]
    assert pool_transfer([], seed=0) is None


def test_read_run_gives_the_report_and_its_cell() -> None:
    r = _report(0, [0.04] * 8)
    report, cell = read_run([SimpleNamespace(event=to_event(r))])
    assert report == r and cell == {"transfers": r.transfers, "verdict": r.verdict, "items": 8}
    assert read_run([]) == (None, None)
    bad = to_event(r).__class__(comparisons=({"a": "final_best"},))
    report, cell = read_run([SimpleNamespace(event=bad)])
    assert report is None and cell["transfers"] is None and "could not be read" in cell["verdict"]
