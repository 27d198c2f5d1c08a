"""The ablation study in the product (issue 25): ``python -m evotrainer -m +study=ablation_smoke`` runs 3 arms x 2
seeds on the tiny random model, each stopped by the same rollout budget, and ends with the study table;
``archive sweep`` prints the same table from the folder and ``--html`` writes its report. The sweep is the
``smoke_study`` fixture (conftest.py), shared with tests/benchmark_scripts/test_unpromoted_racers.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evotrainer.browse.cli import main as archive_main
from evotrainer.browse.study_view import STUDY_REPORT_NAME
from evotrainer.sweep_index import read_index

pytestmark = pytest.mark.slow

ARMS = ["coevolve", "frozen_harness", "random_harness"]


def test_the_smoke_study_runs_every_arm_and_seed_to_the_same_budget(smoke_study) -> None:
    sweep, proc = smoke_study
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = read_index(sweep)["jobs"]
    assert [j["folder"] for j in jobs] == [f"{i}_{a}_seed{s}" for i, (a, s) in
                                           enumerate((a, s) for a in ARMS for s in (0, 1))]
    assert all(j["status"] == "ok" and j["stop_reason"] == "outer.budget.rollouts" for j in jobs)
    out = proc.stdout
    assert "ablation study: 6 run(s) of 3 arm(s), seeds 0,1;" in out
    assert "equal budgets: every run stopped by outer.budget.rollouts=40" in out
    assert (sweep / STUDY_REPORT_NAME).is_file()


def test_archive_sweep_prints_the_same_table_and_its_json_shows_equal_budgets(smoke_study, capsys,
                                                                               tmp_path: Path) -> None:
    sweep, proc = smoke_study
    assert proc.returncode == 0, proc.stderr[-3000:]
    capsys.readouterr()
    assert archive_main(["sweep", str(sweep), "--json"]) == 0
    study = json.loads(capsys.readouterr().out)["study"]
    assert study["arms"] == ARMS and study["budgets_equal"] and study["runs"] == 6
    rows = study["rows"]
    assert [r["label"] for r in rows] == [f"{a}: final best − best seed" for a in ARMS] + [
        "coevolve − frozen_harness", "coevolve − random_harness"]
    for r in rows:
        assert r["seeds"] == [0, 1]
        assert r["heldout"] is not None and r["heldout"]["runs"] == 2 and r["heldout"]["n"] >= 1
        assert r["transfer"] is not None and r["transfer"]["n"] == 2  # task.transfer_limit=2
    for r in rows[:3]:
        assert r["budgets"] == [40, 40] and all(n >= 40 for n in r["rollouts"])
        assert all(isinstance(s, float) and s > 0 for s in r["seconds"]) and r["transfer_plain"] is not None
    html = tmp_path / "study.html"
    assert archive_main(["sweep", str(sweep), "--html", str(html)]) == 0
    text = capsys.readouterr().out
    assert "ablation study: 6 run(s) of 3 arm(s), seeds 0,1;" in text and "│ coevolve − random_harness │" in text
    assert 'id="study-plot"' in html.read_text()


def test_archive_sweep_items_pools_the_matching_items_alone(smoke_study, capsys) -> None:
    sweep, proc = smoke_study
    assert proc.returncode == 0, proc.stderr[-3000:]
    capsys.readouterr()
    assert archive_main(["sweep", str(sweep), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pooled_items"] is None
    assert all(set(v) == {"heldout", "selection"} for v in doc["pooled_by_source"].values())
    held = doc["pooled"]["heldout"]
    assert archive_main(["sweep", str(sweep), "--json", "--items", "*"]) == 0
    every = json.loads(capsys.readouterr().out)["pooled_items"]
    assert every["pattern"] == "*" and every["heldout"]["mean"] == pytest.approx(held["mean"])
    assert every["heldout"]["n"] == held["n"]
    assert archive_main(["sweep", str(sweep), "--items", "no-such-item-*"]) == 0
    assert "no run recorded items matching 'no-such-item-*'" in capsys.readouterr().out


def test_archive_sensitivity_pools_the_study_candidates_per_knob(smoke_study, capsys) -> None:
    sweep, proc = smoke_study
    assert proc.returncode == 0, proc.stderr[-3000:]
    capsys.readouterr()
    assert archive_main(["sensitivity", str(sweep), "--json", "--resamples", "200"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"] == 6 and doc["candidates"] >= 6
    knobs = {r["knob"]: r for r in doc["knobs"]}
    assert {"length", "action_f1"} <= set(knobs)  # a difficulty knob and a reward weight
    for r in knobs.values():
        assert r["rho"] is None or (-1 <= r["rho"] <= 1 and r["n"] >= 4)
    assert archive_main(["sensitivity", str(sweep), "--resamples", "200"]) == 0
    assert "harness sensitivity:" in capsys.readouterr().out
