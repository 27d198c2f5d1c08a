"""Racing and paired promotions (harness/racing.py), the race order. The Pareto parent front: tests/search."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.config import KnobSpec, OuterConfig
from evotrainer.harness import CMASearch, space_from_specs
from evotrainer.harness.objective import CandidateResult, FullScore
from evotrainer.harness.racing import paired_bound, race_stages, run_race
from evotrainer.run.outer_loop import run_outer_loop
from evotrainer.run.validation_split import race_order
from evotrainer.tasks.meeting_minutes.task import MeetingTask


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


def _outer(tmp_path, per_item_inc, per_item_cand, level=0.95, strata=(), stratum_level=None):
    """One outer generation with one candidate whose whole-set per-item values (and item sources) are given."""
    specs = {"length": KnobSpec(80.0, 900.0, log=True, integer=True)}
    space = space_from_specs(specs, {"length": (80.0, 900.0)}, {"length": 220.0}, {"format": 1.0},
                             knobs=["length"], evolve_reward_weights=False)
    cfg = replace(OuterConfig(), popsize=2, generations=1)
    cfg.race = replace(cfg.race, level=level, stratum_level=stratum_level)
    search = CMASearch(space.dim, space.initial_vector(), cfg.sigma0, cfg.popsize, seed=3, sigma_floor=None)
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run")
    rec.start(0, {})

    class P:
        def __init__(self, pid):
            self.id = pid

    inc_mean = float(np.mean(per_item_inc))
    start = CandidateResult(best=P("seed"), population=(P("seed"),), race_estimate=None,
                            full_score=lambda: FullScore(inc_mean, 0, tuple(per_item_inc)))
    told: list = []

    class Obj:
        def set_incumbent(self, policy, hid, g):
            told.append(policy.id)

        def __call__(self, harness, population, hid, g):
            m = float(np.mean(per_item_cand))
            best = P(f"p-{hid}")
            return CandidateResult(best=best, population=(best,), race_estimate=m,
                                   full_score=lambda: FullScore(m, 0, tuple(per_item_cand), tuple(strata)))

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


def test_outer_loop_refuses_a_promotion_worse_on_one_item_source(tmp_path) -> None:
    """``outer.race.stratum_level``: a clear pooled gain made on the short items, with a loss on the long ones."""
    rng = np.random.default_rng(2)
    inc = list(rng.uniform(0.2, 0.4, 30)) + list(rng.uniform(0.02, 0.08, 8))
    cand = [v + 0.05 for v in inc[:30]] + [v - 0.01 - 0.002 * (i % 3) for i, v in enumerate(inc[30:])]
    strata = ["mv"] * 30 + ["elitr"] * 8
    out, events, _ = _outer(tmp_path / "a", inc, cand, strata=strata)
    assert events[0]["promoted"] and "refused_stratum" not in events[0]  # no check unless asked for
    out, events, told = _outer(tmp_path / "b", inc, cand, strata=strata, stratum_level=0.8)
    assert out.incumbent.best.id == "seed" and told == ["seed"]
    assert not events[0]["promoted"] and events[0]["paired"]["low"] > 0  # the pooled bound alone would promote
    assert events[0]["refused_stratum"]["stratum"] == "elitr" and events[0]["refused_stratum"]["n"] == 8
    assert events[0]["refused_stratum"]["high"] < 0


class _Scripted:
    """An objective that races like the real one: each candidate's estimate is the *current* reference's
    mean plus the paired mean difference to it (``Screening.race``), the reference being the last policy
    the outer loop passed to ``set_incumbent``. Candidate j of a generation has the per-item values
    ``table[j]``; every call records which reference its race used."""

    def __init__(self, table: dict[int, list[float]], seed_values: list[float]) -> None:
        self.table = table
        self.values = {"seed": seed_values}  # policy id -> per-item values on the selection items
        self.reference: str | None = None
        self.told: list[str] = []
        self.raced_against: dict[str, str] = {}

    def set_incumbent(self, policy, harness_id, outer_generation):
        self.reference = policy.id
        self.told.append(policy.id)

    def __call__(self, harness, population, hid, g):
        vals = self.table[int(hid.split("c")[1])]
        best = _P(f"p-{hid}")
        self.values[best.id] = vals
        ref = self.values[self.reference]
        self.raced_against[hid] = self.reference
        estimate = float(np.mean(ref)) + paired_bound(ref, vals).mean
        m = float(np.mean(vals))
        return CandidateResult(best=best, population=(best,), race_estimate=estimate,
                               full_score=lambda: FullScore(m, 0, tuple(vals)))


class _P:
    def __init__(self, pid):
        self.id = pid


def _generation(tmp_path, seed_values, table):
    """One outer generation of ``len(table)`` candidates against :class:`_Scripted`."""
    specs = {"length": KnobSpec(80.0, 900.0, log=True, integer=True)}
    space = space_from_specs(specs, {"length": (80.0, 900.0)}, {"length": 220.0}, {"format": 1.0},
                             knobs=["length"], evolve_reward_weights=False)
    cfg = replace(OuterConfig(), popsize=len(table), generations=1)
    search = CMASearch(space.dim, space.initial_vector(), cfg.sigma0, cfg.popsize, seed=3, sigma_floor=None)
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run")
    rec.start(0, {})
    m0 = float(np.mean(seed_values))
    start = CandidateResult(best=_P("seed"), population=(_P("seed"),), race_estimate=None,
                            full_score=lambda: FullScore(m0, 0, tuple(seed_values)))
    objective = _Scripted(table, seed_values)
    out = run_outer_loop(objective, start, space.decode(space.initial_vector()), space, search, cfg, rec)
    promotions = [e.payload for e in store.events("run", kind="promotion")]
    incumbents = [e.payload["policy_id"] for e in store.events("run", kind="incumbent")]
    rows = {r.harness_id: r for r in store.harness_candidates("run")}
    store.close()
    return out, objective, promotions, incumbents, rows


def _three_candidates(third_gap: float) -> tuple[list[float], dict[int, list[float]]]:
    """Seed values, then: a worse candidate, a clearly better one, and a third that is the second plus a noisy
    gap of mean ``third_gap`` (alternating around it by +-0.055)."""
    rng = np.random.default_rng(4)
    seed = list(rng.uniform(0.2, 0.4, 20))
    second = [v + 0.10 + rng.normal(0, 0.01) for v in seed]
    third = [v + third_gap + (0.055 if i % 2 else -0.055) for i, v in enumerate(second)]
    return seed, {0: [v - 0.05 for v in seed], 1: second, 2: third}


def test_a_later_candidate_must_beat_the_incumbent_promoted_earlier_in_its_generation(tmp_path) -> None:
    seed, table = _three_candidates(third_gap=0.005)
    # the premise: the third beats the seed confidently, the second not (it only beats it on the mean)
    assert paired_bound(seed, table[2]).better and not paired_bound(table[1], table[2]).better
    assert float(np.mean(table[2])) > float(np.mean(table[1]))
    out, objective, promotions, incumbents, rows = _generation(tmp_path, seed, table)
    # the third candidate raced the incumbent as of its turn: the second, promoted before it
    assert objective.raced_against == {"g1c0": "seed", "g1c1": "seed", "g1c2": "p-g1c1"}
    assert [(p["harness_id"], p["incumbent_policy_id"], p["promoted"]) for p in promotions] == [
        ("g1c1", "seed", True), ("g1c2", "p-g1c1", False)]
    assert out.incumbent.best.id == "p-g1c1" and incumbents == ["seed", "p-g1c1"]
    assert objective.told == ["seed", "p-g1c1"]
    assert rows["g1c1"].s_val == pytest.approx(float(np.mean(table[1])))  # each whole-set score archived
    assert rows["g1c2"].s_val == pytest.approx(float(np.mean(table[2])))
    assert rows["g1c0"].s_val is None  # its estimate did not beat the incumbent: no whole-set score


def test_two_promotions_in_one_generation_are_archived_in_order(tmp_path) -> None:
    seed, table = _three_candidates(third_gap=0.08)
    assert paired_bound(table[1], table[2]).better
    out, objective, promotions, incumbents, _ = _generation(tmp_path, seed, table)
    assert [(p["harness_id"], p["incumbent_policy_id"], p["promoted"]) for p in promotions] == [
        ("g1c1", "seed", True), ("g1c2", "p-g1c1", True)]
    assert incumbents == ["seed", "p-g1c1", "p-g1c2"] and objective.told == incumbents
    assert out.incumbent.best.id == "p-g1c2" and out.incumbent is out.pairs[0]
    assert [p.harness_id for p in out.pairs][:3] == ["g1c2", "g1c1", "h0"]
    assert out.s_val_curve == [pytest.approx(float(np.mean(seed))), pytest.approx(float(np.mean(table[2])))]


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

    for key, value in (("sizes", [4]), ("sizes", [30, 20]), ("level", 1.5), ("survivors", 0), ("futility", 5.0),
                       ("stratum_level", 1.0)):
        cfg = Config()
        setattr(cfg.outer.race, key, value)
        with pytest.raises(ConfigError, match=f"outer.race.{key}"):
            validate(cfg)


def test_race_summary_counts_races_and_promotions(tmp_path) -> None:
    from evotrainer.browse import views

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
