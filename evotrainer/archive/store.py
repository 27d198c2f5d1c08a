"""The append-only SQLite lineage archive: opening, validation, migrations and inserts.

Plain stdlib ``sqlite3`` with explicit transactions (``isolation_level=None``): every write method is
one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on any error, so a failing batch leaves nothing
behind). The writer puts the file in WAL mode (sqlite.org/wal.html), so readers (a CLI or report while
a run is going) neither block the writer nor take a write lock; closing a writer checkpoints the WAL into
the file. There is no UPDATE or DELETE in this package: only INSERT (and ``INSERT OR IGNORE`` for
idempotent policy inserts).

Reading leaves the run folder as it found it (:meth:`ArchiveStore._connect_read_only`): ``mode=ro`` on a
WAL file creates ``-wal`` and ``-shm`` files when they are missing, leaves them behind, and fails in a
read-only folder (sqlite.org/wal.html, "Read-Only Databases"), so a reader picks its way by what lies
beside the file, whether the folder is writable, and whether a writer holds a run lock there
(``.<run id>.lock``, :mod:`evotrainer.archive.run_lock`):

- no ``-wal`` (or an empty one and no ``-shm``) in a writable folder: a plain connection with
  ``PRAGMA query_only``; a writer may start later (a resumed run) and append and checkpoint while this
  reader is open, which only a connection that takes SQLite's locks sees correctly; the last connection
  to close removes the side files, so none is left behind;
- the same in a read-only folder where no run lock is held (no run is writing it): ``immutable=1``
  (sqlite.org/uri.html: read-only, no locks, no side files). Only there, because an ``immutable`` reader
  of a file that a writer then appends to and checkpoints counts wrong rows, then raises "database disk
  image is malformed";
- ``-wal`` and ``-shm``, or a read-only folder where a writer may be live: ``mode=ro`` shares the writer's
  WAL (reads a read-only ``-shm`` on a read-only mount; SQLite >= 3.22);
- ``-wal`` without ``-shm`` (a killed run's files copied without it), or ``mode=ro`` failing: the file (and
  its WAL) are copied to a temporary folder and read there.

A file whose header says WAL but which holds no tables and has no ``-wal`` beside it is a copy of a
killed run's ``archive.db`` without its ``archive.db-wal``: it is reported as such, never as empty.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from evotrainer import testhooks
from evotrainer.archive.queries import ArchiveQueries
from evotrainer.archive.run_lock import probe
from evotrainer.archive.schema import (
    APPLICATION_ID,
    EVALUATION_KINDS,
    MIGRATIONS,
    READABLE_VERSION,
    SCHEMA_VERSION,
    EvaluationRow,
    HarnessCandidateRow,
)
from evotrainer.archive.selfevolve_store import SelfEvolveTables
from evotrainer.archive.values import finite, now, to_json
from evotrainer.errors import ArchiveError
from evotrainer.genome import Policy

__all__ = ["DEFAULT_ARCHIVE_NAME", "ArchiveStore", "archive_path", "checkpoint_archive", "open_archive"]

DEFAULT_ARCHIVE_NAME = "archive.db"
"""File name of a run's archive inside the Hydra run dir."""

_BUSY_TIMEOUT_S = 10.0
_CLOSE_CHECKPOINT_TIMEOUT_MS = 1000  # how long a closing writer waits for readers before leaving the WAL as is
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _side_file(path: Path, suffix: str) -> Path:
    """``archive.db-wal`` / ``archive.db-shm`` beside ``path`` (SQLite appends the suffix to the name)."""
    return path.with_name(path.name + suffix)


def _wal_header(path: Path) -> bool:
    """Whether the file's header marks a WAL-mode database (read and write versions 2, bytes 18-19).

    Source: sqlite.org/fileformat2.html, "The Database Header".
    """
    try:
        with path.open("rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[:16] == _SQLITE_MAGIC and head[18:20] == b"\x02\x02"


def _missing_wal_error(path: Path) -> ArchiveError:
    wal = _side_file(path, "-wal").name
    shm = _side_file(path, "-shm").name
    return ArchiveError(
        f"{path}: the archive's rows are in {wal}, which is missing: copy {wal} (and {shm}) with it, "
        "or run `python -m evotrainer.archive checkpoint <run dir>` where the run was written"
    )


def _writer_may_be_live(folder: Path) -> bool:
    """Whether a run lock in ``folder`` (``.<run id>.lock``, :mod:`evotrainer.archive.run_lock`) is held by a live
    process, or cannot be checked (a filesystem without ``flock``, an unreadable lock file)."""
    return any(probe(lock) is not False for lock in folder.glob(".*.lock"))


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
        read_only: reads only, never a write lock, usable while a writer runs (also one that starts
            after this reader opened) and on a read-only mount; leaves nothing beside the file that was
            not there (how: the module docstring).

    Raises:
        ArchiveError: the file is missing (read-only), not SQLite or corrupt, a SQLite file of another
            application, or of a newer (or, read-only, older than ``READABLE_VERSION``) schema version, or
            (read-only) a copy whose ``-wal`` file was left behind; the message names the path and what was found.

    Example::

        with ArchiveStore(run_dir / "archive.db") as store:
            store.create_run("run0", seed=0, config={...}, code_version="0.1.0")
            store.add_policies("run0", population)
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = bool(read_only)
        self._copy_dir: Path | None = None  # temporary copy of a file and its WAL (read-only, no -shm)
        self._wal_found = False  # (read-only) a -wal lay beside the file before this reader opened it
        self._conn = self._connect()
        try:
            self._check_and_migrate()
        except BaseException:
            self._conn.close()
            self._drop_copy()
            raise

    # --- opening ----------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                conn = self._connect_read_only()
            else:
                if self.path.exists() and not self.path.is_file():
                    raise ArchiveError(f"{self.path}: expected an archive file, found a directory")
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(self.path), timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            self._drop_copy()
            raise ArchiveError(f"{self.path}: cannot open archive ({exc})") from None
        conn.row_factory = sqlite3.Row
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """Open for reading without writing beside the file (the three ways: the module docstring).

        Raises:
            ArchiveError: the file is missing.
            sqlite3.Error: SQLite cannot open it (turned into ArchiveError by the caller).
        """
        if not self.path.is_file():
            raise ArchiveError(f"{self.path}: archive file not found")
        path = self.path.resolve()
        wal, shm = _side_file(path, "-wal"), _side_file(path, "-shm")
        wal_size = wal.stat().st_size if wal.is_file() else None
        self._wal_found = wal_size is not None
        at_rest = wal_size is None or (wal_size == 0 and not shm.exists())  # every row in the file, no -shm
        writable = os.access(path.parent, os.W_OK)
        if at_rest and writable:
            conn = _connect_uri(path, "mode=rw")
            conn.execute("PRAGMA query_only = ON")
            return conn
        frozen = not writable and not _writer_may_be_live(path.parent)
        if at_rest and frozen:
            return _connect_uri(path, "mode=ro&immutable=1")
        if shm.exists() or at_rest:
            conn = _connect_uri(path, "mode=ro")
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # SQLite opens the WAL lazily
                return conn
            except sqlite3.OperationalError:  # e.g. a -shm no process can map or create; read a copy instead
                conn.close()
            if wal_size == 0 and frozen:
                return _connect_uri(path, "mode=ro&immutable=1")
        self._copy_dir = Path(tempfile.mkdtemp(prefix="evotrainer-archive-"))
        try:
            copy = self._copy_dir / path.name
            shutil.copyfile(path, copy)
            if wal_size is not None:
                shutil.copyfile(wal, _side_file(copy, "-wal"))
        except OSError as exc:
            self._drop_copy()
            raise ArchiveError(f"{self.path}: cannot copy the archive and its WAL to read them ({exc})") from None
        return _connect_uri(copy, "mode=ro")

    def _drop_copy(self) -> None:
        copy_dir, self._copy_dir = self._copy_dir, None
        if copy_dir is not None:
            shutil.rmtree(copy_dir, ignore_errors=True)

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
                if _wal_header(self.path) and not self._wal_found:  # the plain connection may have made one
                    raise _missing_wal_error(self.path)
                raise ArchiveError(f"{self.path}: not an EvoTrainer archive: an empty SQLite file")
            if version < READABLE_VERSION:
                raise ArchiveError(
                    f"{self.path}: archive schema version {version} is older than {READABLE_VERSION}; "
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

    def _write(self, what: str) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``), rolled back on any error."""
        if self.read_only:
            raise ArchiveError(f"{self.path}: archive opened read-only; cannot {what}")
        return self._transaction(what, write=True)

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
        for kind in dict.fromkeys(r.kind for r in rows):  # test-only kill point (evotrainer/testhooks.py)
            testhooks.reached(f"evaluation:{kind}", sum(r.kind == kind for r in rows))

    def add_harness_candidate(self, run_id: str, row: HarnessCandidateRow) -> None:
        """Archive one scored harness candidate (once: a second row with its id raises ArchiveError)."""
        what = f"harness candidate {row.harness_id!r}"
        vector = [finite(v, f"{what} vector") for v in row.vector]
        with self._write(f"add {what} to run {run_id!r}") as conn:
            conn.execute(
                "INSERT INTO harness_candidates (run_id, harness_id, outer_generation, cand_index, "
                "vector_json, values_json, s_val, race_estimate, best_policy_id, status, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (str(run_id), str(row.harness_id), int(row.outer_generation), int(row.index),
                 to_json(vector, f"{what} vector"), to_json(dict(row.values), f"{what} values"),
                 finite(row.s_val, f"{what} s_val", optional=True),
                 finite(row.race_estimate, f"{what} race_estimate", optional=True),
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
        testhooks.reached(f"event:{kind}")  # test-only kill point (evotrainer/testhooks.py)
        return int(cur.lastrowid or 0)

    # --- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent); a writer first checkpoints its WAL into the file.

        SQLite checkpoints when the last connection to a file closes; the explicit checkpoint also covers
        a writer closing while a reader (a CLI, a report) is still open, waiting for it at most
        ``_CLOSE_CHECKPOINT_TIMEOUT_MS``. A checkpoint that cannot finish leaves the rows in the WAL,
        where readers still find them.
        """
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            if not self.read_only:
                try:
                    conn.execute(f"PRAGMA busy_timeout = {_CLOSE_CHECKPOINT_TIMEOUT_MS}")
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                except sqlite3.Error:
                    pass
            conn.close()
        self._drop_copy()

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


def checkpoint_archive(path: str | Path) -> int:
    """Fold ``archive.db-wal`` into ``archive.db`` (``PRAGMA wal_checkpoint(TRUNCATE)``), so the file alone
    holds every committed row and can be copied alone (sqlite.org/pragma.html#pragma_wal_checkpoint).

    Meant for a killed run's archive, in the folder where it was written (``archive checkpoint``). Opens
    the file for writing without migrating it; a file with no ``-wal`` beside it is left untouched.

    Returns:
        The size of the WAL that was folded in, bytes (0: there was none, or it was empty).

    Raises:
        ArchiveError: the file is missing, not an EvoTrainer archive (or its ``-wal`` is missing), the
            folder or file is not writable, or another connection kept the checkpoint from finishing.
    """
    path = Path(path)
    with ArchiveStore(path, read_only=True):  # validates it (and names a missing -wal) without writing
        pass
    wal = _side_file(path.resolve(), "-wal")
    if not wal.is_file():
        return 0
    size = wal.stat().st_size
    try:
        conn = sqlite3.connect(str(path.resolve()), timeout=_BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise ArchiveError(f"{path}: cannot open archive for writing ({exc})") from None
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.Error as exc:
        raise ArchiveError(f"{path}: cannot checkpoint (is the folder writable?): {exc}") from None
    finally:
        conn.close()
    if busy:
        raise ArchiveError(f"{path}: another process is using the archive; checkpoint again when it has ended")
    return int(size)


def _connect_uri(path: Path, query: str) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.as_uri()}?{query}", uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None)


def archive_path(configured: str | Path, run_dir: str | Path) -> Path:
    """Where a run's archive lives: ``configured`` if absolute, else under ``run_dir`` (the Hydra run dir)."""
    path = Path(configured).expanduser()
    return path if path.is_absolute() else Path(run_dir) / path
