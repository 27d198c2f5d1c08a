"""Harness space: vector <-> named values, simplex weights, validation."""

import math
import pickle

import numpy as np
import pytest

from evotrainer.config_schema import KnobSpec
from evotrainer.errors import ConfigError
from evotrainer.harness import Harness, HarnessParam, HarnessSpace, space_from_specs, weights_to_logits

SPECS = {"length": KnobSpec(80.0, 600.0), "speakers": KnobSpec(2.0, 6.0, integer=True), "noise": KnobSpec(0.0, 0.5)}
BOUNDS = {name: (spec.low, spec.high) for name, spec in SPECS.items()}
INIT = {"length": 220.0, "speakers": 3.0, "noise": 0.1}
WEIGHTS = {"completeness": 0.5, "format": 0.2, "action_count": 0.3, "action_f1": 0.0}


def _space() -> HarnessSpace:
    return space_from_specs(
        SPECS, BOUNDS, INIT, WEIGHTS,
        extras={"pass_threshold": KnobSpec(0.3, 0.9, init=0.6), "lr": KnobSpec(1e-5, 1e-3, log=True, init=1e-4)},
    )


def test_layout_and_initial_vector_in_unit_box():
    space = _space()
    assert space.dim == 3 + 4 + 2
    assert space.names[:3] == ("length", "speakers", "noise")
    assert space.names_of("reward_weight") == tuple(WEIGHTS)
    x0 = space.initial_vector()
    assert x0.shape == (space.dim,)
    assert np.all((x0 >= 0) & (x0 <= 1))


def test_decode_encode_round_trip_and_units():
    space = _space()
    x0 = space.initial_vector()
    h = space.decode(x0)
    assert isinstance(h, Harness)
    assert h.difficulty["length"] == pytest.approx(220.0)
    assert h.difficulty["speakers"] == 3 and isinstance(h.difficulty["speakers"], int)
    assert h.extras["pass_threshold"] == pytest.approx(0.6)
    assert h.extras["lr"] == pytest.approx(1e-4)
    assert h.vector == tuple(x0)
    np.testing.assert_allclose(space.encode(h.values), x0, atol=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.uniform(0, 1, space.dim)
        h = space.decode(x)
        for p in space.params:
            assert p.low <= h.values[p.name] <= p.high
        x2 = space.encode(h.values)
        keep = [i for i, p in enumerate(space.params) if not p.integer]
        np.testing.assert_allclose(x2[keep], x[keep], atol=1e-9)


def test_integer_knob_rounded_only_when_decoded():
    space = _space()
    i = space.names.index("speakers")
    x = space.initial_vector()
    x[i] = 0.4  # 2 + 0.4 * 4 = 3.6
    h = space.decode(x)
    assert h.difficulty["speakers"] == 4
    assert h.vector[i] == pytest.approx(0.4)


def test_reward_weights_on_simplex_and_close_to_init():
    space = _space()
    h = space.decode(space.initial_vector())
    w = h.reward_weights
    assert set(w) == set(WEIGHTS)
    assert math.fsum(w.values()) == pytest.approx(1.0)
    assert all(0 < v < 1 for v in w.values())
    for name in ("completeness", "format", "action_count"):
        assert w[name] == pytest.approx(WEIGHTS[name], abs=0.03)
    assert w["action_f1"] < 0.05  # a zero weight lands on the lower logit bound
    for x in (np.zeros(space.dim), np.ones(space.dim), np.random.default_rng(1).uniform(size=space.dim)):
        assert math.fsum(space.decode(x).reward_weights.values()) == pytest.approx(1.0)


def test_weights_to_logits_centred():
    logits = weights_to_logits({"a": 1.0, "b": 1.0}, -2, 2)
    assert logits == {"a": 0.0, "b": 0.0}
    with pytest.raises(ConfigError, match="task.reward_weights"):
        weights_to_logits({"a": 0.0}, -2, 2)


def test_decode_clips_and_rejects_bad_vectors():
    space = _space()
    h = space.decode(np.full(space.dim, 1.5))
    assert h.difficulty["length"] == 600.0
    with pytest.raises(ConfigError):
        space.decode(np.zeros(space.dim + 1))
    with pytest.raises(ConfigError):
        space.decode(np.full(space.dim, np.nan))


@pytest.mark.parametrize(
    ("param", "key"),
    [
        (HarnessParam("a", 1.0, 1.0, 1.0), "harness.params.a.low"),
        (HarnessParam("a", 2.0, 1.0, 1.5), "harness.params.a.low"),
        (HarnessParam("a", 0.0, 1.0, 2.0), "harness.params.a.init"),
        (HarnessParam("a", 0.0, 1.0, 0.5, kind="bogus"), "harness.params.a.kind"),  # type: ignore[arg-type]
        (HarnessParam("a", 0.0, 1.0, 0.5, log=True), "harness.params.a.low"),
        (HarnessParam("a", 0.0, math.inf, 0.5), "harness.params.a.high"),
        (HarnessParam("a", -1.0, 1.0, 0.0, kind="reward_weight", integer=True), "harness.params.a.kind"),
    ],
)
def test_config_errors_name_the_key(param, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        HarnessSpace((param,))


def test_duplicate_and_empty_and_unknown():
    p = HarnessParam("a", 0.0, 1.0, 0.5)
    with pytest.raises(ConfigError, match=r"harness\.params\.a\.name"):
        HarnessSpace((p, p))
    with pytest.raises(ConfigError):
        HarnessSpace(())
    with pytest.raises(ConfigError, match="outer.knobs"):
        space_from_specs(SPECS, BOUNDS, INIT, WEIGHTS, knobs=["nope"])
    space = HarnessSpace((p,))
    with pytest.raises(ConfigError, match=r"harness\.values\.a"):
        space.encode({"a": 2.0})
    with pytest.raises(ConfigError, match="unknown"):
        space.encode({"a": 0.5, "b": 0.1})
    with pytest.raises(ConfigError, match="missing"):
        space.encode({})


def test_knob_subset_and_one_dimensional_space():
    space = space_from_specs(SPECS, BOUNDS, INIT, {"only": 1.0}, knobs=["noise"])
    assert space.names == ("noise", "only")
    one = HarnessSpace((HarnessParam("noise", 0.0, 0.5, 0.1),))
    assert one.dim == 1
    h = one.decode([0.5])
    assert h.difficulty == {"noise": 0.25} and h.reward_weights == {}


def test_space_and_harness_pickle():
    space = _space()
    h = space.decode(space.initial_vector())
    assert pickle.loads(pickle.dumps(space)).names == space.names
    assert pickle.loads(pickle.dumps(h)) == h


def test_ema_toward_is_a_damped_clipped_step():
    from evotrainer.harness import ema_toward

    np.testing.assert_allclose(ema_toward([0.0, 1.0], [1.0, 0.0], 0.25), [0.25, 0.75])
    np.testing.assert_allclose(ema_toward([0.2], [0.8], 1.0), [0.8])
    with pytest.raises(ConfigError, match="outer.damping"):
        ema_toward([0.2], [0.8], 1.5)
    with pytest.raises(ConfigError):
        ema_toward([0.2], [0.8, 0.1], 0.5)
