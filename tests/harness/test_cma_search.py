"""The pycma wrapper: maximises, stays in bounds, survives non-finite scores, is deterministic."""

import math
import pickle

import numpy as np
import pytest

from evotrainer.harness import NONFINITE_FALLBACK, CMASearch


def _run(search: CMASearch, f, iterations: int) -> CMASearch:
    for _ in range(iterations):
        xs = search.ask()
        for x in xs:
            assert x.shape == (search.dim,)
            assert np.all(x >= search.low) and np.all(x <= search.high)
        search.tell(xs, [f(x) for x in xs])
    return search


def test_finds_interior_optimum_of_negated_sphere():
    opt = np.array([0.3, 0.7])
    s = _run(CMASearch(2, [0.5, 0.5], 0.25, 8, seed=0), lambda x: -float(np.sum((x - opt) ** 2)), 60)
    best_x, best = s.result
    assert np.max(np.abs(best_x - opt)) < 1e-2
    assert best <= 0 and best > -1e-4  # higher is better: the maximum of -|x - opt|^2 is 0
    assert np.max(np.abs(s.mean - opt)) < 1e-2
    assert np.all((best_x >= 0) & (best_x <= 1))


def test_maximises_not_minimises():
    # minimising this would go to x = 0; maximising goes to x = 0.8
    s = _run(CMASearch(2, [0.2, 0.2], 0.2, 8, seed=3), lambda x: 1.0 - float(np.sum((x - 0.8) ** 2)), 50)
    best_x, best = s.result
    np.testing.assert_allclose(best_x, [0.8, 0.8], atol=1e-2)
    assert best == pytest.approx(1.0, abs=1e-3)


def test_optimum_on_a_bound_is_returned_in_bounds():
    # increasing in x0 (optimum on the upper bound x0 = 1), interior optimum x1 = 0.4
    s = _run(CMASearch(2, [0.5, 0.5], 0.25, 8, seed=1), lambda x: float(x[0] - (x[1] - 0.4) ** 2), 60)
    best_x, _ = s.result
    assert 0.99 <= best_x[0] <= 1.0
    assert best_x[1] == pytest.approx(0.4, abs=1e-2)
    assert np.all(s.mean <= 1.0) and np.all(s.mean >= 0.0)


def test_general_bounds_lower_bound_optimum():
    s = _run(CMASearch(3, [0.0, 0.0, 0.0], 1.0, 8, seed=2, bounds=(-2.0, 3.0)), lambda x: -float(np.sum(x)), 60)
    best_x, _ = s.result
    assert np.all(best_x >= -2.0) and np.all(best_x <= -1.98)


def test_non_finite_scores_become_finite_penalty_before_pycma():
    s = CMASearch(2, [0.5, 0.5], 0.3, 6, seed=0)
    seen: list[list[float]] = []
    real_tell = s._es.tell

    def spy(solutions, values, *a, **k):
        seen.append(list(values))
        return real_tell(solutions, values, *a, **k)

    s._es.tell = spy
    xs = s.ask()
    s.tell(xs, [math.nan] * len(xs))  # nothing finite yet: the documented fallback
    assert seen[-1] == [-NONFINITE_FALLBACK] * len(xs)
    for _ in range(10):
        xs = s.ask()
        scores = [float(-np.sum((x - 0.5) ** 2)) for x in xs]
        scores[0], scores[1] = math.nan, math.inf
        s.tell(xs, scores)
        vals = seen[-1]
        assert all(math.isfinite(v) for v in vals)
        # the penalty is worse (a larger loss) than every finite score of the batch (the two penalised
        # candidates tie, so they reach pycma in a random order: compare the sorted losses)
        ordered = sorted(vals, reverse=True)
        assert ordered[0] == ordered[1] > max(ordered[2:])
    best_x, best = s.result
    assert math.isfinite(best) and np.all((best_x >= 0) & (best_x <= 1))


def test_one_dimensional_search():
    s = _run(CMASearch(1, [0.5], 0.25, 6, seed=4), lambda x: -float((x[0] - 0.8) ** 2), 40)
    best_x, _ = s.result
    assert best_x.shape == (1,)
    assert best_x[0] == pytest.approx(0.8, abs=1e-2)
    assert s.mean.shape == (1,)
    s.set_mean([0.1])
    assert s.mean[0] == pytest.approx(0.1, abs=1e-9)
    s.inject([[0.95]])
    assert s.ask()[0][0] == pytest.approx(0.95, abs=1e-9)


def test_same_seed_same_points_and_global_rng_untouched():
    def trace(seed):
        s = CMASearch(3, [0.5] * 3, 0.2, 5, seed=seed)
        out = []
        for _ in range(5):
            xs = s.ask()
            out.append(np.array(xs))
            s.tell(xs, [float(-np.sum(x)) for x in xs])
        return np.concatenate(out)

    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = trace(7)
    np.random.seed(999)  # pycma must not depend on the global numpy state
    b = trace(7)
    np.random.seed(123)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, trace(8))
    assert np.array_equal(np.random.get_state()[1], before)
    np.random.seed(0)
    b0 = trace(0)
    assert np.array_equal(b0, trace(0))  # seed 0 is an ordinary seed, not "from the clock"


def test_pickle_round_trip_continues_identically():
    s = _run(CMASearch(2, [0.5, 0.5], 0.25, 6, seed=5), lambda x: -float(np.sum((x - 0.3) ** 2)), 3)
    blob = pickle.dumps(s)
    a, b = pickle.loads(blob), pickle.loads(blob)
    for _ in range(3):
        xa, xb, xs = a.ask(), b.ask(), s.ask()
        assert all(np.array_equal(p, q) and np.array_equal(p, r) for p, q, r in zip(xa, xb, xs, strict=True))
        scores = [float(-np.sum(x)) for x in xa]
        a.tell(xa, scores)
        b.tell(xb, scores)
        s.tell(xs, scores)
    assert a.sigma == s.sigma and a.result[1] == s.result[1]


def test_sigma_shrink_floor_and_set_mean():
    s = CMASearch(2, [0.5, 0.5], 0.2, 6, seed=0, sigma_floor=0.05)
    s.shrink_sigma(0.5)
    assert s.sigma == pytest.approx(0.1)
    s.shrink_sigma(0.1)
    assert s.sigma == pytest.approx(0.05)  # floored
    _run(s, lambda x: -float(np.sum((x - 0.5) ** 2)), 30)
    assert s.sigma >= 0.05
    s.set_mean([0.9, 0.0])
    np.testing.assert_allclose(s.mean, [0.9, 0.0], atol=1e-9)
    xs = s.ask()
    assert np.mean([x[0] for x in xs]) > 0.7
    with pytest.raises(ValueError):
        s.shrink_sigma(1.5)


def test_tell_checks_candidates():
    s = CMASearch(2, [0.5, 0.5], 0.2, 4, seed=0)
    with pytest.raises(ValueError, match="ask"):
        s.tell([], [])
    xs = s.ask()
    with pytest.raises(ValueError):
        s.tell(xs[:2], [0.0, 0.0])
    with pytest.raises(ValueError, match="not returned"):
        s.tell([np.array([0.123, 0.456])] + xs[1:], [0.0] * 4)
    s.tell(list(reversed(xs)), [0.0, 1.0, 2.0, 3.0])  # any order
    best_x, best = s.result
    assert best == 3.0 and np.array_equal(best_x, xs[0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dim": 0}, {"x0": [2.0, 0.5]}, {"sigma0": 0.0}, {"popsize": 1}, {"bounds": (1.0, 0.0)},
        {"sigma_floor": -1.0}, {"x0": [0.5]},
    ],
)
def test_bad_arguments(kwargs):
    args = {"dim": 2, "x0": [0.5, 0.5], "sigma0": 0.2, "popsize": 4, "seed": 0} | kwargs
    with pytest.raises(ValueError):
        CMASearch(**args)


def test_stop_reports_bool(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = CMASearch(2, [0.5, 0.5], 0.2, 4, seed=0)
    assert s.stop() is False
    _run(s, lambda x: 1.0, 30)  # a flat score: pycma eventually stops (tolflatfitness / tolfun)
    assert s.stop() is True and s.stop_reasons
    assert not list(tmp_path.iterdir())  # silent: no outcmaes/ log files


def _flat_run(seed: int, tells: int = 120, popsize: int = 8) -> tuple[float, float]:
    """Tell all-equal scores; returns (share of tells whose new mean is nearest the first told candidate,
    mean over tells of its distance to the new mean divided by the other candidates' mean distance)."""
    s = CMASearch(3, [0.0, 0.0, 0.0], 1.0, popsize, seed=seed, bounds=(-1e3, 1e3))  # bounds never bind
    nearest_first, ratios = 0, []
    for _ in range(tells):
        xs = s.ask()
        s.tell(xs, [0.5] * popsize)
        dist = [float(np.linalg.norm(s.mean - x)) for x in xs]
        nearest_first += int(np.argmin(dist) == 0)
        ratios.append(dist[0] / float(np.mean(dist[1:])))
    return nearest_first / tells, float(np.mean(ratios))


def test_equal_scores_do_not_pull_the_mean_toward_the_first_told_candidate():
    # pycma's stable argsort gave the first told of equal scores the largest weight: before the random
    # tie-break the new mean was nearest candidate 0 in ~29 % of tells (1/8 expected) at ~0.56x the
    # others' distance; with it candidate 0 is like any other.
    for seed in (0, 1, 2):
        share, ratio = _flat_run(seed)
        assert share < 0.22, (seed, share)
        assert ratio > 0.85, (seed, ratio)


def test_tie_break_is_seeded_and_survives_pickling():
    def flat(s: CMASearch, n: int) -> list[np.ndarray]:
        out = []
        for _ in range(n):
            xs = s.ask()
            s.tell(xs, [1.0] * len(xs))
            out.append(s.mean)
        return out

    a, b = CMASearch(2, [0.5, 0.5], 0.2, 6, seed=7), CMASearch(2, [0.5, 0.5], 0.2, 6, seed=7)
    np.testing.assert_array_equal(flat(a, 5), flat(b, 5))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(flat(a, 3), flat(c, 3))
    del c.__dict__["_tie_rng"]  # a search pickled before the tie-break existed still loads and runs
    d = pickle.loads(pickle.dumps(c))
    assert len(flat(d, 2)) == 2
