"""The transfer report: paired comparisons of the final best, the best seed and a plain prompt, the verdict, the
archived event, and how the summary, the HTML report and the plain prompt policy show them."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from evotrainer.browse.report import _transfer_html
from evotrainer.errors import DataError
from evotrainer.events import kinds as ev
from evotrainer.evolve.report import print_transfer
from evotrainer.genome import Policy, render_system_prompt
from evotrainer.stats.transfer import (
    compare_transfer,
    from_event,
    plain_policy,
    read_report,
    score_transfer,
    to_event,
)

IDS = {"final_best": "p1", "best_seed": "terse", "plain_prompt": "plain_prompt"}
ITEMS = [f"q{i}" for i in range(12)]
SEED = [0.10, 0.12, 0.08, 0.15, 0.11, 0.09, 0.13, 0.10, 0.14, 0.12, 0.07, 0.11]
PLAIN = [v - 0.03 for v in SEED]


def _cmp(best: list[float], seed: list[float] = SEED, plain: list[float] | None = PLAIN, ids=IDS, **kw):
    values = {"final_best": best, "best_seed": seed, **({"plain_prompt": plain} if plain is not None else {})}
    return compare_transfer({k: v for k, v in ids.items() if k in values}, values, ITEMS, seed=0, **kw)


def test_gain_transfers_when_both_lower_bounds_are_above_zero() -> None:
    r = _cmp([v + 0.02 + 0.004 * (i % 3) for i, v in enumerate(SEED)])
    assert r.transfers and r.verdict.startswith("gain transfers: final best − best seed +0.0240")
    assert [(c.a, c.b) for c in r.comparisons] == [("final_best", "best_seed"), ("final_best", "plain_prompt"),
                                                   ("best_seed", "plain_prompt")]
    c = r.comparisons[0]
    assert (c.wins, c.losses, c.ties) == (12, 0, 0) and c.diff.n == 12 and 0 < c.diff.low <= c.diff.mean
    assert r.means[0] == pytest.approx(sum(SEED) / 12 + 0.024)
    assert r == _cmp([v + 0.02 + 0.004 * (i % 3) for i, v in enumerate(SEED)])  # seeded bootstrap: reproducible


def test_no_transfer_names_the_comparison_that_does_not_hold() -> None:
    best = [v + (0.02 if i % 2 else -0.02) for i, v in enumerate(SEED)]  # no gain over the seed, beats the plain
    r = _cmp(best)
    assert not r.transfers
    assert r.verdict.startswith("no transfer gain shown: final best − best seed ") and r.verdict.endswith("(no gain)")
    assert "plain prompt" not in r.verdict  # that one holds: only the failing comparison is named
    c = r.comparisons[0]
    assert (c.wins, c.losses, c.ties) == (6, 6, 0) and c.diff.low < 0 < c.diff.high
    worse = _cmp([v - 0.05 for v in SEED])  # worse than the seed and the plain prompt: both named
    assert "final best − best seed -0.0500" in worse.verdict and "final best − plain prompt -0.0200" in worse.verdict
    assert "(worse)" in worse.verdict and not worse.transfers


def test_best_is_the_seed_still_compared_with_the_plain_prompt() -> None:
    r = _cmp(SEED, ids={**IDS, "final_best": "terse"})
    assert not r.transfers and [(c.a, c.b) for c in r.comparisons] == [("final_best", "plain_prompt")]
    assert r.verdict == ("no transfer gain shown: the final best is the best seed (no evolved gain to transfer); "
                         "against the plain prompt +0.0300 [+0.030, +0.030]")
    assert r.comparisons[0].wins == 12
    alone = _cmp(SEED, plain=None, ids={**IDS, "final_best": "terse"})
    assert alone.comparisons == () and alone.verdict.endswith("no plain prompt to compare with")


def test_without_a_plain_prompt_only_the_seed_comparison_decides() -> None:
    r = _cmp([v + 0.03 for v in SEED], plain=None)
    assert r.transfers and r.roles == ("final_best", "best_seed") and len(r.comparisons) == 1
    assert r.verdict.endswith("(no plain prompt compared: task.plain_prompt is null)")
    with pytest.raises(ValueError, match="values for 12 items"):
        _cmp(SEED[:3])


def test_failed_items_count_zero() -> None:
    r = _cmp([None] * 12, plain=[float("nan")] * 12)
    assert r.values[0] == (0.0,) * 12 and r.values[2] == (0.0,) * 12 and not r.transfers


def test_event_round_trips() -> None:
    r = _cmp([v + 0.02 for v in SEED])
    event = to_event(r)
    payload = event.to_payload()
    assert list(payload)[:3] == ["version", "item_ids", "roles"] and payload["comparisons"][0]["level"] == 0.95
    again = ev.from_payload("transfer", payload)
    assert isinstance(again, ev.TransferEvent) and again == event and again.to_payload() == payload
    assert from_event(again) == r
    old = ev.from_payload("transfer", {"item_ids": ["q1"], "verdict": "x"})  # missing keys read as defaults
    assert old.comparisons == () and old.transfers is None and from_event(old).level == 0.95
    with pytest.raises(DataError, match="event 'transfer': unknown key 'extra'"):
        ev.from_payload("transfer", {"extra": 1})
    bad = ev.from_payload("transfer", {"comparisons": [{"a": "final_best"}]})
    report, problem = read_report([SimpleNamespace(event=bad)])
    assert report is None and problem.startswith("the transfer event could not be read")
    assert read_report([]) == (None, None) and read_report([SimpleNamespace(event=event)])[0] == r


def test_summary_prints_the_table_and_the_verdict() -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    print_transfer(console, _cmp([v + 0.02 for v in SEED]))
    print_transfer(console, None)
    text = out.getvalue()
    for part in ("transfer: 12 items no selection used", "final best", "plain_prompt", "final best − plain prompt", "12/0/0",
                 "transfer: gain transfers: final best − best seed +0.0200", "transfer: not configured"):
        assert part in text, part


def test_html_escapes_untrusted_text() -> None:
    r = _cmp([v + 0.02 for v in SEED], ids={**IDS, "best_seed": "<script>x</script>"})
    page = _transfer_html(r, None)
    assert "<script>" not in page and "&lt;script&gt;" in page and "<span class='ok'>" in page
    assert "task.transfer_path gives no items" in _transfer_html(None, None)
    assert _transfer_html(None, "the transfer event could not be read: <b>").endswith("&lt;b&gt;</p>")


def test_plain_prompt_policy_renders_its_instruction_alone() -> None:
    p = plain_policy("  Summarize the meeting. ")
    assert p is not None and p.id == "plain_prompt" and render_system_prompt(p.sections) == "Summarize the meeting."
    assert plain_policy(None) is None and plain_policy("  ") is None


def test_score_transfer_scores_each_genome_once_in_one_call() -> None:
    calls, emitted, archived = [], [], []
    items = [SimpleNamespace(task_id=i) for i in ITEMS[:3]]

    class Screening:
        def meta_many(self, policies, its, kind, harness_id, outer_generation, words=None):
            calls.append(([p.id for p in policies], kind, harness_id, outer_generation))
            return [SimpleNamespace(genome_hash=p.genome_hash, per_item=(0.2, None, 0.4)) for p in policies]

    rec = SimpleNamespace(emit=emitted.append, policies=archived.extend)
    seed = Policy.seed("terse", {"role": "Write minutes.", "format": "", "rules": ""})
    r = score_transfer(Screening(), rec, seed, seed, "Summarize the meeting.", items, seed=0, outer_generation=2)
    assert calls == [(["terse", "plain_prompt"], "meta_transfer", None, 2)]  # the best is the seed: one rollout
    assert r is not None and r.values[0] == (0.2, 0.0, 0.4) and [p.id for p in archived] == ["plain_prompt"]
    assert emitted == [to_event(r)]
    assert score_transfer(Screening(), rec, seed, seed, None, [], seed=0, outer_generation=2) is None
    assert len(calls) == 1 and len(emitted) == 1
