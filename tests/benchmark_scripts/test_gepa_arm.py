"""The ablation study's GEPA arm (benchmarks/gepa_arm.py) on the tiny model: paired with a finished study run,
it runs gepa.optimize with EvoTrainer's evaluator inside the run's budget and writes an arm result that the
study table pools (issue 25)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.browse.study_view import arm_runs
from evotrainer.browse.views import run_generalisation
from evotrainer.config import Config
from evotrainer.evolve.coevolution import run_evolve
from evotrainer.stats.ablation import read_arm_result, study_table

gepa = pytest.importorskip("gepa", reason="the gepa package is not installed (pip install -e '.[peers]')")
pytestmark = pytest.mark.slow  # a tiny study run, then GEPA within its budget: minutes on a busy 2-core machine


@pytest.fixture(scope="module")
def pair_and_arm(tiny_run_config: Callable[[], Config], tmp_path_factory: pytest.TempPathFactory):
    from benchmarks.gepa_arm import run_gepa_arm

    cfg = tiny_run_config()
    cfg.decoding.max_new_tokens = 8
    cfg.inner.generations = 1
    cfg.inner.llm_mutation_share = 0.0
    cfg.inner.mutator_max_new_tokens = 24
    cfg.outer.candidate_source = "frozen_harness"
    cfg.outer.generations, cfg.outer.patience = 50, 50
    cfg.outer.budget.rollouts = 40
    sweep = tmp_path_factory.mktemp("sweep")
    run_evolve(cfg, run_dir=sweep / "0_frozen_harness_seed0")
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        arm = run_gepa_arm(sweep / "0_frozen_harness_seed0", train_tasks=4, minibatch=2)
    return sweep, sweep / "0_frozen_harness_seed0" / "archive.db", arm, log.getvalue()


def test_the_gepa_arm_spends_the_same_budget_and_writes_its_result(pair_and_arm) -> None:
    sweep, _, arm, _ = pair_and_arm
    path = sweep / "gepa_seed0" / "arm_result.json"
    assert arm.source == str(path) and read_arm_result(path).rollouts == arm.rollouts
    assert arm.arm == "gepa" and arm.seed == 0 and arm.budget == 40
    extra = json.loads(path.read_text())["extra"]
    assert extra["generation0_rollouts"] + extra["search_rollouts"] == arm.rollouts
    assert extra["metric_calls"] <= extra["max_metric_calls"] + 8  # GEPA stops between iterations
    assert extra["best_seed_check"] is None or "differently" not in extra["best_seed_check"]


def test_the_arm_reports_its_progress(pair_and_arm) -> None:
    _, _, arm, log = pair_and_arm
    search = arm.budget - json.loads(Path(arm.source).read_text())["extra"]["generation0_rollouts"]
    assert f"gepa arm (seed 0): search: started, {search} rollouts" in log
    assert "Iteration 1:" in log  # GEPA's own line per iteration
    assert "gepa arm (seed 0): held-out and transfer items: started" in log


def test_the_best_seed_scores_as_in_the_paired_run_on_the_same_held_out_items(pair_and_arm) -> None:
    _, archive, arm, _ = pair_and_arm
    with ArchiveStore(archive, read_only=True) as store:
        g = run_generalisation(store, store.list_runs()[0].run_id)
    assert arm.heldout.item_ids == g.heldout.item_ids
    assert arm.heldout.roles["best_seed"] == pytest.approx(g.heldout.baseline)  # same model, evaluator, greedy


def test_the_study_table_pools_the_gepa_arm_with_the_product_arm(pair_and_arm) -> None:
    sweep, _, _, _ = pair_and_arm
    runs, skipped = arm_runs([sweep])
    assert sorted(r.arm for r in runs) == ["frozen_harness", "gepa"] and not skipped
    t = study_table(runs, n_resamples=200)
    assert [r.label for r in t.rows][-1] == "frozen_harness − gepa" and t.budgets_equal
