"""The harness space: named bounded parameters <-> the normalised vector CMA-ES searches.

A *harness* is what the outer loop evolves: the task generator's difficulty knobs, the reward weights,
extra knobs of the training loop (e.g. a pass threshold or a replay ratio), and strategy knobs of the inner
loop's search (an ``inner.*`` setting such as an operator share or the mutator's temperature, applied to that
candidate's inner loop; ``outer.strategy``). Every parameter is a
:class:`HarnessParam` with natural-unit bounds. CMA-ES never sees natural units: it searches
``x in [0, 1]^d``, one coordinate per parameter in declaration order, and :meth:`HarnessSpace.decode`
maps a point to named values:

* ``difficulty``, ``extra`` and ``strategy`` params: ``value = low + x * (high - low)`` (or geometric interpolation
  when ``log=True``); ``integer=True`` values are rounded half-up only when decoded, never in ``x``,
  so the search stays continuous.
* ``reward_weight`` params: ``x`` maps linearly to an unconstrained logit in ``[low, high]`` (e.g.
  ``[-2, 2]``); the weights are the softmax of the logits over all reward-weight params, so they lie on
  the simplex (each in (0, 1), summing to 1). With logit bounds ``[-b, b]`` the largest weight ratio
  the search can express is ``exp(2b)``.
* fixed reward weights: a space may carry no ``reward_weight`` param and instead fixed weights
  (``fixed_reward_weights``, normalised onto the simplex); every decoded harness then applies them.
  With one knob and fixed weights the harness is one-dimensional.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from evotrainer.errors import ConfigError

__all__ = ["KINDS", "Harness", "HarnessParam", "HarnessSpace", "ema_toward", "space_from_specs",
           "weights_to_logits"]

Kind = Literal["difficulty", "reward_weight", "extra", "strategy"]
KINDS: tuple[str, ...] = ("difficulty", "reward_weight", "extra", "strategy")
"""The parameter kinds a harness knows, in the order their dicts appear on :class:`Harness`."""

_MIN_INIT_WEIGHT = 1e-6
"""A zero initial reward weight is treated as this before taking its log (then clipped to the bound)."""


@dataclass(frozen=True)
class HarnessParam:
    """One named, bounded harness parameter.

    Attributes:
        name: unique in its space; the key of the param in every dict of a :class:`Harness`.
        low: lower bound in natural units (a logit for ``reward_weight``); ``low < high``.
        high: upper bound in natural units.
        init: the starting value, ``low <= init <= high``.
        kind: "difficulty" (task-generator knob), "reward_weight" (logit of a reward component's
            weight), "extra" (any other training-loop knob: pass threshold, replay ratio, ...) or
            "strategy" (an ``inner.*`` setting of the candidate's inner loop, named as that key).
        integer: round the decoded value half-up to an int (not for reward weights).
        log: interpolate geometrically between ``low`` and ``high`` (needs ``low > 0``; not for
            reward weights).
    """

    name: str
    low: float
    high: float
    init: float
    kind: Kind = "difficulty"
    integer: bool = False
    log: bool = False

    def validate(self) -> None:
        """Raise ConfigError naming ``harness.params.<name>.<field>`` when the param is inconsistent."""
        key = f"harness.params.{self.name}"
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"config key '{key}.name': expected a non-empty string, got {self.name!r}")
        if self.kind not in KINDS:
            raise ConfigError(f"config key '{key}.kind': expected one of {KINDS}, got {self.kind!r}")
        for fld in ("low", "high", "init"):
            val = getattr(self, fld)
            if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val):
                raise ConfigError(f"config key '{key}.{fld}': expected a finite number, got {val!r}")
        if not self.low < self.high:
            raise ConfigError(
                f"config key '{key}.low': expected low < high, got low={self.low!r}, high={self.high!r}"
            )
        if not self.low <= self.init <= self.high:
            raise ConfigError(
                f"config key '{key}.init': expected a value in [{self.low}, {self.high}], got {self.init!r}"
            )
        if self.kind == "reward_weight" and (self.integer or self.log):
            raise ConfigError(
                f"config key '{key}.kind': a reward_weight param is a logit; integer/log do not apply"
            )
        if self.log and self.low <= 0:
            raise ConfigError(f"config key '{key}.low': log scale needs low > 0, got {self.low!r}")

    def to_unit(self, value: float) -> float:
        """Natural value -> coordinate in [0, 1] (no clipping; caller checks bounds)."""
        if self.log:
            return (math.log(value) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (value - self.low) / (self.high - self.low)

    def from_unit(self, u: float) -> float:
        """Coordinate in [0, 1] -> natural value (unrounded), clipped into ``[low, high]``."""
        u = min(1.0, max(0.0, float(u)))
        if self.log:
            val = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            val = self.low + u * (self.high - self.low)
        return min(self.high, max(self.low, val))


@dataclass(frozen=True)
class Harness:
    """A decoded harness: what one outer-loop candidate applies.

    Attributes:
        values: every param's applied value by name, natural units (difficulty / extra values rounded
            when ``integer``; reward-weight params give their logit).
        difficulty: the task-generator knobs, by name (pass to ``TaskFamily.generate``).
        reward_weights: softmax of the reward-weight logits, by name; each in (0, 1), sum 1.
        extras: the other training-loop knobs, by name.
        vector: the normalised search point it was decoded from, each coordinate in [0, 1].
        strategy: the inner-loop settings this candidate's inner loop runs with, by ``inner.*`` key
            (:meth:`~evotrainer.search.inner_config.InnerConfig.with_strategy`); empty = the run's own.
    """

    values: dict[str, float]
    difficulty: dict[str, float]
    reward_weights: dict[str, float]
    extras: dict[str, float]
    vector: tuple[float, ...]
    strategy: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"difficulty", "reward_weights", "extras", "values"}`` (for the archive), with
        ``"strategy"`` too when the harness has strategy knobs (a harness without them archives as before)."""
        out: dict[str, Any] = {
            "difficulty": dict(self.difficulty),
            "reward_weights": dict(self.reward_weights),
            "extras": dict(self.extras),
            "values": dict(self.values),
        }
        if self.strategy:
            out["strategy"] = dict(self.strategy)
        return out


def _round_half_up(v: float) -> int:
    return int(math.floor(v + 0.5))


def _softmax(logits: Sequence[float]) -> list[float]:
    if not logits:
        return []
    top = max(logits)
    exps = [math.exp(v - top) for v in logits]
    total = sum(exps)
    return [e / total for e in exps]


@dataclass(frozen=True)
class HarnessSpace:
    """An ordered set of harness params and the map between search vectors and named values.

    The search vector ``x`` has shape ``(dim,)``, one coordinate per param in ``params`` order, each in
    [0, 1]; it is what :class:`~evotrainer.harness.cma_search.CMASearch` searches with bounds (0, 1).

    Raises:
        ConfigError: on construction, when a param is inconsistent (``low >= high``, ``init`` outside
            bounds, unknown kind, ...) or two params share a name; the message names
            ``harness.params.<name>.<field>``.
    """

    params: tuple[HarnessParam, ...]
    fixed_reward_weights: Mapping[str, float] = field(default_factory=dict)
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        params = tuple(self.params)
        object.__setattr__(self, "params", params)
        if not params:
            raise ConfigError("config key 'harness.params': expected at least one parameter, got none")
        fixed = dict(self.fixed_reward_weights)
        if fixed:
            if any(p.kind == "reward_weight" for p in params if isinstance(p, HarnessParam)):
                raise ConfigError("config key 'outer.evolve_reward_weights': fixed reward weights and "
                                  "reward_weight params exclude each other")
            total = sum(fixed.values())  # weights checked once (evotrainer.tasks.reward_weights)
            fixed = {k: float(v) / total for k, v in fixed.items()}
        object.__setattr__(self, "fixed_reward_weights", fixed)
        index: dict[str, int] = {}
        for i, p in enumerate(params):
            if not isinstance(p, HarnessParam):
                raise ConfigError(f"config key 'harness.params[{i}]': expected a HarnessParam, got {p!r}")
            p.validate()
            if p.name in index:
                raise ConfigError(f"config key 'harness.params.{p.name}.name': duplicate parameter name")
            index[p.name] = i
        object.__setattr__(self, "_index", index)

    @property
    def dim(self) -> int:
        """Length of the search vector (number of params), >= 1."""
        return len(self.params)

    @property
    def names(self) -> tuple[str, ...]:
        """Param names in search-vector order."""
        return tuple(p.name for p in self.params)

    def names_of(self, kind: str) -> tuple[str, ...]:
        """Names of the params of ``kind`` (one of :data:`KINDS`), in order."""
        return tuple(p.name for p in self.params if p.kind == kind)

    def initial_values(self) -> dict[str, float]:
        """Every param's ``init``, by name (natural units; logits for reward weights)."""
        return {p.name: float(p.init) for p in self.params}

    def initial_vector(self) -> np.ndarray:
        """``encode(initial_values())``: shape (dim,), each in [0, 1]."""
        return self.encode(self.initial_values())

    def decode(self, x: Sequence[float] | np.ndarray) -> Harness:
        """Map a search point to a :class:`Harness`.

        Args:
            x: shape (dim,); coordinates are clipped into [0, 1] first (CMASearch already returns
                in-bounds points; clipping only absorbs float noise).

        Raises:
            ConfigError: ``x`` has the wrong shape or a non-finite coordinate.
        """
        arr = np.asarray(x, dtype=float).reshape(-1)
        if arr.shape != (self.dim,):
            raise ConfigError(f"harness vector: expected shape ({self.dim},), got {np.shape(x)}")
        if not np.all(np.isfinite(arr)):
            raise ConfigError(f"harness vector: expected finite coordinates, got {arr.tolist()}")
        arr = np.clip(arr, 0.0, 1.0)
        values: dict[str, float] = {}
        for p, u in zip(self.params, arr, strict=True):
            v = p.from_unit(float(u))
            values[p.name] = _round_half_up(v) if p.integer else v
        rw_names = self.names_of("reward_weight")
        weights = _softmax([values[n] for n in rw_names])
        reward_weights = dict(zip(rw_names, weights, strict=True)) if rw_names else dict(self.fixed_reward_weights)
        return Harness(
            values=values,
            difficulty={n: values[n] for n in self.names_of("difficulty")},
            reward_weights=reward_weights,
            extras={n: values[n] for n in self.names_of("extra")},
            vector=tuple(float(u) for u in arr),
            strategy={n: values[n] for n in self.names_of("strategy")},
        )

    def encode(self, values: Mapping[str, float]) -> np.ndarray:
        """Map named natural values (logits for reward weights) to a search point.

        Inverse of :meth:`decode` up to the rounding of integer params.

        Args:
            values: one finite value per param name, each inside that param's ``[low, high]``.

        Returns:
            shape (dim,), each coordinate in [0, 1].

        Raises:
            ConfigError: a name missing or unknown, or a value non-finite or out of bounds; the
                message names ``harness.values.<name>``.
        """
        unknown = sorted(set(values) - set(self._index))
        if unknown:
            raise ConfigError(f"config key 'harness.values': unknown parameter(s) {unknown}; known {self.names}")
        out = np.empty(self.dim, dtype=float)
        for i, p in enumerate(self.params):
            if p.name not in values:
                raise ConfigError(f"config key 'harness.values.{p.name}': missing")
            v = values[p.name]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"config key 'harness.values.{p.name}': expected a finite number, got {v!r}")
            if not p.low <= v <= p.high:
                raise ConfigError(
                    f"config key 'harness.values.{p.name}': expected a value in [{p.low}, {p.high}], got {v!r}"
                )
            out[i] = min(1.0, max(0.0, p.to_unit(float(v))))
        return out


def weights_to_logits(
    weights: Mapping[str, float], low: float, high: float
) -> dict[str, float]:
    """Initial reward weights -> centred logits clipped into ``[low, high]``.

    ``logit_i = log(max(w_i, 1e-6)) - mean_j(log w_j over w_j > 0)``, then clipped, so that the
    softmax of the logits reproduces the weights when their ratios fit ``exp(high - low)``; a zero
    weight lands on ``low`` (the smallest weight the search can express).

    ``weights`` passed :func:`~evotrainer.tasks.reward_weights.check_reward_weights` (finite, >= 0, one > 0);
    no positive weight raises ConfigError.
    """
    positive = [math.log(w) for w in weights.values() if w > 0]
    if not positive:
        raise ConfigError(f"config key 'task.reward_weights': expected at least one weight > 0, got {dict(weights)}")
    centre = sum(positive) / len(positive)
    return {
        name: min(high, max(low, math.log(max(float(w), _MIN_INIT_WEIGHT)) - centre))
        for name, w in weights.items()
    }


def space_from_specs(
    specs: Mapping[str, Any],
    family_bounds: Mapping[str, tuple[float, float]],
    difficulty_init: Mapping[str, float],
    reward_init_weights: Mapping[str, float],
    *,
    knobs: Sequence[str] = (),
    evolve_reward_weights: bool = True,
    reward_logit_bounds: tuple[float, float] = (-2.0, 2.0),
    extras: Mapping[str, Any] | None = None,
    strategy: Mapping[str, Any] | None = None,
) -> HarnessSpace:
    """The harness space named in config (``outer.space``, ``outer.knobs``, ``outer.extras``, ``outer.strategy``).

    Parameter order: the chosen difficulty knobs (``knobs`` order, or ``specs`` order when empty), then
    one logit per reward component (unless ``evolve_reward_weights`` is false: then the weights are
    fixed at ``reward_init_weights`` normalised), then the extra knobs, then the strategy knobs.

    Args:
        specs: knob name -> an object with ``low``, ``high``, ``log``, ``integer`` (e.g.
            ``config.KnobSpec``); natural units, inside ``family_bounds``.
        family_bounds: what the task generator accepts (``FamilySpec.difficulty_bounds``).
        difficulty_init: each knob's start value (clipped into its spec's bounds).
        reward_init_weights: starting (or fixed) reward weights by component, each >= 0.
        knobs: difficulty knobs the harness moves; empty = every knob of ``specs``. May be empty with
            ``evolve_reward_weights`` true (a reward-weights-only harness).
        evolve_reward_weights: false fixes the weights (no reward-weight coordinate).
        reward_logit_bounds: (low, high) of every reward logit.
        extras: name -> spec with ``init`` as well (kind "extra": a pass threshold, a replay ratio, ...).
        strategy: ``inner.*`` key -> spec with ``init`` (kind "strategy"); which keys and ranges are valid is
            the inner loop's to say (``config.validate`` checks them against ``InnerConfig``'s strategy keys).

    Raises:
        ConfigError: an unknown knob, bounds outside the generator's, bad scaling, a missing init, or
            an empty harness; the message names the ``outer.*`` key.
    """
    chosen = list(knobs) if knobs else list(specs)
    params: list[HarnessParam] = []
    for name in chosen:
        if name not in specs:
            raise ConfigError(f"config key 'outer.knobs': unknown knob {name!r}; known {sorted(specs)}")
        if name not in family_bounds:
            raise ConfigError(f"config key 'outer.space.{name}': the task family has no such knob; "
                              f"known {sorted(family_bounds)}")
        spec = specs[name]
        flo, fhi = (float(b) for b in family_bounds[name])
        low, high = float(spec.low), float(spec.high)
        if low < flo or high > fhi:
            raise ConfigError(f"config key 'outer.space.{name}': bounds [{low:g}, {high:g}] must lie inside "
                              f"the generator's [{flo:g}, {fhi:g}]")
        if name not in difficulty_init:
            raise ConfigError(f"config key 'task.difficulty.{name}': missing initial value")
        init = min(high, max(low, float(difficulty_init[name])))
        params.append(HarnessParam(name, low, high, init, "difficulty", integer=bool(spec.integer),
                                   log=bool(spec.log)))
    fixed: dict[str, float] = {}
    if evolve_reward_weights:
        lo, hi = (float(b) for b in reward_logit_bounds)
        if not lo < hi:
            raise ConfigError(f"config key 'outer.reward_weight_bounds': expected low < high, got {reward_logit_bounds}")
        for name, logit in weights_to_logits(reward_init_weights, lo, hi).items():
            params.append(HarnessParam(name, lo, hi, logit, "reward_weight"))
    else:
        fixed = dict(reward_init_weights)
    for group, kind, given in (("extras", "extra", extras), ("strategy", "strategy", strategy)):
        for name, spec in (given or {}).items():
            if spec.init is None:
                raise ConfigError(f"config key 'outer.{group}.{name}.init': a {kind} knob needs a start value")
            params.append(HarnessParam(name, float(spec.low), float(spec.high), float(spec.init), kind,
                                       integer=bool(spec.integer), log=bool(spec.log)))
    if not params:
        raise ConfigError("config key 'outer.knobs': the harness has no parameter (no knob, reward weights "
                          "fixed, no extras, no strategy knobs)")
    return HarnessSpace(tuple(params), fixed_reward_weights=fixed)


def ema_toward(current: Sequence[float] | np.ndarray, target: Sequence[float] | np.ndarray, rate: float) -> np.ndarray:
    """Damped step in the search space: ``current + rate * (target - current)``, clipped into [0, 1].

    For applying a harness that moves only part of the way toward a CMA-ES proposal (an exponential
    moving average of applied harnesses; see ``run/outer_loop.py`` for what is damped).

    Args:
        current: shape (dim,), the harness vector applied now.
        target: shape (dim,), where CMA-ES points (mean or best).
        rate: in [0, 1]; 1 jumps to ``target``, 0 stays.

    Raises:
        ConfigError: shapes differ, non-finite input, or ``rate`` outside [0, 1] (key ``outer.damping``).
    """
    cur = np.asarray(current, dtype=float).reshape(-1)
    tgt = np.asarray(target, dtype=float).reshape(-1)
    if cur.shape != tgt.shape or not (np.all(np.isfinite(cur)) and np.all(np.isfinite(tgt))):
        raise ConfigError(f"harness vectors: expected two finite vectors of one shape, got {cur.shape}, {tgt.shape}")
    if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
        raise ConfigError(f"config key 'outer.damping': expected a rate in [0, 1], got {rate!r}")
    return np.clip(cur + rate * (tgt - cur), 0.0, 1.0)
