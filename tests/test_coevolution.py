"""The co-evolution end to end: lineage from the archive, no meta-validation leak, determinism.

The fast tests run the whole loop on a tiny random model (same tokenizer and chat template as the
embedded SmolLM2); ``test_smoke_experiment_real_model`` runs ``+experiment=smoke`` on the real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.coevolution import run_evolve, screening_subset
from evotrainer.config import PROJECT_ROOT, Config
from evotrainer.rollout import batch_id_for
from evotrainer.runtime import build_family, load_validation

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _tiny_config(model_dir: Path) -> Config:
    cfg = Config()
    cfg.seed = 7
    cfg.model.path = str(model_dir)
    cfg.model.max_context = 1024
    cfg.decoding.max_new_tokens = 12
    cfg.task.validation_limit = 6
    cfg.task.tasks_per_generation = 2
    cfg.task.difficulty.length = 100
    cfg.evaluation.policies = ["terse", "secretary_markdown", "inline_example", "no_role"]
    cfg.inner.population_size = 4
    cfg.inner.generations = 1
    cfg.inner.elites = 1
    cfg.inner.tournament_size = 2
    cfg.outer.generations = 2
    cfg.outer.popsize = 2
    cfg.outer.screen_size = 2
    return cfg


@pytest.fixture(scope="module")
def two_runs(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    cfg = _tiny_config(tiny_model_dir)
    out = []
    for name in ("a", "b"):
        run_dir = tmp_path_factory.mktemp(f"run_{name}")
        out.append(run_evolve(cfg, run_dir=run_dir))
    return cfg, out


def test_same_seed_same_archive(two_runs) -> None:
    _, (a, b) = two_runs
    assert a.run_id == b.run_id
    with ArchiveStore(a.archive, read_only=True) as sa, ArchiveStore(b.archive, read_only=True) as sb:
        dump_a, dump_b = sa.dump_deterministic(a.run_id), sb.dump_deterministic(b.run_id)
    assert dump_a == dump_b
    assert dump_a["policies"], "the run archived no policies"


def test_best_policy_lineage_reaches_seeds(two_runs) -> None:
    cfg, (a, _) = two_runs
    with ArchiveStore(a.archive, read_only=True) as store:
        best, score = store.best_policy(a.run_id)
        assert score == pytest.approx(a.best_s_val)
        nodes = store.lineage(a.run_id, best.id)
    seeds = {n.policy.id for n in nodes if n.policy.operator == "seed"}
    assert seeds and seeds <= set(cfg.evaluation.policies)
    by_id = {n.policy.id: n for n in nodes}
    for node in nodes:  # every edge ends at an archived node, and walking parents ends at a seed
        assert all(p in by_id for p in node.parent_ids)
    node = by_id[best.id]
    while node.parent_ids:
        node = by_id[node.parent_ids[0]]
    assert node.policy.operator == "seed"


def test_meta_validation_never_in_task_batches(two_runs) -> None:
    cfg, (a, _) = two_runs
    family = build_family(cfg)
    val_hashes = {t.content_hash for t in load_validation(cfg, family)}
    with ArchiveStore(a.archive, read_only=True) as store:
        batches = store.events(a.run_id, kind="task_batch")
        fitness_batch_ids = {e.batch_id for e in store.evaluations(a.run_id, kind="fitness")}
    assert batches
    logged = {e.payload["batch_id"] for e in batches}
    assert fitness_batch_ids <= logged  # every fitness evaluation used a logged, generated batch
    for e in batches:
        assert not set(e.payload["content_hashes"]) & val_hashes
    assert batch_id_for(load_validation(cfg, family)) not in fitness_batch_ids


def test_screening_subset_is_fixed_and_stratified() -> None:
    cfg = Config()
    items = load_validation(cfg, build_family(cfg))
    a, b = screening_subset(items, 8), screening_subset(list(reversed(items)), 8)
    assert [t.task_id for t in a] == [t.task_id for t in b]
    words = sorted(len(t.transcript.split()) for t in a)
    assert words[0] < 300 and words[-1] > 700  # spans short and long meetings


@pytest.mark.real_model
def test_smoke_experiment_real_model(tmp_path: Path) -> None:
    """``+experiment=smoke`` on the embedded model: completes, prints the summary, archive traceable."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "evotrainer", "+experiment=smoke", f"hydra.run.dir={tmp_path}"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "summary" in proc.stdout and "best prompt" in proc.stdout
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        (run,) = store.list_runs()
        best, _ = store.best_policy(run.run_id)
        ops = {n.policy.operator for n in store.lineage(run.run_id, best.id)}
    assert "seed" in ops
