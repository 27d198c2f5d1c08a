"""The self-evolution curriculum: move the task generator's difficulty with the judge pass rate.

The difficulty is the same set of generator knobs the outer loop's harness moves, within the same
bounds (:func:`curriculum_bounds`: the family's ``spec.space``, e.g. an input's length or the number of
steps a task needs; higher is harder for every knob). When the pass rate stays above ``raise_above`` for
``raise_rounds`` rounds in a row, each chosen knob moves up by ``step`` times its (low, high) range;
when it stays below ``lower_below`` for ``lower_rounds`` rounds, it moves down by the same amount
(clipped to the bounds). The pass-rate history restarts after every change, so the next change needs
fresh evidence at the new level. (The two-sided rule keeps the pass rate in a band where filtered
samples are neither trivial nor absent, the aim of automatic curricula such as Graves et al. 2017.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evotrainer.config import CurriculumConfig
from evotrainer.errors import ConfigError

__all__ = ["CurriculumDecision", "curriculum_bounds", "curriculum_step"]


def curriculum_bounds(default_space: Mapping[str, Mapping[str, float | bool]]) -> dict[str, tuple[float, float]]:
    """Each knob's (low, high) for the curriculum: those of the harness' default space
    (``FamilySpec.space``), not the generator's whole range (``difficulty_bounds``), which may reach
    much costlier tasks (an input's length far past what the harness draws by default)."""
    return {k: (float(v["low"]), float(v["high"])) for k, v in default_space.items()}


@dataclass(frozen=True)
class CurriculumDecision:
    """What the curriculum did after one round.

    Attributes:
        action: ``"raise"``, ``"lower"``, ``"hold"``, or ``"at_bound"`` (a change was due but every
            moved knob is already at its bound).
        difficulty: the knobs for the next round, natural units (unrounded; the generator rounds).
        history: pass rates since the last change, including this round (empty after a change).
    """

    action: str
    difficulty: Mapping[str, float]
    history: tuple[float, ...]


def curriculum_step(
    difficulty: Mapping[str, float],
    bounds: Mapping[str, tuple[float, float]],
    history: Sequence[float],
    cfg: CurriculumConfig,
) -> CurriculumDecision:
    """The next difficulty after a round. Pure: inputs untouched.

    Args:
        difficulty: current knobs, natural units.
        bounds: each knob's (low, high) (:func:`curriculum_bounds`).
        history: pass rates in [0, 1] since the last change, this round's last.
        cfg: thresholds, rounds, step and knobs (``selfevolve.curriculum``).

    Returns:
        The :class:`CurriculumDecision`.

    Raises:
        ConfigError: a knob of ``cfg.knobs`` is not a difficulty knob (names ``selfevolve.curriculum.knobs``).
    """
    knobs = list(cfg.knobs) or [k for k in difficulty if k in bounds]
    unknown = [k for k in knobs if k not in bounds or k not in difficulty]
    if unknown:
        raise ConfigError(f"config key 'selfevolve.curriculum.knobs': unknown knob(s) {unknown}; "
                          f"expected names from {sorted(bounds)}")
    hist = tuple(float(x) for x in history)
    up = len(hist) >= cfg.raise_rounds and all(x > cfg.raise_above for x in hist[-cfg.raise_rounds:])
    down = len(hist) >= cfg.lower_rounds and all(x < cfg.lower_below for x in hist[-cfg.lower_rounds:])
    if not (up or down):
        return CurriculumDecision("hold", dict(difficulty), hist)
    sign = 1.0 if up else -1.0
    new = dict(difficulty)
    for k in knobs:
        low, high = (float(b) for b in bounds[k])
        new[k] = min(high, max(low, float(difficulty[k]) + sign * cfg.step * (high - low)))
    if all(new[k] == float(difficulty[k]) for k in knobs):
        return CurriculumDecision("at_bound", dict(difficulty), hist)
    return CurriculumDecision("raise" if up else "lower", new, ())
