"""The archive CLI on a self-evolution run (issue 27, item 8): ``show``, ``harness``, ``trajectories`` and
``report`` show its rounds, pool and samples; and the co-evolution ``harness`` view labels the race's estimate
as an estimate (it can be negative), not as S_val.

The archive is written here through the archive's writer API (no model): a seed policy, two seed tasks and one
generated task (with markup in its text), two rounds (kept, then reverted) with judged samples, and the run's
self-evolution setup, summary and transfer events; a real training meeting in the pool; round 1 with its model-judge
grade counts and training tokens/s, round 2 without (as an archive before schema 5 reads).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore, EvaluationRow, HarnessCandidateRow
from evotrainer.archive.schema import PoolTaskRow, RoundRow, SampleRow
from evotrainer.browse.cli import main
from evotrainer.browse.selfevolve_report import SCORES_PLOT_ID
from evotrainer.events.kinds import TrajectoriesEvent
from evotrainer.events.selfevolve import SelfEvolveSetupEvent, SelfEvolveSummaryEvent, SelfEvolveTransferEvent
from evotrainer.genome import Policy

RUN = "se-run"
NASTY = "<script>alert('x')</script>"


def _round(k: int, status: str, prev: float, dev: float, val: float | None, **kw) -> RoundRow:
    return RoundRow(round=k, policy_id=kw.pop("policy_id"), status=status, difficulty={"length": 200.0 + k},
                    next_difficulty={"length": 220.0 + k}, curriculum="hold", config={"rounds": 2}, pool_size=3,
                    n_added=1, n_duplicates=0, n_samples=2, n_kept=1, pass_rate=0.5, mean_score=0.6,
                    losses=(1.4, 1.1), train={"steps": 2}, prev_dev_score=prev, dev_score=dev, val_score=val, **kw)


def build_selfevolve_archive(path: Path, *, finished: bool = True) -> dict[str, Policy]:
    """Two rounds: round 1 kept (candidate c1 with an adapter), round 2 reverted (started from c1)."""
    seed = Policy.seed("s1", {"role": "You take notes.", "format": "## Topics", "rules": "Be brief."})
    c1 = replace(seed.child(list(seed.sections), operator="selfevolve", generation=1), adapter="adapters/round1")
    path.parent.mkdir(parents=True, exist_ok=True)
    with ArchiveStore(path) as store:
        store.create_run(RUN, seed=5, config={"mode": "selfevolve", "seed": 5}, code_version="test")
        store.add_policies(RUN, [seed])
        store.add_pool_tasks(RUN, [
            PoolTaskRow(0, "t1", "h1", "seed", {"length": 200.0}, "Ana: hi.\nBo: send it by Friday.", "## Topics\n- send"),
            PoolTaskRow(0, "t2", "h2", "seed", {"length": 200.0}, "Cy: budget.", "## Topics\n- budget"),
        ])
        store.add_event(RUN, "setup", SelfEvolveSetupEvent(policy="s1", dev_tasks=("d1", "d2"), val_items=("v1",),
                                                           seed_tasks=("t1", "t2")).to_payload())
        store.add_evaluations(RUN, [EvaluationRow(policy_id="s1", kind="meta_val", batch_id="val", total=0.30,
                                                  n_tasks=1, generated_tokens=20)])
        store.add_pool_tasks(RUN, [PoolTaskRow(1, "g1", "h3", "generated", {"length": 201.0}, f"Di: {NASTY}", ""),
                                   PoolTaskRow(1, "r1", "h4", "real", {}, "Ed: a real meeting.", "A summary.")])
        store.add_samples(RUN, [
            SampleRow(round=1, task_id="g1", index=0, output=f"- {NASTY}", score=0.8, rule=0.7,
                      components={"format": 1.0}, grades=(8.0, None), model=0.8, passed=True),
            SampleRow(round=1, task_id="t1", index=0, output="- nothing", score=0.2, rule=0.2, passed=False,
                      degenerate="repetition"),
        ])
        store.add_policies(RUN, [c1])
        store.add_round(RUN, replace(_round(1, "kept", 0.40, 0.45, 0.35, policy_id="s1", candidate_id=c1.id,
                                            adapter_path="adapters/round1", grades_requested=4, grades_parsed=3),
                                     train={"steps": 2, "input_tokens": 4200, "seconds_per_step": 20.0,
                                            "tokens_per_second": 105.0}))
        store.add_samples(RUN, [SampleRow(round=2, task_id="t2", index=0, output="- budget", score=0.9, rule=0.9,
                                          passed=True)])
        store.add_round(RUN, _round(2, "reverted", 0.45, 0.41, None, policy_id=c1.id, note="dev score fell"))
        if finished:
            store.add_event(RUN, "summary", SelfEvolveSummaryEvent(
                baseline_dev=0.40, baseline_val=0.30, final_policy=c1.id, final_adapter="adapters/round1",
                rounds=((1, "kept", 0.45, 0.35), (2, "reverted", 0.41, None)), generated_tokens=1234).to_payload())
            store.add_event(RUN, "selfevolve_transfer", SelfEvolveTransferEvent(
                version=1, item_ids=("q1", "q2"), groups=("m1", "m2"), base_policy="s1", final_policy=c1.id,
                verdict="transfer (2 items of 2 groups): final − base +0.0100 [-0.010, +0.030]").to_payload())
    return {"seed": seed, "c1": c1}


@pytest.fixture()
def archive(tmp_path: Path) -> tuple[Path, dict[str, Policy]]:
    path = tmp_path / "run" / "archive.db"
    return path, build_selfevolve_archive(path)


def _cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_show_prints_the_rounds_of_a_selfevolve_run(archive, capsys) -> None:
    path, pols = archive
    code, out, err = _cli(capsys, "show", path, "--json")
    assert code == 0, err
    ov = json.loads(out)
    assert ov["mode"] == "selfevolve" and ov["status"] == "finished" and ov["policy"] == "s1"
    assert [(r["round"], r["status"], r["dev_score"], r["val_score"]) for r in ov["rounds"]] == [
        (1, "kept", 0.45, 0.35), (2, "reverted", 0.41, None)]
    assert ov["rounds"][0]["adapter_path"] == "adapters/round1" and ov["rounds"][0]["steps"] == 2
    assert ov["baseline_dev"] == pytest.approx(0.40) and ov["final_policy"] == pols["c1"].id
    assert ov["pool"] == {"tasks": 4, "seed": 2, "real": 1, "generated": 1}
    assert ov["samples"] == {"judged": 3, "passed": 2} and ov["grades"] == {"requested": 4, "parsed": 3}
    assert [(r["parse_rate"], r["tokens_per_second"]) for r in ov["rounds"]] == [(0.75, 105.0), (None, None)]
    assert ov["transfer"].startswith("transfer (2 items of 2 groups)")
    code, out, _ = _cli(capsys, "show", path)
    assert code == 0 and "self-evolution rounds" in out and "no harness" not in out
    assert "kept" in out and "reverted" in out and "0.400 -> 0.450" in out and "adapters/round1" in out
    assert "grades parsed" in out and "3/4 (75%)" in out and "2 (105)" in out and "transfer (2 items" in out


def test_show_of_an_unfinished_selfevolve_run_says_so(tmp_path: Path, capsys) -> None:
    build_selfevolve_archive(tmp_path / "archive.db", finished=False)
    code, out, _ = _cli(capsys, "show", tmp_path / "archive.db", "--json")
    ov = json.loads(out)
    assert code == 0 and ov["status"].startswith("running or crashed") and len(ov["rounds"]) == 2


def test_harness_says_a_selfevolve_run_has_no_harness_and_shows_rounds(archive, capsys) -> None:
    path, _ = archive
    code, out, _ = _cli(capsys, "harness", path)
    assert code == 0 and "has no harness" in out and "no harness candidates yet" not in out
    assert "self-evolution rounds" in out and "reverted" in out
    code, out, _ = _cli(capsys, "harness", path, "--json")
    assert code == 0 and json.loads(out) == []  # the same type as for a co-evolution run: no candidates


def test_trajectories_exports_one_line_per_judged_sample(tmp_path: Path, archive, capsys) -> None:
    path, pols = archive
    code, out, err = _cli(capsys, "trajectories", path)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["round"], r["task_id"], r["score"], r["passed"]) for r in rows] == [
        (1, "g1", 0.8, True), (1, "t1", 0.2, False), (2, "t2", 0.9, True)]
    first = rows[0]
    assert first["kind"] == "selfevolve_sample" and first["policy_id"] == "s1"
    assert first["output"] == f"- {NASTY}" and first["task_input"] == f"Di: {NASTY}"  # data, as archived
    assert first["grades"] == [8.0, None] and first["components"] == {"format": 1.0} and first["task_source"] == "generated"
    assert rows[1]["degenerate"] == "repetition" and rows[2]["policy_id"] == pols["c1"].id
    code, out, _ = _cli(capsys, "trajectories", path, "--policy", pols["c1"].id)
    assert code == 0 and [json.loads(line)["round"] for line in out.splitlines()] == [2]
    target = tmp_path / "samples.jsonl"
    code, out, _ = _cli(capsys, "trajectories", path, "--out", target)
    assert code == 0 and "3 samples" in out and len(target.read_text(encoding="utf-8").splitlines()) == 3


def test_report_of_a_selfevolve_run_plots_rounds_and_escapes_model_text(archive, capsys) -> None:
    path, _ = archive
    code, out, err = _cli(capsys, "report", path, "--json")
    assert code == 0, err
    doc = Path(json.loads(out)["report"]).read_text(encoding="utf-8")
    assert f'id="{SCORES_PLOT_ID}"' in doc and "Plotly.newPlot" in doc
    assert "self-evolution run" in doc and "adapters/round1" in doc and "dev score fell" in doc
    assert 'id="pool"' in doc and 'id="samples"' in doc and "Ana: hi." in doc
    assert NASTY not in doc and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in doc
    assert "no harness candidates" not in doc
    assert "grades parsed" in doc and "3/4 (75%)" in doc and "transfer (2 items" in doc


def test_harness_view_labels_the_race_estimate_as_an_estimate(tmp_path: Path, capsys) -> None:
    path = tmp_path / "archive.db"
    with ArchiveStore(path) as store:
        store.create_run("co", seed=1, config={"seed": 1}, code_version="test")
        store.add_harness_candidate("co", HarnessCandidateRow(
            harness_id="h1.0", outer_generation=1, index=0, vector=(0.5,), values={"difficulty": {"length": 100}},
            race_estimate=-0.0312, status="evaluated"))
    code, out, _ = _cli(capsys, "harness", path)
    assert code == 0 and "race estimate (can be < 0)" in out and "-0.0312" in out
    assert "screen S_val" not in out and "S_val (whole set)" in out


def test_trajectories_of_a_coevolution_run_still_export_its_episodes(tmp_path: Path, capsys) -> None:
    """The self-evolution branch leaves the multi-step export as it was; a run with neither says why."""
    path = tmp_path / "archive.db"
    seed = Policy.seed("a", {"role": "You act."})
    with ArchiveStore(path) as store:
        store.create_run("co", seed=1, config={"seed": 1, "mode": "coevolve"}, code_version="test")
        store.add_policies("co", [seed])
        store.add_event("co", "trajectories", TrajectoriesEvent(
            policy_id="a", batch_id="b1", evaluation_kind="fitness", harness_id="h0.0",
            trajectories=({"messages": [NASTY]}, {"text": "x"})).to_payload())
    code, out, _ = _cli(capsys, "trajectories", path)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["policy_id"] for r in rows] == ["a", "a"] and rows[0]["messages"] == [NASTY]
    assert rows[0]["kind"] == "fitness" and rows[1]["text"] == "x"
    empty = tmp_path / "empty.db"
    with ArchiveStore(empty) as store:
        store.create_run("co", seed=1, config={"seed": 1}, code_version="test")
    code, _, err = _cli(capsys, "trajectories", empty)
    assert code == 2 and "no archived trajectories" in err


def test_a_selfevolve_archive_of_the_previous_release_reads_read_only(tmp_path: Path, capsys) -> None:
    """``tests/data/archive_v2/archive_v2.db`` (schema 2, pool columns ``transcript`` / ``reference_minutes``,
    no setup or summary event) shows its round and exports its sample, and is left as it was."""
    copy = tmp_path / "archive.db"
    shutil.copyfile(Path(__file__).resolve().parents[1] / "data" / "archive_v2" / "archive_v2.db", copy)
    before = copy.read_bytes()
    code, out, _ = _cli(capsys, "show", copy, "--json")
    ov = json.loads(out)
    assert code == 0 and [(r["round"], r["status"], r["dev_score"]) for r in ov["rounds"]] == [(1, "kept", 0.5)]
    assert ov["status"].startswith("running or crashed")
    assert ov["pool"] == {"tasks": 2, "seed": 1, "real": 0, "generated": 1} and ov["transfer"] is None
    assert ov["rounds"][0]["grades_requested"] is None and ov["grades"] == {"requested": 0, "parsed": 0}
    code, out, _ = _cli(capsys, "trajectories", copy)
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and row["task_input"] == "Cy: budget talk." and row["output"] == "- budget" and row["grades"] == [8.0]
    code, out, _ = _cli(capsys, "harness", copy)
    assert code == 0 and "has no harness" in out
    assert copy.read_bytes() == before


def test_a_sweep_job_of_a_selfevolve_run_reports_its_final_policys_s_val(archive) -> None:
    """The last round was reverted: its score is the discarded adapter's, so the job's S_val is round 1's (kept)."""
    from evotrainer.app.sweep_callback import job_figures

    figures = job_figures(archive[0])
    assert figures["mode"] == "selfevolve" and figures["s_val"] == 0.35 and figures["initial_s_val"] == 0.30
