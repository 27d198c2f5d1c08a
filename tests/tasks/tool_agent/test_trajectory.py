"""Trajectory records: the JSON round trip the family's outputs use, and its refusals."""

from __future__ import annotations

import json

import pytest

from evotrainer.errors import DataError
from evotrainer.tasks.tool_agent.trajectory import Step, Trajectory

ASSISTANT = (
    "Thought: I need the weight first.\nAction: lookup[weight of copper kettle]",
    "Thought: now convert ünïcode 🚀\nAction: convert[1.25 kg to lb]",
    "Final Answer: 2.76 lb",
)


def _hand_built() -> Trajectory:
    messages = (
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Tools: ...\nQuestion: What is the weight of copper kettle in lb?"},
        {"role": "assistant", "content": ASSISTANT[0]},
        {"role": "user", "content": "Observation: 1.25 kg"},
        {"role": "assistant", "content": ASSISTANT[1]},
        {"role": "user", "content": "Observation: 2.755778479 lb"},
        {"role": "assistant", "content": ASSISTANT[2]},
    )
    steps = (Step(0, ASSISTANT[0], ASSISTANT[0], "action", "lookup", "weight of copper kettle", "1.25 kg", 1.25,
                  reward=1.0),
             Step(1, ASSISTANT[1], ASSISTANT[1], "action", "convert", "1.25 kg to lb", "2.755778479 lb",
                  2.755778479, reward=1.0),
             Step(2, ASSISTANT[2], ASSISTANT[2], "final", answer="2.76 lb", reward=1.0))
    return Trajectory("t1", "p1", messages, steps, "2.76 lb", "final_answer", 1.0,
                      {"correct": 1.0, "efficiency": 1.0, "format": 1.0}, None)


def test_json_round_trip() -> None:
    traj = _hand_built()
    line = json.dumps(traj.to_dict(), ensure_ascii=False, separators=(",", ":"))
    back = Trajectory.from_dict(json.loads(line))
    assert back == traj and back.to_dict() == traj.to_dict()
    row = json.loads(line)
    assert row["steps"][1]["observation"] == "2.755778479 lb" and row["messages"][2]["content"] == ASSISTANT[0]


@pytest.mark.parametrize(("row", "why"), [
    ({"task_id": "x"}, "malformed"),
    ({**_hand_built().to_dict(), "reward": 1.5}, "not in"),
    ({**_hand_built().to_dict(), "stop_reason": "bored"}, "stop_reason"),
])
def test_a_malformed_trajectory_is_refused_naming_where(row: dict, why: str) -> None:
    with pytest.raises(DataError, match=rf"^out\.jsonl:2: .*{why}"):
        Trajectory.from_dict(row, "out.jsonl:2")
