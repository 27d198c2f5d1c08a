"""A failing job of a Hydra multirun does not end the sweep (hydra#2551); a single run keeps exit status 2.

The jobs fail before any model is loaded (config checks, a missing validation file), so this stays fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    assert "Error executing job" in proc.stderr


def test_single_run_error_is_one_line_with_status_2(tmp_path: Path) -> None:
    proc = _evotrainer("+experiment=meeting_minutes", "outer.race.level=2", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert "error: config key 'outer.race.level'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
