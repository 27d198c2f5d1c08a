"""Operator statistics: how often each operator's children beat their parents, and adaptive choice.

A child *beats its parents* when its fitness is strictly higher than the best fitness among the
parents it was varied from, both measured on the same task batch (one inner-loop call uses one batch).
A child made by crossover then mutation is credited to its last operator (as in DEAP's varAnd). Children
whose evaluation failed are not counted.

Adaptive operator probabilities follow probability matching (Goldberg 1990; Thierens 2005, "An adaptive
pursuit strategy for allocating operator probabilities"): each operator's configured probability is
scaled by its Laplace-smoothed success rate ``(improved + 1) / (tried + 2)``, renormalised, and mixed
with the configured probabilities so that no enabled operator starves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evotrainer.genome import Policy

__all__ = ["OperatorStats", "adapted_probabilities", "format_operator_stats", "operator_kind"]


def operator_kind(operator: str) -> str:
    """``"mut_structural/add"`` -> ``"mut_structural"``."""
    return operator.split("/", 1)[0]


@dataclass(frozen=True)
class OperatorStats:
    """Children tried and children that beat their parents, per operator.

    Attributes:
        counts: operator kind (``mut_structural``, ``cx_sections``, ...) -> ``(tried, improved)``,
            integers with ``0 <= improved <= tried``.
        detail: full operator name (``mut_structural/add``, ``mut_llm_rewrite/stricter``, ...) ->
            ``(tried, improved)``.
    """

    counts: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    detail: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def from_children(
        cls,
        children: Sequence[Policy],
        child_fitness: Mapping[str, float | None],
        parent_best: Mapping[str, float],
    ) -> OperatorStats:
        """Count one generation.

        Args:
            children: the evaluated children.
            child_fitness: child id -> fitness (None when its evaluation failed; such children are skipped).
            parent_best: child id -> best fitness among the parents it was varied from (same batch).
                Children without an entry are skipped.
        """
        counts: dict[str, list[int]] = {}
        detail: dict[str, list[int]] = {}
        for child in children:
            value = child_fitness.get(child.id)
            if value is None or child.id not in parent_best:
                continue
            better = int(value > parent_best[child.id])
            for table, key in ((counts, operator_kind(child.operator)), (detail, child.operator)):
                entry = table.setdefault(key, [0, 0])
                entry[0] += 1
                entry[1] += better
        return cls({k: (v[0], v[1]) for k, v in sorted(counts.items())},
                   {k: (v[0], v[1]) for k, v in sorted(detail.items())})

    def merged(self, other: OperatorStats) -> OperatorStats:
        """Sum of two records (e.g. the run so far plus one generation)."""
        return OperatorStats(_add(self.counts, other.counts), _add(self.detail, other.detail))

    def rate(self, kind: str) -> float | None:
        """Share of ``kind``'s children that beat their parents, in [0, 1]; None when none was tried."""
        tried, improved = self.counts.get(kind, (0, 0))
        return improved / tried if tried else None

    def to_dict(self) -> dict[str, dict[str, list[int]]]:
        """JSON-ready form: ``{"counts": {kind: [tried, improved]}, "detail": {...}}``."""
        return {"counts": {k: list(v) for k, v in self.counts.items()},
                "detail": {k: list(v) for k, v in self.detail.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, Sequence[int]]]) -> OperatorStats:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: an entry is not two integers with ``0 <= improved <= tried``.
        """
        def table(name: str) -> dict[str, tuple[int, int]]:
            out = {}
            for key, value in dict(data.get(name, {})).items():
                tried, improved = (int(x) for x in value)
                if not 0 <= improved <= tried:
                    raise ValueError(f"operator stats {name}[{key!r}]: expected 0 <= improved <= tried, "
                                     f"got {list(value)}")
                out[str(key)] = (tried, improved)
            return dict(sorted(out.items()))

        return cls(table("counts"), table("detail"))


def _add(a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    out = dict(a)
    for key, (tried, improved) in b.items():
        t0, i0 = out.get(key, (0, 0))
        out[key] = (t0 + tried, i0 + improved)
    return dict(sorted(out.items()))


def format_operator_stats(stats: OperatorStats) -> list[tuple[str, int, int, float]]:
    """Rows for a run summary, one per operator kind: ``(kind, tried, improved, improved / tried)``, sorted by tried
    (descending), then name; kinds never tried are absent. The rate is in [0, 1], higher is better."""
    rows = [(name, tried, improved, improved / tried) for name, (tried, improved) in stats.counts.items() if tried]
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def adapted_probabilities(
    base: Mapping[str, float], stats: OperatorStats, *, mix: float = 0.3
) -> dict[str, float]:
    """Operator probabilities adapted to success rates (probability matching, see module doc).

    ``p_k = (1 - mix) * normalise(base_k * (improved_k + 1) / (tried_k + 2)) + mix * normalise(base_k)``.
    Operators with base probability 0 stay at 0.

    Args:
        base: operator kind -> configured probability, >= 0, not all 0.
        stats: counts so far.
        mix: weight of the configured probabilities, in [0, 1] (1 = no adaptation).

    Returns:
        Operator kind -> probability, summing to 1, same keys as ``base``.
    """
    total = sum(base.values())
    if total <= 0:
        raise ValueError("adapted_probabilities: every base probability is 0")
    prior = {k: v / total for k, v in base.items()}
    scored = {k: v * (stats.counts.get(k, (0, 0))[1] + 1) / (stats.counts.get(k, (0, 0))[0] + 2)
              for k, v in prior.items()}
    norm = sum(scored.values())
    return {k: (1 - mix) * scored[k] / norm + mix * prior[k] for k in base}
