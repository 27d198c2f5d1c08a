"""The outer loop against synthetic objectives: rollback, damping, budget, failures, 1-D harness."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.config import Config, KnobSpec, OuterConfig, to_config
from evotrainer.errors import ConfigError
from evotrainer.harness import CMASearch, space_from_specs
from evotrainer.harness.objective import CandidateResult, FullScore
from evotrainer.run.outer_loop import run_outer_loop

BOUNDS = {"length": (80.0, 900.0), "noise": (0.0, 0.6)}
INIT = {"length": 220.0, "noise": 0.1}
WEIGHTS = {"completeness": 0.5, "format": 0.5}
SPECS = {"length": KnobSpec(80.0, 900.0, log=True, integer=True), "noise": KnobSpec(0.0, 0.6)}


@dataclass(frozen=True)
class Pol:
    id: str


class Synthetic:
    """A synthetic objective: ``screen(g, j, harness)`` gives the race estimate of candidate j of gen g.

    The whole-set score of a candidate is its race estimate + ``full_offset`` (the estimate's error). Records
    every call.
    """

    def __init__(self, screen, *, full_offset=0.01, tokens=0, gain=None, clock=None, step_s=0.0):
        self.screen, self.full_offset, self.tokens, self.gain = screen, full_offset, tokens, gain
        self.calls: list[tuple[str, object, tuple]] = []
        self.clock, self.step_s = clock, step_s

    def __call__(self, harness, population, harness_id, outer_generation):
        j = int(harness_id.split("c")[1])
        self.calls.append((harness_id, harness, tuple(population)))
        if self.clock is not None:
            self.clock.t += self.step_s
        s = self.screen(outer_generation, j, harness)
        best = Pol(f"p-{harness_id}")
        full = FullScore(None if s is None or not math.isfinite(s) else s + self.full_offset)
        return CandidateResult(best=best, population=(best, *tuple(population)[:1]), race_estimate=s,
                               full_score=lambda: full, inner_gain=self.gain, best_fitness=0.5,
                               generated_tokens=self.tokens, train_tokens=self.tokens)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _setup(tmp_path: Path, *, knobs=(), evolve_weights=True, popsize=2, **outer):
    space = space_from_specs(SPECS, BOUNDS, INIT, WEIGHTS, knobs=list(knobs), evolve_reward_weights=evolve_weights)
    cfg = replace(OuterConfig(), popsize=popsize, **outer)
    search = CMASearch(space.dim, space.initial_vector(), cfg.sigma0, cfg.popsize, seed=3,
                       sigma_floor=cfg.sigma_floor)
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run")
    rec.start(0, {})
    start = CandidateResult(best=Pol("seed"), population=(Pol("seed"), Pol("seed2")), race_estimate=None,
                            full_score=lambda: FullScore(0.5))
    return space, cfg, search, store, rec, start


def _run(tmp_path, objective, **kw):
    clock = kw.pop("clock", None)
    space, cfg, search, store, rec, start = _setup(tmp_path, **kw)
    extra = {"clock": clock, "started_at": 0.0} if clock is not None else {}
    out = run_outer_loop(objective, start, space.decode(space.initial_vector()), space, search, cfg, rec, **extra)
    return out, store, search, space


def test_oscillating_objective_rolls_back_to_best_archived_pair(tmp_path: Path) -> None:
    objective = Synthetic(lambda g, j, h: (0.6 if g % 2 else 0.4) + 0.001 * j)
    sigma0 = OuterConfig().sigma0
    out, store, _, _ = _run(tmp_path, objective, generations=5)
    events = store.events("run", kind="rollback")
    assert events and events[0].payload["cause"] == "oscillation"
    assert events[0].payload["sigma"] < sigma0
    assert out.rollbacks and out.rollbacks[0]["cause"] == "oscillation"
    # the final incumbent is the best archived pair, and nothing scored on the whole set beat it
    assert out.incumbent is out.pairs[0]
    whole = [c.s_val for c in store.harness_candidates("run") if c.s_val is not None]
    assert out.incumbent.s_val == pytest.approx(max([0.5, *whole]))
    # after the rollback the run resumed from the restored pair's population and harness
    g = events[0].payload["outer_generation"]
    resumed = [c for c in objective.calls if c[0].startswith(f"g{g + 1}c")]
    assert resumed and resumed[0][2] == out.pairs[0].population
    # the incumbent curve is logged per outer generation and never ends below its maximum
    gens = store.events("run", kind="outer_generation")
    assert [e.payload["outer_generation"] for e in gens] == list(range(1, len(gens) + 1))
    assert all({"current_s_val", "incumbent_s_val"} <= set(e.payload) for e in gens)
    curve = out.s_val_curve
    assert curve == sorted(curve) and curve[-1] == max(curve)
    store.close()


def test_regression_triggers_rollback_with_cause(tmp_path: Path) -> None:
    objective = Synthetic(lambda g, j, h: 0.7 if g == 1 else 0.45)
    out, store, _, _ = _run(tmp_path, objective, generations=4)
    (first, *_) = store.events("run", kind="rollback")
    assert first.payload["cause"] == "regression" and first.payload["outer_generation"] == 3
    assert first.payload["restored_harness_id"] == out.incumbent.harness_id
    assert out.incumbent.s_val == pytest.approx(0.71)
    store.close()


@pytest.mark.parametrize(("limit", "value", "evaluations"), [
    ("evaluations", 3, 3), ("tokens", 250, 3), ("seconds", 30.0, 3), ("train_tokens", 250, 3),
    ("seconds", 35.0, 3),  # candidates of 10 s: a fourth, started at 30 s, would end past 35 s
])
def test_budget_limits_stop_at_the_right_point(tmp_path: Path, limit: str, value, evaluations: int) -> None:
    clock = FakeClock()
    objective = Synthetic(lambda g, j, h: 0.5 + 0.01 * g, tokens=100, clock=clock, step_s=10.0)
    budget = replace(OuterConfig().budget, **{limit: value})
    out, store, _, _ = _run(tmp_path, objective, generations=10, budget=budget, clock=clock)
    assert out.stop.key == f"outer.budget.{limit}"
    assert out.usage.evaluations == evaluations == len(objective.calls)
    (summary_like,) = [e for e in store.events("run", kind="outer_generation") if e.payload["outer_generation"] == 2]
    assert summary_like.payload["incumbent_s_val"] >= 0.5
    store.close()


def test_plateau_and_generation_limit_stop_reasons(tmp_path: Path) -> None:
    out, store, _, _ = _run(tmp_path, Synthetic(lambda g, j, h: 0.3), generations=10, patience=2, min_gain=0.01)
    assert out.stop.key == "outer.patience" and len(out.s_val_curve) == 3
    store.close()
    out2, store2, _, _ = _run(tmp_path / "b", Synthetic(lambda g, j, h: 0.5 + 0.1 * g), generations=2)
    assert out2.stop.key == "outer.generations" and out2.usage.evaluations == 4
    store2.close()


def test_crashing_and_nan_candidates_get_the_worst_penalty(tmp_path: Path) -> None:
    def screen(g, j, h):
        if j == 0:
            raise RuntimeError("boom")
        return float("nan") if g == 2 else 0.55 + 0.01 * g

    out, store, search, _ = _run(tmp_path, Synthetic(screen), generations=3, popsize=3)
    rows = store.harness_candidates("run")
    failed = [r for r in rows if r.status == "failed"]
    assert len(failed) == 3 + 2  # j=0 crashes in every generation; j=1, 2 of generation 2 give NaN
    assert any(e.payload["error"].startswith("RuntimeError") for e in store.events("run", kind="candidate_failed"))
    assert np.all(np.isfinite(search.mean)) and math.isfinite(search.sigma)
    assert out.incumbent.s_val == pytest.approx(0.55 + 0.03 + 0.01)
    store.close()


def test_one_dimensional_harness_runs_and_stays_in_bounds(tmp_path: Path) -> None:
    objective = Synthetic(lambda g, j, h: 1.0 - abs(h.difficulty["length"] - 500) / 1000)
    out, store, _, space = _run(tmp_path, objective, knobs=["length"], evolve_weights=False, generations=4,
                                sigma0=0.6, damping=1.0)
    assert space.dim == 1 and space.names == ("length",)
    for _, h, _ in objective.calls:
        assert 80 <= h.difficulty["length"] <= 900 and float(h.difficulty["length"]).is_integer()
        assert h.reward_weights == pytest.approx({"completeness": 0.5, "format": 0.5})
        assert all(0.0 <= v <= 1.0 for v in h.vector)
    assert out.usage.evaluations == 8
    store.close()


def test_applied_harness_is_a_damped_step_toward_the_proposal(tmp_path: Path) -> None:
    objective = Synthetic(lambda g, j, h: 0.5)
    out, store, _, space = _run(tmp_path, objective, generations=1, damping=0.25, sigma0=0.5)
    start = space.initial_vector()
    for row in store.harness_candidates("run"):
        proposal = np.asarray(row.values["proposal"])
        assert np.allclose(row.vector, start + 0.25 * (proposal - start))
        assert np.all((np.asarray(row.vector) >= 0) & (np.asarray(row.vector) <= 1))
    store.close()


def test_reward_hacking_is_flagged_and_penalised(tmp_path: Path) -> None:
    # inner fitness rises by 0.2 while the screening S_val falls below the starting population's
    objective = Synthetic(lambda g, j, h: 0.45 if j == 0 else 0.5, gain=0.2)
    out, store, _, _ = _run(tmp_path, objective, generations=1)
    rows = {r.harness_id: r for r in store.harness_candidates("run")}
    assert rows["g1c0"].values["flagged_reward_hacking"] is True
    assert rows["g1c0"].values["told"] == pytest.approx(0.45 - OuterConfig().hack_check.penalty)
    assert rows["g1c0"].race_estimate == pytest.approx(0.45)  # the archived estimate is not altered
    assert rows["g1c1"].values["flagged_reward_hacking"] is False
    assert [e.payload["harness_id"] for e in store.events("run", kind="reward_hacking")] == ["g1c0"]
    store.close()


def test_config_one_dimensional_and_bad_values() -> None:
    dot = ["outer.knobs=[length]", "outer.evolve_reward_weights=false"]
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(dot)))
    assert cfg.outer.knobs == ["length"] and not cfg.outer.evolve_reward_weights
    for bad, key in [("outer.knobs=[nope]", "outer.knobs"), ("outer.damping=0", "outer.damping"),
                     ("outer.space.noise.high=-1", "outer.space.noise.low"),
                     ("outer.rollback.window=1", "outer.rollback.window"),
                     ("outer.budget.tokens=0", "outer.budget.tokens")]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist([bad])))
    with pytest.raises(ConfigError, match=r"outer\.space\.length"):
        space_from_specs({"length": KnobSpec(10.0, 900.0)}, BOUNDS, INIT, WEIGHTS)
