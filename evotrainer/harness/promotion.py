"""The promotion rule: when a candidate replaces the incumbent, in one place for both rooms.

The outer loop (:func:`evotrainer.run.outer_loop.decide`, in ``mode=evolve`` and ``selfevolve.outer_loop``) asks whether
a harness candidate's best policy replaces the incumbent policy; the self-evolution room (``mode=selfevolve``,
:func:`evotrainer.selfevolve.round.run_round`) asks whether a round's new adapter replaces the current one.
Both ask :meth:`PromotionRule.decide` with the two scores, and per-item scores where they have them:

- with per-item scores of both on the same items (same length), the candidate is promoted when the
  one-sided paired Student-t lower bound on ``candidate - incumbent`` at ``level`` is above 0
  (:func:`~evotrainer.harness.racing.paired_bound`; the racing module's docstring says why);
- without them, on its mean alone: promoted when it is higher, or equal with ``ties=True``.

Pure: scores in, a :class:`Promotion` out. Scores are higher-is-better (S_val or dev score, in [0, 1]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evotrainer.harness.racing import PairedBound, paired_bound

__all__ = ["Promotion", "PromotionRule"]


@dataclass(frozen=True)
class Promotion:
    """One decision of :class:`PromotionRule`.

    Attributes:
        promoted: whether the candidate replaces the incumbent.
        evidence: the paired bounds the decision rests on, or None when it was made on the means.
    """

    promoted: bool
    evidence: PairedBound | None = None


@dataclass(frozen=True)
class PromotionRule:
    """When a candidate replaces the incumbent (module docstring).

    Attributes:
        level: one-sided confidence of the paired lower bound, in (0.5, 1) (``outer.race.level``).
        ties: on the means alone, whether an equal score promotes (self-evolution keeps a new adapter whose
            dev score did not fall; the evolve room keeps its incumbent).
    """

    level: float = 0.95
    ties: bool = False

    def decide(self, incumbent: float, candidate: float, incumbent_items: Sequence[float] = (),
               candidate_items: Sequence[float] = ()) -> Promotion:
        """Promote ``candidate`` over ``incumbent``?

        Args:
            incumbent: the incumbent's score (higher is better).
            candidate: the candidate's score on the same items.
            incumbent_items: the incumbent's per-item scores, shape (n,); empty = decide on the means.
            candidate_items: the candidate's per-item scores on the same items in the same order, shape
                (n,); another length than ``incumbent_items`` = decide on the means.

        Returns:
            The :class:`Promotion`, with the paired bounds when they decided it.
        """
        if len(incumbent_items) and len(incumbent_items) == len(candidate_items):
            bound = paired_bound(incumbent_items, candidate_items, self.level)
            return Promotion(bound.better, bound)
        return Promotion(candidate >= incumbent if self.ties else candidate > incumbent)
