"""The archive in resume mode: stored writes are verified and skipped, later ones inserted, a mismatch raises."""

from __future__ import annotations

import pytest

from evotrainer.archive import ArchiveStore, EvaluationRow
from evotrainer.archive.replay_store import ReplayingStore
from evotrainer.errors import ArchiveError
from evotrainer.genome import Policy
from tests.archive._dump import dump_deterministic

RUN = "run0"


def _seeds() -> list[Policy]:
    return [Policy.seed("s1", {"role": "You take minutes.", "format": "## Decisions", "rules": "Be brief."}),
            Policy.seed("s2", {"role": "Secrétaire", "format": "- bullets", "rules": "No guessing."})]


def _row(policy: str, total: float, seconds: float = 1.0) -> EvaluationRow:
    return EvaluationRow(policy_id=policy, kind="fitness", batch_id="b0", total=total, components={"format": total},
                         n_tasks=2, generated_tokens=10, seconds=seconds, harness_id="h0", outer_generation=0,
                         inner_generation=0)


def _writes(store: ArchiveStore, *, last_total: float = 0.3) -> None:
    """What a run writes, in order (the first half is what a killed process had written)."""
    store.add_policies(RUN, _seeds())
    store.add_evaluations(RUN, [_row("s1", 0.1), _row("s2", 0.2)])
    store.add_event(RUN, "phase", {"name": "inner_generation", "seconds": 3.0})
    store.add_event(RUN, "lead", {"policy_id": "s1"})
    store.add_evaluations(RUN, [_row("s1", last_total)])
    store.add_event(RUN, "summary", {"best": "s1"})


def test_stored_rows_are_skipped_and_later_ones_inserted(tmp_path) -> None:
    path = tmp_path / "archive.db"
    with ArchiveStore(path) as store:
        store.create_run(RUN, seed=0, config={}, code_version="x")
        store.add_policies(RUN, _seeds())
        store.add_evaluations(RUN, [_row("s1", 0.1, seconds=9.0), _row("s2", 0.2, seconds=8.0)])  # killed after
        store.add_event(RUN, "phase", {"name": "inner_generation", "seconds": 7.5})
    with ArchiveStore(tmp_path / "full.db") as full:
        full.create_run(RUN, seed=0, config={}, code_version="x")
        _writes(full)
        expected = dump_deterministic(full, RUN)
    with ReplayingStore(path, RUN, marker={"elapsed_before_s": 1.5}) as store:
        store.create_run(RUN, 0, {"changed": True}, "y")  # the runs row is reused
        assert store.replaying
        store.add_policies(RUN, _seeds())
        store.add_evaluations(RUN, [_row("s1", 0.1), _row("s2", 0.2)])
        assert store.replayed["evaluations"] == 2  # timings differ: still the same rows
        store.add_event(RUN, "phase", {"name": "inner_generation", "seconds": 3.0})
        assert not store.replaying and store.next_stored_event() is None
        store.add_event(RUN, "lead", {"policy_id": "s1"})
        store.add_evaluations(RUN, [_row("s1", 0.3)])
        store.add_event(RUN, "summary", {"best": "s1"})
        assert dump_deterministic(store, RUN) == expected  # a resume marker is a phase event: left out
        markers = [e.payload for e in store.events(RUN, kind="phase") if e.payload["name"] == "resume"]
        (run,) = store.list_runs()
    assert run.config == {}
    assert markers == [{"name": "resume", "replayed": {"policies": 2, "evaluations": 2, "harness_candidates": 0,
                                                       "events": 1, "selfevolve_pool": 0, "selfevolve_samples": 0,
                                                       "selfevolve_rounds": 0}, "elapsed_before_s": 1.5}]
    with ReplayingStore(path, RUN) as store:  # a second resume replays past the first one's marker
        _writes(store)
        assert store.replayed["events"] == 3 and store.replayed["evaluations"] == 3 and not store.replaying


def test_a_different_write_is_a_divergence(tmp_path) -> None:
    path = tmp_path / "archive.db"
    with ArchiveStore(path) as store:
        store.create_run(RUN, seed=0, config={}, code_version="x")
        _writes(store)
    with ReplayingStore(path, RUN) as store:
        store.add_policies(RUN, _seeds())
        with pytest.raises(ArchiveError, match=r"resume diverged at evaluations row 2: stored 0.2, now 0.25"):
            store.add_evaluations(RUN, [_row("s1", 0.1), _row("s2", 0.25)])
    with ReplayingStore(path, RUN) as store, pytest.raises(ArchiveError, match="resume diverged at policies row 1"):
        store.add_policies(RUN, _seeds()[::-1])
    with pytest.raises(ArchiveError, match="no run 'other'"):
        ReplayingStore(path, "other")
