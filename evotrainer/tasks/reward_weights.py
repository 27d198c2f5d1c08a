"""Reward weights: checked in one function, once, when a run's config meets its task family.

:func:`check_reward_weights` is the only check of a weight mapping. A run calls it once, in
:func:`evotrainer.run.runtime.task_settings` (``task.reward_weights`` over the family's ``spec.reward_weights``);
everything downstream (the harness space's logits or fixed weights, the families' ``reward``) receives weights
that passed it and only does arithmetic on them (:func:`on_simplex`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from evotrainer.errors import ConfigError

__all__ = ["check_reward_weights", "on_simplex"]


def check_reward_weights(weights: Mapping[str, float], components: Sequence[str], key: str = "task.reward_weights",
                         *, simplex: bool = False) -> dict[str, float]:
    """``weights`` as floats, in their own order, after checking them.

    Args:
        weights: reward component name -> weight (missing components weigh 0).
        components: the family's reward component names (the keys of ``FamilySpec.reward_weights``).
        key: the config key the errors name (``<key>.<component>``).
        simplex: also require the weights to sum to 1 (within 1e-6) instead of only one weight > 0.

    Returns:
        ``{name: float(weight)}``; nothing is normalised.

    Raises:
        ConfigError: an unknown component, a weight that is not a finite number >= 0 (booleans refused), no
            weight above 0, or with ``simplex`` a sum other than 1; the message names the key.
    """
    out: dict[str, float] = {}
    for name, w in weights.items():
        if name not in components:
            raise ConfigError(f"config key '{key}.{name}': unknown reward component; expected one of "
                              f"{list(components)}")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ConfigError(f"config key '{key}.{name}': expected a finite number >= 0, got {w!r}")
        out[name] = float(w)
    if simplex and abs(sum(out.values()) - 1.0) > 1e-6:
        raise ConfigError(f"config key '{key}': weights must sum to 1, got {sum(out.values()):g}")
    if not any(w > 0 for w in out.values()):
        raise ConfigError(f"config key '{key}': expected at least one weight > 0, got {dict(weights)}")
    return out


def on_simplex(weights: Mapping[str, float], components: Sequence[str]) -> dict[str, float]:
    """Every component's weight divided by their sum (a missing component weighs 0), in ``components`` order.

    Arithmetic only: ``weights`` passed :func:`check_reward_weights` (a component not in ``components`` is
    ignored; a zero sum gives a ZeroDivisionError).
    """
    out = dict.fromkeys(components, 0.0)
    for name in out:
        if name in weights:
            out[name] = float(weights[name])
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}
