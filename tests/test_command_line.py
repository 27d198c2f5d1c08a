"""Bad input at the command line: one clear line naming the key or file, non-zero exit, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evotrainer.config import PACKAGE_DATA, PROJECT_ROOT


def _run(*overrides: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, "-m", "evotrainer", *overrides, f"hydra.run.dir={tmp_path}"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["+experiment=meeting_minutes", "task.difficulty.speakers=0"], "task.difficulty.speakers"),
        (["+experiment=meeting_minutes", "no_such_key=1"], "no_such_key"),
        (["+experiment=meeting_minutes", "inner.elites=9", "inner.population_size=4"], "inner.elites"),
        (["+experiment=meeting_minutes", "inner.tournament_size=20"], "inner.tournament_size"),
        (["+experiment=meeting_minutes", "outer.generations=0"], "outer.generations"),
        (["+experiment=meeting_minutes", "outer.reward_weight_bounds=[1,1]"], "outer.reward_weight_bounds"),
        (["+experiment=meeting_minutes", "mode=train"], "mode"),
        (["+experiment=meeting_minutes", "mode=evaluate", "task.validation_path=/no/such/file.jsonl"],
         "task.validation_path"),
        (["+experiment=meeting_minutes", "mode=evaluate", "evaluation.policies=[nobody]"], "evaluation.policies"),
        (["+experiment=meeting_minutes", "mode=evaluate", "model.path=/no/such/model"], "/no/such/model"),
        (["+experiment=meeting_minutes", "mode=distill", "distill.teacher=nobody"], "distill.teacher: 'nobody'"),
        (["+experiment=meeting_minutes", "mode=distill", "distill.train_limit=0"], "config key 'distill.train_limit'"),
    ],
)
def test_bad_input_gives_one_clear_error(overrides: list[str], expected: str, tmp_path: Path) -> None:
    proc = _run(*overrides, tmp_path=tmp_path)
    assert proc.returncode != 0
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_malformed_validation_line_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "val.jsonl"
    good = (PACKAGE_DATA / "validation_set" / "meeting_minutes.jsonl").read_text().splitlines()[0]
    bad.write_text(good + "\n{not json\n")
    proc = _run("+experiment=meeting_minutes", "mode=evaluate", f"task.validation_path={bad}",
                tmp_path=tmp_path / "run")
    assert proc.returncode != 0
    assert f"{bad}:2" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_lists_modes_and_experiments(tmp_path: Path) -> None:
    proc = _run("--help", tmp_path=tmp_path)
    assert proc.returncode == 0
    for word in ("mode=evaluate", "meeting_minutes", "smoke", "task.validation_path"):
        assert word in proc.stdout
