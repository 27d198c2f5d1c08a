"""``benchmarks/unpromoted_racers.py`` (issue 25): the best unpromoted racer of each study run against its incumbent on
held-out and transfer items. The pooling on made-up scores (no model), then the whole script on the smoke study sweep
(the ``smoke_study`` fixture, tiny random model) with one racer added to a copy of its first job's archive."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not an installed package

from benchmarks.unpromoted_racers import RacerRun, RunPlan, compare_racers, main, render  # noqa: E402
from evotrainer.archive.schema import EvaluationRow  # noqa: E402
from evotrainer.archive.store import open_archive  # noqa: E402
from evotrainer.events.kinds import SetupEvent  # noqa: E402
from evotrainer.genome import Policy  # noqa: E402
from evotrainer.stats.ablation import ItemScores  # noqa: E402


def _run(job: str, arm: str, inc: list[float], racer: list[float] | None, ids: tuple[str, ...]) -> RacerRun:
    pol = Policy(id=f"{job}-inc", sections=(("prompt", "Summarise."),))
    rac = None if racer is None else Policy(id=f"{job}-racer", sections=(("prompt", "Minutes."),))
    plan = RunPlan(job=job, arm=arm, seed=0, archive="a.db", run_id="r", config={}, heldout_ids=ids, incumbent=pol,
                   racer=rac, incumbent_val=0.1, racer_val=None if racer is None else 0.2, archived_heldout=None,
                   archived_transfer=None)
    roles = {"incumbent": tuple(inc), **({} if racer is None else {"racer": tuple(racer)})}
    return RacerRun(plan, ItemScores(ids, roles), None, (), 0)


def test_runs_are_pooled_per_arm_and_overall_by_item_and_runs_without_a_racer_are_left_out() -> None:
    ids = ("a", "b", "c")
    runs = [_run("0_coevolve_seed0", "coevolve", [0.1, 0.2, 0.3], [0.2, 0.2, 0.1], ids),
            _run("1_coevolve_seed1", "coevolve", [0.1, 0.2, 0.3], None, ids),
            _run("2_frozen_harness_seed0", "frozen_harness", [0.1, 0.2, 0.3], [0.4, 0.3, 0.3], ids)]
    rows = compare_racers(runs, n_resamples=300)
    assert [(r["scope"], r["label"]) for r in rows] == [
        ("run", "0_coevolve_seed0"), ("run", "2_frozen_harness_seed0"), ("arm", "coevolve"),
        ("arm", "frozen_harness"), ("all", "all runs")]  # no transfer items: no transfer rows
    assert all(r["part"] == "heldout" and r["n"] == 3 for r in rows)
    first, frozen, everything = rows[0], rows[1], rows[-1]
    assert first["mean"] == pytest.approx((0.1 + 0.0 - 0.2) / 3) and (first["wins"], first["losses"]) == (1, 1)
    assert first["ties"] == 1 and frozen["low"] > 0 and frozen["runs"] == 1
    per_item = np.mean([[0.1, 0.0, -0.2], [0.3, 0.1, 0.0]], axis=0)  # each item's difference averaged over the runs
    assert everything["mean"] == pytest.approx(per_item.mean()) and everything["runs"] == 2
    assert (everything["wins"], everything["losses"], everything["ties"]) == (3, 1, 2)
    assert everything["low"] <= everything["mean"] <= everything["high"]
    assert compare_racers(runs, n_resamples=300) == rows  # seeded: the same intervals again
    assert compare_racers(runs[1:2]) == []


@pytest.mark.slow
def test_the_script_scores_an_added_racer_and_reproduces_the_archived_incumbent(smoke_study, tmp_path: Path,
                                                                                 capsys) -> None:
    source, proc = smoke_study
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "sweep"
    shutil.copytree(source, sweep)  # the fixture's folder stays as it was
    with open_archive(sweep / "0_coevolve_seed0" / "archive.db", read_only=False) as store:
        run = store.list_runs()[-1]
        setup = next(e.event for e in store.events(run.run_id, kind="setup") if isinstance(e.event, SetupEvent))
        incumbent = store.evaluations(run.run_id, kind="meta_heldout")[-1].policy_id
        racer = next(p.id for p in store.policies(run.run_id) if p.id != incumbent)
        store.add_evaluations(run.run_id, [  # as if it had been raced on the whole selection set and lost
            EvaluationRow(policy_id=racer, kind="meta_val", batch_id="test", total=0.5,
                          n_tasks=len(setup.selection_items)),
            EvaluationRow(policy_id=racer, kind="meta_val", batch_id="test", total=0.9, n_tasks=1)])  # partial
    out = tmp_path / "out"

    assert main([str(sweep), "--plan"]) == 0
    text = capsys.readouterr().out
    assert "6 run(s), 1 with a racer" in text and f"racer {racer}, selection S_val 0.5000" in text
    assert "1_coevolve_seed1 (coevolve, seed 1): incumbent" in text and "no racer" in text
    assert not out.exists()

    assert main([str(sweep), "--out", str(out), "--threads", "1", "--json", "--resamples", "200"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["job"] for r in doc["runs"]] == [p.name for p in sorted(sweep.glob("[0-9]_*"))]
    first = doc["runs"][0]
    assert first["racer"] == racer and first["incumbent"] == incumbent
    assert len(first["heldout"]["item_ids"]) == len(first["heldout"]["racer"]) == 3  # outer.heldout_share=0.5 of 6
    assert first["heldout"]["item_ids"] == list(setup.heldout_items)
    assert len(first["transfer"]["item_ids"]) == 2  # task.transfer_limit=2
    assert all(r["mismatches"] == 0 and len(r["checks"]) == 2 for r in doc["runs"])  # re-scored = archived
    assert all(r["racer"] is None and "racer" not in r["heldout"] for r in doc["runs"][1:])
    rows = {(r["scope"], r["label"], r["part"]): r for r in doc["rows"]}
    assert set(rows) == {(s, lab, part) for part in ("heldout", "transfer")
                         for s, lab in (("run", "0_coevolve_seed0"), ("arm", "coevolve"), ("all", "all runs"))}
    held = rows[("all", "all runs", "heldout")]
    diffs = np.subtract(first["heldout"]["racer"], first["heldout"]["incumbent"])
    assert held["mean"] == pytest.approx(diffs.mean()) and held["wins"] + held["losses"] + held["ties"] == 3
    assert json.loads((out / "unpromoted_racers.json").read_text())["rows"] == doc["rows"]
    assert len((out / "unpromoted_racers_items.csv").read_text().splitlines()) == 1 + 6 * (3 + 2) + 3 + 2
    table = render(doc)
    assert "held-out  0_coevolve_seed0" in table and "transfer  all runs" in table
    assert "equal the archived totals in 12 of 12 comparisons" in table
