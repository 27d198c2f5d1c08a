"""The top-k archive of (harness, population) pairs and the rollback rule of the outer loop.

Semantics (all scores are meta-validation S_val, higher is better):

* **Archived pair.** When a harness candidate's best policy is scored on the whole selection set,
  its (applied harness, resulting population, best policy) is offered to a top-``k`` archive ordered
  by that whole-set S_val (ties: the earlier pair first). The incumbent of the run is always the
  archive's first pair, so the run never reports anything worse than the best archived pair.
* **Current S_val.** Each outer generation the run continues from the best candidate's population.
  Its *current* S_val is that candidate's race estimate of its whole-set S_val
  (:mod:`evotrainer.harness.scoring`): the only score every candidate has. It is compared with the
  incumbent's whole-set S_val, the number the estimate estimates. The incumbent never decreases; the
  current S_val can, and that is what the rule watches.
* **History.** The current S_val per outer generation since the run started or was last restored;
  its first entry is the start value (the whole-set S_val of the incumbent or the restored pair).
* **Rollback rule** (:func:`rollback_cause`), checked after every outer generation:

  - *regression*: the last ``generations`` current values (start value excluded) all lie more than
    ``tolerance`` below the incumbent's whole-set S_val;
  - *oscillation*: among the last ``window`` deltas of the history, the deltas larger than
    ``oscillation_threshold`` in size change sign at least ``oscillations`` times (a swing up then
    down then up, ...).

  On a trigger the caller restores the best archived pair (its population and applied harness; the
  CMA-ES mean moves there), shrinks sigma, restarts the history from the restored value and logs a
  ``rollback`` event with the cause.

Pure functions over frozen records; the pair's population and policy are opaque to this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ArchivedPair", "RollbackRule", "RollbackTrigger", "archive_pair", "rollback_cause"]


@dataclass(frozen=True)
class ArchivedPair:
    """A (harness, population) pair scored on the whole selection set.

    Attributes:
        s_val: whole-selection-set S_val of ``best``, in [0, 1], higher is better.
        harness: the applied :class:`~evotrainer.harness.space.Harness` (its ``vector`` is where to
            resume the search).
        population: the population to resume from (opaque tuple of policies).
        best: the best policy of that population (opaque; has an ``id``).
        outer_generation: when the pair was made (0 = the start).
        harness_id: the candidate's id in the archive (e.g. ``"g3c1"``, ``"h0"``).
        per_item: ``best``'s per-item values behind ``s_val`` (empty when the objective gives none).
    """

    s_val: float
    harness: Any
    population: tuple
    best: Any
    outer_generation: int
    harness_id: str
    per_item: tuple[float, ...] = ()


def archive_pair(pairs: Sequence[ArchivedPair], pair: ArchivedPair, top_k: int) -> tuple[ArchivedPair, ...]:
    """``pairs`` plus ``pair``, best first by S_val (ties: earlier outer generation first), cut to ``top_k``.

    Args:
        pairs: the current archive (any order; not modified).
        pair: the new pair.
        top_k: pairs kept, >= 1.

    Raises:
        ValueError: ``top_k < 1``.
    """
    if top_k < 1:
        raise ValueError(f"archive_pair: top_k must be >= 1, got {top_k}")
    ranked = sorted([*pairs, pair], key=lambda p: (-p.s_val, p.outer_generation))
    return tuple(ranked[:top_k])


@dataclass(frozen=True)
class RollbackRule:
    """Thresholds of :func:`rollback_cause` (``outer.rollback.*`` in config).

    Attributes:
        tolerance: S_val units, >= 0; a current value counts as regressed below ``best - tolerance``.
        generations: consecutive regressed outer generations that trigger a rollback, >= 1.
        oscillation_threshold: S_val units, >= 0; smaller deltas are ignored as noise.
        oscillations: sign changes of the significant deltas that trigger a rollback, >= 1.
        window: most recent deltas looked at for oscillation, >= oscillations + 1.
    """

    tolerance: float = 0.03
    generations: int = 2
    oscillation_threshold: float = 0.02
    oscillations: int = 2
    window: int = 4


@dataclass(frozen=True)
class RollbackTrigger:
    """Why a rollback fires: ``cause`` is "regression" or "oscillation"; ``detail`` is for humans."""

    cause: str
    detail: str


def rollback_cause(history: Sequence[float], best: float, rule: RollbackRule) -> RollbackTrigger | None:
    """Whether the current S_val history calls for a rollback (see the module docstring).

    Args:
        history: current S_val per outer generation since the start or the last restore, oldest
            first; ``history[0]`` is the start value. Each in [0, 1], higher is better.
        best: the incumbent's whole-set S_val.
        rule: the thresholds.

    Returns:
        The trigger, or None. Regression is checked first.
    """
    recent = list(history[1:])[-rule.generations:]
    if len(recent) == rule.generations and all(v < best - rule.tolerance for v in recent):
        return RollbackTrigger(
            "regression",
            f"current S_val {', '.join(f'{v:.4f}' for v in recent)} more than {rule.tolerance:g} below the "
            f"best {best:.4f} for {rule.generations} outer generation(s)",
        )
    deltas = [b - a for a, b in zip(history[:-1], history[1:], strict=True)][-rule.window:]
    swings = [d for d in deltas if abs(d) > rule.oscillation_threshold]
    changes = sum(1 for a, b in zip(swings[:-1], swings[1:], strict=True) if (a > 0) != (b > 0))
    if changes >= rule.oscillations:
        return RollbackTrigger(
            "oscillation",
            f"{changes} sign change(s) of the S_val delta above {rule.oscillation_threshold:g} in the last "
            f"{len(deltas)} outer generation(s): deltas {', '.join(f'{d:+.4f}' for d in deltas)}",
        )
    return None
