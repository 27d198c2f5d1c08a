"""Which harness knobs move a candidate's score? A rank-correlation sensitivity study over archived candidates.

Which harness parameters measurably move S_val, before the outer loop's dimension is changed? Every run
archives each harness candidate's named values and its race estimate (``race_estimate``: its race leader's
whole-set S_val as the race estimated it, what CMA-ES is told before any reward-hacking penalty, higher is better;
:mod:`evotrainer.harness.scoring`). This module pools those
(values, score) pairs over runs and, per knob, reports Spearman's rank correlation between the knob's value and
the score, with a percentile bootstrap interval over candidates (``scipy.stats.bootstrap``, paired resampling;
Efron & Tibshirani 1993, ch. 13). Scores are centred on their run's median first, so a seed whose best seed
scores higher than another's does not read as a knob effect (runs differ in their item draws and incumbents).

What it is not: a causal estimate. Candidates of one CMA-ES run are not independent draws (later means follow
earlier scores), so with few candidates treat an interval that excludes 0 as a lead to test, not a finding.
Knobs that never varied (a frozen harness) are listed with ``rho = None``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from evotrainer.stats.bootstrap import finite

__all__ = ["CandidatePoint", "KnobSensitivity", "knob_values", "sensitivity"]


@dataclass(frozen=True)
class CandidatePoint:
    """One archived harness candidate.

    Attributes:
        run: the run (or job) it belongs to; scores are centred per run.
        harness_id: its id in the run.
        values: knob name -> value (difficulty knobs in their units, reward weights in [0, 1]).
        score: its race estimate (S_val units, higher is better).
    """

    run: str
    harness_id: str
    values: Mapping[str, float]
    score: float


@dataclass(frozen=True)
class KnobSensitivity:
    """One knob's rank correlation with the (run-centred) candidate score.

    Attributes:
        knob: the knob's name.
        n: candidates with a value and a score.
        rho: Spearman's rho in [-1, 1]; positive means higher values went with higher scores; None when the knob
            or the scores did not vary.
        low, high: the percentile bootstrap interval of ``rho`` at the requested level (None with ``rho``, or
            when the bootstrap is degenerate).
        spread: the knob's interquartile range over the candidates, in its units (0 for a frozen knob).
    """

    knob: str
    n: int
    rho: float | None
    low: float | None
    high: float | None
    spread: float

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies wholly above or below 0."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def knob_values(values: Mapping[str, object]) -> dict[str, float]:
    """The numeric knobs of an archived candidate's ``values`` (``Harness.as_dict()`` plus extras): the flat
    ``values`` mapping when present, else ``difficulty`` and ``reward_weights`` merged. Non-numbers are dropped."""
    flat = values.get("values")
    if not isinstance(flat, Mapping):
        flat = {**dict(values.get("difficulty") or {}), **dict(values.get("reward_weights") or {})}
    out: dict[str, float] = {}
    for k, v in flat.items():
        if (value := finite(v)) is not None:
            out[str(k)] = value
    return out


def _centred(points: Sequence[CandidatePoint]) -> np.ndarray:
    by_run: dict[str, list[float]] = {}
    for p in points:
        by_run.setdefault(p.run, []).append(p.score)
    medians = {r: float(np.median(s)) for r, s in by_run.items()}
    return np.array([p.score - medians[p.run] for p in points], dtype=float)


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    with warnings.catch_warnings():  # a resample with one distinct value has no correlation: it counts as 0
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        r = stats.spearmanr(x, y).statistic
    return finite(r) or 0.0


def sensitivity(points: Sequence[CandidatePoint], *, level: float = 0.95, resamples: int = 2000,
                seed: int = 0) -> list[KnobSensitivity]:
    """Per knob, Spearman's rho between its value and the run-centred score, most correlated first.

    Args:
        points: archived candidates with a finite score (others should be left out by the caller).
        level: coverage of the bootstrap interval, in (0, 1).
        resamples: bootstrap resamples, >= 100.
        seed: seed of the bootstrap's generator.

    Returns:
        One row per knob seen in any candidate; rows with a rho first by ``|rho|`` descending, then frozen knobs.

    Raises:
        ValueError: ``level`` outside (0, 1) or ``resamples`` below 100.
    """
    if not 0 < level < 1:
        raise ValueError(f"level: expected a value in (0, 1), got {level}")
    if resamples < 100:
        raise ValueError(f"resamples: expected >= 100, got {resamples}")
    pts = [p for p in points if finite(p.score) is not None]
    knobs = sorted({k for p in pts for k in p.values})
    rows: list[KnobSensitivity] = []
    for knob in knobs:
        have = [p for p in pts if knob in p.values]
        x = np.array([p.values[knob] for p in have], dtype=float)
        y = _centred(have) if have else np.array([])
        spread = float(np.subtract(*np.percentile(x, [75, 25]))) if len(x) else 0.0
        if len(have) < 4 or np.ptp(x) == 0 or np.ptp(y) == 0:
            rows.append(KnobSensitivity(knob, len(have), None, None, None, spread))
            continue
        rho = _rho(x, y)
        res = stats.bootstrap((x, y), _rho, paired=True, vectorized=False, n_resamples=resamples,
                              confidence_level=level, method="percentile", random_state=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        ok = finite(low) is not None and finite(high) is not None
        rows.append(KnobSensitivity(knob, len(have), rho, low if ok else None, high if ok else None, spread))
    return sorted(rows, key=lambda r: (r.rho is None, -abs(r.rho or 0.0), r.knob))
