"""A small ask/tell wrapper around pycma's CMA-ES that *maximises* inside box bounds.

Everything outside this module is higher-is-better; pycma minimises. The sign flips in exactly one
place, :meth:`CMASearch.tell`. Other guarantees:

* **Bounds.** pycma's default boundary handler, ``BoundTransform`` (a piecewise linear/quadratic map
  of the internal genotype into the box; pycma ``boundary_handler.py``), already returns in-bounds
  phenotypes from ``ask``; we clip them again to absorb float noise, so callers only ever see repaired
  in-bounds points. pycma keeps the unrepaired genotype of each asked point keyed by the point, and its
  ``tell`` docstring says modifications of asked solutions are disregarded under boundary handling; so
  :meth:`tell` hands pycma back the very arrays its ``ask`` returned.
* **Ties are broken at random.** pycma ranks the told values with ``np.argsort(fit.fit_plus_pen)``
  (``CMAEvolutionStrategy.tell`` in ``evolution_strategy.py``, pycma 4.x); numpy sorts short arrays by
  insertion sort, which is stable, so among equal scores the candidate told first takes the largest
  recombination weight and the mean moves toward it (by how much: docs/concepts.md). The told order is not random (injected points come first in ``ask``; callers list
  candidates in their own order), so :meth:`tell` hands pycma the candidates in a random order drawn
  from its own seeded generator: within each group of equal scores every ranking is then equally likely,
  whatever the sort algorithm. That is the neutral selection CMA-ES is designed around: under random
  selection the mean performs an unbiased random walk and cumulative step-size adaptation leaves sigma
  unbiased (Hansen 2016, "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772, sec. 5). Distinct
  scores rank exactly as before.
* **Non-finite scores** never reach pycma: they become a finite worst penalty (the worst finite score
  seen so far minus 1, or :data:`NONFINITE_FALLBACK` before any finite score).
* **Randomness.** By default pycma samples from the *global* ``numpy.random`` state, seeded from
  option ``seed`` (whose ``0``/``None`` mean "seed from the clock"). The wrapper instead gives pycma
  option ``randn`` = the ``randn`` of its own ``numpy.random.RandomState`` seeded from ``seed`` (via
  ``SeedSequence``), so runs are reproducible whatever else touches ``numpy.random``, the global state
  is never touched, and the generator pickles with the search.
* **One dimension.** pycma does not support 1-D problems (pycma issues #86, #302). A 1-D search runs
  pycma in 2-D with a dummy coordinate that no caller ever sees and that no score depends on.
* **Seams for the outer loop:** :meth:`shrink_sigma` (rollback), :meth:`set_mean` (rollback / damping
  toward an archived harness), :meth:`inject` (propose a known point), a sigma floor, and pickling
  (the whole wrapper, pycma state and RNG state included, pickles).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

with warnings.catch_warnings():  # pycma warns at import when matplotlib is absent; we never plot
    warnings.simplefilter("ignore")
    import cma

__all__ = ["NONFINITE_FALLBACK", "CMASearch"]

NONFINITE_FALLBACK = -1.0e9
"""Score (higher is better) given to a non-finite score when no finite score has been seen yet."""


class CMASearch:
    """Maximise a black-box score over a box with pycma's CMA-ES, ask/tell style.

    Args:
        dim: search dimension d >= 1.
        x0: initial mean, shape (d,), inside ``bounds``.
        sigma0: initial step size in the units of x (for the harness' [0, 1] box, 0.2-0.3 is usual;
            pycma advises about a quarter of the search range), > 0.
        popsize: candidates per ask (CMA-ES lambda), >= 2.
        seed: any int; the same seed and the same told scores give the same asked points.
        bounds: ``(low, high)``, each a scalar or a sequence of length d; low < high. Default (0, 1):
            the normalised harness space.
        sigma_floor: if given (> 0), sigma never drops below it (after each tell and each shrink).
            This floors pycma's overall step size; per-coordinate stds are sigma times the square roots
            of the covariance diagonal, so they can still shrink if the covariance does.

    Raises:
        ValueError: inconsistent arguments (the wrapper is built from validated config).
    """

    def __init__(
        self,
        dim: int,
        x0: Sequence[float] | np.ndarray,
        sigma0: float,
        popsize: int,
        seed: int,
        bounds: tuple[float | Sequence[float], float | Sequence[float]] = (0.0, 1.0),
        sigma_floor: float | None = None,
    ) -> None:
        if int(dim) != dim or dim < 1:
            raise ValueError(f"CMASearch: dim must be an int >= 1, got {dim!r}")
        self.dim = int(dim)
        low = np.broadcast_to(np.asarray(bounds[0], dtype=float), (self.dim,)).copy()
        high = np.broadcast_to(np.asarray(bounds[1], dtype=float), (self.dim,)).copy()
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
            raise ValueError(f"CMASearch: bounds must be finite with low < high, got {bounds!r}")
        x0_arr = np.asarray(x0, dtype=float).reshape(-1)
        if x0_arr.shape != (self.dim,) or not np.all(np.isfinite(x0_arr)):
            raise ValueError(f"CMASearch: x0 must be finite with shape ({self.dim},), got {x0!r}")
        if np.any(x0_arr < low) or np.any(x0_arr > high):
            raise ValueError(f"CMASearch: x0 {x0_arr.tolist()} is outside bounds {bounds!r}")
        if not (math.isfinite(sigma0) and sigma0 > 0):
            raise ValueError(f"CMASearch: sigma0 must be > 0, got {sigma0!r}")
        if int(popsize) != popsize or popsize < 2:
            raise ValueError(f"CMASearch: popsize must be an int >= 2, got {popsize!r}")
        if sigma_floor is not None and not (math.isfinite(sigma_floor) and sigma_floor > 0):
            raise ValueError(f"CMASearch: sigma_floor must be > 0 or None, got {sigma_floor!r}")
        self.low, self.high = low, high
        self.popsize = int(popsize)
        self.seed = int(seed)
        self.sigma_floor = None if sigma_floor is None else float(sigma_floor)
        self._rs = np.random.RandomState(np.random.MT19937(np.random.SeedSequence(self.seed % 2**64)))
        self._tie_rng = _tie_rng(self.seed)
        # pycma refuses 1-D: add one dummy coordinate in the middle of [0, 1] that nobody sees.
        self._pad = 1 if self.dim == 1 else 0
        lo_int = np.concatenate([low, np.zeros(self._pad)])
        hi_int = np.concatenate([high, np.ones(self._pad)])
        x0_int = np.concatenate([x0_arr, np.full(self._pad, 0.5)])
        opts = {
            "bounds": [lo_int.tolist(), hi_int.tolist()],
            "randn": self._rs.randn,  # our own generator; pycma then ignores option seed
            "seed": np.nan,  # pycma: nan = do not seed the global numpy.random
            "popsize": self.popsize,
            "verbose": -9,  # silent: no console output, no outcmaes/ log files
            "verb_log": 0,
            "verb_disp": 0,
        }
        self._es = cma.CMAEvolutionStrategy(x0_int.tolist(), float(sigma0), opts)
        self._pending_raw: list[np.ndarray] = []  # exactly what pycma's ask returned
        self._pending: list[np.ndarray] = []  # what we handed out (clipped, unpadded)
        self._worst_finite = math.inf
        self._best_x = x0_arr.copy()
        self._best_score = -math.inf
        self._apply_floor()

    # --- padding helpers -------------------------------------------------------------------------

    def _unpad(self, x_int: np.ndarray) -> np.ndarray:
        out = np.asarray(x_int, dtype=float)[: self.dim]
        return np.clip(out, self.low, self.high)

    def _pad_point(self, x: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
        arr = np.asarray(x, dtype=float).reshape(-1)
        if arr.shape != (self.dim,) or not np.all(np.isfinite(arr)):
            raise ValueError(f"CMASearch.{what}: expected a finite point of shape ({self.dim},), got {x!r}")
        arr = np.clip(arr, self.low, self.high)
        if self._pad:
            pheno = self._es.boundary_handler.repair(np.asarray(self._es.mean, dtype=float))
            dummy = np.clip(np.asarray(pheno, dtype=float)[self.dim :], 0.0, 1.0)  # keep it where it is
            arr = np.concatenate([arr, dummy])
        return arr

    def _to_geno(self, x_int: np.ndarray) -> np.ndarray:
        """In-bounds phenotype (padded) -> pycma genotype, via the boundary handler's inverse."""
        return np.asarray(self._es.gp.geno(x_int, from_bounds=self._es.boundary_handler.inverse), dtype=float)

    # --- ask / tell -------------------------------------------------------------------------------

    def ask(self) -> list[np.ndarray]:
        """Sample ``popsize`` candidates.

        Returns:
            ``popsize`` arrays of shape (dim,), each coordinate inside ``bounds`` (already repaired).
            Pass the same arrays (any order) to :meth:`tell`; a new ``ask`` discards untold ones.
        """
        raw = self._es.ask()
        self._pending_raw = [np.asarray(r, dtype=float) for r in raw]
        self._pending = [self._unpad(r) for r in self._pending_raw]
        return [p.copy() for p in self._pending]

    def tell(self, candidates: Sequence[np.ndarray], scores: Sequence[float]) -> None:
        """Report the scores of every candidate of the last :meth:`ask`.

        Args:
            candidates: the arrays the last ``ask`` returned, all of them, in any order.
            scores: one per candidate, **higher is better**; NaN/inf become a finite worst penalty
                (worst finite score seen so far minus 1; :data:`NONFINITE_FALLBACK` if none yet).
                Equal scores are ranked in a random order (seeded; see the module doc).

        Raises:
            ValueError: no pending ask, a count mismatch, or a candidate that was not asked.
        """
        if not self._pending:
            raise ValueError("CMASearch.tell: no pending candidates; call ask() first")
        if len(candidates) != len(self._pending) or len(scores) != len(self._pending):
            raise ValueError(
                f"CMASearch.tell: expected {len(self._pending)} candidates and scores, "
                f"got {len(candidates)} and {len(scores)}"
            )
        order: list[int] = []
        for cand in candidates:
            arr = np.asarray(cand, dtype=float).reshape(-1)
            match = next(
                (j for j, p in enumerate(self._pending) if j not in order and np.array_equal(p, arr)), None
            )
            if match is None:
                raise ValueError("CMASearch.tell: a candidate was not returned by the last ask()")
            order.append(match)
        raw_scores = [float(s) for s in scores]
        finite = [s for s in raw_scores if math.isfinite(s)]
        if finite:
            self._worst_finite = min(self._worst_finite, *finite)
        penalty = self._worst_finite - 1.0 if math.isfinite(self._worst_finite) else NONFINITE_FALLBACK
        clean = [s if math.isfinite(s) else penalty for s in raw_scores]
        for j, raw in zip(order, raw_scores, strict=True):
            if math.isfinite(raw) and raw > self._best_score:
                self._best_score, self._best_x = raw, self._pending[j].copy()
        losses = [-s for s in clean]  # the one sign flip: pycma minimises
        if len(set(losses)) < len(losses):  # ties: pycma's stable argsort would favour the first told
            shuffled = [int(k) for k in self._tie_rng.permutation(len(order))]
            order, losses = [order[k] for k in shuffled], [losses[k] for k in shuffled]
        self._es.tell([self._pending_raw[j] for j in order], losses)
        self._pending_raw, self._pending = [], []
        self._apply_floor()

    def stop(self) -> bool:
        """True when pycma's termination criteria fire (tolfun, tolx, stagnation, ...)."""
        return bool(self._es.stop())

    @property
    def stop_reasons(self) -> dict[str, Any]:
        """pycma's termination dict (criterion -> value); empty while running."""
        return dict(self._es.stop())

    # --- state ------------------------------------------------------------------------------------

    @property
    def result(self) -> tuple[np.ndarray, float]:
        """``(best_x, best_score)`` over all told candidates with a finite score.

        ``best_x`` has shape (dim,) and lies inside ``bounds``; ``best_score`` is higher-is-better.
        Before any finite score was told it is ``(x0, -inf)``.
        """
        return self._best_x.copy(), self._best_score

    @property
    def mean(self) -> np.ndarray:
        """The distribution mean mapped into the box, shape (dim,) (pycma's ``xfavorite``)."""
        pheno = self._es.gp.pheno(np.asarray(self._es.mean, dtype=float), into_bounds=self._es.boundary_handler.repair)
        return self._unpad(np.asarray(pheno, dtype=float))

    @property
    def sigma(self) -> float:
        """The current overall step size, in the units of x."""
        return float(self._es.sigma)

    def shrink_sigma(self, factor: float) -> None:
        """Multiply sigma by ``factor`` in (0, 1] (e.g. on rollback), then apply the sigma floor."""
        if not (math.isfinite(factor) and 0 < factor <= 1):
            raise ValueError(f"CMASearch.shrink_sigma: factor must be in (0, 1], got {factor!r}")
        self._es.sigma = float(self._es.sigma) * float(factor)
        self._apply_floor()

    def set_mean(self, x: Sequence[float] | np.ndarray) -> None:
        """Move the distribution mean to ``x`` (shape (dim,), clipped into ``bounds``).

        For rollback to an archived harness or a damped (EMA) step. Call it between ``tell`` and
        ``ask``; candidates asked before it and not yet told are discarded. Covariance and evolution
        paths are kept.
        """
        geno = self._to_geno(self._pad_point(x, "set_mean"))
        self._es.mean = geno.copy()
        self._pending_raw, self._pending = [], []

    def inject(self, points: Sequence[Sequence[float] | np.ndarray]) -> None:
        """Have the next :meth:`ask` propose ``points`` (each shape (dim,), clipped into bounds) first.

        Uses pycma's ``inject`` (Hansen 2011, "Injecting external solutions into CMA-ES"): the update
        in ``tell`` may shorten a far injected step.
        """
        genos = [self._to_geno(self._pad_point(p, "inject")) for p in points]
        self._es.inject(genos, force=True)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle; a search pickled before ties were broken at random gets its tie generator here."""
        self.__dict__.update(state)
        if "_tie_rng" not in state:
            self._tie_rng = _tie_rng(self.seed)

    def _apply_floor(self) -> None:
        if self.sigma_floor is not None and self._es.sigma < self.sigma_floor:
            self._es.sigma = self.sigma_floor


def _tie_rng(seed: int) -> np.random.Generator:
    """The tie-break generator: its own stream of ``seed`` (the sampling stream is left as it was)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed % 2**64, spawn_key=(1,))))
