"""The outer loop's candidate sources (issue 25): CMA-ES, a frozen harness, random harnesses."""

from __future__ import annotations

import numpy as np
import pytest

from evotrainer.config import Config, KnobSpec, validate
from evotrainer.errors import ConfigError
from evotrainer.harness import CMASearch, space_from_specs
from evotrainer.harness.candidates import (
    CANDIDATE_SOURCES,
    CandidateSource,
    FrozenHarness,
    RandomHarness,
    candidate_source,
)
from evotrainer.seeding import Seeds

X0 = np.array([0.2, 0.5, 0.9])


def _source(name: str, seed: int = 0, popsize: int = 4) -> CandidateSource:
    return candidate_source(name, x0=X0, sigma0=0.25, popsize=popsize, cma_seed=Seeds(seed).int("cma"),
                            rng=Seeds(seed).numpy("random_harness"), sigma_floor=0.02)


def test_every_configured_source_is_built_and_satisfies_the_protocol() -> None:
    kinds = {name: type(_source(name)) for name in CANDIDATE_SOURCES}
    assert kinds == {"coevolve": CMASearch, "frozen_harness": FrozenHarness, "random_harness": RandomHarness}
    assert all(isinstance(_source(name), CandidateSource) for name in CANDIDATE_SOURCES)
    with pytest.raises(ConfigError, match="outer.candidate_source"):
        _source("annealing")


def test_frozen_returns_the_start_harness_every_time_whatever_it_is_told() -> None:
    s = _source("frozen_harness")
    for _ in range(3):
        xs = s.ask()
        assert len(xs) == 4 and all(np.array_equal(x, X0) for x in xs)
        xs[0][0] = 0.77  # a caller editing a candidate does not move the harness
        s.tell(xs, [1.0, -1.0, float("nan"), 0.5])
        s.set_mean([0.9, 0.9, 0.9])  # a rollback's move is ignored
        s.shrink_sigma(0.5)
    assert np.array_equal(s.ask()[0], X0) and s.sigma == 0.0 and s.stop_reasons == {}


def test_random_stays_inside_the_bounds_is_seeded_and_ignores_the_scores() -> None:
    a, b, c = _source("random_harness", seed=3), _source("random_harness", seed=3), _source("random_harness", seed=4)
    draws_a, draws_c = [], []
    for _ in range(25):
        xs = a.ask()
        a.tell(xs, [float(x.sum()) for x in xs])  # told scores change nothing
        a.set_mean(X0)
        draws_a += xs
        draws_c += c.ask()
    pts = np.array(draws_a)  # (100, 3)
    assert pts.shape == (100, 3) and pts.min() >= 0.0 and pts.max() <= 1.0
    assert pts.min(axis=0).max() < 0.1 and pts.max(axis=0).min() > 0.9  # spread over the whole box
    same = [x for _ in range(25) for x in b.ask()]  # the same seed, never told: the same points
    assert all(np.array_equal(x, y) for x, y in zip(draws_a, same, strict=True))
    assert not np.allclose(pts, np.array(draws_c))  # another seed, other points
    assert abs(pts.mean() - 0.5) < 0.08


def test_random_points_decode_inside_every_knob_bound() -> None:
    specs = {"length": KnobSpec(80.0, 600.0, integer=True), "noise": KnobSpec(0.0, 0.5)}
    space = space_from_specs(specs, {"length": (40.0, 2000.0), "noise": (0.0, 1.0)}, {"length": 220, "noise": 0.1},
                             {"completeness": 0.5, "format": 0.5})
    s = RandomHarness(space.dim, 16, np.random.default_rng(0))
    for x in s.ask():
        h = space.decode(x)
        assert 80.0 <= h.difficulty["length"] <= 600.0 and 0.0 <= h.difficulty["noise"] <= 0.5
        assert sum(h.reward_weights.values()) == pytest.approx(1.0)


def test_coevolve_is_todays_cma_search_with_the_same_seed() -> None:
    s, ref = _source("coevolve", seed=5), CMASearch(3, X0, 0.25, 4, seed=Seeds(5).int("cma"), sigma_floor=0.02)
    assert all(np.array_equal(x, y) for x, y in zip(s.ask(), ref.ask(), strict=True))


def test_the_config_keys_are_checked() -> None:
    cfg = Config()
    cfg.outer.candidate_source = "frozen"
    with pytest.raises(ConfigError, match="outer.candidate_source"):
        validate(cfg)
    cfg = Config()
    cfg.outer.budget.rollouts = 0
    with pytest.raises(ConfigError, match="outer.budget.rollouts"):
        validate(cfg)
    cfg = Config()
    cfg.task.transfer_limit = 0
    with pytest.raises(ConfigError, match="task.transfer_limit"):
        validate(cfg)
