"""A failing job of a Hydra multirun does not end the sweep (hydra#2551); a single run keeps exit status 2;
a sweep ends with one line per failed job and Hydra's own errors are one line too (issue 26, item 11).

The jobs fail before any model is loaded (config checks, a missing validation file), so this stays fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evotrainer.config import PROJECT_ROOT


def _evotrainer(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(["timeout", "120", sys.executable, "-m", "evotrainer", *args], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=150)


def test_every_job_of_a_sweep_runs_when_jobs_fail_and_the_sweep_exits_non_zero(tmp_path: Path) -> None:
    # job 0 and 2 fail the config check; job 1 passes it and fails later, on the missing validation file
    sweep = tmp_path / "sweep"
    proc = _evotrainer("-m", "+experiment=meeting_minutes", "mode=evaluate",
                       "task.validation_path=/no/such/file.jsonl", "outer.race.level=2,0.9,3",
                       f"hydra.sweep.dir={sweep}")
    assert proc.returncode not in (0, 124), proc.stderr
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [p.name.split("_")[0] for p in jobs] == ["0", "1", "2"]
    logs = ["".join(f.read_text() for f in job.glob("*.log")) for job in jobs]
    assert "outer.race.level" in logs[0] and "got 2.0" in logs[0]
    assert "task.validation_path" in logs[1] and "/no/such/file.jsonl" in logs[1]
    assert "outer.race.level" in logs[2] and "got 3.0" in logs[2]
    assert proc.stderr.strip().splitlines()[-4].startswith("error: job 0 (outer.race.level=2): ConfigError:")


def test_a_sweep_whose_jobs_fail_on_a_bad_value_ends_with_one_line_per_job_not_a_traceback(tmp_path: Path) -> None:
    proc = _evotrainer("-m", "+experiment=meeting_minutes", "outer.generations=0", "seed=0,1",
                       f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout and "Error executing job" not in proc.stderr
    assert "HYDRA_FULL_ERROR" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-3:]  # the sweep's last word: one line per failed job, then the count
    bad = "ConfigError: config key 'outer.generations': expected >= 1, got 0"
    assert last[:2] == [f"error: job 0 (seed=0): {bad}", f"error: job 1 (seed=1): {bad}"]
    assert last[2].startswith(f"(2 of 2 jobs failed; sweep folder {tmp_path / 'sweep'};")
    assert "debug=true" in last[2]


def test_a_failed_sweep_with_debug_true_shows_the_traceback(tmp_path: Path) -> None:
    proc = _evotrainer("-m", "+experiment=meeting_minutes", "outer.generations=0", "debug=true",
                       f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "ConfigError: config key 'outer.generations'" in proc.stderr


@pytest.mark.parametrize("multirun", [True, False], ids=["multirun", "single_run"])
def test_a_value_hydra_cannot_convert_is_one_line_naming_the_key(multirun: bool, tmp_path: Path) -> None:
    where = ["-m", f"hydra.sweep.dir={tmp_path / 'sweep'}", "seed=0,1"] if multirun else [f"hydra.run.dir={tmp_path}"]
    proc = _evotrainer(*where, "+experiment=meeting_minutes", "outer.race.futility=abc")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-2] == ("error: config key 'outer.race.futility': Value 'abc' of type 'str' could not be converted "
                         "to Float (Error merging override outer.race.futility=abc)")
    assert lines[-1] == "(run with debug=true for the full traceback)"
    for noise in ("full_key", "reference_type", "HYDRA_FULL_ERROR", "Traceback"):
        assert noise not in proc.stderr + proc.stdout


def test_single_run_error_is_one_line_with_status_2(tmp_path: Path) -> None:
    proc = _evotrainer("+experiment=meeting_minutes", "outer.race.level=2", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert "error: config key 'outer.race.level'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
