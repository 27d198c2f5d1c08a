"""What the inner loop reports: one :class:`GenerationReport` per generation (to ``on_generation``) and the
:class:`InnerResult` of a call (:func:`~evotrainer.search.inner_loop.run_inner_loop`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deap import tools

from evotrainer.genome import Policy
from evotrainer.search.operator_stats import OperatorStats

__all__ = ["GenerationReport", "InnerResult"]


@dataclass(frozen=True)
class GenerationReport:
    """What one generation did; passed to ``on_generation``.

    Attributes:
        generation: generation number (``start_generation`` for the initial evaluation).
        initial: True for the report of the initial population's evaluation (no variation).
        population: the population after this generation (each member has a fitness).
        fitness: id -> fitness of every population member (float, higher is better).
        children: new genomes made and evaluated this generation (parent ids and operator on each),
            including those whose evaluation failed.
        child_fitness: id -> fitness of each child, None where its evaluation failed.
        rejected: LLM answers rejected plus invalid or duplicate children replaced this generation.
        rejections: one ``"<operator>: <reason>"`` per rejection counted in ``rejected`` (e.g.
            ``"mut_reflective/rules: leak: names 'Priya'"``, ``"cx_sections: duplicate genome"``); the
            record's ``rejections`` entry sums them up as one string for the archive.
        skipped: True when every evaluation failed and the population was kept unchanged.
        record: this generation's logbook record (see ``inner_loop.LOGBOOK_HEADER``).
        timings: seconds per phase: ``select``, ``vary``, ``evaluate``.
        hall_of_fame: best distinct genomes so far, best first.
        mutator_error: the error string when the batched mutator call raised, else None.
        intermediates: genomes made on the way to a child but never evaluated (a crossover child that
            was then mutated, a rejected child that was repaired): archive them with ``children`` so
            every child's parent ids resolve and lineage reaches the seeds.
        operator_stats: this generation's children that beat their parents, per operator.
        mutation_probabilities: mutation operator kind -> probability used this generation (adapted
            when ``cfg.adaptive_operators``).
        diversity_swaps: members swapped in to keep ``cfg.min_diversity``.
    """

    generation: int
    initial: bool
    population: tuple[Policy, ...]
    fitness: Mapping[str, float]
    children: tuple[Policy, ...]
    child_fitness: Mapping[str, float | None]
    rejected: int
    skipped: bool
    record: Mapping[str, Any]
    timings: Mapping[str, float]
    hall_of_fame: tuple[Policy, ...]
    mutator_error: str | None = None
    operator_stats: OperatorStats = field(default_factory=OperatorStats)
    mutation_probabilities: Mapping[str, float] = field(default_factory=dict)
    diversity_swaps: int = 0
    intermediates: tuple[Policy, ...] = ()
    rejections: tuple[str, ...] = ()


@dataclass(frozen=True)
class InnerResult:
    """Outcome of :func:`run_inner_loop`.

    Attributes:
        population: the final population.
        fitness: id -> fitness of every policy evaluated successfully during the call (the final
            population included).
        hall_of_fame: best distinct genomes of the call, best first.
        logbook: DEAP ``Logbook``, one record per generation (initial evaluation included).
        best: the best policy of the call (hall of fame's first).
        best_fitness: its fitness.
        skipped_generations: generations in which every evaluation failed.
        operator_stats: children that beat their parents, per operator, summed over the call.
        lead_children: the children made in the lead's slots (``lead`` and ``cfg.lead_offspring``) that
            were evaluated successfully, in the order made (each has a fitness in ``fitness``).
        lead_kinds: the mutation kind given to each lead slot of the call, in order (pass them on as
            ``lead_tried`` to keep the rotation going across calls).
    """

    population: tuple[Policy, ...]
    fitness: Mapping[str, float]
    hall_of_fame: tuple[Policy, ...]
    logbook: tools.Logbook
    best: Policy
    best_fitness: float
    skipped_generations: tuple[int, ...] = field(default=())
    operator_stats: OperatorStats = field(default_factory=OperatorStats)
    lead_children: tuple[Policy, ...] = ()
    lead_kinds: tuple[str, ...] = ()
