"""The lead and the incumbent: which policy later races compare with, and whose mutants get the lead slots.

:class:`LeadState` is one of the named parts of a harness candidate's run (:mod:`evotrainer.evolve.llm_objective`):

- the *incumbent* is the reference every race compares with; the outer loop sets it on every promotion;
- the *Pareto front* holds the first policy of every genome scored on the selection items (and every
  incumbent); the *lead* of a candidate, the parent of its ``inner.lead_offspring`` mutants, is drawn from
  the members best on at least one screening item, dominated ones removed, in proportion to the items each
  is best on (:func:`~evotrainer.search.pareto_front.item_wins`: GEPA's per-item Pareto selection,
  Agrawal et al. 2025, arXiv 2507.19457, duplicates collapsed by genome);
- it remembers which mutation kinds were tried on each lead, so the inner loop rotates through them.
"""

from __future__ import annotations

from collections.abc import Sequence

from evotrainer.archive.recorder import RunRecorder
from evotrainer.events.kinds import IncumbentReferenceEvent, LeadEvent
from evotrainer.genome import Policy
from evotrainer.run.screening import Screening
from evotrainer.search.pareto_front import choose_parent, item_wins
from evotrainer.seeding import Seeds

__all__ = ["LeadState"]


class LeadState:
    """Incumbent, Pareto front, lead and the mutation kinds tried per lead.

    Args:
        rec: the run's archive writer (``incumbent_reference`` and ``lead`` events).
        seeds: the run's named RNG streams (``lead/<harness id>`` draws the lead).

    Attributes:
        incumbent: the reference of later races, or None before the first :meth:`set_incumbent`.
        front: genome hash -> the first policy of that genome scored on selection items, in the order seen.
        lead: the parent of the latest candidate's lead mutants, or None.
        tried: policy id -> mutation kinds tried on it as lead, in order.
    """

    def __init__(self, rec: RunRecorder, seeds: Seeds) -> None:
        self.rec, self.seeds = rec, seeds
        self.incumbent: Policy | None = None
        self.front: dict[str, Policy] = {}
        self.lead: Policy | None = None
        self.tried: dict[str, tuple[str, ...]] = {}

    def add(self, policy: Policy) -> None:
        """Put ``policy`` on the front unless a policy of its genome is there already."""
        self.front.setdefault(policy.genome_hash, policy)

    def set_incumbent(self, policy: Policy, harness_id: str = "h0", outer_generation: int = 0) -> None:
        """Make ``policy`` the reference of later races (archived as an ``incumbent_reference`` event)."""
        self.incumbent = policy
        self.add(policy)
        self.rec.emit(IncumbentReferenceEvent(outer_generation=outer_generation, harness_id=harness_id,
                                              policy_id=policy.id))

    def reference(self, population: Sequence[Policy], fallback: Policy | None) -> Policy | None:
        """The policy a race compares with: the incumbent, else the population's first, else ``fallback``."""
        if self.incumbent is not None:
            return self.incumbent
        return population[0] if population else fallback

    def choose(self, population: Sequence[Policy], screening: Screening, harness_id: str,
               outer_generation: int) -> Policy | None:
        """Draw the lead of a candidate from the front (archived as a ``lead`` event with the front).

        The front is taken over the screening items (the race's first stage), which every raced or screened
        policy has a value on; a member best on at least one item and not dominated is drawn with probability
        proportional to the items it is best on (one entry per genome). The incumbent (or the population's
        first) when no member has values there.
        """
        vectors: dict[str, list[float]] = {}
        members: dict[str, Policy] = {}
        for policy in self.front.values():
            vec = screening.first_stage_vector(policy)
            if vec is not None:
                vectors[policy.id] = vec
                members[policy.id] = policy
        wins = item_wins(vectors, genomes={pid: p.genome_hash for pid, p in members.items()})
        pick = choose_parent(wins, self.seeds.python(f"lead/{harness_id}"))
        lead = members[pick] if pick is not None else self.reference(population, None)
        if lead is not None:
            self.lead = lead
            self.rec.emit(LeadEvent(outer_generation=outer_generation, harness_id=harness_id, policy_id=lead.id,
                                    front=wins))
        return lead

    def kinds_tried(self, lead: Policy | None) -> tuple[str, ...]:
        """Mutation kinds tried on ``lead`` so far (empty for None)."""
        return self.tried.get(lead.id, ()) if lead is not None else ()

    def note_tried(self, lead: Policy | None, kinds: Sequence[str]) -> None:
        """Remember that ``kinds`` were tried on ``lead`` (nothing for None)."""
        if lead is not None:
            self.tried[lead.id] = self.tried.get(lead.id, ()) + tuple(kinds)
