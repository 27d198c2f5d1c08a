"""Robust sweeps (issue 16, item 2): unique sweep and run folders, the sweep index, the side-by-side table,
a non-zero exit when a job failed, and the joblib launcher with threads divided between the jobs; a job
killed by the OS is reported as killed, not running (issue 26, item 5).

The sweeps run the real ``python -m evotrainer -m ...`` on the tiny random model; jobs that must fail do so
on a missing validation file, after Hydra started them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from evotrainer import resolvers
from evotrainer.app.sweep_callback import error_line
from evotrainer.backends import threads
from evotrainer.browse.cli import main as archive_main
from evotrainer.config import PROJECT_ROOT
from evotrainer.sweep_index import (
    INDEX_NAME,
    JOB_LOCK_NAME,
    KILLED_ERROR,
    hold_lock,
    planned_jobs,
    read_index,
    update_index,
)

_FAST_FAIL = ("+experiment=meeting_minutes", "mode=evaluate", "outer.race.level=2,3")  # fails the config check


def _tiny(model_dir: Path) -> list[str]:
    return ["+experiment=smoke", f"model.path={model_dir}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=12",
            "task.validation_limit=6", "task.difficulty.length=100", "inner.llm_mutation_share=0",
            "outer.popsize=2", "outer.generations=1", "evaluation.policies=[terse,no_role]"]


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def _start(*args: str, cwd: Path = PROJECT_ROOT) -> subprocess.Popen:
    return subprocess.Popen(["timeout", "280", sys.executable, "-m", "evotrainer", *args], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _evotrainer(*args: str, cwd: Path = PROJECT_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["timeout", "280", sys.executable, "-m", "evotrainer", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


def _archive_cli(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = archive_main(list(args))
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def failing_sweep(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """3 jobs: the first runs the tiny evolve run to the end, the other two miss their validation file."""
    sweep = tmp_path_factory.mktemp("sweep") / "s"
    proc = _evotrainer("-m", *_tiny(tiny_model_dir),
                       "task.validation_path=validation_set/meeting_minutes.jsonl,/no/such/a.jsonl,/no/such/b.jsonl",
                       f"hydra.sweep.dir={sweep}")
    return sweep, proc


def test_a_sweep_with_two_failing_jobs_runs_the_good_one_lists_both_failures_and_exits_non_zero(
        failing_sweep) -> None:
    sweep, proc = failing_sweep
    assert proc.returncode == 1, proc.stderr[-3000:]  # Hydra re-raises the first failure after every job ran
    index = read_index(sweep)
    assert index["status"] == "failed" and index["planned_jobs"] == 3 and index["ended"]
    jobs = index["jobs"]
    assert [(j["num"], j["folder"], j["status"]) for j in jobs] == [
        (0, "0_seed0", "ok"), (1, "1_seed0", "failed"), (2, "2_seed0", "failed")]
    good, *bad = jobs
    assert good["error"] is None and good["mode"] == "evolve" and good["stop_reason"] == "outer.generations"
    assert 0 <= good["s_val"] <= 1 and 0 <= good["initial_s_val"] <= 1
    assert set(good["heldout_diff"]) == {"mean", "low", "high", "n"}
    for job, name in zip(bad, ("a", "b"), strict=True):
        assert job["error"] == f"ConfigError: config key 'task.validation_path': file not found: /no/such/{name}.jsonl"
        assert f"task.validation_path=/no/such/{name}.jsonl" in job["overrides"]
        assert job["s_val"] is None and job["ended"] >= job["started"]
    assert "+experiment=smoke" in good["overrides"]
    assert (sweep / "0_seed0" / "archive.db").is_file() and not (sweep / "1_seed0" / "archive.db").exists()


def test_archive_sweep_prints_the_jobs_side_by_side(failing_sweep, capsys) -> None:
    sweep, _ = failing_sweep
    code, out = _archive_cli(capsys, "sweep", str(sweep))
    assert code == 0, out
    s_val = read_index(sweep)["jobs"][0]["s_val"]
    assert "jobs of the sweep" in out and f"{s_val:.4f}" in out
    assert "/no/such/a.jsonl" in out and "/no/such/b.jsonl" in out and out.count("failed") >= 2
    assert "pooled held-out difference over 1 run(s)" in out  # the existing pooled figure is still there
    code, out = _archive_cli(capsys, "sweep", str(sweep), "--json")
    doc = json.loads(out)
    assert [j["status"] for j in doc["jobs"]] == ["ok", "failed", "failed"]
    assert doc["jobs"][1]["distinct"] == ["task.validation_path=/no/such/a.jsonl"]
    assert len(doc["runs"]) == 1
    code, out = _archive_cli(capsys, "sweep", str(sweep.parent), "--json")  # a folder above: its sweeps' indexes
    assert code == 0 and [j["sweep"] for j in json.loads(out)["jobs"]] == [str(sweep)] * 3


def test_two_sweeps_started_at_once_never_share_a_folder(tmp_path: Path) -> None:
    # the same fixed prefix for both: only ${evotrainer_unique:} can keep them apart
    args = [*_FAST_FAIL, f"hydra.sweep.dir={tmp_path}/multirun/same_${{evotrainer_unique:}}"]
    procs = [_start("-m", *args), _start("-m", *args, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
             if _has_joblib() else _start("-m", *args)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 1, err[-2000:]
    sweeps = sorted((tmp_path / "multirun").iterdir())
    assert len(sweeps) == 2 and all(s.name.startswith("same_") for s in sweeps)
    for s in sweeps:
        jobs = read_index(s)["jobs"]
        assert [j["folder"] for j in jobs] == ["0_seed0", "1_seed0"]
        assert all(j["status"] == "failed" for j in jobs)
        assert sorted(p.name for p in s.iterdir() if p.is_dir()) == ["0_seed0", "1_seed0"]


def test_two_single_runs_started_at_once_never_share_a_folder(tmp_path: Path) -> None:
    procs = [_start("+experiment=meeting_minutes", "outer.race.level=2", cwd=tmp_path) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 2, err[-2000:]
    runs = sorted((tmp_path / "archive" / "runs").iterdir())
    assert len(runs) == 2 and all("_evolve_seed0_" in r.name for r in runs)


def test_the_unique_resolver_differs_between_configs_and_is_stable_within_one() -> None:
    resolvers.register_resolvers()
    a = OmegaConf.create({"dir": "x_${evotrainer_unique:}", "again": "${evotrainer_unique:}"})
    b = OmegaConf.create({"dir": "x_${evotrainer_unique:}"})
    assert a.dir != b.dir and a.dir == f"x_{a.again}" and a.dir == a.dir
    assert len(resolvers.unique_suffix()) == 6


def test_archive_sweep_json_of_a_sweep_with_no_finished_job_exits_0(tmp_path: Path, capsys) -> None:
    sweep = tmp_path / "s"

    def start(doc: dict) -> None:
        doc["planned_jobs"] = 2
        doc["jobs"] += [{"num": 0, "folder": "0_seed0", "overrides": ["seed=0"], "status": "running"},
                        {"num": 1, "folder": "1_seed1", "overrides": ["seed=1"], "status": "failed",
                         "error": "ConfigError: config key 'seed': boom"}]

    update_index(sweep, lambda doc: None)  # the sweep has started; no job yet
    code, out = _archive_cli(capsys, "sweep", str(sweep), "--json")
    assert code == 0 and json.loads(out)["jobs"] == [] and json.loads(out)["runs"] == []
    update_index(sweep, start)
    (sweep / "0_seed0").mkdir()  # a running job before its archive exists
    code, out = _archive_cli(capsys, "sweep", str(sweep), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["runs"] == [] and doc["pooled"]["heldout"] is None
    assert [(j["num"], j["status"], j["sweep_status"]) for j in doc["jobs"]] == [(0, "running", "running"),
                                                                                   (1, "failed", "running")]
    assert doc["jobs"][1]["error"] == "ConfigError: config key 'seed': boom"
    code, _ = _archive_cli(capsys, "sweep", str(tmp_path), "--json")  # the folder above: its index found too
    assert code == 0
    empty = tmp_path / "not_a_sweep"
    empty.mkdir()
    assert _archive_cli(capsys, "sweep", str(empty), "--json")[0] == 2  # no index, no archive


def test_planned_jobs_counts_as_the_basic_sweeper_splits() -> None:
    assert planned_jobs(["+experiment=smoke", "seed=0,1,2", "outer.popsize=2,3"]) == (6, 6)
    assert planned_jobs(["seed=range(4)"], {"inner.elites": "1,2"}, max_batch_size=3) == (8, 3)
    assert planned_jobs(["seed=0"]) == (1, 1)
    assert planned_jobs(["seed=interval(0,1)"]) is None


def test_threads_divide_by_the_jobs_the_launcher_runs_at_once(tmp_path: Path) -> None:
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    OmegaConf.save(OmegaConf.create({"hydra": {"sweeper": {
        "_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "max_batch_size": None,
        "params": None}, "overrides": {"task": ["+experiment=smoke", "seed=0,1"]}}}), tmp_path / "multirun.yaml")
    assert threads.sweep_batch(str(tmp_path)) == 2
    assert threads.sweep_batch(str(tmp_path / "nowhere")) is None
    saved = HydraConfig.instance().cfg
    try:
        for n_jobs, cores, expected in ((-1, 16, 2), (2, 16, 2), (1, 16, 1), (-1, 1, 1), (8, 2, 2)):
            cfg = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})  # set_config makes it read-only
            cfg.hydra.mode = RunMode.MULTIRUN
            cfg.hydra.sweep.dir = str(tmp_path)
            cfg.hydra.launcher = {"n_jobs": n_jobs}
            HydraConfig.instance().set_config(cfg)
            assert threads.sweep_jobs(cores) == expected, (n_jobs, cores)
    finally:
        HydraConfig.instance().cfg = saved
    # joblib's default n_jobs=-1 on 16 cores runs this sweep's 2 jobs at once: 8 threads each, not 1
    assert threads.choose_threads(threads.Machine(cores=16, load=0.0, jobs=2)) == 8


def _bump(folder: str, worker: int) -> None:
    for i in range(10):
        update_index(folder, lambda doc, n=worker * 100 + i: doc["jobs"].append({"num": n, "status": "ok"}))


def test_parallel_updates_of_the_index_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump, args=(str(tmp_path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    nums = [j["num"] for j in read_index(tmp_path)["jobs"]]
    assert nums == sorted(w * 100 + i for w in range(4) for i in range(10))
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_error_line_is_one_line_with_the_type() -> None:
    assert error_line(ValueError("bad value\nmore detail")) == "ValueError: bad value"
    assert error_line(KeyError()) == "KeyError"
    assert len(error_line(RuntimeError("x" * 2000))) == 500


def _has_joblib() -> bool:
    try:
        import hydra_plugins.hydra_joblib_launcher  # noqa: F401
    except ImportError:
        return False
    return True


def test_joblib_launcher_runs_two_jobs_in_parallel_with_threads_divided(tiny_model_dir: Path,
                                                                          tmp_path: Path) -> None:
    if not _has_joblib():
        pytest.skip("hydra-joblib-launcher is not installed (pip install -e '.[sweep]')")
    sweep = tmp_path / "s"
    proc = _evotrainer("-m", *_tiny(tiny_model_dir), "seed=0,1", "hydra/launcher=joblib",
                       "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = read_index(sweep / INDEX_NAME)
    assert index["status"] == "ok" and index["launcher"] == "JoblibLauncher"
    assert [(j["folder"], j["status"]) for j in index["jobs"]] == [("0_seed0", "ok"), ("1_seed1", "ok")]
    assert all(isinstance(j["s_val"], float) for j in index["jobs"])
    for job in ("0_seed0", "1_seed1"):
        log = "".join(f.read_text() for f in (sweep / job).glob("*.log"))
        assert "2 parallel jobs" in log  # each job counts its sibling (threads.sweep_jobs)


def _running_pid(sweep: Path, num: int, proc: subprocess.Popen, listed: int = 1) -> int | None:
    """The pid of job ``num`` once the index lists it as running and lists at least ``listed`` jobs; None when the
    sweep ended first."""
    while proc.poll() is None:
        try:
            jobs = read_index(sweep)["jobs"]
            for job in jobs if len(jobs) >= listed else ():
                if job["num"] == num and job["status"] == "running" and job.get("pid"):
                    return int(job["pid"])
        except (OSError, ValueError):  # not written yet
            pass
        time.sleep(0.1)
    return None


def test_a_parallel_sweep_job_killed_by_the_os_is_reported_killed_not_running(tiny_model_dir: Path, tmp_path: Path,
                                                                                capsys) -> None:
    if not _has_joblib():
        pytest.skip("hydra-joblib-launcher is not installed (pip install -e '.[sweep]')")
    sweep = tmp_path / "s"
    proc = _start("-m", *_tiny(tiny_model_dir), "seed=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                  f"hydra.sweep.dir={sweep}")
    pid = _running_pid(sweep, 1, proc, listed=2)  # both jobs started: one is killed beside a running sibling
    assert pid is not None, "job 1 never ran"
    os.kill(pid, signal.SIGKILL)  # what the out-of-memory killer does to a joblib worker
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    on_disk = read_index(sweep, check_live=False)  # the file itself, as the launcher closed it
    assert on_disk["status"] == "failed" and on_disk["ended"]
    killed = on_disk["jobs"][1]
    assert (killed["num"], killed["status"], killed["error"]) == (1, "killed", KILLED_ERROR)
    assert {j["status"] for j in on_disk["jobs"]} <= {"ok", "killed"}  # the sibling finished or is marked
    assert f"error: job 1 (seed=1): killed: {KILLED_ERROR}" in err.splitlines()
    assert "Traceback" not in err
    code, out = _archive_cli(capsys, "sweep", str(sweep), "--json")
    assert code == 0 and json.loads(out)["jobs"][1]["status"] == "killed"
    _, out = _archive_cli(capsys, "sweep", str(sweep))
    assert "killed" in out and "running" not in out


def test_a_sweep_killed_with_its_job_reads_as_killed_not_running(tiny_model_dir: Path, tmp_path: Path,
                                                                 capsys) -> None:
    # the basic launcher runs each job in the sweep's own process: the kill ends both, and nobody writes
    sweep = tmp_path / "s"
    proc = _start("-m", *_tiny(tiny_model_dir), "seed=0,1", f"hydra.sweep.dir={sweep}")
    pid = _running_pid(sweep, 0, proc)
    assert pid is not None, "job 0 never ran"
    os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=300)
    on_disk = read_index(sweep, check_live=False)
    assert on_disk["status"] == "running" and on_disk["jobs"][0]["status"] == "running"  # as the kill left it
    index = read_index(sweep)
    assert index["status"] == "killed" and [(j["num"], j["status"]) for j in index["jobs"]] == [(0, "killed")]
    code, out = _archive_cli(capsys, "sweep", str(sweep), "--json")
    assert code == 0 and [j["status"] for j in json.loads(out)["jobs"]] == ["killed"]
    _, out = _archive_cli(capsys, "sweep", str(sweep))
    assert "killed" in out and "running" not in out


def test_only_a_dead_writer_on_this_host_is_marked_killed(tmp_path: Path) -> None:
    for name in ("live", "dead"):
        (tmp_path / name).mkdir()
    fd = hold_lock(tmp_path / "live" / JOB_LOCK_NAME)  # a live job: this process holds its lock
    assert fd is not None
    (tmp_path / "dead" / JOB_LOCK_NAME).touch()  # its holder ended without reporting
    ended = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                               text=True, check=True).stdout)
    here = socket.gethostname()
    jobs = [{"num": 0, "folder": "live", "status": "running", "host": here, "lock": True},
            {"num": 1, "folder": "dead", "status": "running", "host": here, "lock": True},
            {"num": 2, "folder": "dead", "status": "running", "host": "another-machine", "lock": True},
            {"num": 3, "folder": "x", "status": "running", "host": here, "lock": False, "pid": ended},
            {"num": 4, "folder": "x", "status": "running", "host": here, "lock": False, "pid": os.getpid()},
            {"num": 5, "folder": "dead", "status": "ok", "host": here, "lock": True, "error": None},
            {"num": 6, "folder": "dead", "status": "running"}]  # written before jobs recorded a host
    try:
        update_index(tmp_path, lambda doc: doc["jobs"].extend(jobs))
        expected = ["running", "killed", "running", "killed", "running", "ok", "running"]
        assert [j["status"] for j in read_index(tmp_path)["jobs"]] == expected
        assert [j["status"] for j in read_index(tmp_path, check_live=False)["jobs"]][1] == "running"
        update_index(tmp_path, lambda doc: None)  # the next write records what the reader saw
        assert [j["status"] for j in read_index(tmp_path, check_live=False)["jobs"]] == expected
        assert read_index(tmp_path)["jobs"][1]["error"] == KILLED_ERROR
    finally:
        os.close(fd)
    assert read_index(tmp_path)["jobs"][0]["status"] == "killed"  # its lock is free now
