"""The promotion rule: when a candidate replaces the incumbent, in one place for both rooms.

The outer loop (:func:`evotrainer.run.outer_loop.decide`, in ``mode=evolve`` and ``selfevolve.outer_loop``) asks whether
a harness candidate's best policy replaces the incumbent policy; the self-evolution room (``mode=selfevolve``,
:func:`evotrainer.selfevolve.round.run_round`) asks whether a round's new adapter replaces the current one.
Both ask :meth:`PromotionRule.decide` with the two scores, and per-item scores where they have them:

- with per-item scores of both on the same items (same length), the candidate is promoted when the
  one-sided paired Student-t lower bound on ``candidate - incumbent`` at ``level`` is above 0
  (:func:`~evotrainer.harness.racing.paired_bound`; the racing module's docstring says why);
- without them, on its mean alone: promoted when it is higher, or equal with ``ties=True``;
- with ``stratum_level`` set and a stratum label per item (the item's source, e.g. ``elitr`` or ``qmsum``), a
  candidate the paired bound promotes is still refused when it is confidently worse on one stratum of at least
  ``stratum_min_items`` items: the one-sided upper bound on that stratum's paired difference at ``stratum_level``
  is below 0. A gain on a pooled mean can come from the short items of a mix while the long ones lose
  (docs/results.md); the racing module's drop rule, applied per stratum, catches that.

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
        refused_on: the stratum on which the candidate was confidently worse and its bound there, when that
            refused a promotion the pooled bound allowed; None otherwise.
    """

    promoted: bool
    evidence: PairedBound | None = None
    refused_on: tuple[str, PairedBound] | None = None

    @property
    def refused_stratum(self) -> dict[str, object] | None:
        """The stratum that refused a promotion the pooled bound allowed, JSON-safe (``stratum`` and its paired
        bound), or None."""
        if self.refused_on is None:
            return None
        return {"stratum": self.refused_on[0], **self.refused_on[1].as_dict()}


@dataclass(frozen=True)
class PromotionRule:
    """When a candidate replaces the incumbent (module docstring).

    Attributes:
        level: one-sided confidence of the paired lower bound, in (0.5, 1) (``outer.race.level``).
        ties: on the means alone, whether an equal score promotes (self-evolution keeps a new adapter whose
            dev score did not fall; the evolve room keeps its incumbent).
        stratum_level: one-sided confidence of "worse on a stratum", in (0.5, 1) (``outer.race.stratum_level``);
            None = no stratum check.
        stratum_min_items: strata with fewer paired items are not checked (>= 2: a bound needs two).
    """

    level: float = 0.95
    ties: bool = False
    stratum_level: float | None = None
    stratum_min_items: int = 3

    def decide(self, incumbent: float, candidate: float, incumbent_items: Sequence[float] = (),
               candidate_items: Sequence[float] = (), strata: Sequence[str] = ()) -> Promotion:
        """Promote ``candidate`` over ``incumbent``?

        Args:
            incumbent: the incumbent's score (higher is better).
            candidate: the candidate's score on the same items.
            incumbent_items: the incumbent's per-item scores, shape (n,); empty = decide on the means.
            candidate_items: the candidate's per-item scores on the same items in the same order, shape
                (n,); another length than ``incumbent_items`` = decide on the means.
            strata: each item's stratum label, shape (n,); another length = no stratum check.

        Returns:
            The :class:`Promotion`, with the paired bounds when they decided it.
        """
        if len(incumbent_items) and len(incumbent_items) == len(candidate_items):
            bound = paired_bound(incumbent_items, candidate_items, self.level)
            worse = self._worse_stratum(incumbent_items, candidate_items, strata) if bound.better else None
            return Promotion(bound.better and worse is None, bound, worse)
        return Promotion(candidate >= incumbent if self.ties else candidate > incumbent)

    def _worse_stratum(self, incumbent_items: Sequence[float], candidate_items: Sequence[float],
                       strata: Sequence[str]) -> tuple[str, PairedBound] | None:
        """The first stratum (in sorted order) on which the candidate is confidently worse, with its bound."""
        if self.stratum_level is None or len(strata) != len(incumbent_items):
            return None
        for label in sorted(set(strata)):
            idx = [i for i, s in enumerate(strata) if s == label]
            if len(idx) < max(self.stratum_min_items, 2):
                continue
            bound = paired_bound([incumbent_items[i] for i in idx], [candidate_items[i] for i in idx],
                                 self.stratum_level)
            if bound.worse:
                return label, bound
        return None
