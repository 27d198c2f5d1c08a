"""The benchmark suite's pure helpers (``benchmarks/report.py``, the FLOP and byte counts): no model, no timing."""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not an installed package

from benchmarks.fig_roofline import ModelFacts, decode_bytes, prefill_flops  # noqa: E402
from benchmarks.report import (  # noqa: E402
    TARGETS,
    Figure,
    Target,
    check_targets,
    format_value,
    median,
    render,
    result_path,
    to_payload,
    write_results,
)


def test_median_odd_even_and_empty() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_targets_met_not_met_and_not_measured() -> None:
    targets = (Target("fast", "a", 3.0), Target("calm", "b", 2.5, at_least=False), Target("full run", "", 60.0))
    results = check_targets({"a": 3.0, "b": 2.6}, targets)
    assert [r.status for r in results] == ["met", "not met", "not measured"]
    assert [r.status for r in check_targets({"a": float("nan"), "b": None}, targets)] == ["not measured"] * 3


def test_every_issue_target_is_listed_once() -> None:
    metrics = [t.metric for t in TARGETS if t.metric]
    assert len(metrics) == len(set(metrics))
    assert {"prefix.speedup", "generation.speedup", "roofline.prefill_fraction", "roofline.decode_fraction",
            "busy.ratio"} <= set(metrics)


def test_format_value() -> None:
    assert format_value(None) == "n/a"
    assert format_value(2.1734, "x") == "2.17x"
    assert format_value(0.4567, "%") == "45.7 %"
    assert format_value(123.4, "tok/s") == "123 tok/s"
    assert format_value(24, "") == "24"
    assert format_value(49.0, "tok/s") == "49.0 tok/s"
    assert format_value(0.0123, "s") == "12 ms"


def test_render_prints_rows_runs_skips_and_targets() -> None:
    fig = Figure("generation", "tokens/s", workload="16 requests")
    fig.add("batch 16", 49.0, "tok/s", runs=[48.0, 49.0, 51.0])
    skipped = Figure("prefix", "shared prefix", skipped="not available in this commit")
    text = render([fig, skipped], check_targets({"generation.speedup": 2.17}), ["header line"])
    assert text.startswith("header line")
    assert "[1] generation: tokens/s" in text and "workload: 16 requests" in text
    assert "49.0 tok/s" in text and "runs 48.0, 49.0, 51.0" in text
    assert "skipped: not available in this commit" in text
    assert "NOT MET" in text and "measured 2.17x; target >= 6x" in text


def test_results_json_is_strict_and_named_by_commit_and_time(tmp_path: Path) -> None:
    path = result_path(tmp_path / "results", "abc1234", datetime(2025, 1, 2, 3, 4, 5))
    assert path.name == "abc1234-20250102-030405.json"
    fig = Figure("roofline", "limits", metrics={"roofline.decode_fraction": float("inf")})
    fig.add("decode / bandwidth limit", float("nan"), "%")
    payload = to_payload({"commit": "abc1234"}, [fig], check_targets(fig.metrics))
    written = write_results(path, payload)
    loaded = json.loads(written.read_text(encoding="utf-8"))
    assert loaded["meta"]["commit"] == "abc1234"
    assert loaded["figures"][0]["rows"][0]["value"] is None  # NaN -> null
    assert loaded["figures"][0]["metrics"]["roofline.decode_fraction"] is None
    assert {t["status"] for t in loaded["targets"]} == {"not measured"}


def _facts(**kw: int) -> ModelFacts:
    base = dict(params=1000, weight_bytes=4000, embedding_params=200, layers=2, hidden=8, heads=2, kv_heads=1,
                head_dim=4, intermediate=16, vocab=25, dtype_bytes=4, tied=True)
    return ModelFacts(**{**base, **kw})


def test_prefill_flops_counts_linear_attention_and_head() -> None:
    f = _facts()
    assert f.linear_params == 800  # tied: the head is the embedding
    # 2 * 800 * 3 tokens + 4 * layers * heads * head_dim * (1 + 2 + 3) pairs + 2 * vocab * hidden for 1 row
    assert prefill_flops(f, [3]) == 2 * 800 * 3 + 4 * 2 * 2 * 4 * 6 + 2 * 25 * 8
    assert _facts(tied=False).linear_params == 800 - 25 * 8


def test_decode_bytes_weights_plus_kv_cache() -> None:
    f = _facts()
    assert decode_bytes(f, batch=2, context=10) == 4000 + 2 * 2 * 1 * 4 * 4 * 2 * 10
    assert math.isclose(decode_bytes(f, batch=1, context=0), f.weight_bytes)
