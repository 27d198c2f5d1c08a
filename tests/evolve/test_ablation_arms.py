"""The ablation arms end to end on the tiny model: each arm's candidates come from its source, and the rollout
budget, counted from the archive, stops the run (issue 25)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.archive.schema import budget_rollouts
from evotrainer.browse.study_view import arm_runs
from evotrainer.config import Config
from evotrainer.evolve.coevolution import run_evolve


def _arm(tiny_run_config: Callable[[], Config], source: str) -> Config:
    cfg = tiny_run_config()
    cfg.decoding.max_new_tokens = 8
    cfg.inner.generations = 1
    cfg.inner.llm_mutation_share = 0.0
    cfg.outer.candidate_source = source
    cfg.outer.generations = 50
    cfg.outer.patience = 50
    cfg.outer.budget.rollouts = 45
    return cfg


@pytest.fixture(scope="module")
def arms(tiny_run_config, tmp_path_factory: pytest.TempPathFactory):
    """source -> (the archived summary event, the run's archive file, its run id)."""
    out = {}
    for source in ("frozen_harness", "random_harness"):
        run_dir = tmp_path_factory.mktemp(source)
        summary = run_evolve(_arm(tiny_run_config, source), run_dir=run_dir)
        with ArchiveStore(run_dir / "archive.db", read_only=True) as store:
            out[source] = (summary, run_dir / "archive.db", store.list_runs()[0].run_id)
    return out


@pytest.mark.parametrize("source", ["frozen_harness", "random_harness"])
def test_the_rollout_budget_counted_from_the_archive_stops_the_arm(arms, source: str) -> None:
    s, archive, run_id = arms[source]
    assert s.stop_reason == "outer.budget.rollouts", s.stop_detail
    with ArchiveStore(archive, read_only=True) as store:
        rows = store.evaluations(run_id)
        stops = store.events(run_id, kind="stop")
        cands = store.harness_candidates(run_id)
    counted = sum(budget_rollouts(r) for r in rows)
    assert counted >= 45 and s.candidates >= 1
    # the stop was decided before a candidate, on the count of the rows archived so far
    assert stops and stops[-1].payload["key"] == "outer.budget.rollouts"
    used = int(stops[-1].payload["detail"].split()[0])
    assert 45 <= used <= counted and len(cands) == s.candidates
    (run,), _ = arm_runs([archive.parent])
    assert (run.arm, run.rollouts, run.budget) == (source, counted, 45)


def test_frozen_candidates_are_the_start_harness_and_random_ones_spread(arms) -> None:
    vectors = {}
    for source, (_, archive, run_id) in arms.items():
        with ArchiveStore(archive, read_only=True) as store:
            vectors[source] = np.array([c.values["proposal"] for c in store.harness_candidates(run_id)])
    frozen, rand = vectors["frozen_harness"], vectors["random_harness"]
    assert len(frozen) >= 2 and np.allclose(frozen, frozen[0])
    assert len(rand) >= 2 and not np.allclose(rand, rand[0]) and rand.min() >= 0 and rand.max() <= 1


def test_the_run_control_counts_the_recorders_rollouts_against_the_rollout_limit() -> None:
    from types import SimpleNamespace

    from evotrainer.harness.stopping import BudgetLimits, Usage, budget_stop
    from evotrainer.run.control import RunControl

    assert budget_stop(Usage(rollouts=44), BudgetLimits(rollouts=45)) is None
    assert budget_stop(Usage(rollouts=45), BudgetLimits(rollouts=45)).detail == "45 rollouts used, limit 45"
    rec = SimpleNamespace(rollouts=44, events=[])
    rec.emit = lambda event: rec.events.append(event)
    control = RunControl(rec, BudgetLimits(rollouts=45))
    assert control.check(Usage(seconds=1.0), harness_id="g1c0") is None
    rec.rollouts = 46  # the recorder archived more rows: the next boundary stops
    stop = control.check(Usage(seconds=2.0), harness_id="g1c1")
    assert stop.key == "outer.budget.rollouts" and [e.kind for e in rec.events] == ["stop"]
