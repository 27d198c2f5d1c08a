"""Experiment tracking (issue 16, item 6): a tiny evolve run logs to real TensorBoard and MLflow stores, read back."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.browse.sweep_views import run_generalisation
from evotrainer.config import Config, TrackingConfig
from evotrainer.errors import ConfigError
from evotrainer.events.kinds import InnerGenerationEvent, SummaryEvent
from evotrainer.evolve.coevolution import run_evolve
from evotrainer.tracking import Tracker, flatten_config, open_tracker

_MISSING = [m for m in ("tensorboard", "mlflow", "sqlalchemy", "alembic") if importlib.util.find_spec(m) is None]


def _tiny_config(tiny_run_config: Callable[[], Config]) -> Config:
    cfg = tiny_run_config()
    cfg.seed = 3
    cfg.evaluation.policies = ["terse", "secretary_markdown", "no_role"]
    cfg.inner.generations = 1
    cfg.inner.llm_mutation_share = 0.0  # model-free operators only: keeps the run short
    cfg.inner.use_embedder = False
    cfg.outer.generations = 1
    cfg.outer.race.sizes = [3]
    cfg.tracking = TrackingConfig(tensorboard=True, mlflow=True, experiment="tiny")
    return cfg


@pytest.mark.skipif(bool(_MISSING), reason=f"tracking packages missing: {_MISSING} (pip install -e '.[track]')")
def test_evolve_run_logs_to_tensorboard_and_mlflow(tiny_run_config: Callable[[], Config], tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary = run_evolve(_tiny_config(tiny_run_config), run_dir=tmp_path)
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        run_id = store.list_runs()[0].run_id
        inner_events = store.events(run_id, kind="inner_generation")
        candidates = store.harness_candidates(run_id)
        gen = run_generalisation(store, run_id)
    scored = [c for c in candidates if c.race_estimate is not None]
    assert inner_events and scored

    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"inner/best_fitness", "inner/mean_fitness", "candidate/race_estimate", "outer/incumbent_s_val",
            "final/best_s_val"} <= tags
    best = acc.Scalars("inner/best_fitness")
    assert [s.step for s in best] == list(range(len(inner_events)))
    assert [s.value for s in best] == pytest.approx([e.payload["record"]["max"] for e in inner_events])
    screens = acc.Scalars("candidate/race_estimate")
    assert [s.value for s in screens] == pytest.approx([c.race_estimate for c in scored])
    assert [s.step for s in acc.Scalars("outer/incumbent_s_val")] == [0, 1]
    assert acc.Scalars("outer/incumbent_s_val")[-1].value == pytest.approx(summary.best_s_val)

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert run.info.run_name == run_id and run.info.status == "FINISHED"
    assert run.data.params["seed"] == "3" and run.data.params["outer.race.sizes"] == "[3]"
    assert run.data.params["tracking.mlflow"] == "true"
    history = client.get_metric_history(run.info.run_id, "inner/mean_fitness")
    assert sorted(m.step for m in history) == list(range(len(inner_events)))
    assert [m.value for m in sorted(history, key=lambda m: m.step)] == pytest.approx(
        [e.payload["record"]["mean"] for e in inner_events])
    assert run.data.metrics["final/best_s_val"] == pytest.approx(summary.best_s_val)
    assert gen is not None
    assert run.data.metrics["final/selection_diff"] == pytest.approx(gen.selection.diff.mean)
    assert run.data.tags["verdict"] == gen.verdict
    races = client.get_metric_history(run.info.run_id, "candidate/race_evaluations")
    assert races and all(m.value >= 1 for m in races)


def test_missing_package_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(ConfigError) as err:
        open_tracker(TrackingConfig(mlflow=True), tmp_path)
    message = str(err.value)
    assert "tracking.mlflow" in message and "pip install 'evotrainer[track]'" in message and "\n" not in message
    assert open_tracker(TrackingConfig(), tmp_path) is None  # off by default: nothing imported, nothing written
    assert not any(tmp_path.iterdir())


def test_a_failing_sink_is_dropped_and_the_others_go_on() -> None:
    class Broken:
        def start(self, *a) -> None:
            raise OSError("disk full")

    class Memory:
        def __init__(self) -> None:
            self.logged: list[tuple[dict, int]] = []
            self.closed: bool | None = None

        def start(self, *a) -> None:
            pass

        def log(self, metrics, step) -> None:
            self.logged.append((dict(metrics), step))

        def note(self, key, text) -> None:
            pass

        def close(self, ok) -> None:
            self.closed = ok

    good = Memory()
    tracker = Tracker([Broken(), good])
    tracker.start("run", 0, {"seed": 0})
    tracker.event(InnerGenerationEvent(record={"max": 0.5, "mean": float("nan")}))
    tracker.event(SummaryEvent(best_s_val=0.25, stop_reason="outer.generations"))
    assert tracker.sinks == [good]
    assert good.logged[0] == ({"inner/best_fitness": 0.5}, 0)  # non-finite values are left out
    assert good.logged[-1] == ({"final/best_s_val": 0.25}, 0) and good.closed is True


def test_flatten_config() -> None:
    flat = flatten_config({"a": {"b": 1, "c": [1, 2], "d": None, "e": {}}, "f": "x" * 7000})
    assert flat == {"a.b": "1", "a.c": "[1, 2]", "a.d": "null", "a.e": "{}", "f": "x" * 5997 + "..."}


@pytest.mark.skipif(bool(_MISSING), reason=f"tracking packages missing: {_MISSING} (pip install -e '.[track]')")
def test_a_resumed_run_logs_a_new_attempt_beside_the_killed_one(tmp_path: Path) -> None:
    """The replay re-sends every event: each resume gets its own TensorBoard folder and run-name suffix."""
    cfg = TrackingConfig(tensorboard=True)
    first = open_tracker(cfg, tmp_path)
    assert first is not None and first.suffix == "" and first.sinks[0].log_dir == tmp_path / "tensorboard"
    for k in (1, 2):
        again = open_tracker(cfg, tmp_path, resumed=True)
        assert again is not None and again.suffix == f" (resume {k})"
        assert again.sinks[0].log_dir == tmp_path / "tensorboard" / f"resume_{k}"


@pytest.mark.skipif(bool(_MISSING), reason=f"tracking packages missing: {_MISSING} (pip install -e '.[track]')")
def test_resume_attempts_are_counted_without_tensorboard_too(tmp_path: Path) -> None:
    for k in (1, 2):
        (tmp_path / ".hydra" / f"resume_2026-12-01_00-00-0{k}").mkdir(parents=True)  # what a resumed CLI run writes
        tracker = open_tracker(TrackingConfig(mlflow=True), tmp_path, resumed=True)
        assert tracker is not None and tracker.suffix == f" (resume {k})"
        tracker.close()


# --- issue 26, line 6: parallel jobs sharing one fresh MLflow SQLite file ------------------------------------

_RACE_JOBS = 2


def _race_job(uri: str, run_dir: str, k: int, ready, result) -> None:
    """One sweep job: opens MLflow tracking on ``uri`` together with the others, logs one metric, closes."""
    ready.wait()  # every job's first MLflow call (schema creation) at once
    tracker = open_tracker(TrackingConfig(mlflow=True, mlflow_uri=uri, experiment="race"), run_dir)
    assert tracker is not None
    tracker.start(f"job{k}", k, {"seed": k})
    tracker.event(InnerGenerationEvent(record={"max": 0.5, "mean": 0.25}))
    kept = len(tracker.sinks)
    tracker.close(ok=True)
    result.put((k, kept))


@pytest.mark.skipif(bool(_MISSING), reason=f"tracking packages missing: {_MISSING} (pip install -e '.[track]')")
def test_parallel_jobs_on_one_fresh_mlflow_sqlite_all_log_their_run(tmp_path: Path) -> None:
    """Jobs creating MLflow's schema in the same new file at once raced in Alembic's migrations ("duplicate
    column name: step", "table _alembic_tmp_tags already exists"), and the losers' ``open_tracker`` raised,
    ending the job (2 jobs: 3 of 3 tries before the fix). Every job's run must be in the store, finished,
    with its metric."""
    import multiprocessing as mp

    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    (tmp_path / "shared").mkdir()
    ctx = mp.get_context("spawn")
    ready, result = ctx.Barrier(_RACE_JOBS), ctx.Queue()
    procs = [ctx.Process(target=_race_job, args=(uri, str(tmp_path / f"job{k}"), k, ready, result))
             for k in range(_RACE_JOBS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0] * _RACE_JOBS
    kept = dict(result.get(timeout=10) for _ in range(_RACE_JOBS))
    assert kept == {k: 1 for k in range(_RACE_JOBS)}, "a job's MLflow sink was dropped"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("race")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == [f"job{k}" for k in range(_RACE_JOBS)]
    assert all(r.info.status == "FINISHED" and r.data.metrics["inner/best_fitness"] == 0.5 for r in runs)


@pytest.mark.skipif(bool(_MISSING), reason=f"tracking packages missing: {_MISSING} (pip install -e '.[track]')")
def test_mlflow_schema_lock_sits_beside_the_sqlite_file(tmp_path: Path) -> None:
    from evotrainer.tracking import _schema_lock, _sqlite_file

    assert _sqlite_file(f"sqlite:///{tmp_path / 'm.db'}") == tmp_path / "m.db"
    assert _sqlite_file("sqlite:///runs/m.db?timeout=20") == Path("runs/m.db")
    assert _sqlite_file("sqlite://") is None and _sqlite_file("sqlite:///:memory:") is None
    assert _sqlite_file("http://localhost:5000") is None and _sqlite_file("file:///tmp/mlruns") is None
    with _schema_lock(f"sqlite:///{tmp_path / 'm.db'}") as locked:
        assert locked and (tmp_path / "m.db.lock").exists()
    with _schema_lock("http://localhost:5000") as locked:
        assert not locked  # a server serialises its own schema creation
