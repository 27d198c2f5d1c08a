"""How a harness candidate is scored: one rule object (``harness/scoring.py``), one name per number, one mean and
standard-error helper, one finiteness check."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evotrainer.config import OuterConfig
from evotrainer.harness.racing import run_race
from evotrainer.harness.scoring import CandidateScore, ScoringRule
from evotrainer.stats.bootstrap import finite, item_values, mean_stderr

PKG = Path(__file__).resolve().parents[2] / "evotrainer"


def _code(rel: str) -> str:
    return (PKG / rel).read_text(encoding="utf-8")


def test_a_harness_candidate_is_scored_by_one_rule_object() -> None:
    outer = OuterConfig()
    rule = ScoringRule.from_config(replace(outer, screen_top_k=2))
    assert (rule.racers, rule.sizes, rule.level, rule.drop_level) == (2, (24,), 0.95, 0.8)
    assert (rule.fitness_rise, rule.s_val_drop, rule.penalty) == (0.01, 0.01, 0.05)
    assert rule.promotion.level == rule.level and not rule.promotion.ties
    assert rule.stages(75, 8) == (8, 24, 75) and rule.stages(0, 8) == ()
    # the score CMA-ES is told: the race estimate, less the penalty when the candidate hacked its reward
    honest = rule.score(0.42, inner_gain=0.2, current=0.40)
    assert honest == CandidateScore(0.42, 0.42 - 0.40, False, 0.42)
    hacked = rule.score(0.30, inner_gain=0.2, current=0.40)
    assert hacked.flagged and hacked.told == pytest.approx(0.30 - 0.05) and hacked.estimate == 0.30
    assert not rule.score(0.30, inner_gain=0.005, current=0.40).flagged  # fitness barely rose
    assert not replace(rule, hack_check=False).score(0.30, inner_gain=0.2, current=0.40).flagged
    assert rule.score(None, inner_gain=0.2, current=0.40) == CandidateScore(None, None, False, None)
    assert not rule.score(0.30, inner_gain=math.nan, current=0.40).flagged  # an unknown gain never flags
    # only an estimate above the incumbent's whole-set S_val earns a whole-set score
    assert rule.worth_scoring(0.41, 0.40) and not rule.worth_scoring(0.40, 0.40)
    assert not rule.worth_scoring(None, 0.40)


def test_the_race_estimate_is_the_references_mean_plus_the_leaders_paired_mean() -> None:
    rule = ScoringRule()
    ref = [0.2, 0.4, 0.3, 0.5]
    cand = [0.3, 0.5, 0.3, 0.6]
    race = rule.race(1, ref, lambda idx, a, b: [cand[a:b] for _ in idx], rule.stages(4, 2))
    assert race == run_race(1, ref, lambda idx, a, b: [cand[a:b] for _ in idx], (2, 4), level=0.95,
                            drop_level=0.8, survivors=1, futility=0.0)
    assert rule.estimate(ref, race) == pytest.approx(float(np.mean(cand)))
    assert rule.estimate(ref, run_race(0, ref, lambda *a: [], (2, 4))) is None  # nobody raced


def test_one_helper_gives_mean_and_standard_error() -> None:
    values = [0.1, 0.4, 0.35, 0.9, 0.0]
    mean, se = mean_stderr(values)
    assert mean == pytest.approx(np.mean(values)) and se == pytest.approx(np.std(values, ddof=1) / math.sqrt(5))
    assert mean_stderr([0.3]) == (0.3, None) and mean_stderr([]) == (0.0, None)


def test_finite_is_the_one_finiteness_check() -> None:
    assert finite(0.5) == 0.5 and finite(1) == 1.0
    assert finite(None) is None and finite(math.nan) is None and finite(-math.inf) is None
    assert finite(True) is None and finite("0.5") is None
    assert item_values([0.5, None, math.nan, 1]) == (0.5, 0.0, 0.0, 1.0)  # as S_val counts a failed item


def test_a_candidate_score_is_assembled_in_one_file() -> None:
    """The race, its estimate, the reward-hacking flag, the told score and the promotion rule are used through
    :class:`ScoringRule` alone; no other module of the evolve, harness or search rooms calls them."""
    pieces = re.compile(r"\b(run_race|race_stages|paired_bound|PromotionRule|hacking_flag|told_score)\(")
    homes = {"harness/scoring.py", "harness/racing.py", "harness/promotion.py"}
    hits = [f"{p.relative_to(PKG)}: {m.group(0)}" for room in ("evolve", "harness", "search")
            for p in sorted((PKG / room).rglob("*.py")) if p.relative_to(PKG).as_posix() not in homes
            for m in pieces.finditer(p.read_text(encoding="utf-8"))]
    assert hits == []
    assert not (PKG / "harness" / "hacking.py").exists()


def test_the_race_estimate_is_called_an_estimate_everywhere() -> None:
    """``screen_s_val`` named the race estimate, the screening mean and the whole-set mean; only the archive's
    schema (its migration and the old column name it reads) still says it."""
    hits = [f"{p.relative_to(PKG)}:{n}" for p in sorted(PKG.rglob("*.py"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(r"\bscreen_s_val\b", line) and p.relative_to(PKG).as_posix() != "archive/schema.py"]
    assert hits == []


def test_the_s_val_path_computes_its_mean_and_error_in_one_helper() -> None:
    """S_val's mean and standard error (rollout, whole-set score, race, estimate) all come from
    :func:`~evotrainer.stats.bootstrap.mean_stderr`."""
    computing = re.compile(r"np\.mean\(|\.mean\(\)|ddof|\.std\(|sqrt\(")
    paths = ("rollout.py", "run/screening.py", "harness/racing.py", "harness/scoring.py")
    hits = [f"{rel}:{n}: {line.strip()}" for rel in paths
            for n, line in enumerate(_code(rel).splitlines(), 1) if computing.search(line)]
    assert hits == []


def test_a_score_is_checked_for_finiteness_once() -> None:
    """One function decides whether a score is usable (:func:`~evotrainer.stats.bootstrap.finite`): from the
    objective's result to the told score, and in every report of per-item S_val (generalisation, transfer,
    ``mode=evaluate``, the sensitivity study). The optimiser's own guard (``CMASearch.tell``) aside."""
    paths = ("run/outer_loop.py", "run/screening.py", "evolve/llm_objective.py", "harness/objective.py",
             "harness/scoring.py", "harness/rollback.py", "stats/generalisation.py", "stats/transfer.py",
             "stats/sensitivity.py", "stats/bootstrap.py", "evaluate/report.py", "browse/sensitivity_view.py")
    hits = [f"{rel}:{n}" for rel in paths for n, line in enumerate(_code(rel).splitlines(), 1) if "isfinite" in line]
    assert len(hits) == 1 and hits[0].startswith("stats/bootstrap.py"), hits
