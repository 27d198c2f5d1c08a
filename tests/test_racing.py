"""Racing and paired promotions (harness/racing.py), the race order. The Pareto parent front: tests/search."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.coevolution import CandidateResult, FullScore, run_outer_loop
from evotrainer.config import KnobSpec, OuterConfig
from evotrainer.harness import CMASearch, space_from_specs
from evotrainer.harness.racing import paired_bound, race_stages, run_race
from evotrainer.tasks.base import MeetingTask
from evotrainer.validation_split import race_order


def _evaluator(table: dict[int, list[float]], calls: list[tuple]):
    def evaluate(indices, start, end):
        calls.append((tuple(indices), start, end))
        return [table[i][start:end] for i in indices]
    return evaluate


def test_paired_bound_t_interval_and_counts() -> None:
    ref = [0.1, 0.2, 0.3, 0.4]
    cand = [0.2, 0.25, 0.3, 0.6]
    b = paired_bound(ref, cand, 0.95)
    d = np.array(cand) - np.array(ref)
    assert b.mean == pytest.approx(d.mean())
    assert b.low < b.mean < b.high
    assert (b.wins, b.losses, b.ties, b.n) == (3, 0, 1, 4)
    one = paired_bound([0.1], [0.9])
    assert math.isinf(one.low) and not one.better and not one.worse
    with pytest.raises(ValueError, match="level"):
        paired_bound(ref, cand, 0.4)
    with pytest.raises(ValueError, match="items"):
        paired_bound(ref, cand[:2])


def test_race_stages() -> None:
    assert race_stages(75, 8, [24]) == (8, 24, 75)
    assert race_stages(6, 8, [24]) == (6,)
    assert race_stages(30, 8, [4, 24, 24, 100]) == (8, 24, 30)


def test_race_drops_a_clearly_worse_candidate_early_and_keeps_an_undecided_one() -> None:
    rng = np.random.default_rng(0)
    n = 40
    ref = list(rng.uniform(0.2, 0.4, n))
    worse = [v - 0.15 for v in ref]  # clearly worse on every item
    close = [v + rng.normal(0, 0.03) for v in ref]  # indistinguishable
    calls: list[tuple] = []
    race = run_race(2, ref, _evaluator({0: worse, 1: close}, calls), race_stages(n, 8, [16]), survivors=1,
                    futility=None)
    first, second = race.entries
    assert first.status == "worse" and first.items == 8  # dropped after the first stage
    assert second.status in {"undecided", "better"} and second.items == n  # continued to every item
    assert race.leader == 1
    assert race.evaluations == 2 * 8 + 1 * (n - 8)
    assert calls[0] == ((0, 1), 0, 8) and all(c[0] == (1,) for c in calls[1:])


def test_better_on_screen_but_confidently_worse_on_more_items_is_not_promoted() -> None:
    n = 30
    ref = [0.3] * n
    cand = [0.5] * 8 + [0.1] * (n - 8)  # wins the 8 screening items, loses the rest
    calls: list[tuple] = []
    race = run_race(1, ref, _evaluator({0: cand}, calls), race_stages(n, 8, [16]))
    entry = race.entries[0]
    assert entry.status == "worse" and entry.items > 8 and not entry.bound.better


def test_race_survivors_cut_and_leader() -> None:
    ref = [0.3] * 10
    table = {0: [0.31] * 10, 1: [0.35, 0.36] * 5, 2: [0.32] * 10}
    race = run_race(3, ref, _evaluator(table, []), (4, 10), survivors=1)
    statuses = {e.index: e.status for e in race.entries}
    assert statuses[1] == "better" and statuses[0] == "cut" and statuses[2] == "cut"
    assert race.leader == 1


def _outer(tmp_path, per_item_inc, per_item_cand, level=0.95):
    """One outer generation with one candidate whose whole-set per-item values are given."""
    specs = {"length": KnobSpec(80.0, 900.0, log=True, integer=True)}
    space = space_from_specs(specs, {"length": (80.0, 900.0)}, {"length": 220.0}, {"format": 1.0},
                             knobs=["length"], evolve_reward_weights=False)
    cfg = replace(OuterConfig(), popsize=2, generations=1)
    cfg.race = replace(cfg.race, level=level)
    search = CMASearch(space.dim, space.initial_vector(), cfg.sigma0, cfg.popsize, seed=3, sigma_floor=None)
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run")
    rec.start(0, {})

    class P:
        def __init__(self, pid):
            self.id = pid

    inc_mean = float(np.mean(per_item_inc))
    start = CandidateResult(best=P("seed"), population=(P("seed"),), screen_s_val=None,
                            full_score=lambda: FullScore(inc_mean, inc_mean, 0, tuple(per_item_inc)))
    told: list = []

    class Obj:
        def set_incumbent(self, policy, hid, g):
            told.append(policy.id)

        def __call__(self, harness, population, hid, g):
            m = float(np.mean(per_item_cand))
            best = P(f"p-{hid}")
            return CandidateResult(best=best, population=(best,), screen_s_val=m,
                                   full_score=lambda: FullScore(m, m, 0, tuple(per_item_cand)))

    out = run_outer_loop(Obj(), start, space.decode(space.initial_vector()), space, search, cfg, rec)
    events = [e.payload for e in store.events("run", kind="promotion")]
    store.close()
    return out, events, told


def test_outer_loop_promotes_only_on_a_confident_paired_gain(tmp_path) -> None:
    rng = np.random.default_rng(1)
    inc = list(rng.uniform(0.2, 0.4, 40))
    noisy = [v + (0.05 if i % 2 else -0.04) for i, v in enumerate(inc)]  # higher mean, interval straddles 0
    out, events, told = _outer(tmp_path / "a", inc, noisy)
    assert float(np.mean(noisy)) > float(np.mean(inc))
    assert out.incumbent.best.id == "seed" and events and not events[0]["promoted"]
    assert told == ["seed"]
    clear = [v + 0.05 for v in inc]
    out, events, told = _outer(tmp_path / "b", inc, clear)
    assert out.incumbent.best.id.startswith("p-") and events[0]["promoted"]
    assert events[0]["paired"]["low"] > 0 and told == ["seed", out.incumbent.best.id]


def _task(i: int, words: int) -> MeetingTask:
    return MeetingTask(task_id=f"t{i}", transcript=" ".join(["w"] * words))


def test_race_order_puts_the_screen_first_and_spreads_prefixes() -> None:
    items = [_task(i, 10 + i) for i in range(20)]
    screen = [items[0], items[10], items[19]]
    order = race_order(items, screen)
    assert order[:3] == screen
    assert sorted(t.task_id for t in order) == sorted(t.task_id for t in items)
    lengths = [len(t.transcript.split()) for t in order[3:7]]
    assert max(lengths) - min(lengths) >= 8  # the next stage spans short and long transcripts


def test_futility_stops_a_candidate_pointing_the_wrong_way_before_the_last_stage() -> None:
    ref = [0.3] * 30
    slightly_worse = [0.3 - (0.01 if i % 2 else -0.006) for i in range(30)]  # mean -0.002, not confidently worse
    race = run_race(1, ref, _evaluator({0: slightly_worse}, []), (8, 16, 30), futility=0.0)
    assert race.entries[0].status == "futile" and race.entries[0].items == 8 and race.evaluations == 8
    race = run_race(1, ref, _evaluator({0: slightly_worse}, []), (8, 16, 30), futility=None)
    assert race.entries[0].status == "undecided" and race.entries[0].items == 30


def test_race_config_is_validated_with_the_key_named() -> None:
    from evotrainer.config import Config, validate
    from evotrainer.errors import ConfigError

    for key, value in (("sizes", [4]), ("sizes", [30, 20]), ("level", 1.5), ("survivors", 0), ("futility", 5.0)):
        cfg = Config()
        setattr(cfg.outer.race, key, value)
        with pytest.raises(ConfigError, match=f"outer.race.{key}"):
            validate(cfg)


def test_race_summary_counts_races_and_promotions(tmp_path) -> None:
    from evotrainer.archive import views

    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run")
    rec.start(0, {})
    rec.event("race", harness_id="g1c0", evaluations=40,
              entries=[{"status": "futile"}, {"status": "worse"}, {"status": "undecided"}])
    rec.event("race", harness_id="g1c1", evaluations=24, entries=[{"status": "futile"}])
    rec.event("promotion", promoted=False)
    rec.event("promotion", promoted=True)
    got = views.race_summary(store, "run")
    store.close()
    assert got == {"races": 2, "evaluations": 64, "entries": 4,
                   "by_status": {"futile": 2, "worse": 1, "undecided": 1}, "promotions": 2, "promoted": 1}
