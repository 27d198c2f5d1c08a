"""The ablation study's table (issue 25): pooling over seeds by a cluster bootstrap over items, arm against arm
paired by seed and item, equal budgets made visible, and a peer arm's result file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from evotrainer.browse.study_view import arm_runs, is_study, study_html
from evotrainer.errors import DataError
from evotrainer.stats.ablation import (
    ArmRun,
    ItemScores,
    read_arm_result,
    render_study,
    study_notes,
    study_table,
    to_payload,
    write_arm_result,
)
from evotrainer.stats.bootstrap import paired_difference, rng_for

HELD = [f"h{i}" for i in range(10)]
TRANSFER = [f"t{i}" for i in range(6)]
BASE = np.linspace(0.05, 0.14, 10)  # the best seed's per-item S_val on the held-out items, shape (10,)
GAIN = {"coevolve": 0.02, "frozen_harness": 0.0, "random_harness": -0.01, "gepa": 0.005}


def _wobble(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 0.01, size=10)  # (10,)


def _run(arm: str, seed: int, *, budget: int | None = 300, rollouts: int = 310, gain: float | None = None,
         order: list[int] | None = None, transfer: bool = True) -> ArmRun:
    g = GAIN[arm] if gain is None else gain
    wobble = _wobble(seed)  # the same for every arm of a seed: the seed's luck, not the arm's
    best = BASE + g + wobble
    idx = order or list(range(10))
    held = ItemScores(tuple(HELD[i] for i in idx), {"best_seed": tuple(BASE[idx]), "final_best": tuple(best[idx])})
    tr = None
    if transfer:
        tb = BASE[:6]
        tr = ItemScores(tuple(TRANSFER), {"best_seed": tuple(tb), "final_best": tuple(tb + g / 2),
                                          "plain_prompt": tuple(tb + 0.03)})
    return ArmRun(arm, seed, f"run-{arm}-{seed}", f"/s/{arm}{seed}/archive.db", rollouts, budget, 900.0 + seed,
                  held, tr)


def _study(arms=("coevolve", "frozen_harness", "random_harness"), seeds=(0, 1, 2)) -> list[ArmRun]:
    return [_run(a, s, rollouts=300 + 10 * s + len(a)) for a in arms for s in seeds]


def _row(table, label: str):
    return next(r for r in table.rows if r.label == label)


def test_the_table_has_one_row_per_arm_then_the_reference_against_each_other_arm() -> None:
    t = study_table(_study(), seed=0, n_resamples=400)
    assert t.arms == ("coevolve", "frozen_harness", "random_harness") and t.runs == 9
    assert [r.label for r in t.rows] == [
        "coevolve: final best − best seed", "frozen_harness: final best − best seed",
        "random_harness: final best − best seed", "coevolve − frozen_harness", "coevolve − random_harness"]
    co = _row(t, "coevolve: final best − best seed")
    assert co.seeds == (0, 1, 2) and co.rollouts == (308, 318, 328) and co.budgets == (300, 300, 300)
    luck = float(np.mean([_wobble(s) for s in (0, 1, 2)]))
    assert co.heldout.diff.mean == pytest.approx(0.02 + luck) and co.heldout.diff.low < co.heldout.diff.high
    assert (co.heldout.diff.n, co.heldout.runs, co.heldout.pairs) == (10, 3, 30)  # 10 clusters, not 30 draws
    assert co.heldout.wins + co.heldout.losses + co.heldout.ties == 30
    assert co.transfer.diff.mean == pytest.approx(0.01) and co.transfer_plain.diff.mean == pytest.approx(-0.02)
    assert co.transfer.wins == 18  # 3 seeds x 6 transfer items
    fr = _row(t, "frozen_harness: final best − best seed")
    assert fr.heldout.diff.mean == pytest.approx(luck)
    vs = _row(t, "coevolve − random_harness")
    assert vs.kind == "versus" and vs.rollouts == () and vs.heldout.diff.mean == pytest.approx(0.03)
    assert (vs.heldout.wins, vs.heldout.losses) == (30, 0) and vs.transfer.diff.mean == pytest.approx(0.015)
    assert t.budgets_equal


def test_the_interval_is_a_cluster_bootstrap_over_items_of_the_seed_averaged_differences() -> None:
    runs = _study()
    t = study_table(runs, seed=11, level=0.9, n_resamples=500)
    per_seed = [np.asarray(r.heldout.roles["final_best"]) - np.asarray(r.heldout.roles["best_seed"])
                for r in runs if r.arm == "coevolve"]
    expected = paired_difference([0.0] * 10, list(np.mean(per_seed, axis=0)), n_resamples=500, level=0.9,
                                 rng=rng_for(11, "ablation", "coevolve", "heldout", "final_best", "best_seed"))
    got = _row(t, "coevolve: final best − best seed").heldout.diff
    assert (got.mean, got.low, got.high, got.n) == pytest.approx((expected.mean, expected.low, expected.high, 10))
    co = [np.asarray(r.heldout.roles["final_best"]) for r in runs if r.arm == "coevolve"]
    fr = [np.asarray(r.heldout.roles["final_best"]) for r in runs if r.arm == "frozen_harness"]
    vs_expected = paired_difference([0.0] * 10, list(np.mean([a - b for a, b in zip(co, fr, strict=True)], axis=0)),
                                    n_resamples=500, level=0.9,
                                    rng=rng_for(11, "ablation", "coevolve", "frozen_harness", "heldout"))
    vs = _row(t, "coevolve − frozen_harness").heldout.diff
    assert (vs.mean, vs.low, vs.high) == pytest.approx((vs_expected.mean, vs_expected.low, vs_expected.high))


def test_arm_against_arm_pairs_by_seed_and_by_item_id() -> None:
    runs = _study(seeds=(0, 1, 2))
    runs = [r for r in runs if not (r.arm == "frozen_harness" and r.seed == 2)]  # frozen lacks seed 2
    shuffled = list(reversed(range(10)))
    runs.append(_run("gepa", 1, order=shuffled, transfer=False))  # items in another order, no transfer report
    t = study_table(runs, seed=0, n_resamples=300)
    assert t.arms[-1] == "gepa"
    assert _row(t, "coevolve − frozen_harness").seeds == (0, 1)
    g = _row(t, "coevolve − gepa")
    assert g.seeds == (1,) and g.heldout.diff.mean == pytest.approx(0.015) and g.heldout.diff.n == 10
    assert g.transfer is None and _row(t, "gepa: final best − best seed").transfer is None


def test_a_second_run_of_an_arm_and_seed_is_left_out_and_unequal_budgets_are_said() -> None:
    runs = [*_study(), _run("coevolve", 0, budget=600)]
    t = study_table(runs, n_resamples=200)
    assert t.duplicates == ("/s/coevolve0/archive.db",) and t.runs == 9 and t.budgets_equal
    notes = study_notes(t)
    assert notes[0].startswith("equal budgets: every run stopped by outer.budget.rollouts=300")
    assert "counted 308–334" in notes[0] and notes[1].startswith("left out")
    t2 = study_table([_run("coevolve", 0), _run("frozen_harness", 0, budget=None)], n_resamples=200)
    assert not t2.budgets_equal and study_notes(t2)[0].startswith("budgets NOT equal: coevolve ['300'], "
                                                                  "frozen_harness ['none']")


def test_the_rendered_table_and_its_payload() -> None:
    t = study_table(_study(), n_resamples=200)
    table = render_study(t)
    assert len(table.columns) == 8 and table.row_count == 5
    console = Console(width=160, record=True)
    console.print(table)
    text = console.export_text()
    assert "seeds 0,1,2;" in text and "│ coevolve − frozen_harness │" in text and "318 (308–328) / 300" in text
    assert max(len(line) for line in text.splitlines()) <= 160 and "│     15.0 │" in text  # mean wall minutes
    doc = json.loads(json.dumps(to_payload(t)))
    assert doc["budgets_equal"] and [r["kind"] for r in doc["rows"]] == ["arm"] * 3 + ["versus"] * 2
    assert set(doc["rows"][0]["heldout"]) >= {"mean", "low", "high", "n", "runs", "wins", "losses", "ties"}


def test_an_arm_result_file_round_trips_and_is_found_below_a_folder(tmp_path: Path) -> None:
    run = _run("gepa", 2)
    path = write_arm_result(tmp_path / "gepa_seed2", run, extra={"metric_calls": 300})
    back = read_arm_result(path)
    assert back == ArmRun(**{**run.__dict__, "source": str(path)})
    found, skipped = arm_runs([tmp_path])
    assert [r.run_id for r in found] == ["run-gepa-2"] and skipped == [] and is_study(found)
    assert not is_study([_run("coevolve", 0)])
    bad = json.loads(path.read_text())
    bad["heldout"]["roles"]["final_best"] = bad["heldout"]["roles"]["final_best"][:3]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "arm_result.json").write_text(json.dumps(bad))
    with pytest.raises(DataError, match="heldout.roles.final_best"):
        read_arm_result(tmp_path / "bad" / "arm_result.json")
    found, skipped = arm_runs([tmp_path])
    assert len(found) == 1 and "heldout.roles.final_best" in skipped[0]["reason"]
    bad = json.loads(path.read_text())
    bad["arm"] = "gepa[red]\x1b[2J"
    (tmp_path / "bad" / "arm_result.json").write_text(json.dumps(bad))
    with pytest.raises(DataError, match="field 'arm'"):
        read_arm_result(tmp_path / "bad" / "arm_result.json")


def test_the_study_page_escapes_arm_names_and_holds_the_figure() -> None:
    runs = [_run("coevolve", 0), ArmRun("<script>x</script>", 0, "r-x", "/x", 300, 300, None,
                                          _run("coevolve", 0).heldout, None)]
    page = study_html(study_table(runs, n_resamples=100), ["/s"])
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert 'id="study-plot"' in page and "equal budgets" in page


@pytest.mark.parametrize("name", ["ablation", "ablation_smoke"])
def test_the_study_configs_compose_with_one_budget_and_a_sweep_over_arms_and_seeds(name: str) -> None:
    from hydra import compose, initialize_config_dir

    from evotrainer.config import PACKAGE_DATA, register_configs, to_config
    from evotrainer.sweep_index import planned_jobs

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        dcfg = compose(config_name="config", overrides=[f"+study={name}"], return_hydra_config=True)
        cfg = to_config(compose(config_name="config", overrides=[f"+study={name}"]))
    params = dict(dcfg.hydra.sweeper.params)
    assert params["outer.candidate_source"] == "coevolve,frozen_harness,random_harness"
    assert planned_jobs([], params) == ((9, 9) if name == "ablation" else (6, 6))
    from omegaconf import OmegaConf

    subdir = OmegaConf.to_container(dcfg.hydra.sweep, resolve=False)["subdir"]
    assert subdir == "${hydra.job.num}_${outer.candidate_source}_seed${seed}"
    assert dcfg.hydra.callbacks.study_table._target_ == "evotrainer.app.study_callback.StudyTableCallback"
    assert cfg.outer.budget.rollouts and cfg.outer.budget.seconds is None and cfg.mode == "evolve"
    assert cfg.outer.patience >= 100 and cfg.outer.generations >= 100  # the rollout budget alone stops an arm
    assert cfg.task.transfer_path  # every transfer window (ablation) or the first few (smoke)
    assert cfg.archive.call_log == "../llm_calls.db"  # one call log in the sweep folder for every job
    if name == "ablation":  # 12 selection items: the race promotes at 0.6, not the main job's 0.95 (docs/outer_loop_budget.md)
        assert cfg.outer.race.level == 0.6 and cfg.outer.race.sizes == []


def test_the_study_callback_prints_the_table_after_the_last_job_of_a_failed_sweep(tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    from hydra.core.utils import JobStatus
    from omegaconf import OmegaConf

    from evotrainer.app.study_callback import StudyTableCallback
    from evotrainer.sweep_index import update_index

    ended: list[str] = []
    monkeypatch.setattr(StudyTableCallback, "_end", lambda self, config: ended.append(str(config.hydra.job.num)))

    def config(num: int):
        return OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "job": {"num": num}}})

    def index(*statuses: str) -> None:
        def change(doc: dict) -> None:
            doc["planned_jobs"] = 3
            doc["jobs"] = [{"num": i, "status": s} for i, s in enumerate(statuses)]
        update_index(tmp_path, change)

    cb, ok, failed = StudyTableCallback(), SimpleNamespace(status=JobStatus.COMPLETED), \
        SimpleNamespace(status=JobStatus.FAILED)
    index("failed", "ok", "running")  # job 2 ends now; the index still says running (end hooks run in reverse)
    cb.on_job_end(config(1), ok)  # not the last one: job 2 is still running
    assert ended == []
    cb.on_job_end(config(2), ok)  # the last job of a sweep in which job 0 failed
    assert ended == ["2"]
    index("ok", "ok", "running")
    cb.on_job_end(config(2), ok)  # nothing failed: on_multirun_end prints it
    assert ended == ["2"]
    cb.on_job_end(config(2), failed)  # the last job itself failed
    assert ended == ["2", "2"]


def test_the_strategy_study_is_the_ablation_study_with_strategy_knobs_on_coevolve_only() -> None:
    from dataclasses import asdict

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from evotrainer.config import PACKAGE_DATA, register_configs, to_config
    from evotrainer.sweep_index import planned_jobs

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        dcfg = compose(config_name="config", overrides=["+study=ablation_strategy"], return_hydra_config=True)
        cfg = to_config(compose(config_name="config", overrides=["+study=ablation_strategy"]))
        base = to_config(compose(config_name="config", overrides=["+study=ablation"]))
    params = dict(dcfg.hydra.sweeper.params)
    assert params == {"outer.candidate_source": "coevolve", "seed": "0,1,2"} and planned_jobs([], params) == (3, 3)
    subdir = OmegaConf.to_container(dcfg.hydra.sweep, resolve=False)["subdir"]
    assert subdir == "${hydra.job.num}_${outer.candidate_source}_strategy_seed${seed}"
    assert dcfg.hydra.callbacks.study_table._target_ == "evotrainer.app.study_callback.StudyTableCallback"
    bounds = {name: (k.low, k.high) for name, k in cfg.outer.strategy.items()}
    assert bounds == {"mutator_temperature": (0.3, 1.2), "reflective_share": (0.0, 1.0),
                      "exemplar_mutation_share": (0.0, 0.5), "prefill_mutation_share": (0.0, 0.5),
                      "llm_merge_share": (0.0, 1.0)}
    assert all(k.init == getattr(cfg.inner, name) for name, k in cfg.outer.strategy.items())  # today's settings
    assert cfg.inner.reflective_share == 0.42 and cfg.inner.mutator_temperature == 0.8
    mine, theirs = asdict(cfg), asdict(base)
    assert mine["outer"].pop("strategy") and theirs["outer"].pop("strategy") == {}
    assert mine == theirs  # otherwise +study=ablation: budget, items, race, call log


def test_runs_with_strategy_knobs_are_their_own_arm_and_pool_with_the_ablation_sweep(tmp_path: Path) -> None:
    from evotrainer.archive import ArchiveStore
    from evotrainer.archive.recorder import RunRecorder
    from evotrainer.browse.study_view import arm_name, load_study
    from evotrainer.stats.generalisation import compare, to_payload

    knob = {"reflective_share": {"low": 0.0, "high": 1.0, "init": 0.42}}
    assert arm_name({"outer": {"candidate_source": "coevolve", "strategy": knob}}) == "coevolve_strategy"
    assert arm_name({"outer": {"candidate_source": "coevolve", "strategy": {}}}) == "coevolve"
    assert arm_name({"outer": {}}) == "coevolve"
    base = list(BASE[:6])

    def job(sweep: Path, seed: int, outer: dict, gain: float) -> None:
        folder = sweep / f"{seed}_{arm_name({'outer': outer})}_seed{seed}"
        folder.mkdir(parents=True)
        with ArchiveStore(folder / "archive.db") as store:
            rec = RunRecorder(store, f"run-s{seed}-{arm_name({'outer': outer})}")
            rec.start(seed, {"seed": seed, "outer": {**outer, "budget": {"rollouts": 300}}})
            rec.event("setup", selection_items=HELD[6:], heldout_items=HELD[:6])
            g = compare("no_role", f"best{seed}", (base[:4], base[:4]), (base, [v + gain for v in base]), seed=seed)
            rec.event("generalisation", **to_payload(g))
            if seed == 1:  # a resumed run: its wall time is the last process's plus what the resume carried over
                rec.event("phase", name="resume", elapsed_before_s=600.0, process_started_at="2026-12-07T00:00:00")
            rec.event("phase", name="totals", seconds=300.0)

    ablation, strategy = tmp_path / "ablation", tmp_path / "strategy"
    for seed in (0, 1):
        job(ablation, seed, {"candidate_source": "frozen_harness"}, 0.0)
        job(strategy, seed, {"candidate_source": "coevolve", "strategy": knob}, 0.02)
    runs, table, skipped = load_study([ablation, strategy])
    assert skipped == [] and sorted((r.arm, r.seed) for r in runs) == [
        ("coevolve_strategy", 0), ("coevolve_strategy", 1), ("frozen_harness", 0), ("frozen_harness", 1)]
    assert {(r.arm, r.seed): r.seconds for r in runs}[("coevolve_strategy", 1)] == 900.0
    assert {(r.arm, r.seed): r.seconds for r in runs}[("coevolve_strategy", 0)] == 300.0
    assert table.arms == ("coevolve_strategy", "frozen_harness")
    vs = _row(table, "coevolve_strategy − frozen_harness")
    assert vs.seeds == (0, 1) and vs.heldout.diff.mean == pytest.approx(0.02)
    with_ablation = study_table([*_study(), *(_run("coevolve_strategy", s, gain=0.03) for s in (0, 1, 2))],
                                n_resamples=200)
    assert with_ablation.arms[:2] == ("coevolve_strategy", "coevolve")  # the strategy arm is the reference
    assert [r.label for r in with_ablation.rows if r.kind == "versus"] == [
        "coevolve_strategy − coevolve", "coevolve_strategy − frozen_harness", "coevolve_strategy − random_harness"]
