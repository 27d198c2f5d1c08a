"""``benchmarks/candidate_cost.py``: seconds per harness candidate and generation 0 from archived events (no model)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not an installed package

from benchmarks.candidate_cost import candidate_costs, pycma_default_popsize, report  # noqa: E402

T0 = datetime(2026, 12, 2, 7, 0, tzinfo=timezone.utc)


@dataclass
class _Event:
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""


def _at(seconds: float, kind: str, **payload: Any) -> _Event:
    return _Event(kind, payload, (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds"))


def _phase(seconds: float, hid: str) -> _Event:
    return _at(seconds, "phase", name="inner_generation", fields={"harness_id": hid})


def test_generation0_and_each_candidate_from_event_stamps() -> None:
    events = [
        _at(0, "setup", harness_names=["length", "noise", "w_format"]),
        _at(1, "task_batch", harness_id="h0"),
        _at(200, "incumbent", harness_id="h0"),
        _at(250, "task_batch", harness_id="g1c0"), _phase(270, "g1c0"), _phase(290, "g1c0"),
        _at(330, "race", harness_id="g1c0", evaluations=16),
        _at(330, "task_batch", harness_id="g1c1"), _phase(360, "g1c1"),
        _at(380, "race", harness_id="g1c1", evaluations=16), _at(420, "promotion", harness_id="g1c1"),
        _at(420, "stop", harness_id="g2c0"),  # names the next candidate, which never ran
        _at(500, "summary"),
    ]
    c = candidate_costs(events, {"outer": {"popsize": 6}})
    assert c["generation0_s"] == 250 and c["count"] == 2 and c["end_s"] == 80 and c["run_s"] == 500
    first, second = c["candidates"]
    assert (first["seconds"], first["inner_s"], first["race_s"], first["promotion_s"]) == (80, 40, 40, 0)
    assert (second["seconds"], second["inner_s"], second["race_s"], second["promotion_s"]) == (90, 30, 20, 40)
    assert c["median_s"] == 85 and c["within_45_min"] == 2
    assert (c["dimension"], c["popsize"], c["pycma_default_popsize"]) == (3, 6, 7)
    text = "\n".join(report(c))
    assert "generation 0 <= 300 s: 250 s MET" in text and "(7): 6 NOT MET" in text


def test_pycma_default_population() -> None:
    assert [pycma_default_popsize(n) for n in (2, 4, 6, 10)] == [6, 8, 9, 10]
