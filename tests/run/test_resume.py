"""Crash-safe resume and the STOP file (issue 16): a run killed with SIGKILL and resumed ends with the same
archive rows (timings aside) and the same final best as an uninterrupted run; the thread count is recorded
and a resume reuses it or warns (issue 26, item 4).

The runs are real ``python -m evotrainer`` processes on the tiny random model, so the kill is a real
``SIGKILL`` (chosen deterministically with the test-only ``EVOTRAINER_TEST_KILL_AT`` hook,
``evotrainer/testhooks.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.config import PROJECT_ROOT, Config, ExecutorConfig
from evotrainer.errors import ConfigError
from evotrainer.harness.stopping import StopReason
from evotrainer.run.control import RunControl, StopRequested
from evotrainer.run.resume import (
    ResumePlan,
    config_diff,
    find_resumable,
    plan_resume,
    resume_threads,
    resume_warnings,
)
from tests.archive._dump import dump_run_folder as _dump

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _overrides(model_dir: Path) -> list[str]:
    """The tiny co-evolution of tests/evolve/test_coevolution.py (one outer generation of 2 candidates)."""
    return [
        "seed=7", f"model.path={model_dir}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=12",
        "task.validation_limit=6", "task.tasks_per_generation=2", "task.difficulty.length=100",
        "evaluation.policies=[terse,secretary_markdown,inline_example,no_role]", "inner.population_size=4",
        "inner.generations=1", "inner.elites=1", "inner.tournament_size=2", "outer.generations=1",
        "outer.popsize=2", "outer.screen_size=2",
    ]


INNER_EVALUATION = "event:task_batch:2+1"  # the first candidate's first inner evaluation, at its first model call


def _cli(args: list[str], *, kill_at: str | None = None, cwd: Path = PROJECT_ROOT,
         timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "EVOTRAINER_TEST_KILL_AT"}
    env["HF_HUB_OFFLINE"] = "1"
    if kill_at is not None:
        env["EVOTRAINER_TEST_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "evotrainer", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _events(run_dir: Path, kind: str) -> list:
    with ArchiveStore(run_dir / "archive.db", read_only=True) as store:
        (run,) = store.list_runs()
        return store.events(run.run_id, kind=kind)


@pytest.fixture(scope="module")
def full_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, float]:
    run_dir = tmp_path_factory.mktemp("full")
    t0 = time.perf_counter()
    proc = _cli([*_overrides(tiny_model_dir), f"hydra.run.dir={run_dir}"])
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, _dump(run_dir), seconds


@pytest.fixture(scope="module")
def killed_in_inner_evaluation(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run killed at the first candidate's first inner evaluation; tests resume copies of it."""
    run_dir = tmp_path_factory.mktemp("killed") / "run"
    killed = _cli([*_overrides(tiny_model_dir), f"hydra.run.dir={run_dir}"], kill_at=INNER_EVALUATION)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not _events(run_dir, "summary")
    return run_dir


def _kill_points(full: dict) -> dict[str, str]:
    """Three kill points: generation 0's screening rows (after 2 of the 4 seeds' rows), the first candidate's
    first inner evaluation (at its first model call), and that candidate's race (after its first row)."""
    screens = [e for e in full["evaluations"] if e["kind"] == "meta_screen"]
    gen0 = sum(e["harness_id"] == "h0" for e in screens)
    assert gen0 >= 3 and len(screens) > gen0, "the tiny run must screen seeds and race a candidate"
    return {
        "generation0": "evaluation:meta_screen:2",
        "inner_evaluation": INNER_EVALUATION,
        "racing": f"evaluation:meta_screen:{gen0 + 1}",
    }


@pytest.mark.parametrize("point", ["generation0", "inner_evaluation", "racing"])
def test_killed_run_resumes_to_the_same_archive(point: str, full_run, killed_in_inner_evaluation: Path,
                                                tiny_model_dir: Path, tmp_path: Path) -> None:
    full_dir, full, full_s = full_run
    run_dir = tmp_path / "run"
    args = _overrides(tiny_model_dir)
    t0 = time.perf_counter()
    if point == "inner_evaluation":  # the module's killed run, copied
        shutil.copytree(killed_in_inner_evaluation, run_dir)
    else:
        killed = _cli([*args, f"hydra.run.dir={run_dir}"], kill_at=_kill_points(full)[point])
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    killed_s = time.perf_counter() - t0
    assert not _events(run_dir, "summary")
    t0 = time.perf_counter()
    resumed = _cli([*args, f"resume={run_dir}"])
    resumed_s = time.perf_counter() - t0
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "summary" in resumed.stdout
    assert _dump(run_dir) == full  # every row, the final best and the summary included (timings aside)
    (marker,) = [e for e in _events(run_dir, "phase") if e.payload.get("name") == "resume"]
    assert sum(marker.payload["replayed"].values()) > 0
    assert (run_dir / ".hydra").is_dir() and list((run_dir / ".hydra").glob("resume_*"))
    print(f"\nresume timing ({point}): uninterrupted {full_s:.1f} s; killed {killed_s:.1f} s + resumed "
          f"{resumed_s:.1f} s")


def test_config_change_is_refused_unless_forced(full_run, killed_in_inner_evaluation: Path, tiny_model_dir: Path,
                                                tmp_path: Path) -> None:
    full_dir, full, _ = full_run
    run_dir = tmp_path / "run"
    args = _overrides(tiny_model_dir)
    shutil.copytree(killed_in_inner_evaluation, run_dir)
    changed = [a if not a.startswith("inner.tournament_size") else "inner.tournament_size=3" for a in args]
    refused = _cli([*changed, f"resume={run_dir}"])
    assert refused.returncode == 2
    assert "inner.tournament_size" in refused.stderr and "resume_force=true" in refused.stderr
    # a change that leaves the replayed part alone (batch size: same text) resumes when forced
    forced = _cli([*args, "model.batch_size=3", f"resume={run_dir}", "resume_force=true"])
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert _dump(run_dir) == full
    (marker,) = [e for e in _events(run_dir, "phase") if e.payload.get("name") == "resume"]
    assert marker.payload["forced_keys"] == ["model.batch_size", "mutator.batch_size"]  # the mutator follows


def test_resume_true_picks_the_newest_resumable_run_of_the_same_config(tiny_model_dir: Path,
                                                                       tmp_path: Path) -> None:
    args = _overrides(tiny_model_dir)
    root = tmp_path / "archive" / "runs"
    old, new, other = root / "a_old", root / "b_new", root / "c_other"
    for run_dir, extra in ((old, []), (new, []), (other, ["seed=8"])):
        proc = _cli([*args, *extra, f"hydra.run.dir={run_dir}"], kill_at="event:setup:1", cwd=tmp_path)
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
        time.sleep(0.01)
    with ArchiveStore(new / "archive.db", read_only=True) as store:
        (run,) = store.list_runs()
    assert find_resumable(run.config, root) == new
    assert find_resumable({**run.config, "seed": 99}, root) is None
    plan = plan_resume("true", run.config, runs_root=root)
    assert plan.run_dir == new and plan.run_id == run.run_id
    with pytest.raises(ConfigError, match="no resumable run of this config"):  # force never widens the search
        plan_resume("true", {**run.config, "outer": {**run.config["outer"], "generations": 2}}, force=True,
                    runs_root=root)
    # through the CLI, from the launch folder that holds archive/runs
    proc = _cli([*args, "resume=true"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _events(new, "summary") and not _events(old, "summary") and not _events(other, "summary")


def test_a_resume_told_another_thread_count_warns_with_the_key_to_pass(full_run, tiny_model_dir: Path,
                                                                      tmp_path: Path) -> None:
    _, full, _ = full_run
    run_dir = tmp_path / "run"
    args = _overrides(tiny_model_dir)
    killed = _cli([*args, "model.threads=1", f"hydra.run.dir={run_dir}"],
                  kill_at=INNER_EVALUATION)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    (compute,) = [e for e in _events(run_dir, "phase") if e.payload.get("name") == "compute"]
    assert compute.payload["threads"] == 1  # recorded with the run, before the first inner evaluation
    resumed = _cli([*args, "model.threads=2", f"resume={run_dir}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    out = resumed.stdout + resumed.stderr
    assert "ran with 1 compute threads, this process with model.threads=2" in out and "pass model.threads=1" in out
    dump = _dump(run_dir)
    assert json.loads(dump["run"]["config_json"])["model"]["threads"] == 1  # the stored config is kept, and its id
    # measured: going on at 2 threads gives the rows an uninterrupted run (automatic threads) wrote
    assert {k: v for k, v in dump.items() if k != "run"} == {k: v for k, v in full.items() if k != "run"}


def test_a_resume_with_automatic_threads_reuses_the_recorded_count() -> None:
    plan = ResumePlan(run_dir=Path("r"), archive=Path("r/archive.db"), run_id="run-x", elapsed_s=0.0,
                      threads={"threads": 3, "worker_threads": 2})
    cfg = Config()  # model.threads null; the mutator is the policy model's config
    assert resume_threads(cfg, plan) == []
    assert cfg.model.threads == 3 and cfg.mutator == cfg.model  # still one model, not a second load
    told = Config()
    told.model.threads = 2
    (line,) = resume_threads(told, plan)
    assert told.model.threads == 2 and "model.threads=2" in line and "pass model.threads=3" in line
    ray = Config()
    ray.executor = ExecutorConfig(kind="ray")
    assert resume_threads(ray, plan) == [] and ray.executor.ray.threads == 2
    older = Config()  # a run written before the count was recorded: nothing to reuse
    assert resume_threads(older, ResumePlan(Path("r"), Path("r/archive.db"), "run-x", 0.0)) == []
    assert older.model.threads is None


def test_a_resume_warns_where_the_server_does_not_promise_the_same_text_beside_other_requests(tmp_path: Path) -> None:
    """Continuous-batching servers are not batch-invariant (vllm#23138, llama.cpp#7052): past the replay, the
    requests a killed run left unanswered go out again beside other requests."""
    from evotrainer.backends.openai_compat import OpenAIBackend
    from evotrainer.model_schema import OpenAIConfig
    from tests.backends._fake_openai import FakeServer

    def archived_run(name: str, owned_by: str, server: str = "auto") -> tuple[Path, dict]:
        with FakeServer(owned_by=owned_by) as fake:  # what the run's `backend` phase event records
            described = OpenAIBackend(OpenAIConfig(base_url=fake.url, model=fake.model, server=server)).describe()
        config = {"mode": "evolve", "seed": 0, "model": {"backend": "openai"}, "mutator": {"backend": "hf"}}
        with ArchiveStore(tmp_path / name / "archive.db") as store:
            store.create_run("run-x", 0, config, "v")
            store.add_event("run-x", "phase", {"name": "backend", "model": described,
                                               "mutator": {"backend": "hf:smollm2 (float32)"}})
        return tmp_path / name, config

    run_dir, config = archived_run("vllm", "vllm")
    (line,) = resume_warnings(plan_resume(run_dir, config))
    assert line.startswith("resume: run run-x's model ran on a vllm server (http://127.0.0.1:")
    assert "does not promise the same text whatever runs beside a request" in line and "vllm#23138" in line
    run_dir, config = archived_run("tf", "local", server="transformers")  # one generate call per request
    assert resume_warnings(plan_resume(run_dir, config)) == []
    engine = ResumePlan(Path("r"), Path("r/archive.db"), "run-y", 0.0, backends={"model": {"backend": "vllm"}})
    (line,) = resume_warnings(engine)  # the in-process vLLM engine batches continuously too
    assert "model ran on the vLLM engine" in line and "VLLM_BATCH_INVARIANT=1" in line


def test_config_diff_names_dotted_keys_and_ignores_threads_and_resume_keys() -> None:
    a = {"seed": 0, "model": {"threads": 1, "path": "x"}, "inner": {"elites": 1}, "resume": None}
    b = {"seed": 0, "model": {"threads": 2, "path": "y"}, "inner": {"elites": 1.0}, "resume": "d", "debug": True}
    assert config_diff(a, b) == ["model.path"]
    watch = {"tracking": {"tensorboard": True, "mlflow": True}}
    assert config_diff(a, {**a, **watch}) == []  # tracking can be switched on for the resumed part
    # the live report archives an event per refresh, so switching it is a change the replay would trip on
    assert config_diff(a, {**a, "archive": {"live_report": False}}) == ["archive.live_report"]


def test_plan_resume_refusals(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no archive"):
        plan_resume(tmp_path, {})
    with pytest.raises(ConfigError, match="no resumable run"):
        plan_resume("true", {}, runs_root=tmp_path)


def test_a_run_still_being_written_is_not_resumed(tmp_path: Path) -> None:
    import fcntl

    from evotrainer.run.resume import lock_path

    run_dir = tmp_path / "runs" / "r"
    with ArchiveStore(run_dir / "archive.db") as store:
        store.create_run("run-x", 0, {"mode": "evolve", "seed": 0}, "v")
    assert plan_resume(run_dir, {"mode": "evolve", "seed": 0}).run_id == "run-x"
    with open(lock_path(run_dir / "archive.db", "run-x"), "w") as held:  # a live writer's lock
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(ConfigError, match="still running"):
            plan_resume(run_dir, {"mode": "evolve", "seed": 0})
        assert find_resumable({"mode": "evolve", "seed": 0}, tmp_path / "runs") is None
    assert find_resumable({"mode": "evolve", "seed": 0}, tmp_path / "runs") == run_dir


def test_stop_file_ends_the_run_with_its_summary(full_run, tiny_model_dir: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "STOP").touch()
    proc = _cli([*_overrides(tiny_model_dir), "outer.generations=3", f"hydra.run.dir={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "summary" in proc.stdout and "stop_file" in proc.stdout
    (stop,) = _events(run_dir, "stop")
    assert stop.payload["key"] == "stop_file" and stop.payload["harness_id"] == "g1c0"
    (summary,) = _events(run_dir, "summary")
    assert summary.payload["stop_reason"] == "stop_file" and summary.payload["candidates"] == 0
    assert _events(run_dir, "generalisation")  # the usual end: best vs best seed, held-out items


def test_stop_at_an_inner_generation_drops_that_candidate(tmp_path: Path) -> None:
    """``StopRequested`` from inside a candidate (an inner-generation boundary) ends the outer loop there."""
    from tests.run.test_outer_loop import Synthetic, _run

    class Stopping(Synthetic):
        def __call__(self, harness, population, harness_id, outer_generation):
            if harness_id == "g1c1":
                raise StopRequested(StopReason("stop_file", "STOP found"))
            return super().__call__(harness, population, harness_id, outer_generation)

    out, store, _, _ = _run(tmp_path, Stopping(lambda g, j, h: 0.6), generations=3)
    assert out.stop.key == "stop_file" and out.usage.evaluations == 1
    assert [r.harness_id for r in store.harness_candidates("run")] == ["g1c0"]


def test_run_control_follows_the_stored_run_while_replaying(tmp_path: Path) -> None:
    class Replay:
        replaying = True

        def __init__(self, nxt):
            self.nxt = nxt

        def next_stored_event(self):
            return self.nxt

    class Rec:
        def __init__(self):
            self.events = []

        def emit(self, event):
            self.events.append((event.kind, event.to_payload()))

    from evotrainer.harness.stopping import BudgetLimits, Usage

    (tmp_path / "STOP").touch()
    rec = Rec()
    control = RunControl(rec, BudgetLimits(seconds=1.0), stop_file=tmp_path / "STOP",
                         replay=Replay(("task_batch", {})))
    assert control.check(Usage(seconds=99.0), harness_id="g1c0") is None  # the stored run went on here
    control.replay = Replay(("stop", {"key": "outer.budget.seconds", "detail": "1.2 s used, limit 1"}))
    assert control.check(Usage(), harness_id="g1c1").key == "outer.budget.seconds"
    control.replay = None
    with pytest.raises(StopRequested):
        control.inner_boundary(harness_id="g2c0", inner_generation=3)
    assert [k for k, _ in rec.events] == ["stop", "stop"]
    assert json.dumps(rec.events)  # JSON-ready payloads
