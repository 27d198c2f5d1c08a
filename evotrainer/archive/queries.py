"""Read-only queries over an archive: runs, policies, best policy, lineage, evaluations, events.

:class:`ArchiveQueries` is mixed into :class:`~evotrainer.archive.store.ArchiveStore`, so every query
is a method of an open store (read-only or not). Multi-statement queries run inside one deferred read
transaction, which in WAL mode sees one consistent snapshot and never blocks the writer.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from evotrainer.archive.schema import (
    EvaluationRow,
    EventRow,
    HarnessCandidateRow,
    LineageNode,
    RunInfo,
    columns,
)
from evotrainer.errors import ArchiveError
from evotrainer.genome import Policy

__all__ = ["ArchiveQueries"]

_MAX_LINEAGE_DEPTH = 100_000
_CANDIDATE_COLUMNS = ("harness_id", "outer_generation", "cand_index", "vector_json", "values_json", "s_val",
                      "race_estimate", "best_policy_id", "status")
"""Guard of the recursive lineage query (ids are content hashes, so cycles cannot occur)."""

_POLICY_COLS = "policy_id, genome_json, parent_ids_json, operator, generation, root_id"


def _policy_from_row(row: sqlite3.Row) -> Policy:
    genome = json.loads(row["genome_json"])
    return Policy(
        id=row["policy_id"],
        sections=tuple((str(k), str(v)) for k, v in genome["sections"]),
        parent_ids=tuple(json.loads(row["parent_ids_json"])),
        operator=row["operator"],
        generation=int(row["generation"]),
        root_id=row["root_id"],
        adapter=genome.get("adapter"),
        decoding=tuple((str(k), v) for k, v in genome.get("decoding", ())),
    )


def _evaluation_from_row(row: sqlite3.Row) -> EvaluationRow:
    return EvaluationRow(
        policy_id=row["policy_id"],
        kind=row["kind"],
        batch_id=row["batch_id"],
        total=float(row["total"]),
        components=json.loads(row["components_json"]),
        n_tasks=int(row["n_tasks"]),
        generated_tokens=int(row["generated_tokens"]),
        seconds=float(row["seconds"]),
        harness_id=row["harness_id"],
        outer_generation=row["outer_generation"],
        inner_generation=row["inner_generation"],
        cached=bool(row["cached"]),
        error=row["error"],
    )


def _candidate_from_row(row: sqlite3.Row) -> HarnessCandidateRow:
    return HarnessCandidateRow(
        harness_id=row["harness_id"],
        outer_generation=int(row["outer_generation"]),
        index=int(row["cand_index"]),
        vector=tuple(float(v) for v in json.loads(row["vector_json"])),
        values=json.loads(row["values_json"]),
        s_val=row["s_val"],
        race_estimate=row["race_estimate"],
        best_policy_id=row["best_policy_id"],
        status=row["status"],
    )


class ArchiveQueries:
    """Query methods; the host class provides ``path`` and an open ``_conn`` with ``sqlite3.Row`` rows."""

    path: Path
    _conn: sqlite3.Connection

    @contextmanager
    def _transaction(self, what: str, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction, committed at the end and rolled back on any error: ``BEGIN IMMEDIATE`` to write,
        a deferred ``BEGIN`` (one consistent snapshot, no write lock) to read. A SQLite error raises
        :class:`ArchiveError` naming the file and ``what``."""
        conn = self._conn
        if conn is None:
            raise ArchiveError(f"{self.path}: archive is closed")
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as exc:
            raise ArchiveError(f"{self.path}: cannot {what}: {exc}") from None
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise ArchiveError(f"{self.path}: cannot {what}: {exc}") from None
            raise

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        """One consistent snapshot for several statements."""
        return self._transaction("read archive")

    # --- runs -------------------------------------------------------------------------------------

    def list_runs(self) -> list[RunInfo]:
        """Every run in the file, oldest first."""
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY rowid").fetchall()
        return [self._run(r) for r in rows]

    def get_run(self, run_id: str) -> RunInfo:
        """The run ``run_id``. Raises ArchiveError when absent."""
        with self._read() as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path}: no run {run_id!r}")
        return self._run(row)

    @staticmethod
    def _run(row: sqlite3.Row) -> RunInfo:
        return RunInfo(
            run_id=row["run_id"],
            seed=int(row["seed"]),
            config=json.loads(row["config_json"]),
            code_version=row["code_version"],
            host=row["host"],
            created_at=row["created_at"],
        )

    # --- policies ---------------------------------------------------------------------------------

    def get_policy(self, run_id: str, policy_id: str) -> Policy:
        """The archived policy, rebuilt as the record that was added. Raises ArchiveError when absent."""
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {_POLICY_COLS} FROM policies WHERE run_id = ? AND policy_id = ?", (run_id, policy_id)
            ).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path}: run {run_id!r} has no policy {policy_id!r}")
        return _policy_from_row(row)

    def policies(self, run_id: str, generation: int | None = None) -> list[Policy]:
        """Every archived policy of the run (optionally of one inner generation), in insertion order."""
        sql = f"SELECT {_POLICY_COLS} FROM policies WHERE run_id = ?"
        args: list[Any] = [run_id]
        if generation is not None:
            sql += " AND generation = ?"
            args.append(int(generation))
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY rowid", args).fetchall()
        return [_policy_from_row(r) for r in rows]

    def best_policy(self, run_id: str, kind: str = "meta_val") -> tuple[Policy, float] | None:
        """The policy of the single highest-``total`` evaluation of ``kind`` (rows with an error skipped).

        Ties go to the earliest inserted row. Returns None when there is no such evaluation.

        Returns:
            ``(policy, total)``; ``total`` is higher-is-better.
        """
        with self._read() as conn:
            row = conn.execute(
                "SELECT policy_id, total FROM evaluations WHERE run_id = ? AND kind = ? AND error IS NULL "
                "ORDER BY total DESC, id ASC LIMIT 1",
                (run_id, kind),
            ).fetchone()
        if row is None:
            return None
        return self.get_policy(run_id, row["policy_id"]), float(row["total"])

    def lineage(self, run_id: str, policy_id: str) -> list[LineageNode]:
        """``policy_id`` and all its ancestors back to the seeds (operator "seed", no parents).

        A recursive CTE walks the ``policy_parents`` edges (both parents of a crossover). Each ancestor
        appears once, at its shortest depth; order is by depth, then insertion. Ancestors that were
        never archived are left out.

        Raises:
            ArchiveError: ``policy_id`` is not archived in the run.
        """
        with self._read() as conn:
            rows = conn.execute(
                f"""WITH RECURSIVE anc(pid, depth) AS (
                        SELECT ?, 0
                        UNION
                        SELECT pp.parent_id, anc.depth + 1
                        FROM policy_parents AS pp JOIN anc ON pp.run_id = ? AND pp.child_id = anc.pid
                        WHERE anc.depth < {_MAX_LINEAGE_DEPTH}
                    ),
                    best(pid, depth) AS (SELECT pid, MIN(depth) FROM anc GROUP BY pid)
                    SELECT {", ".join("p." + c.strip() for c in _POLICY_COLS.split(","))}, best.depth
                    FROM best JOIN policies AS p ON p.run_id = ? AND p.policy_id = best.pid
                    ORDER BY best.depth, p.rowid""",
                (policy_id, run_id, run_id),
            ).fetchall()
        if not rows or rows[0]["policy_id"] != policy_id:
            raise ArchiveError(f"{self.path}: run {run_id!r} has no policy {policy_id!r}")
        nodes = []
        for r in rows:
            pol = _policy_from_row(r)
            nodes.append(LineageNode(policy=pol, parent_ids=pol.parent_ids, depth=int(r["depth"])))
        return nodes

    def children(self, run_id: str, policy_id: str) -> list[str]:
        """Ids of the archived policies that name ``policy_id`` as a parent, in insertion order."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT child_id FROM policy_parents WHERE run_id = ? AND parent_id = ? ORDER BY rowid",
                (run_id, policy_id),
            ).fetchall()
        return [r["child_id"] for r in rows]

    # --- evaluations, harness candidates, events ----------------------------------------------------

    def evaluations(self, run_id: str, policy_id: str | None = None, kind: str | None = None) -> list[EvaluationRow]:
        """Evaluation rows of the run, optionally filtered, in insertion order."""
        sql, args = "SELECT * FROM evaluations WHERE run_id = ?", [run_id]
        if policy_id is not None:
            sql += " AND policy_id = ?"
            args.append(policy_id)
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY id", args).fetchall()
        return [_evaluation_from_row(r) for r in rows]

    def harness_candidates(self, run_id: str) -> list[HarnessCandidateRow]:
        """Harness candidates of the run by outer generation, then index."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {columns(conn, 'harness_candidates', _CANDIDATE_COLUMNS)} FROM harness_candidates "
                "WHERE run_id = ? ORDER BY outer_generation, cand_index, rowid", (run_id,),
            ).fetchall()
        return [_candidate_from_row(r) for r in rows]

    def events(self, run_id: str, kind: str | None = None) -> list[EventRow]:
        """Events of the run (optionally of one kind), in insertion order."""
        sql, args = "SELECT * FROM events WHERE run_id = ?", [run_id]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY id", args).fetchall()
        return [
            EventRow(id=int(r["id"]), kind=r["kind"], payload=json.loads(r["payload_json"]), created_at=r["created_at"])
            for r in rows
        ]
