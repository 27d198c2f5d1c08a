"""The deterministic dump of a run: what two runs of one seed and config must archive alike (tests' oracle)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evotrainer.archive import ArchiveStore
from evotrainer.archive.queries import _CANDIDATE_COLUMNS as CANDIDATE_COLUMNS
from evotrainer.archive.schema import columns
from evotrainer.errors import ArchiveError


def dump_deterministic(store: ArchiveStore, run_id: str, exclude_event_kinds: Sequence[str] = ("phase",)) -> dict[str, Any]:
    """Everything the run archived except what legitimately varies between identical runs.

    Left out: timestamps, ``host``, evaluation ``seconds``, autoincrement ids, self-evolution round
    timings and training facts (wall-clock seconds inside), and events whose kind
    is in ``exclude_event_kinds`` (default: "phase" events, which carry wall-clock timings). Two runs
    with the same seed and config must give equal dumps.

    Returns:
        JSON-ready dict with keys run, policies, policy_parents, evaluations, harness_candidates,
        selfevolve_rounds, selfevolve_pool, selfevolve_samples, events; each a list of row dicts in insertion order (run: one dict).
    """
    with store._read() as conn:
        run = conn.execute(
            "SELECT run_id, seed, config_json, code_version FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if run is None:
            raise ArchiveError(f"{store.path}: no run {run_id!r}")
        out: dict[str, Any] = {"run": dict(run)}
        queries = {
            "policies": "SELECT policy_id, genome_json, genome_hash, parent_ids_json, operator, generation, "
            "root_id FROM policies WHERE run_id = ? ORDER BY rowid",
            "policy_parents": "SELECT child_id, parent_id, position FROM policy_parents WHERE run_id = ? "
            "ORDER BY rowid",
            "evaluations": "SELECT policy_id, kind, batch_id, total, components_json, n_tasks, "
            "generated_tokens, harness_id, outer_generation, inner_generation, cached, error "
            "FROM evaluations WHERE run_id = ? ORDER BY id",
            "harness_candidates": f"SELECT {columns(conn, 'harness_candidates', CANDIDATE_COLUMNS)} "
            "FROM harness_candidates WHERE run_id = ? ORDER BY rowid",
            "selfevolve_rounds": "SELECT round, policy_id, candidate_id, status, difficulty_json, "
            "next_difficulty_json, curriculum, config_json, pool_size, n_added, n_duplicates, n_samples, "
            "n_kept, pass_rate, mean_score, losses_json, adapter_path, dev_score, prev_dev_score, "
            "val_score, note FROM selfevolve_rounds WHERE run_id = ? ORDER BY round",
            "selfevolve_pool": "SELECT round, task_id, content_hash, source, difficulty_json, "
            f"{columns(conn, 'selfevolve_pool', ('task_input', 'reference'))}, "
            "truth_json FROM selfevolve_pool WHERE run_id = ? ORDER BY rowid",
            "selfevolve_samples": "SELECT round, task_id, sample_index, output, score, rule, components_json, "
            "grades_json, model, degenerate, passed, error FROM selfevolve_samples WHERE run_id = ? ORDER BY id",
        }
        for name, sql in queries.items():
            out[name] = [dict(r) for r in conn.execute(sql, (run_id,)).fetchall()]
        placeholders = ", ".join("?" for _ in exclude_event_kinds)
        ev_sql = "SELECT kind, payload_json FROM events WHERE run_id = ?"
        if exclude_event_kinds:
            ev_sql += f" AND kind NOT IN ({placeholders})"
        out["events"] = [dict(r) for r in conn.execute(ev_sql + " ORDER BY id", (run_id, *exclude_event_kinds))]
    return out


def dump_run_folder(run_dir: Any) -> dict[str, Any]:
    """:func:`dump_deterministic` of the one run in ``run_dir/archive.db``, without its ``code_version`` (the
    checkout may get commits between two runs a test compares)."""
    from pathlib import Path

    with ArchiveStore(Path(run_dir) / "archive.db", read_only=True) as store:
        (run,) = store.list_runs()
        dump = dump_deterministic(store, run.run_id)
    dump["run"].pop("code_version")
    return dump
