"""Several processes writing one archive: every row lands (SQLite WAL, a busy timeout, BEGIN IMMEDIATE)."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from evotrainer.archive import ArchiveStore, EvaluationRow
from evotrainer.archive.recorder import RunRecorder
from evotrainer.archive.store import _BUSY_TIMEOUT_S
from evotrainer.events.kinds import PhaseEvent
from evotrainer.genome import Policy

RUN = "run-concurrent"
WRITERS, ROWS = 4, 50


def _writer(path: str, worker: int, ready, go) -> None:
    """One process: its own connection, ``ROWS`` events and ``ROWS`` evaluations, one transaction each."""
    with ArchiveStore(path) as store:
        rec = RunRecorder(store, RUN)
        ready.wait()
        go.wait()  # all writers start together, so their transactions contend
        for i in range(ROWS):
            rec.emit(PhaseEvent(name="concurrency_probe", fields={"worker": worker, "row": i}))
            store.add_evaluations(RUN, [EvaluationRow(f"w{worker}", "fitness", f"b{worker}-{i}", i / ROWS)])


def test_four_processes_writing_fifty_rows_each_store_all_of_them(tmp_path: Path) -> None:
    assert _BUSY_TIMEOUT_S >= 5  # a writer waits for the write lock instead of failing with "database is locked"
    db = tmp_path / "archive.db"
    with ArchiveStore(db) as store:
        store.create_run(RUN, seed=0, config={}, code_version="t")
        store.add_policies(RUN, [Policy.seed(f"w{k}", {"role": f"writer {k}"}) for k in range(WRITERS)])
    ctx = mp.get_context("spawn")
    ready, go = ctx.Barrier(WRITERS + 1), ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(db), k, ready, go)) for k in range(WRITERS)]
    for p in procs:
        p.start()
    ready.wait(timeout=300)
    go.set()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    with ArchiveStore(db, read_only=True) as store:
        events = [e for e in store.events(RUN, kind="phase") if e.payload["name"] == "concurrency_probe"]
        evals = store.evaluations(RUN, kind="fitness")
    assert len(events) == WRITERS * ROWS
    assert sorted((e.payload["worker"], e.payload["row"]) for e in events) == [
        (k, i) for k in range(WRITERS) for i in range(ROWS)]
    assert len(evals) == WRITERS * ROWS and len({e.batch_id for e in evals}) == WRITERS * ROWS
