"""Self-evolution tables of the archive: rounds, pool additions and judged samples (schema version 2; the
pool's input and reference columns renamed in version 3, :func:`~evotrainer.archive.schema.columns`; the rounds'
model-judge grade counts added in version 5).

:class:`SelfEvolveTables` is mixed into :class:`~evotrainer.archive.store.ArchiveStore`. Inserts are
append-only (plain INSERT, bound parameters, one ``BEGIN IMMEDIATE`` transaction per call through
the host's ``_write``); reads go through the host's ``_read`` snapshot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evotrainer.archive.schema import PoolTaskRow, RoundRow, SampleRow, columns
from evotrainer.archive.values import finite, now, to_json
from evotrainer.errors import ArchiveError

__all__ = ["ROUND_STATUSES", "SelfEvolveTables"]

ROUND_STATUSES: tuple[str, ...] = ("kept", "reverted", "no_pass", "failed")
"""Values of ``RoundRow.status``."""

class SelfEvolveTables:
    """Insert and query methods of the self-evolution tables (host provides ``path``, ``_write``, ``_read``)."""

    path: Path
    _write: Any
    _read: Any

    # --- inserts ----------------------------------------------------------------------------------

    def add_round(self, run_id: str, row: RoundRow) -> None:
        """Archive one round (once: a second row for the same round raises ArchiveError).

        Raises:
            ArchiveError: unknown status, a non-finite number, non-JSON content, or a duplicate round.
        """
        what = f"self-evolution round {row.round}"
        if row.status not in ROUND_STATUSES:
            raise ArchiveError(f"{what}: status must be one of {ROUND_STATUSES}, got {row.status!r}")
        losses = [finite(x, f"{what} loss") for x in row.losses]
        timings = {str(k): finite(v, f"{what} timing {k!r}") for k, v in row.timings.items()}
        params = (
            str(run_id), int(row.round), str(row.policy_id), row.candidate_id, row.status,
            to_json(dict(row.difficulty), f"{what} difficulty"),
            to_json(dict(row.next_difficulty), f"{what} next_difficulty"), str(row.curriculum),
            to_json(dict(row.config), f"{what} config"), int(row.pool_size), int(row.n_added),
            int(row.n_duplicates), int(row.n_samples), int(row.n_kept), finite(row.pass_rate, f"{what} pass_rate"),
            finite(row.mean_score, f"{what} mean_score"), to_json(losses, f"{what} losses"), row.adapter_path,
            to_json(dict(row.train), f"{what} train"), finite(row.dev_score, f"{what} dev_score", True),
            finite(row.prev_dev_score, f"{what} prev_dev_score", True),
            finite(row.val_score, f"{what} val_score", True), to_json(timings, f"{what} timings"), row.note, now(),
            _count(row.grades_requested, f"{what} grades_requested"), _count(row.grades_parsed, f"{what} grades_parsed"),
        )
        if row.grades_parsed is not None and (row.grades_requested is None or row.grades_parsed > row.grades_requested):
            raise ArchiveError(f"{what}: grades_parsed {row.grades_parsed} exceeds grades_requested "
                               f"{row.grades_requested}")
        with self._write(f"add {what} to run {run_id!r}") as conn:
            conn.execute(
                "INSERT INTO selfevolve_rounds (run_id, round, policy_id, candidate_id, status, difficulty_json, "
                "next_difficulty_json, curriculum, config_json, pool_size, n_added, n_duplicates, n_samples, "
                "n_kept, pass_rate, mean_score, losses_json, adapter_path, train_json, dev_score, "
                "prev_dev_score, val_score, timings_json, note, created_at, grades_requested, grades_parsed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params,
            )

    def add_pool_tasks(self, run_id: str, rows: Sequence[PoolTaskRow]) -> None:
        """Archive pool additions, all or none."""
        with self._write(f"add pool tasks to run {run_id!r}") as conn:
            conn.executemany(
                "INSERT INTO selfevolve_pool (run_id, round, task_id, content_hash, source, difficulty_json, "
                "task_input, reference, truth_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(str(run_id), int(r.round), str(r.task_id), str(r.content_hash), str(r.source),
                  to_json(dict(r.difficulty), f"pool task {r.task_id!r} difficulty"), str(r.task_input),
                  str(r.reference), to_json(dict(r.truth), f"pool task {r.task_id!r} truth"), now())
                 for r in rows],
            )

    def add_samples(self, run_id: str, rows: Sequence[SampleRow]) -> None:
        """Archive judged samples, all or none.

        Raises:
            ArchiveError: a non-finite score, or a score outside [0, 1].
        """
        values = []
        for r in rows:
            what = f"sample {r.task_id!r}#{r.index} of round {r.round}"
            score = finite(r.score, f"{what} score")
            if not 0.0 <= score <= 1.0:
                raise ArchiveError(f"{what}: score must be in [0, 1], got {score}")
            grades = [finite(g, f"{what} grade", True) for g in r.grades]
            comps = {str(k): finite(v, f"{what} component {k!r}") for k, v in r.components.items()}
            values.append((str(run_id), int(r.round), str(r.task_id), int(r.index), str(r.output), score,
                           finite(r.rule, f"{what} rule"), to_json(comps, f"{what} components"),
                           to_json(grades, f"{what} grades"), finite(r.model, f"{what} model", True), r.degenerate,
                           int(bool(r.passed)), r.error, now()))
        with self._write(f"add samples to run {run_id!r}") as conn:
            conn.executemany(
                "INSERT INTO selfevolve_samples (run_id, round, task_id, sample_index, output, score, rule, "
                "components_json, grades_json, model, degenerate, passed, error, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )

    # --- queries ----------------------------------------------------------------------------------

    def selfevolve_rounds(self, run_id: str) -> list[RoundRow]:
        """Every archived round of ``run_id``, in round order."""
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM selfevolve_rounds WHERE run_id = ? ORDER BY round",
                                (run_id,)).fetchall()
        return [_round_from_row(r) for r in rows]

    def selfevolve_pool(self, run_id: str, round: int | None = None) -> list[PoolTaskRow]:
        """Pool additions of ``run_id`` (of one ``round`` when given), in insertion order."""
        args: list[Any] = [run_id]
        where = "run_id = ?"
        if round is not None:
            where, args = where + " AND round = ?", [*args, int(round)]
        with self._read() as conn:
            texts = columns(conn, "selfevolve_pool", ("task_input", "reference"))
            sql = (f"SELECT round, task_id, content_hash, source, difficulty_json, {texts}, truth_json "
                   f"FROM selfevolve_pool WHERE {where} ORDER BY rowid")
            rows = conn.execute(sql, args).fetchall()
        return [PoolTaskRow(round=int(r["round"]), task_id=r["task_id"], content_hash=r["content_hash"],
                            source=r["source"], difficulty=json.loads(r["difficulty_json"]),
                            task_input=r["task_input"], reference=r["reference"],
                            truth=json.loads(r["truth_json"])) for r in rows]

    def selfevolve_samples(
        self, run_id: str, round: int | None = None, passed: bool | None = None
    ) -> list[SampleRow]:
        """Judged samples of ``run_id``, optionally of one ``round`` and/or only (not) passed ones."""
        sql, args = "SELECT * FROM selfevolve_samples WHERE run_id = ?", [run_id]
        if round is not None:
            sql, args = sql + " AND round = ?", [*args, int(round)]
        if passed is not None:
            sql, args = sql + " AND passed = ?", [*args, int(bool(passed))]
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY id", args).fetchall()
        return [SampleRow(round=int(r["round"]), task_id=r["task_id"], index=int(r["sample_index"]),
                          output=r["output"], score=float(r["score"]), rule=float(r["rule"]),
                          components=json.loads(r["components_json"]),
                          grades=tuple(json.loads(r["grades_json"])), model=r["model"],
                          degenerate=r["degenerate"], passed=bool(r["passed"]), error=r["error"]) for r in rows]


def _count(value: int | None, what: str) -> int | None:
    """A count as stored: None stays None; else an int >= 0 (ArchiveError otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArchiveError(f"{what}: expected an integer >= 0 or None, got {value!r}")
    return int(value)


def _round_from_row(r: sqlite3.Row) -> RoundRow:
    """The record of a ``selfevolve_rounds`` row; columns added after the file's version (a read-only open of an
    older file, :data:`~evotrainer.archive.schema.ADDED_COLUMNS`) read as None."""
    have = set(r.keys())
    return RoundRow(
        round=int(r["round"]), policy_id=r["policy_id"], status=r["status"],
        difficulty=json.loads(r["difficulty_json"]), next_difficulty=json.loads(r["next_difficulty_json"]),
        curriculum=r["curriculum"], config=json.loads(r["config_json"]), pool_size=int(r["pool_size"]),
        n_added=int(r["n_added"]), n_duplicates=int(r["n_duplicates"]), n_samples=int(r["n_samples"]),
        n_kept=int(r["n_kept"]), pass_rate=float(r["pass_rate"]), mean_score=float(r["mean_score"]),
        losses=tuple(float(x) for x in json.loads(r["losses_json"])), candidate_id=r["candidate_id"],
        adapter_path=r["adapter_path"], train=json.loads(r["train_json"]), dev_score=r["dev_score"],
        prev_dev_score=r["prev_dev_score"], val_score=r["val_score"], timings=json.loads(r["timings_json"]),
        note=r["note"], grades_requested=r["grades_requested"] if "grades_requested" in have else None,
        grades_parsed=r["grades_parsed"] if "grades_parsed" in have else None,
    )
