"""The reward-hacking flag of the outer loop: inner fitness rose while held-out S_val fell.

A harness candidate runs the inner loop under its own reward weights and task difficulty; its inner
fitness can rise by exploiting the reward (a harness "hacking" its own reward terms) while the
policies get worse at the real task. The terminal check compares two numbers measured at the end of
the candidate's inner run:

* ``inner_gain``: best inner fitness at the end minus the best fitness of the starting population on
  the same task batch (reward units, >= 0 when the inner loop keeps elites);
* ``s_val_delta``: the candidate's best policy's S_val on the fixed screening items minus the S_val
  of the population it started from on the same items. This S_val is the meta-validation metric
  (never a reward term) on items that never enter a task batch or inner fitness.

A candidate is *flagged* when ``inner_gain > fitness_rise`` and ``s_val_delta < -s_val_drop``. A
flagged candidate is penalised: the score told to CMA-ES is its screening S_val minus ``penalty``, so
CMA-ES moves away from it and it is less likely to be the candidate the run continues from. Its
screening S_val itself is archived unchanged, and promotion to incumbent still uses the honest
whole-set score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["HackCheck", "hacking_flag", "told_score"]


@dataclass(frozen=True)
class HackCheck:
    """Thresholds of :func:`hacking_flag` (``outer.hack_check.*``); all >= 0."""

    enabled: bool = True
    fitness_rise: float = 0.01
    s_val_drop: float = 0.01
    penalty: float = 0.05


def hacking_flag(inner_gain: float | None, s_val_delta: float | None, check: HackCheck) -> bool:
    """True when inner fitness rose by more than ``fitness_rise`` while S_val fell by more than ``s_val_drop``.

    Unknown (None or non-finite) inputs never flag.
    """
    if not check.enabled or inner_gain is None or s_val_delta is None:
        return False
    if not (math.isfinite(inner_gain) and math.isfinite(s_val_delta)):
        return False
    return inner_gain > check.fitness_rise and s_val_delta < -check.s_val_drop


def told_score(screen_s_val: float | None, flagged: bool, check: HackCheck) -> float:
    """The score CMA-ES is told (higher is better): screening S_val, minus ``penalty`` when flagged.

    A failed candidate (None or non-finite) gives NaN, which ``CMASearch.tell`` turns into its worst
    penalty.
    """
    if screen_s_val is None or not math.isfinite(screen_s_val):
        return math.nan
    return float(screen_s_val) - (check.penalty if flagged else 0.0)
