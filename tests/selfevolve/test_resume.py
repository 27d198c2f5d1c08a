"""A ``mode=selfevolve`` run killed with SIGKILL and resumed ends with the same archive rows (timings aside) as an
uninterrupted run, without training a kept round again; the same run in another folder archives the same rows.

Real ``python -m evotrainer`` processes on the tiny random model; the kill point is chosen with the test-only
``EVOTRAINER_TEST_KILL_AT`` hook (``evotrainer/testhooks.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.config import PROJECT_ROOT
from evotrainer.selfevolve.trained import TRAINED_NAME
from tests.archive._dump import dump_run_folder as _dump

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _overrides(model_dir: Path) -> list[str]:
    """Two rounds of the tiny self-evolution of tests/selfevolve/test_run_tiny.py, and one transfer window."""
    return [
        "mode=selfevolve", "seed=3", f"model.path={model_dir}", "model.dtype=float32", "model.max_context=1024",
        "decoding.max_new_tokens=8", "task.validation_limit=2", "selfevolve.rounds=2", "selfevolve.seed_tasks=2",
        "selfevolve.new_tasks_per_round=1", "selfevolve.pool_cap=3", "selfevolve.samples_per_task=1",
        "selfevolve.judge_repeats=2", "selfevolve.dev_size=1", "selfevolve.val_limit=1",
        "selfevolve.pass_threshold=0.0", "selfevolve.transfer_limit=1", "selfevolve.lora.steps=2",
        "selfevolve.lora.batch_size=2", "selfevolve.lora.rank=4", "selfevolve.lora.max_length=1024",
        "task.difficulty.length=80",
    ]


def _cli(args: list[str], *, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "EVOTRAINER_TEST_KILL_AT"}
    env["HF_HUB_OFFLINE"] = "1"
    if kill_at is not None:
        env["EVOTRAINER_TEST_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "evotrainer", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def _phases(run_dir: Path) -> list[dict]:
    with ArchiveStore(run_dir / "archive.db", read_only=True) as store:
        (run,) = store.list_runs()
        return [e.payload for e in store.events(run.run_id, kind="phase")]


@pytest.fixture(scope="module")
def full_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    run_dir = tmp_path_factory.mktemp("full")
    proc = _cli([*_overrides(tiny_model_dir), f"hydra.run.dir={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, _dump(run_dir)


def test_a_killed_selfevolve_run_resumes_to_the_same_archive(full_run, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Killed at round 2's first model call (its rollout), after round 1 trained; resumed in its folder, it archives
    what the uninterrupted run archived in another folder (trained policies' ids hash their adapter's path inside
    the run folder)."""
    full_dir, full = full_run
    assert [r["round"] for r in full["selfevolve_rounds"]] == [1, 2]
    for r in full["selfevolve_rounds"]:  # each trained round kept its training beside its adapter
        assert r["candidate_id"] and r["adapter_path"]
        kept = json.loads((full_dir / r["adapter_path"] / TRAINED_NAME).read_text())
        assert len(kept["result"]["losses"]) == 2 and len(kept["fingerprint"]) == 64
    args = _overrides(tiny_model_dir)
    killed = _cli([*args, f"hydra.run.dir={tmp_path}"], kill_at="evaluation:meta_val:2+1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    round1 = tmp_path / "adapters" / "round_001"
    kept = (round1 / TRAINED_NAME).read_text()
    resumed = _cli([*args, f"resume={tmp_path}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _dump(tmp_path) == full  # every row, the rounds, the transfer comparison and the summary
    assert (round1 / TRAINED_NAME).read_text() == kept  # round 1 was loaded, not trained again
    (marker,) = [p for p in _phases(tmp_path) if p.get("name") == "resume"]
    assert marker["replayed"]["selfevolve_samples"] > 0 and marker["replayed"]["evaluations"] >= 2


def test_a_finished_selfevolve_run_is_not_resumed(full_run, tiny_model_dir: Path) -> None:
    full_dir, _ = full_run
    proc = _cli([*_overrides(tiny_model_dir), f"resume={full_dir}"])
    assert proc.returncode != 0 and "already finished" in proc.stderr


def test_a_killed_training_harness_search_resumes_to_the_same_archive(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``selfevolve.outer_loop``: killed at the second harness candidate's first model call, resumed."""
    from tests.selfevolve.test_objective import SEARCH
    from tests.selfevolve.test_run_tiny import _real_overrides

    data = tmp_path / "data"
    data.mkdir()
    # the study's harness extras (real_share, pass_threshold: a command line cannot add such a key), at tiny sizes
    search = [o for o in SEARCH if not o.startswith("outer.extras.")]
    args = ["+study=selfevolve_harness", *_real_overrides(tiny_model_dir, data), *search,
            "outer.candidate_source=coevolve", "model.threads=1"]
    full = _cli([*args, f"hydra.run.dir={tmp_path / 'full'}"])
    assert full.returncode == 0, full.stderr[-3000:]
    run_dir = tmp_path / "killed"
    killed = _cli([*args, f"hydra.run.dir={run_dir}"], kill_at="event:race:1+1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = _cli([*args, f"resume={run_dir}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _dump(run_dir) == _dump(tmp_path / "full")
    assert len(_dump(run_dir)["harness_candidates"]) == 2
