"""Archive schema: the DDL, its version, the migrations, and the records rows travel in.

One SQLite file per run (several runs may share one file). The file is marked as ours by
``PRAGMA application_id`` (:data:`APPLICATION_ID`) and carries its schema version in
``PRAGMA user_version``. Each version bump adds exactly one function to :data:`MIGRATIONS` that takes a
file from the previous version to the new one; a fresh file runs them all, in order, inside the opening
transaction (SQLite DDL is transactional).

Every table is append-only: rows are inserted, never updated or deleted. A record whose state changes
over time (an incumbent, a rollback) is written as a new :data:`events` row instead.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evotrainer.events.kinds import Event, from_payload
from evotrainer.genome import Policy

__all__ = ["ADDED_COLUMNS", "APPLICATION_ID", "BUDGET_KINDS", "EVALUATION_KINDS", "MIGRATIONS", "READABLE_VERSION",
           "RENAMED_COLUMNS", "SCHEMA_VERSION", "columns", "EvaluationRow", "EventRow", "HarnessCandidateRow",
           "LineageNode", "PoolTaskRow", "RoundRow", "RunInfo", "SampleRow", "budget_rollouts"]

APPLICATION_ID = 0x45564F54
"""``PRAGMA application_id`` of EvoTrainer archives: the bytes "EVOT" (sqlite.org/fileformat.html)."""

SCHEMA_VERSION = 5
"""``PRAGMA user_version`` this code writes and reads. Bump it together with a new MIGRATIONS entry."""

READABLE_VERSION = 2
"""The oldest version a read-only open reads as it is (no migration: a reader never writes). Versions 3 and 4 only
renamed columns, which readers select under their new names (:func:`columns`); version 5 only added nullable
columns (:data:`ADDED_COLUMNS`), which readers of an older file read as NULL."""

EVALUATION_KINDS: tuple[str, ...] = ("fitness", "meta_val", "meta_screen", "meta_heldout", "meta_transfer")
"""Kinds of evaluation rows: inner fitness on a harness task batch; meta-validation on the fixed set;
meta-validation on the fixed screening subset; a held-out report set never used for selection; the transfer
items (``task.transfer_path``, the run's transfer report; no selection uses them). A text column: no migration."""

BUDGET_KINDS: tuple[str, ...] = ("fitness", "meta_screen", "meta_val")
"""Evaluation kinds whose rollouts count toward ``outer.budget.rollouts`` (:func:`budget_rollouts`): training
batches and selection items, what a search spends to decide. The held-out and transfer reports, which every
run makes once at its end for the same policies, are left out."""


def budget_rollouts(row: EvaluationRow) -> int:
    """Rollouts ``row`` adds to the rollout budget: its ``n_tasks`` (one rollout per task or item) when it is
    of a :data:`BUDGET_KINDS` kind and was computed, 0 when served from the cache (no model call) or of
    another kind. The run's stopping rule and the ablation table count with this same function."""
    return row.n_tasks if row.kind in BUDGET_KINDS and not row.cached else 0

_V1: tuple[str, ...] = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        seed INTEGER NOT NULL,
        config_json TEXT NOT NULL,
        code_version TEXT NOT NULL,
        host TEXT NOT NULL
    )""",
    """CREATE TABLE policies (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        policy_id TEXT NOT NULL,
        genome_json TEXT NOT NULL,
        genome_hash TEXT NOT NULL,
        parent_ids_json TEXT NOT NULL,
        operator TEXT NOT NULL,
        generation INTEGER NOT NULL,
        root_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, policy_id)
    )""",
    """CREATE TABLE policy_parents (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        child_id TEXT NOT NULL,
        parent_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (run_id, child_id, position)
    )""",
    """CREATE TABLE evaluations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        policy_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        batch_id TEXT NOT NULL,
        total REAL NOT NULL,
        components_json TEXT NOT NULL,
        n_tasks INTEGER NOT NULL,
        generated_tokens INTEGER NOT NULL,
        seconds REAL NOT NULL,
        harness_id TEXT,
        outer_generation INTEGER,
        inner_generation INTEGER,
        cached INTEGER NOT NULL,
        error TEXT,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE harness_candidates (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        harness_id TEXT NOT NULL,
        outer_generation INTEGER NOT NULL,
        cand_index INTEGER NOT NULL,
        vector_json TEXT NOT NULL,
        values_json TEXT NOT NULL,
        s_val REAL,
        screen_s_val REAL,
        best_policy_id TEXT,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, harness_id)
    )""",
    """CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        kind TEXT NOT NULL,
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX idx_parents_child ON policy_parents(run_id, child_id)",
    "CREATE INDEX idx_parents_parent ON policy_parents(run_id, parent_id)",
    "CREATE INDEX idx_policies_generation ON policies(run_id, generation)",
    "CREATE INDEX idx_eval_policy ON evaluations(run_id, policy_id, kind)",
    "CREATE INDEX idx_eval_kind_total ON evaluations(run_id, kind, total DESC)",
    "CREATE INDEX idx_harness_outer ON harness_candidates(run_id, outer_generation, cand_index)",
    "CREATE INDEX idx_events_kind ON events(run_id, kind, id)",
)


_V2: tuple[str, ...] = (
    """CREATE TABLE selfevolve_rounds (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        round INTEGER NOT NULL,
        policy_id TEXT NOT NULL,
        candidate_id TEXT,
        status TEXT NOT NULL,
        difficulty_json TEXT NOT NULL,
        next_difficulty_json TEXT NOT NULL,
        curriculum TEXT NOT NULL,
        config_json TEXT NOT NULL,
        pool_size INTEGER NOT NULL,
        n_added INTEGER NOT NULL,
        n_duplicates INTEGER NOT NULL,
        n_samples INTEGER NOT NULL,
        n_kept INTEGER NOT NULL,
        pass_rate REAL NOT NULL,
        mean_score REAL NOT NULL,
        losses_json TEXT NOT NULL,
        adapter_path TEXT,
        train_json TEXT NOT NULL,
        dev_score REAL,
        prev_dev_score REAL,
        val_score REAL,
        timings_json TEXT NOT NULL,
        note TEXT,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, round)
    )""",
    """CREATE TABLE selfevolve_pool (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        round INTEGER NOT NULL,
        task_id TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        source TEXT NOT NULL,
        difficulty_json TEXT NOT NULL,
        transcript TEXT NOT NULL,
        reference_minutes TEXT NOT NULL,
        truth_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, round, task_id)
    )""",
    """CREATE TABLE selfevolve_samples (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        round INTEGER NOT NULL,
        task_id TEXT NOT NULL,
        sample_index INTEGER NOT NULL,
        output TEXT NOT NULL,
        score REAL NOT NULL,
        rule REAL NOT NULL,
        components_json TEXT NOT NULL,
        grades_json TEXT NOT NULL,
        model REAL,
        degenerate TEXT,
        passed INTEGER NOT NULL,
        error TEXT,
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX idx_se_pool_round ON selfevolve_pool(run_id, round)",
    "CREATE INDEX idx_se_samples_round ON selfevolve_samples(run_id, round, passed)",
)


def _creates(stmts: Sequence[str]) -> Callable[[sqlite3.Connection], None]:
    """A migration that runs ``stmts`` (tables and indexes; adds only): to 1 from an empty file, :data:`_V1`; to 2,
    the self-evolution tables (rounds, pool additions, judged samples), :data:`_V2`."""
    def migrate(conn: sqlite3.Connection) -> None:
        for stmt in stmts:
            conn.execute(stmt)
    return migrate


RENAMED_COLUMNS: Mapping[int, tuple[tuple[str, str, str], ...]] = {
    3: (("selfevolve_pool", "transcript", "task_input"), ("selfevolve_pool", "reference_minutes", "reference")),
    4: (("harness_candidates", "screen_s_val", "race_estimate"),),
}
"""Version -> the ``(table, old name, new name)`` columns it renamed: 3, the pool's domain-named columns; 4, a
harness candidate's race estimate (:mod:`evotrainer.harness.scoring`)."""


def _renames(version: int) -> Callable[[sqlite3.Connection], None]:
    """The migration to ``version`` of :data:`RENAMED_COLUMNS`: ``ALTER TABLE ... RENAME COLUMN`` (SQLite >= 3.25)
    keeps every row as it is."""
    def migrate(conn: sqlite3.Connection) -> None:
        for table, old, new in RENAMED_COLUMNS[version]:
            conn.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}")
    return migrate


ADDED_COLUMNS: Mapping[int, tuple[tuple[str, str, str], ...]] = {
    5: (("selfevolve_rounds", "grades_requested", "INTEGER"), ("selfevolve_rounds", "grades_parsed", "INTEGER")),
}
"""Version -> the ``(table, column, type)`` columns it added, nullable (NULL in rows written before): 5, a
self-evolution round's model-judge grades asked for and parsed (:class:`RoundRow`)."""


def _adds(version: int) -> Callable[[sqlite3.Connection], None]:
    """The migration to ``version`` of :data:`ADDED_COLUMNS` (``ALTER TABLE ... ADD COLUMN``, rows kept)."""
    def migrate(conn: sqlite3.Connection) -> None:
        for table, column, kind in ADDED_COLUMNS[version]:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    return migrate


def columns(conn: sqlite3.Connection, table: str, names: Sequence[str]) -> str:
    """A select list of ``table``'s columns ``names`` under their current names, also for an older file opened
    read-only: a column it still has under an old name (:data:`RENAMED_COLUMNS`) is selected ``AS`` the new one."""
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    old = {new: was for renames in RENAMED_COLUMNS.values() for t, was, new in renames if t == table}
    return ", ".join(f"{old[n]} AS {n}" if n not in have and n in old else n for n in names)


MIGRATIONS: Mapping[int, Callable[[sqlite3.Connection], None]] = {1: _creates(_V1), 2: _creates(_V2),
                                                                  3: _renames(3), 4: _renames(4), 5: _adds(5)}
"""Target version -> function taking a file from ``version - 1`` to ``version`` (inside a transaction;
must not use ``executescript``, which commits)."""


@dataclass(frozen=True)
class RunInfo:
    """One run of the archive.

    Attributes:
        run_id: unique id of the run.
        seed: the run's root seed.
        config: the resolved config, as a JSON-ready dict.
        code_version: package version and/or git describe of the code that ran.
        host: machine name (informational; excluded from determinism dumps).
        created_at: ISO 8601 UTC timestamp.
    """

    run_id: str
    seed: int
    config: dict[str, Any]
    code_version: str
    host: str = ""
    created_at: str = ""


@dataclass(frozen=True)
class EvaluationRow:
    """One evaluation of one policy on one batch (inner fitness or meta-validation).

    Attributes:
        policy_id: the evaluated policy (archived first with ``add_policies``).
        kind: one of :data:`EVALUATION_KINDS`.
        batch_id: id of the task batch (e.g. a hash of task ids, or the validation-set name).
        total: mean score over the batch, finite, higher is better (rewards and S_val in [0, 1]).
        components: mean of each reward / metric component over the batch, by name, finite.
        n_tasks: tasks in the batch, >= 0.
        generated_tokens: tokens generated for this evaluation (0 when cached), >= 0.
        seconds: wall time spent, >= 0 (excluded from determinism dumps).
        harness_id: the harness candidate it ran under, if any.
        outer_generation: outer (CMA-ES) generation, if any.
        inner_generation: inner (GA) generation, if any.
        cached: served from the fitness cache rather than computed.
        error: None, or why the evaluation fell back to its fallback score.
    """

    policy_id: str
    kind: str
    batch_id: str
    total: float
    components: Mapping[str, float] = field(default_factory=dict)
    n_tasks: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0
    harness_id: str | None = None
    outer_generation: int | None = None
    inner_generation: int | None = None
    cached: bool = False
    error: str | None = None


@dataclass(frozen=True)
class HarnessCandidateRow:
    """One outer-loop harness candidate, written once its scores are known.

    Attributes:
        harness_id: unique in the run (e.g. ``"h{outer_generation}.{index}"``).
        outer_generation: CMA-ES generation, >= 0.
        index: position in that generation's ask, >= 0.
        vector: the normalised search point, each coordinate in [0, 1].
        values: the decoded named values (e.g. ``Harness.as_dict()``), JSON-ready.
        s_val: whole-selection-set S_val of the best resulting policy, higher is better; None when it was not
            scored there (its race estimate did not beat the incumbent, or it failed).
        race_estimate: the race's estimate of that policy's whole-set S_val (S_val units, can be < 0; column
            ``screen_s_val`` before schema version 4), None = failed.
        best_policy_id: the policy ``s_val`` belongs to, or None.
        status: free text, e.g. "evaluated", "screened_out", "failed".
    """

    harness_id: str
    outer_generation: int
    index: int
    vector: tuple[float, ...]
    values: Mapping[str, Any]
    s_val: float | None = None
    race_estimate: float | None = None
    best_policy_id: str | None = None
    status: str = "evaluated"


@dataclass(frozen=True)
class EventRow:
    """A logged event: phase timings, incumbent changes, rollbacks, ...

    Attributes:
        id: insertion order in the file (increasing).
        kind: free text, e.g. "phase", "incumbent", "rollback".
        payload: the JSON payload.
        created_at: ISO 8601 UTC timestamp.
    """

    id: int
    kind: str
    payload: dict[str, Any]
    created_at: str = ""

    @property
    def event(self) -> Event:
        """The typed event (:func:`evotrainer.events.kinds.from_payload`; rebuilt on each access).

        Raises:
            DataError: an unknown kind, or a payload key unknown to the kind or of the wrong type.
        """
        return from_payload(self.kind, self.payload)


@dataclass(frozen=True)
class LineageNode:
    """One ancestor (or the start policy itself) in a lineage query.

    Attributes:
        policy: the archived policy.
        parent_ids: its parents' ids, in order (empty for seeds).
        depth: 0 for the start policy, 1 for its parents, ... (shortest path when reached twice).
    """

    policy: Policy
    parent_ids: tuple[str, ...]
    depth: int


@dataclass(frozen=True)
class RoundRow:
    """One self-evolution round (table ``selfevolve_rounds``; one row per round, written at its end).

    Attributes:
        round: 1-based round number.
        policy_id: the policy the round started from (its adapter is the parent adapter).
        status: ``"kept"`` (dev score did not fall), ``"reverted"`` (it fell: the adapter reverts),
            ``"no_pass"`` (no sample passed: nothing trained) or ``"failed"`` (training failed).
        difficulty: generator knobs of the tasks generated this round, natural units.
        next_difficulty: knobs after the curriculum step.
        curriculum: the curriculum action ("raise", "lower", "hold", "at_bound").
        config: the round's settings (``selfevolve`` config), JSON-ready.
        pool_size: tasks rolled out this round.
        n_added / n_duplicates: pool additions / candidates dropped as near-duplicates.
        n_samples / n_kept: samples judged / samples at or above the pass threshold.
        pass_rate: n_kept / n_samples in [0, 1].
        mean_score: mean judge score in [0, 1], higher is better.
        losses: training loss per step (empty when nothing trained).
        candidate_id: the trained policy's id, or None.
        adapter_path: its adapter folder relative to the run dir, or None.
        train: training facts: examples, replay; when it trained also the fields of
            :class:`~evotrainer.adapters.train.TrainResult` but the folder, and tokens_per_second (input tokens / s).
        dev_score: dev-set score of the candidate (or of the unchanged policy), in [0, 1], or None.
        prev_dev_score: dev-set score of the policy the round started from.
        val_score: meta-validation score (S_val) of the candidate on the round's items, or None.
        timings: wall seconds per phase (excluded from determinism comparisons).
        note: free text (why nothing trained, an error).
        grades_requested / grades_parsed: model-judge grades asked for this round (0 when the model judge is off)
            and those that parsed (the others fall back to the rule reward); None in rounds before schema 5.
    """

    round: int
    policy_id: str
    status: str
    difficulty: Mapping[str, float]
    next_difficulty: Mapping[str, float]
    curriculum: str
    config: Mapping[str, Any]
    pool_size: int
    n_added: int
    n_duplicates: int
    n_samples: int
    n_kept: int
    pass_rate: float
    mean_score: float
    losses: tuple[float, ...] = ()
    candidate_id: str | None = None
    adapter_path: str | None = None
    train: Mapping[str, Any] = field(default_factory=dict)
    dev_score: float | None = None
    prev_dev_score: float | None = None
    val_score: float | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    note: str | None = None
    grades_requested: int | None = None
    grades_parsed: int | None = None

    @property
    def parse_rate(self) -> float | None:
        """``grades_parsed / grades_requested`` in [0, 1]; None when no grade was asked for or not recorded."""
        if not self.grades_requested or self.grades_parsed is None:
            return None
        return self.grades_parsed / self.grades_requested


@dataclass(frozen=True)
class PoolTaskRow:
    """One task added to the self-evolution pool (table ``selfevolve_pool``).

    Attributes:
        round: the round that added it (0 = seed task).
        task_id: the task's id.
        content_hash: :func:`evotrainer.tasks.base.content_hash` of the task's input.
        source: "seed" (generated at set-up), "real" (an item of ``task.train_path``) or "generated".
        difficulty: generator knobs it was made at.
        task_input: the task's input as the policy reads it (``Task.text``; column ``transcript`` before
            schema version 3).
        reference: the family's reference answer, "" when none (column ``reference_minutes`` before 3).
        truth: the family's ``ground_truth(task)`` (JSON-ready), else ``{"identity": task.identity()}``.
    """

    round: int
    task_id: str
    content_hash: str
    source: str
    difficulty: Mapping[str, float]
    task_input: str
    reference: str = ""
    truth: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SampleRow:
    """One judged rollout sample (table ``selfevolve_samples``).

    Attributes:
        round: the round.
        task_id: the pool task it answers.
        index: sample number for that task, >= 0.
        output: the generated output (untrusted text, stored as data only).
        score: combined judge score in [0, 1].
        rule: rule reward in [0, 1].
        components: rule reward components.
        grades: model grades per repeat (None = unparsed).
        model: mean parsed grade / 10, or None.
        degenerate: the guard's reason, or None.
        passed: score >= the pass threshold (trained on when the round trains).
        error: judge errors, or None.
    """

    round: int
    task_id: str
    index: int
    output: str
    score: float
    rule: float
    components: Mapping[str, float] = field(default_factory=dict)
    grades: tuple[float | None, ...] = ()
    model: float | None = None
    degenerate: str | None = None
    passed: bool = False
    error: str | None = None
