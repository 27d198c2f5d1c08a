"""An archive opened to resume a run: writes already stored are verified and skipped, later ones inserted.

A resumed run re-runs the engine from its start (``evotrainer/run/resume.py``), so it writes every row the
killed process wrote, in the same order, before any new one. :class:`ReplayingStore` compares each write,
table by table and in order, with the rows stored for the run, leaving out what legitimately varies
between identical runs (timestamps, evaluation ``seconds``, the timings of ``phase`` events, a self-evolution
round's phase timings and training seconds). A matching write
is skipped; past the end of a table's stored rows, writes are inserted as usual; a mismatch raises
``ArchiveError("resume diverged at <table> row N: ...")``, which means the code or the config changed
since the run was written. Nothing stored is rewritten or deleted. The ``runs`` row is reused.
``phase`` events are compared by their ``name`` alone, so code must write them whatever the timings are
(a phase event written only when something was slow would make a resume diverge).

The first new row is preceded by a ``phase`` event named ``resume`` (how many rows were replayed, the
elapsed seconds carried over, the config keys a forced resume changed); a later resume skips such markers
when it replays.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from evotrainer.archive.schema import EvaluationRow, HarnessCandidateRow, PoolTaskRow, RoundRow, SampleRow
from evotrainer.archive.store import ArchiveStore, _genome_json
from evotrainer.archive.values import to_json
from evotrainer.errors import ArchiveError
from evotrainer.events.kinds import PhaseEvent
from evotrainer.genome import Policy

__all__ = ["RESUME_MARKER", "ReplayingStore"]

RESUME_MARKER = "resume"
"""``name`` of the ``phase`` event written where a resumed process starts adding rows."""

_TABLES = ("policies", "evaluations", "harness_candidates", "events", "selfevolve_pool", "selfevolve_samples",
           "selfevolve_rounds")

_TRAIN_TIMINGS = ("seconds", "seconds_per_step", "tokens_per_second")
"""Keys of a round's ``train`` facts that are wall-clock figures (left out of the comparison, as its ``timings``)."""


def _policy_key(p: Policy) -> tuple:
    return (p.id, _genome_json(p), p.genome_hash, json.dumps(list(p.parent_ids), ensure_ascii=False),
            p.operator, int(p.generation), p.root_id)


def _evaluation_key(r: EvaluationRow) -> tuple:
    components = json.loads(to_json({str(k): float(v) for k, v in r.components.items()}, "components"))
    return (r.policy_id, r.kind, str(r.batch_id), float(r.total), components, int(r.n_tasks),
            int(r.generated_tokens), r.harness_id, None if r.outer_generation is None else int(r.outer_generation),
            None if r.inner_generation is None else int(r.inner_generation), int(bool(r.cached)), r.error)


def _opt(x: Any) -> float | None:
    return None if x is None else float(x)


def _candidate_key(r: HarnessCandidateRow) -> tuple:
    return (str(r.harness_id), int(r.outer_generation), int(r.index), [float(v) for v in r.vector],
            json.loads(to_json(dict(r.values), "values")), _opt(r.s_val), _opt(r.race_estimate), r.best_policy_id,
            str(r.status))


def _row_key(row: PoolTaskRow | SampleRow | RoundRow) -> tuple:
    """A self-evolution row as JSON values (tuples as lists), wall-clock figures left out."""
    data = asdict(row)
    if isinstance(row, RoundRow):
        data.pop("timings")
        data["train"] = {k: v for k, v in data["train"].items() if k not in _TRAIN_TIMINGS}
    return (json.loads(json.dumps(data, sort_keys=True, default=str)),)


def _event_key(kind: str, payload: Mapping[str, Any]) -> tuple:
    if kind == "phase":  # wall-clock timings: only which phase
        return (kind, payload.get("name"))
    return (kind, json.loads(to_json(dict(payload), f"event {kind!r} payload")))


class ReplayingStore(ArchiveStore):
    """:class:`ArchiveStore` in resume mode for one run (module docstring).

    Args:
        path: the run's archive file (must hold ``run_id``).
        run_id: the run being resumed.
        marker: extra payload of the ``resume`` phase event (e.g. elapsed seconds, forced config keys).

    Attributes:
        replayed: rows verified and skipped so far, per table.

    Raises:
        ArchiveError: as :class:`ArchiveStore`; the archive holds no run ``run_id``; a write differs from
            the stored row at its position (``resume diverged at ...``).
    """

    def __init__(self, path: Any, run_id: str, marker: Mapping[str, Any] | None = None) -> None:
        super().__init__(path)
        self.run_id = run_id
        self.marker = dict(marker or {})
        self.replayed = dict.fromkeys(_TABLES, 0)
        self._stored = self._load(run_id)
        self._seen: set[str] = set()  # policy ids written (or verified) by this process
        self._live = False

    def _load(self, run_id: str) -> dict[str, list[tuple]]:
        conn = self._conn
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            raise ArchiveError(f"{self.path}: no run {run_id!r} to resume")
        stored: dict[str, list[tuple]] = {}
        stored["policies"] = [
            (r[0], r[1], r[2], r[3], r[4], int(r[5]), r[6]) for r in conn.execute(
                "SELECT policy_id, genome_json, genome_hash, parent_ids_json, operator, generation, root_id "
                "FROM policies WHERE run_id = ? ORDER BY rowid", (run_id,))]
        stored["evaluations"] = [
            (r[0], r[1], r[2], float(r[3]), json.loads(r[4]), int(r[5]), int(r[6]), r[7], r[8], r[9], int(r[10]),
             r[11]) for r in conn.execute(
                "SELECT policy_id, kind, batch_id, total, components_json, n_tasks, generated_tokens, harness_id, "
                "outer_generation, inner_generation, cached, error FROM evaluations WHERE run_id = ? ORDER BY id",
                (run_id,))]
        stored["harness_candidates"] = [
            (r[0], int(r[1]), int(r[2]), json.loads(r[3]), json.loads(r[4]), r[5], r[6], r[7], r[8])
            for r in conn.execute(
                "SELECT harness_id, outer_generation, cand_index, vector_json, values_json, s_val, race_estimate, "
                "best_policy_id, status FROM harness_candidates WHERE run_id = ? ORDER BY rowid", (run_id,))]
        events = []
        for kind, body in conn.execute("SELECT kind, payload_json FROM events WHERE run_id = ? ORDER BY id",
                                       (run_id,)):
            payload = json.loads(body)
            if kind == "phase" and payload.get("name") == RESUME_MARKER:
                continue  # an earlier resume's marker: not written again by a replay
            events.append(_event_key(kind, payload) + (payload,))
        stored["events"] = events
        stored["selfevolve_pool"] = [_row_key(r) for r in self.selfevolve_pool(run_id)]
        stored["selfevolve_samples"] = [_row_key(r) for r in self.selfevolve_samples(run_id)]
        stored["selfevolve_rounds"] = [_row_key(r) for r in self.selfevolve_rounds(run_id)]
        self._stored_ids = {row[0] for row in stored["policies"]}
        return stored

    # --- state ------------------------------------------------------------------------------------

    @property
    def replaying(self) -> bool:
        """True while some stored event is not yet replayed (stop decisions then follow the stored run)."""
        return self.replayed["events"] < len(self._stored["events"])

    def next_stored_event(self) -> tuple[str, dict[str, Any]] | None:
        """``(kind, payload)`` of the next stored event not yet replayed, or None past the end."""
        i = self.replayed["events"]
        events = self._stored["events"]
        return (events[i][0], events[i][-1]) if i < len(events) else None

    def _check(self, table: str, key: tuple) -> bool:
        """True when ``key`` is the next stored row of ``table`` (then counted as replayed); False past the
        end of the stored rows. Raises ArchiveError on a mismatch."""
        i = self.replayed[table]
        stored = self._stored[table]
        if i >= len(stored):
            return False
        want = stored[i][: len(key)]
        if want != key:
            field = next((j for j, (a, b) in enumerate(zip(want, key, strict=True)) if a != b), 0)
            raise ArchiveError(
                f"resume diverged at {table} row {i + 1}: stored {_short(want[field])}, now {_short(key[field])} "
                f"(field {field} of {_short(want)}); the code or the config changed since the run was written "
                f"({self.path})")
        self.replayed[table] = i + 1
        return True

    def _going_live(self) -> None:
        if not self._live:
            self._live = True
            marker = PhaseEvent(name=RESUME_MARKER, fields={"replayed": dict(self.replayed), **self.marker})
            super().add_event(self.run_id, marker.kind, marker.to_payload())

    # --- writes -----------------------------------------------------------------------------------

    def create_run(self, run_id: str, seed: int, config: Mapping[str, Any], code_version: str, *,
                   exist_ok: bool = False) -> None:
        """The stored ``runs`` row is reused: nothing is written for the resumed run."""
        if run_id != self.run_id:
            super().create_run(run_id, seed, config, code_version, exist_ok=exist_ok)

    def add_policies(self, run_id: str, policies: Sequence[Policy]) -> int:
        new = []
        for p in policies:
            if p.id in self._seen:
                new.append(p)  # the base store ignores it (or raises on another genome), as without resume
                continue
            self._seen.add(p.id)
            if not self._check("policies", _policy_key(p)):
                new.append(p)
        if any(p.id not in self._stored_ids for p in new):
            self._going_live()
        return super().add_policies(run_id, new) if new else 0

    def add_evaluations(self, run_id: str, rows: Sequence[EvaluationRow]) -> None:
        new = [r for r in rows if not self._check("evaluations", _evaluation_key(r))]
        if new:
            self._going_live()
            super().add_evaluations(run_id, new)

    def add_harness_candidate(self, run_id: str, row: HarnessCandidateRow) -> None:
        if not self._check("harness_candidates", _candidate_key(row)):
            self._going_live()
            super().add_harness_candidate(run_id, row)

    def add_pool_tasks(self, run_id: str, rows: Sequence[PoolTaskRow]) -> None:
        new = [r for r in rows if not self._check("selfevolve_pool", _row_key(r))]
        if new:
            self._going_live()
            super().add_pool_tasks(run_id, new)

    def add_samples(self, run_id: str, rows: Sequence[SampleRow]) -> None:
        new = [r for r in rows if not self._check("selfevolve_samples", _row_key(r))]
        if new:
            self._going_live()
            super().add_samples(run_id, new)

    def add_round(self, run_id: str, row: RoundRow) -> None:
        if not self._check("selfevolve_rounds", _row_key(row)):
            self._going_live()
            super().add_round(run_id, row)

    def add_event(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> int:
        if self._check("events", _event_key(kind, payload)):
            return 0
        self._going_live()
        return super().add_event(run_id, kind, payload)


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
