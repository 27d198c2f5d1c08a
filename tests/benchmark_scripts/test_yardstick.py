"""benchmarks/yardstick.py's pure helpers (issue 24's targets); no model, no data files."""

from __future__ import annotations

import pytest

from benchmarks.yardstick import old_value, round_robin, spearman, status, targets


def test_old_value_is_mm4():
    assert old_value({"rouge_lsum": 0.4, "action_f1": 0.2, "degenerate": 0.0}) == pytest.approx(0.3)
    assert old_value({"rouge_lsum": 0.4, "degenerate": 0.0}) == 0.4
    assert old_value({"rouge_lsum": 0.4, "action_f1": 0.2, "degenerate": 1.0}) == 0.0


def test_round_robin_alternates_groups_keeping_order():
    items = ["h1", "h2", "h3", "q1", "q2"]
    assert round_robin(items, lambda s: s[0]) == ["h1", "q1", "h2", "q2", "h3"]


def test_spearman_needs_three_varying_values():
    assert spearman([1, 2, 3], [10, 30, 20]) == pytest.approx(0.5)
    assert spearman([1, 2], [1, 2]) is None and spearman([1, 1, 1], [1, 2, 3]) is None


def test_targets_measured_only_at_full_size():
    probes = {m: {"shares": {"skeleton": 0.05, "wrong_item": 0.3}} for m in ("mm-4", "mm-5")}
    rank = {"seeds": list("abcdefghijklmn"), "items": {"selection": 60, "unseen": 60},
            **{m: {"spearman": 0.6} for m in ("mm-4", "mm-5")}}
    got = {t["metric"]: t["status"] for t in targets(probes, rank)}
    assert got["yardstick.skeleton_share.mm-5"] == "MET" and got["yardstick.wrong_item_share.mm-5"] == "NOT MET"
    assert got["yardstick.spearman.mm-5"] == "MET"
    rank["items"]["unseen"] = 59
    assert {t["metric"]: t["status"] for t in targets(probes, rank)}["yardstick.spearman.mm-4"] == "NOT MEASURED"
    assert status(None, True) == "NOT MEASURED"


def test_checkpoint_skips_a_torn_last_line(tmp_path):
    from benchmarks.yardstick import _load_checkpoint

    path = tmp_path / "ck.jsonl"
    path.write_text('{"key": "a", "output": "x"}\n{"key": "b", "outp', encoding="utf-8")
    assert _load_checkpoint(path) == {"a": "x"}
    assert _load_checkpoint(tmp_path / "missing.jsonl") == {}


def test_checkpoint_key_changes_with_prompt_and_sampling():
    from types import SimpleNamespace

    from benchmarks.yardstick import _request_key

    a = SimpleNamespace(messages=({"role": "user", "content": "hi"},), params={"temperature": 0.0})
    b = SimpleNamespace(messages=({"role": "user", "content": "ho"},), params={"temperature": 0.0})
    c = SimpleNamespace(messages=a.messages, params={"temperature": 0.7})
    assert len({_request_key(a), _request_key(b), _request_key(c)}) == 3
    assert _request_key(a) == _request_key(SimpleNamespace(messages=a.messages, params=dict(a.params)))
