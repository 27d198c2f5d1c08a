"""The append-only SQLite lineage archive: opening, validation, migrations and inserts.

Plain stdlib ``sqlite3`` with explicit transactions (``isolation_level=None``): every write method is
one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on any error, so a failing batch leaves nothing
behind). The writer puts the file in WAL mode (sqlite.org/wal.html), so readers (a CLI or report while
a run is going) open it with ``mode=ro`` and neither block the writer nor take a write lock.
There is no UPDATE or DELETE in this package: only INSERT (and ``INSERT OR IGNORE`` for idempotent
policy inserts).
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evotrainer.archive.queries import ArchiveQueries
from evotrainer.archive.schema import (
    APPLICATION_ID,
    EVALUATION_KINDS,
    MIGRATIONS,
    SCHEMA_VERSION,
    EvaluationRow,
    HarnessCandidateRow,
)
from evotrainer.archive.selfevolve_store import SelfEvolveTables
from evotrainer.archive.values import finite, now, to_json
from evotrainer.errors import ArchiveError
from evotrainer.search.genome import Policy

__all__ = ["DEFAULT_ARCHIVE_NAME", "ArchiveStore", "archive_path", "open_archive"]

DEFAULT_ARCHIVE_NAME = "archive.db"
"""File name of a run's archive inside the Hydra run dir."""

_BUSY_TIMEOUT_S = 10.0


def _genome_json(policy: Policy) -> str:
    genome = {
        "sections": [list(s) for s in policy.sections],
        "adapter": policy.adapter,
        "decoding": [list(d) for d in policy.decoding],
    }
    return to_json(genome, f"policy {policy.id!r} genome")


class ArchiveStore(ArchiveQueries, SelfEvolveTables):
    """One archive file, opened for writing (default) or read-only.

    Args:
        path: the SQLite file. Writing mode creates it and its parent folder when missing.
        read_only: open with ``mode=ro``: reads only, never a write lock, usable while a writer runs.

    Raises:
        ArchiveError: the file is missing (read-only), not SQLite or corrupt, a SQLite file of another
            application, or of a newer (or, read-only, older) schema version; the message names the
            path and what was found.

    Example::

        with ArchiveStore(run_dir / "archive.db") as store:
            store.create_run("run0", seed=0, config={...}, code_version="0.1.0")
            store.add_policies("run0", population)
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = bool(read_only)
        self._conn = self._connect()
        try:
            self._check_and_migrate()
        except BaseException:
            self._conn.close()
            raise

    # --- opening ----------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                if not self.path.is_file():
                    raise ArchiveError(f"{self.path}: archive file not found")
                uri = self.path.resolve().as_uri() + "?mode=ro"
                conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            else:
                if self.path.exists() and not self.path.is_file():
                    raise ArchiveError(f"{self.path}: expected an archive file, found a directory")
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(self.path), timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise ArchiveError(f"{self.path}: cannot open archive ({exc})") from None
        conn.row_factory = sqlite3.Row
        return conn

    def _check_and_migrate(self) -> None:
        conn = self._conn
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            n_objects = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise ArchiveError(f"{self.path}: not an EvoTrainer archive: not a readable SQLite file ({exc})") from None
        fresh = app_id == 0 and version == 0 and n_objects == 0
        if not fresh and app_id != APPLICATION_ID:
            raise ArchiveError(
                f"{self.path}: not an EvoTrainer archive: SQLite application_id is {app_id:#x} "
                f"(expected {APPLICATION_ID:#x}) with {n_objects} schema object(s)"
            )
        if version > SCHEMA_VERSION:
            raise ArchiveError(
                f"{self.path}: archive schema version {version} is newer than this EvoTrainer "
                f"supports ({SCHEMA_VERSION}); upgrade evotrainer to read it"
            )
        if self.read_only:
            if fresh:
                raise ArchiveError(f"{self.path}: not an EvoTrainer archive: an empty SQLite file")
            if version < SCHEMA_VERSION:
                raise ArchiveError(
                    f"{self.path}: archive schema version {version} is older than {SCHEMA_VERSION}; "
                    "open it once for writing to migrate it"
                )
            return
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            raise ArchiveError(f"{self.path}: cannot set up the archive ({exc})") from None
        if str(mode).lower() != "wal":
            raise ArchiveError(f"{self.path}: could not switch the archive to WAL mode (got {mode!r})")
        if version < SCHEMA_VERSION:
            with self._write("migrate schema"):
                # Re-read under the write lock: another writer may have migrated meanwhile.
                current = conn.execute("PRAGMA user_version").fetchone()[0]
                for target in range(current + 1, SCHEMA_VERSION + 1):
                    MIGRATIONS[target](conn)
                conn.execute(f"PRAGMA application_id = {int(APPLICATION_ID)}")
                conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")

    # --- transactions -----------------------------------------------------------------------------

    @contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction: BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any error."""
        if self.read_only:
            raise ArchiveError(f"{self.path}: archive opened read-only; cannot {what}")
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
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

    # --- inserts ----------------------------------------------------------------------------------

    def create_run(
        self,
        run_id: str,
        seed: int,
        config: Mapping[str, Any],
        code_version: str,
        *,
        exist_ok: bool = False,
    ) -> None:
        """Record a run.

        Args:
            run_id: unique id of the run in this file.
            seed: the root seed.
            config: the resolved config as a JSON-ready mapping.
            code_version: e.g. package version plus git describe.
            exist_ok: when the run already exists, do nothing instead of raising (resume).

        Raises:
            ArchiveError: the run exists (and not ``exist_ok``), or config is not JSON-serialisable.
        """
        cfg = to_json(dict(config), f"run {run_id!r} config")
        verb = "INSERT OR IGNORE" if exist_ok else "INSERT"
        with self._write(f"create run {run_id!r}") as conn:
            conn.execute(
                f"{verb} INTO runs (run_id, created_at, seed, config_json, code_version, host) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (str(run_id), now(), int(seed), cfg, str(code_version), socket.gethostname()),
            )

    def add_policies(self, run_id: str, policies: Sequence[Policy]) -> int:
        """Archive policies and their parent edges; re-adding an archived policy is a no-op.

        Args:
            run_id: an existing run.
            policies: any number of policies (seeds, children); parents need not be archived first.

        Returns:
            The number of policies that were new.

        Raises:
            ArchiveError: unknown run, or an id already archived with a different genome (nothing of
                the batch is written then).
        """
        added = 0
        with self._write(f"add policies to run {run_id!r}") as conn:
            for p in policies:
                genome_hash = p.genome_hash
                cur = conn.execute(
                    "INSERT OR IGNORE INTO policies (run_id, policy_id, genome_json, genome_hash, "
                    "parent_ids_json, operator, generation, root_id, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (str(run_id), p.id, _genome_json(p), genome_hash, to_json(list(p.parent_ids), "parent ids"),
                     p.operator, int(p.generation), p.root_id, now()),
                )
                if cur.rowcount == 0:
                    row = conn.execute(
                        "SELECT genome_hash FROM policies WHERE run_id = ? AND policy_id = ?", (run_id, p.id)
                    ).fetchone()
                    if row is not None and row[0] != genome_hash:
                        raise ArchiveError(
                            f"{self.path}: policy {p.id!r} of run {run_id!r} is already archived with "
                            "a different genome"
                        )
                    continue
                added += 1
                conn.executemany(
                    "INSERT OR IGNORE INTO policy_parents (run_id, child_id, parent_id, position) "
                    "VALUES (?, ?, ?, ?)",
                    [(str(run_id), p.id, parent, i) for i, parent in enumerate(p.parent_ids)],
                )
        return added

    def add_evaluations(self, run_id: str, rows: Sequence[EvaluationRow]) -> None:
        """Archive evaluation rows, all or none.

        Raises:
            ArchiveError: unknown run, an unknown ``kind``, a non-finite ``total`` or component, or a
                negative count; nothing of the batch is written then.
        """
        with self._write(f"add evaluations to run {run_id!r}") as conn:
            for i, r in enumerate(rows):
                what = f"evaluation row {i} (policy {r.policy_id!r})"
                if r.kind not in EVALUATION_KINDS:
                    raise ArchiveError(f"{what}: kind must be one of {EVALUATION_KINDS}, got {r.kind!r}")
                if min(int(r.n_tasks), int(r.generated_tokens)) < 0:
                    raise ArchiveError(f"{what}: n_tasks and generated_tokens must be >= 0")
                components = {str(k): finite(v, f"{what} component {k!r}") for k, v in r.components.items()}
                conn.execute(
                    "INSERT INTO evaluations (run_id, policy_id, kind, batch_id, total, components_json, "
                    "n_tasks, generated_tokens, seconds, harness_id, outer_generation, inner_generation, "
                    "cached, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (str(run_id), r.policy_id, r.kind, str(r.batch_id), finite(r.total, f"{what} total"),
                     to_json(components, f"{what} components"), int(r.n_tasks), int(r.generated_tokens),
                     finite(r.seconds, f"{what} seconds"), r.harness_id,
                     None if r.outer_generation is None else int(r.outer_generation),
                     None if r.inner_generation is None else int(r.inner_generation),
                     int(bool(r.cached)), r.error, now()),
                )

    def add_harness_candidate(self, run_id: str, row: HarnessCandidateRow) -> None:
        """Archive one scored harness candidate (once: a second row with its id raises ArchiveError)."""
        what = f"harness candidate {row.harness_id!r}"
        vector = [finite(v, f"{what} vector") for v in row.vector]
        with self._write(f"add {what} to run {run_id!r}") as conn:
            conn.execute(
                "INSERT INTO harness_candidates (run_id, harness_id, outer_generation, cand_index, "
                "vector_json, values_json, s_val, screen_s_val, best_policy_id, status, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (str(run_id), str(row.harness_id), int(row.outer_generation), int(row.index),
                 to_json(vector, f"{what} vector"), to_json(dict(row.values), f"{what} values"),
                 finite(row.s_val, f"{what} s_val", optional=True),
                 finite(row.screen_s_val, f"{what} screen_s_val", optional=True),
                 row.best_policy_id, str(row.status), now()),
            )

    def add_event(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> int:
        """Log an event (phase timings, incumbent change, rollback, ...); returns its id."""
        body = to_json(dict(payload), f"event {kind!r} payload")
        with self._write(f"add event {kind!r} to run {run_id!r}") as conn:
            cur = conn.execute(
                "INSERT INTO events (run_id, kind, payload_json, created_at) VALUES (?, ?, ?, ?)",
                (str(run_id), str(kind), body, now()),
            )
            return int(cur.lastrowid or 0)

    # --- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent)."""
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            conn.close()

    def __enter__(self) -> ArchiveStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_archive(path: str | Path, *, read_only: bool = True) -> ArchiveStore:
    """Open an existing archive, read-only by default (CLI, report).

    Raises:
        ArchiveError: as :class:`ArchiveStore`; also when ``path`` does not exist.
    """
    if not Path(path).is_file():
        raise ArchiveError(f"{path}: archive file not found")
    return ArchiveStore(path, read_only=read_only)


def archive_path(configured: str | Path, run_dir: str | Path) -> Path:
    """Where a run's archive lives: ``configured`` if absolute, else under ``run_dir`` (the Hydra run dir)."""
    path = Path(configured).expanduser()
    return path if path.is_absolute() else Path(run_dir) / path
