"""Where the outer loop's harness candidates come from: CMA-ES, or one of an ablation study's control arms.

The outer loop (:func:`evotrainer.run.outer_loop.run_outer_loop`) asks a *candidate source* for ``popsize`` points
of the normalised harness box ``[0, 1]^d``, runs the inner loop and the race under each, and tells it the
scores. ``outer.candidate_source`` picks the source; everything else (damping, the inner loop, racing,
promotion, rollback, the budget) is the same for every source, so an ablation that changes only this key
measures what the harness search itself adds:

- ``coevolve``: :class:`~evotrainer.harness.cma_search.CMASearch`, CMA-ES ask/tell (the product's default);
- ``frozen_harness``: :class:`FrozenHarness`, every candidate is the start harness; the inner loop and the
  race run as usual, so this arm is the inner loop alone at the same budget;
- ``random_harness``: :class:`RandomHarness`, each candidate drawn uniformly from the box with the run's
  seeded generator, never updated from the scores (random search; Bergstra & Bengio 2012, "Random Search
  for Hyper-Parameter Optimization", JMLR 13, the usual baseline of a tuned search).

The box is the harness space's normalised coordinates (:class:`~evotrainer.harness.space.HarnessSpace`): a
uniform point decodes to a value uniform between each knob's bounds (log-uniform for a ``log`` knob, a uniform
logit for a reward weight). The outer loop still applies each proposal ``x`` damped toward the harness it
continues from (``a + outer.damping * (x - a)``), for every source alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evotrainer.errors import ConfigError
from evotrainer.harness.cma_search import CMASearch

__all__ = ["CANDIDATE_SOURCES", "CandidateSource", "FrozenHarness", "RandomHarness", "candidate_source"]

CANDIDATE_SOURCES: tuple[str, ...] = ("coevolve", "frozen_harness", "random_harness")
"""The values of ``outer.candidate_source``."""


@runtime_checkable
class CandidateSource(Protocol):
    """What the outer loop needs of a harness searcher (ask / tell, as pycma's and Optuna's searchers).

    Points are arrays of shape (dim,), each coordinate in [0, 1]; scores are higher-is-better.
    """

    def ask(self) -> list[np.ndarray]:
        """``popsize`` new points."""
        ...

    def tell(self, candidates: Sequence[np.ndarray], scores: Sequence[float]) -> None:
        """The scores of every point of the last :meth:`ask` (NaN = failed)."""
        ...

    def set_mean(self, x: Sequence[float] | np.ndarray) -> None:
        """Move the search toward ``x`` (a rollback restores an archived harness)."""
        ...

    def shrink_sigma(self, factor: float) -> None:
        """Shrink the step size by ``factor`` in (0, 1] (on a rollback)."""
        ...

    @property
    def sigma(self) -> float:
        """The step size in box units (0.0 for a source that has none)."""
        ...

    @property
    def stop_reasons(self) -> dict[str, Any]:
        """The searcher's own termination flags (empty when none fired; logged, never obeyed)."""
        ...


def _point(x: Sequence[float] | np.ndarray, dim: int, what: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float).reshape(-1)
    if arr.shape != (dim,) or not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"{what}: expected a point of shape ({dim},) inside [0, 1], got {x!r}")
    return arr


def _check_popsize(popsize: int, what: str) -> int:
    if int(popsize) != popsize or popsize < 1:
        raise ValueError(f"{what}: popsize must be an int >= 1, got {popsize!r}")
    return int(popsize)


class _NoUpdate:
    """The part of :class:`CandidateSource` a source that never learns shares: ``tell`` checks the lengths
    and ignores the scores; ``set_mean`` and ``shrink_sigma`` do nothing; no step size, no stop flags."""

    def tell(self, candidates: Sequence[np.ndarray], scores: Sequence[float]) -> None:
        """Ignored (only the lengths are checked).

        Raises:
            ValueError: ``candidates`` and ``scores`` differ in length.
        """
        if len(candidates) != len(scores):
            raise ValueError(f"{type(self).__name__}.tell: {len(candidates)} candidates, {len(scores)} scores")

    def set_mean(self, x: Sequence[float] | np.ndarray) -> None:
        """Ignored: a frozen harness stays at ``x0`` (a rollback restores a pair found under it anyway);
        random search has no mean."""

    def shrink_sigma(self, factor: float) -> None:
        """Ignored (no step size)."""

    @property
    def sigma(self) -> float:
        return 0.0

    @property
    def stop_reasons(self) -> dict[str, Any]:
        return {}


class FrozenHarness(_NoUpdate):
    """Every candidate is ``x0``, the start harness; scores are ignored.

    Args:
        x0: the start harness's normalised vector, shape (dim,), inside [0, 1].
        popsize: candidates per ask, >= 1 (the outer loop runs each from the same population; their task
            batches and inner-loop generators differ, since those are drawn per harness id).

    Raises:
        ValueError: ``x0`` is not a point of the box, or ``popsize`` < 1.
    """

    def __init__(self, x0: Sequence[float] | np.ndarray, popsize: int) -> None:
        self.dim = int(np.size(x0))
        self.x0 = _point(x0, self.dim, "FrozenHarness")
        self.popsize = _check_popsize(popsize, "FrozenHarness")

    def ask(self) -> list[np.ndarray]:
        """``popsize`` copies of ``x0`` (fresh arrays)."""
        return [self.x0.copy() for _ in range(self.popsize)]



class RandomHarness(_NoUpdate):
    """Each candidate uniform in ``[0, 1]^dim``, drawn from ``rng``; never updated from the scores.

    Args:
        dim: harness dimension, >= 1.
        popsize: candidates per ask, >= 1.
        rng: the run's generator for this stream (e.g. ``Seeds(seed).numpy("random_harness")``): the same
            generator state gives the same candidates.

    Raises:
        ValueError: ``dim`` or ``popsize`` < 1.
    """

    def __init__(self, dim: int, popsize: int, rng: np.random.Generator) -> None:
        if int(dim) != dim or dim < 1:
            raise ValueError(f"RandomHarness: dim must be an int >= 1, got {dim!r}")
        self.dim = int(dim)
        self.popsize = _check_popsize(popsize, "RandomHarness")
        self.rng = rng

    def ask(self) -> list[np.ndarray]:
        """``popsize`` points, each coordinate uniform in [0, 1]."""
        return [self.rng.uniform(0.0, 1.0, size=self.dim) for _ in range(self.popsize)]



def candidate_source(
    name: str, *, x0: Sequence[float] | np.ndarray, sigma0: float, popsize: int, cma_seed: int,
    rng: np.random.Generator, sigma_floor: float | None = None,
) -> CandidateSource:
    """The source named by ``outer.candidate_source`` (module docstring).

    Args:
        name: one of :data:`CANDIDATE_SOURCES`.
        x0: the start harness, shape (dim,), inside [0, 1].
        sigma0, sigma_floor: CMA-ES step size and its floor (``coevolve`` only).
        popsize: candidates per outer generation (CMA-ES lambda; the same for every source).
        cma_seed: pycma's seed (``coevolve``).
        rng: the generator of ``random_harness``.

    Raises:
        ConfigError: an unknown ``name`` (naming ``outer.candidate_source``).
    """
    if name == "coevolve":
        return CMASearch(int(np.size(x0)), x0, sigma0, popsize, seed=cma_seed, sigma_floor=sigma_floor)
    if name == "frozen_harness":
        return FrozenHarness(x0, popsize)
    if name == "random_harness":
        return RandomHarness(int(np.size(x0)), popsize, rng)
    raise ConfigError(f"config key 'outer.candidate_source': expected one of {CANDIDATE_SOURCES}, got {name!r}")
