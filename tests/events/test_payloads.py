"""Typed archive events: payloads round-trip key for key and in order, records are frozen, bad input raises."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.errors import DataError
from evotrainer.events import kinds as ev

PKG = Path(__file__).resolve().parents[2] / "evotrainer"

# One payload per producer, built the way the producer built it before the typed events (same keys, same
# order, values of the same JSON types): evolve/coevolution.py, llm_objective.py, run/control.py, evolve/budget_check.py,
# browse/live_report.py, recorder.py (trajectories), replay_store.py (resume marker), selfevolve/run.py and round.py.
_BOUND = {"mean": 0.05, "low": -0.01, "high": None, "n": 4, "wins": 2, "losses": 1, "ties": 1}
_SPLIT = {"split": "heldout", "n": 2, "baseline_mean": 0.4, "best_mean": 0.5,
          "diff": {"mean": 0.1, "low": -0.2, "high": 0.4, "share_b_better": 0.7, "n": 2},
          "wins": 1, "losses": 0, "ties": 1, "baseline": [0.3, 0.5], "best": [0.5, 0.5], "item_ids": ["v1", "v2"]}
PAYLOADS: list[tuple[str, dict]] = [
    ("setup", {"validation_items": 6, "selection_items": ["v1", "v2"], "heldout_items": ["v3"],
               "screen_items": ["v1"], "harness_names": ["length", "format"], "population": ["terse", "markdown"],
               "probes": {"means": {"reference": 0.9, "skeleton": 0.0}, "items": 6, "policy": None,
                          "policy_id": None, "failures": [], "misses": []}}),
    ("yardstick", {"means": {"reference": 0.9, "baseline": 0.0}, "items": 4, "policy": 0.05,
                   "policy_id": "terse", "failures": [], "misses": ["wrong_item 0.02 > 25% of the policy's 0.05"]}),
    ("task_batch", {"outer_generation": 1, "harness_id": "g1c0", "batch_id": "b-1", "task_ids": ["t1", "t2"],
                    "content_hashes": ["h1", "h2"]}),
    ("incumbent_reference", {"outer_generation": 0, "harness_id": "h0", "policy_id": "terse"}),
    ("lead", {"outer_generation": 1, "harness_id": "g1c0", "policy_id": "terse", "front": {"terse": 2, "md": 1}}),
    ("race", {"outer_generation": 1, "harness_id": "g1c0", "reference": "terse", "stages": [2, 4], "evaluations": 12,
              "leader": "p9", "level": 0.95, "drop_level": 0.8,
              "entries": [{"policy_id": "p9", "items": 4, "status": "better", **_BOUND}]}),
    ("phase", {"name": "inner_generation", "harness_id": "g1c0", "generation": 3, "select": 0.01, "vary": 1.5,
               "evaluate": 2.25}),
    ("inner_generation", {"harness_id": "g1c0", "outer_generation": 1, "generation": 3,
                          "record": {"gen": 3, "nevals": 2, "max": 0.5, "mean": 0.25, "min": 0.0},
                          "children": ["p8", "p9"], "rejected": 1, "skipped": False, "mutator_error": None}),
    ("operator_stats", {"harness_id": None, "outer_generation": None,
                        "stats": {"mutate_llm": {"tried": 3, "better": 1}}}),
    ("style_library", {"harness_id": "g2c1", "outer_generation": 2, "accepted": False,
                       "error": "RuntimeError('down')"}),
    ("style_library", {"harness_id": "g2c1", "outer_generation": 2, "accepted": True, "retired": "dry",
                       "rewritten": "warm", "new_name": "warm~2", "answer": "Be brief.",
                       "library": [["warm", "Be warm."], ["warm~2", "Be brief."]]}),
    ("incumbent", {"outer_generation": 0, "policy_id": "terse", "s_val": 0.41, "harness_id": "h0"}),
    ("reward_hacking", {"outer_generation": 1, "harness_id": "g1c1", "inner_gain": 0.3, "s_val_delta": -0.2,
                        "penalty": 0.5}),
    ("outer_skipped", {"outer_generation": 2, "reason": "no candidate evaluated successfully"}),
    ("promotion", {"outer_generation": 1, "harness_id": "g1c0", "policy_id": "p9", "incumbent_policy_id": "terse",
                   "promoted": True, "s_val": 0.46, "incumbent_s_val": 0.41, "level": 0.95, "paired": _BOUND}),
    ("promotion", {"outer_generation": 1, "harness_id": "g1c0", "policy_id": "p9", "incumbent_policy_id": "terse",
                   "promoted": False, "s_val": 0.4, "incumbent_s_val": 0.41, "level": 0.95, "paired": None}),
    ("rollback", {"outer_generation": 3, "cause": "regression", "detail": "3 generations below",
                  "restored_harness_id": "g1c0", "restored_policy_id": "p9", "s_val": 0.46, "sigma": 0.15}),
    ("outer_generation", {"outer_generation": 1, "current_s_val": 0.44, "current_full_s_val": None,
                          "incumbent_s_val": 0.46, "incumbent_policy_id": "p9",
                          "best_harness_id": "g1c0", "rolled_back": False, "sigma": 0.3, "told": [0.44, None],
                          "archive": [["g1c0", 0.46], ["h0", 0.41]], "cma_termination": {"tolfun": "1e-11"}}),
    ("phase", {"name": "outer_generation", "outer_generation": 1, "seconds": 12.5}),
    ("candidate_failed", {"outer_generation": 1, "harness_id": "g1c1", "error": "ValueError: boom"}),
    ("summary", {"initial_best": "terse", "initial_s_val": 0.41, "best": "p9", "best_s_val": 0.46,
                 "best_harness_id": "g1c0", "heldout_s_val": 0.5, "selection_items": 4, "heldout_items": 2,
                 "rollouts": 120, "s_val_curve": [0.41, 0.46], "current_curve": [0.4, 0.44], "rollbacks": 0,
                 "stop_reason": "outer.generations", "stop_detail": "2 reached", "candidates": 4,
                 "generated_tokens": 5000, "archive": [["g1c0", 0.46]]}),
    ("phase", {"name": "totals", "seconds": 99.0, "inner_evaluate": 50.0, "meta-validation": 20.0}),
    ("generalisation", {"version": 1, "baseline_id": "terse", "best_id": "p9", "level": 0.95, "held": None,
                        "verdict": "undecided: ...", "selection": {**_SPLIT, "split": "selection"},
                        "heldout": _SPLIT}),
    ("transfer", {"version": 1, "item_ids": ["q1", "q2"], "roles": ["final_best", "best_seed", "plain_prompt"],
                  "policy_ids": ["p9", "terse", "plain_prompt"], "means": [0.5, 0.4, 0.3],
                  "values": [[0.5, 0.5], [0.3, 0.5], [0.3, 0.3]],
                  "comparisons": [{"a": "final_best", "b": "best_seed", "diff": 0.1, "low": 0.0, "high": 0.2,
                                   "share_better": 0.5, "n": 2, "wins": 1, "losses": 0, "ties": 1, "level": 0.95}],
                  "level": 0.95, "transfers": False, "verdict": "no transfer gain shown: ..."}),
    ("stop", {"key": "stop_file", "detail": "STOP found", "outer_generation": 2, "harness_id": "g2c0"}),
    ("stop", {"key": "stop_file", "detail": "STOP found", "outer_generation": 2, "harness_id": "g2c0",
              "inner_generation": 5}),
    ("phase", {"name": "gen0_estimate", "seconds": 300.0, "elapsed": 20.0, "per_request": 1.5,
               "length_factor": 1.0, "remaining_requests": 40, "budget": 600.0, "share": 0.5, "warn": False}),
    ("phase", {"name": "report", "outer_generation": None, "seconds": 0.2, "path": "/r/report.html", "error": None}),
    ("phase", {"name": "resume", "replayed": {"policies": 3, "events": 9}, "elapsed_before_s": 5.0}),
    ("trajectories", {"policy_id": "terse", "batch_id": "b-1", "kind": "fitness", "harness_id": None,
                      "trajectories": [{"messages": []}, {"text": "not json"}]}),
    ("input_handling", {"policy_id": "terse", "batch_id": "b-1", "kind": "meta_val", "harness_id": None,
                        "handling": ["whole", "windowed:4", "cut:0.230"]}),
    ("setup", {"mode": "selfevolve", "policy": "terse", "dev_tasks": ["d1"], "val_items": ["v1"],
               "seed_tasks": ["s1", "s2"]}),
    ("phase", {"name": "selfevolve model load", "seconds": 3.0}),
    ("phase", {"name": "selfevolve baseline", "dev": 1.0, "meta_val": 2.0}),
    ("phase", {"name": "selfevolve round 1", "seconds": 9.0, "sample": 4.0, "train": 5.0}),
    ("summary", {"mode": "selfevolve", "baseline_dev": 0.3, "baseline_val": None, "final_policy": "terse",
                 "final_adapter": None, "rounds": [[1, "kept", 0.35, None], [2, "rejected", 0.3, 0.2]],
                 "generated_tokens": 800}),
    ("phase", {"name": "selfevolve transfer", "seconds": 12.0}),
    ("selfevolve_transfer", {"version": 1, "item_ids": ["q1", "q2", "q3"], "groups": ["m1", "m1", "m2"],
                             "base_policy": "terse", "final_policy": "se2-abc", "final_adapter": "adapters/round_002",
                             "base_values": [0.2, 0.1, 0.3], "final_values": [0.25, 0.1, 0.2],
                             "comparison": {"base_mean": 0.2, "final_mean": 0.1833, "diff": -0.0375, "low": -0.1,
                                            "high": 0.025, "share_better": 0.25, "clusters": 2, "wins": 1,
                                            "losses": 1, "ties": 1, "same": False, "level": 0.95},
                             "verdict": "transfer (3 items of 2 groups): ..."}),
]


@pytest.mark.parametrize(("kind", "payload"), PAYLOADS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(PAYLOADS)])
def test_payload_round_trips_with_its_keys_in_order(kind: str, payload: dict) -> None:
    event = ev.from_payload(kind, payload)
    assert event.kind == kind
    out = event.to_payload()
    assert out == payload and list(out) == list(payload)
    assert json.dumps(out) == json.dumps(payload)  # the archive's bytes
    assert ev.from_payload(kind, out) == event


def test_every_kind_and_class_is_covered() -> None:
    classes = {c for c in vars(ev).values() if isinstance(c, type) and issubclass(c, ev.Event) and c is not ev.Event}
    assert classes == set(ev.EVENT_TYPES.values()) | set(ev.MODE_TYPES.values())
    assert all(cls.kind == kind for kind, cls in ev.EVENT_TYPES.items())
    covered = {type(ev.from_payload(k, p)) for k, p in PAYLOADS}
    assert covered == classes


def _produced_kinds() -> dict[str, str]:
    """Kind -> file:line of every ``*.event("<kind>", ...)`` call left in the package (untyped producers)."""
    found: dict[str, str] = {}
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "event"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found[node.args[0].value] = f"{path.relative_to(PKG)}:{node.lineno}"
    return found


def test_untyped_producers_use_known_kinds() -> None:
    """``RunRecorder.event`` raises on an unknown kind: every call still written that way names a known one."""
    unknown = {k: where for k, where in _produced_kinds().items() if k not in ev.EVENT_TYPES}
    assert not unknown


@pytest.mark.parametrize("cls", sorted(set(ev.EVENT_TYPES.values()) | set(ev.MODE_TYPES.values()),
                                       key=lambda c: c.__name__))
def test_events_are_frozen_and_slotted(cls: type[ev.Event]) -> None:
    event = cls(name="x") if cls is ev.PhaseEvent else cls()
    field = dataclasses.fields(event)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, field, None)
    assert not hasattr(event, "__dict__")


def test_bad_payloads_raise_one_line_errors_naming_the_kind_and_key() -> None:
    with pytest.raises(DataError, match=r"unknown event kind 'nope'"):
        ev.from_payload("nope", {})
    with pytest.raises(DataError, match=r"event 'incumbent': unknown key 'note'"):
        ev.from_payload("incumbent", {"policy_id": "a", "note": "x"})
    with pytest.raises(DataError, match=r"event 'race': key 'stages' holds \[2, 'x'\], expected tuple\[int, \.\.\.\]"):
        ev.from_payload("race", {"stages": [2, "x"]})
    with pytest.raises(DataError, match=r"event 'inner_generation': key 'skipped'"):
        ev.from_payload("inner_generation", {"skipped": 1})  # an int is not a bool
    with pytest.raises(DataError, match=r"event 'phase': missing key 'name'"):
        ev.from_payload("phase", {"seconds": 1.0})
    with pytest.raises(DataError, match=r"event 'summary': payload is a list"):
        ev.from_payload("summary", [])  # type: ignore[arg-type]
    assert issubclass(DataError, ValueError)


def test_older_payloads_read_with_defaults() -> None:
    """A payload written before a key existed (task batches before batch ids) reads; missing fields default."""
    old = ev.from_payload("task_batch", {"outer_generation": 0, "harness_id": "h0", "task_ids": ["t1"]})
    assert isinstance(old, ev.TaskBatchEvent)
    assert old.batch_id is None and old.content_hashes == () and old.task_ids == ("t1",)
    rb = ev.from_payload("rollback", {"outer_generation": 2, "to_outer_generation": 0, "sigma": 0.1})
    assert isinstance(rb, ev.RollbackEvent) and rb.fields == {"to_outer_generation": 0} and rb.cause is None
    assert list(rb.to_payload())[-1] == "to_outer_generation"  # an unknown key of an open kind is kept, last


def test_numbers_keep_their_json_type() -> None:
    """An int where a float is declared stays an int, so the payload is written back unchanged."""
    inc = ev.from_payload("incumbent", {"s_val": 0})
    assert json.dumps(inc.to_payload()["s_val"]) == "0"


def test_emit_stores_the_payload_and_hands_the_typed_event_to_subscribers(tmp_path: Path) -> None:
    seen: list[ev.Event] = []
    with ArchiveStore(tmp_path / "a.db") as store:
        store.create_run("r", seed=0, config={}, code_version="t")
        rec = RunRecorder(store, "r", subscribers=[seen.append])
        incumbent = ev.IncumbentEvent(outer_generation=0, policy_id="terse", s_val=0.41, harness_id="h0")
        rec.emit(incumbent)
        rec.event("lead", outer_generation=1, harness_id="g1c0", policy_id="terse", front={"terse": 2})
        with pytest.raises(DataError, match="unknown event kind"):
            rec.event("no_such_kind", x=1)
        rows = store.events("r")
    assert seen[0] is incumbent and isinstance(seen[1], ev.LeadEvent) and len(seen) == 2
    assert [r.kind for r in rows] == ["incumbent", "lead"]
    assert rows[0].payload == incumbent.to_payload() and rows[0].event == incumbent
    assert rows[1].event == seen[1]
    assert list(rows[1].payload) == ["outer_generation", "harness_id", "policy_id", "front"]
