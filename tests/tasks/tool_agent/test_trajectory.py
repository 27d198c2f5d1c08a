"""Trajectory records: JSONL round trip, and the SFT loss mask covering exactly the model's own tokens."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from evotrainer.errors import DataError
from evotrainer.tasks.tool_agent.generator import generate_tasks
from evotrainer.tasks.tool_agent.trajectory import Step, Trajectory, load_jsonl, loss_mask, save_jsonl

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


def test_jsonl_round_trip(tmp_path: Path) -> None:
    traj = _hand_built()
    path = save_jsonl([traj, traj], tmp_path / "sub" / "t.jsonl")
    assert [t.to_dict() for t in load_jsonl(path)] == [traj.to_dict()] * 2
    row = json.loads(path.read_text().splitlines()[0])
    assert row["steps"][1]["observation"] == "2.755778479 lb" and row["messages"][2]["content"] == ASSISTANT[0]
    assert not list(path.parent.glob(".t.jsonl.*"))  # no temporary file left behind
    assert load_jsonl(path)[0].tool_calls == (("lookup", "weight of copper kettle"), ("convert", "1.25 kg to lb"))


@pytest.mark.parametrize(("line", "why"), [
    ("{bad", "not valid JSON"), ("[1]", "JSON object"), ('{"task_id": "x"}', "malformed"),
])
def test_jsonl_errors_name_the_line(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_hand_built().to_dict()) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"t\.jsonl:2: .*{why}"):
        load_jsonl(path)
    bad = {**_hand_built().to_dict(), "reward": 1.5}
    path.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="not in"):
        load_jsonl(path)


def test_loss_mask_covers_exactly_the_assistant_tokens(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    traj = _hand_built()
    out = loss_mask(tok, traj)
    assert len(out.input_ids) == len(out.mask) and set(out.mask) == {0, 1}
    spans, current = [], []
    for token, m in zip(out.input_ids, out.mask, strict=True):
        if m:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    assert [tok.decode(s) for s in spans] == [a + tok.eos_token for a in ASSISTANT]
    # the unmasked tokens are everything else of the rendered chat: nothing lost, nothing added
    assert tok.decode(list(out.input_ids)) == tok.apply_chat_template(list(traj.messages), tokenize=False)
    unmasked = tok.decode([t for t, m in zip(out.input_ids, out.mask, strict=True) if not m])
    assert "Observation: 1.25 kg" in unmasked and "You are careful." in unmasked and "Thought" not in unmasked


def test_loss_mask_on_a_rollout_chat_ending_with_an_observation(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    task = generate_tasks(random.Random(0), {"steps": 1}, 1)[0]
    messages = ({"role": "user", "content": task.question}, {"role": "assistant", "content": "Action: calculator[1]"},
                {"role": "user", "content": "Observation: 1"}, {"role": "assistant", "content": ""},
                {"role": "user", "content": "Observation: Error: the reply is empty."})
    out = loss_mask(tok, messages)  # no system turn: an empty one is added, as at generation
    masked = [t for t, m in zip(out.input_ids, out.mask, strict=True) if m]
    assert tok.decode(masked) == "Action: calculator[1]" + tok.eos_token  # the blank reply is not learnt
    with pytest.raises(DataError, match="no assistant turn"):
        loss_mask(tok, messages[:1])
