"""The task-family contract: a core protocol of at most eight members, extra powers as ``runtime_checkable``
capability protocols checked with ``isinstance``, no family member looked up by name, and a family that
implements only the core runs."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evotrainer.backends.base import Generation
from evotrainer.config import Config
from evotrainer.errors import DataError
from evotrainer.evaluate.run import run_evaluate
from evotrainer.run.runtime import build_family, load_transfer
from evotrainer.tasks import TASK_FAMILIES, base, get_task_family

ROOT = Path(__file__).resolve().parents[2]
LOOKUP = re.compile(r"\b(?:getattr|hasattr)\(\s*(?:self\.)?_?(?:family|fam)\b|"
                    r"inspect\.signature\(\s*(?:self\.)?_?family\.")


def _members(proto: type) -> set[str]:
    return {n for n in vars(proto) if not n.startswith("_")} | set(vars(proto).get("__annotations__", {}))


def test_task_family_core_has_at_most_eight_members() -> None:
    members = _members(base.TaskFamily)
    assert len(members) <= 8, sorted(members)


def test_no_family_member_is_looked_up_by_name() -> None:
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
            for folder in ("evotrainer", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if LOOKUP.search(line)]
    assert not hits, "family members looked up by name (use a capability protocol and isinstance):\n" + "\n".join(hits)


def test_generic_code_reads_only_contract_members() -> None:
    """Outside ``tasks/``, a family is read through the core and the capability protocols only (e.g. never a
    family's own option such as the meeting family's ``long``)."""
    protocols = (base.TaskFamily, base.Datasets, base.SelfEvolving, base.Exemplars, base.Probes, base.EmbeddingMeta)
    allowed = set().union(*(_members(p) for p in protocols))
    read = re.compile(r"\b(?:self\.)?_?family\.(\w+)")
    hits = [f"{p.relative_to(ROOT)}:{n}: family.{m.group(1)}"
            for folder in ("evotrainer", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))
            if p.relative_to(ROOT).parts[:2] != ("evotrainer", "tasks")
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            for m in read.finditer(line) if m.group(1) not in allowed]
    assert not hits, "family members outside the contract:\n" + "\n".join(hits)


def test_shipped_families_declare_their_capabilities_as_protocols() -> None:
    meeting, tool = get_task_family("meeting_minutes"), get_task_family("tool_agent")
    both = (base.Datasets, base.SelfEvolving, base.Exemplars)
    assert all(isinstance(f, p) for f in (meeting, tool) for p in both)
    assert isinstance(meeting, base.Probes) and isinstance(meeting, base.EmbeddingMeta)
    assert not isinstance(tool, base.Probes) and not isinstance(tool, base.EmbeddingMeta)
    assert not isinstance(CoreOnly(), base.Datasets) and not isinstance(CoreOnly(), base.SelfEvolving)


# ---- a family that implements the core protocol only ------------------------------------------------------


@dataclass(frozen=True)
class WordTask:
    task_id: str
    word: str
    source: str = "file"
    group: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.word.encode()).hexdigest()

    @property
    def text(self) -> str:
        return self.word

    @property
    def size(self) -> int:
        return len(self.word)

    def identity(self) -> list[Any]:
        return [self.word]


class CoreOnly:
    """Say the word: the reward and the meta score are 1.0 when the output holds the task's word."""

    name = "core_only"
    spec = base.FamilySpec(scorer_version="core-1", difficulty_bounds={"letters": (3.0, 9.0)},
                           difficulty={"letters": 5.0}, reward_weights={"said": 1.0})

    def generate(self, rng: np.random.Generator, difficulty: Mapping[str, float], n: int) -> list[WordTask]:
        k = int(difficulty["letters"])
        return [WordTask(f"g{i}", "".join(rng.choice(list("abcdefgh"), size=k)), "generated") for i in range(n)]

    def build_messages(self, sections: Sequence[tuple[str, str]], task: WordTask) -> tuple[dict, ...]:
        return ({"role": "user", "content": task.word},)

    def roll_out(self, llm: Any, requests: Sequence[base.RolloutRequest]) -> list[Generation]:
        return base.single_turn_roll_out(llm, requests)

    def reward(self, output: str, task: WordTask, weights: Mapping[str, float]) -> base.RewardBreakdown:
        said = float(task.word in output)
        return base.RewardBreakdown(said, {"said": said})

    def meta_score(self, output: str, task: WordTask) -> base.MetaScore:
        said = float(task.word in output)
        return base.MetaScore(said, {"said": said})

    def load_validation(self, path: str | Path, limit: int | None = None,
                        field_map: Mapping[str, str] | None = None) -> list[WordTask]:
        rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        return [WordTask(r["id"], r["word"], Path(path).name, r.get("group")) for r in rows][:limit]


class _Echo:
    name = "echo"

    def generate(self, requests: Sequence[Any]) -> list[Generation]:
        return [Generation(r.messages[-1]["content"], 1, 1, "stop") for r in requests]


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: Sequence[dict[str, Any]]) -> Config:
    monkeypatch.setitem(TASK_FAMILIES, "core_only", f"{__name__}.CoreOnly")
    path = tmp_path / "words.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = Config(mode="evaluate")
    cfg.task.name, cfg.task.validation_path = "core_only", str(path)
    cfg.task.difficulty, cfg.task.reward_weights, cfg.outer.space = {}, {}, {}
    cfg.evaluation.policies = ["terse"]
    return cfg


def test_a_family_with_only_the_core_is_evaluated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(tmp_path, monkeypatch, [{"id": "a", "word": "kiwi"}, {"id": "b", "word": "plum"}])
    outcome = run_evaluate(cfg, run_dir=tmp_path / "run", llm=_Echo())
    assert [r.mean for r in outcome.results] == [1.0]
    doc = json.loads((tmp_path / "run" / "evaluate.json").read_text(encoding="utf-8"))
    assert doc["n_items"] == 2 and doc["format"] == "jsonl"


def test_a_transfer_item_of_a_validation_group_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-out and transfer checks read the neutral ``Task.group``, not a domain's meta field."""
    cfg = _config(tmp_path, monkeypatch, [{"id": "a", "word": "kiwi", "group": "doc1"}])
    (tmp_path / "transfer.jsonl").write_text(json.dumps({"id": "t", "word": "pear", "group": "doc1"}) + "\n",
                                             encoding="utf-8")
    cfg.task.transfer_path = str(tmp_path / "transfer.jsonl")
    with pytest.raises(DataError, match="group 'doc1'"):
        load_transfer(cfg, build_family(cfg))


def test_the_gepa_adapter_reflects_through_the_family_contract() -> None:
    """GEPA's adapter shows the family's own reflection hints and the item's truth, whatever the family."""
    from types import SimpleNamespace

    from benchmarks.gepa_arm import FamilyAdapter

    family = get_task_family("tool_agent")
    task = family.generate(np.random.default_rng(0), family.spec.difficulty, 1)[0]
    adapter = FamilyAdapter(SimpleNamespace(family=family), None, family.spec.reward_weights)  # type: ignore[arg-type]
    batch = SimpleNamespace(trajectories=[{"task": task, "parts": {"correct": 0.0}}], outputs=["42"], scores=[0.0])
    (record,) = adapter.make_reflective_dataset({}, batch, ["rules"])["rules"]
    assert family.spec.texts.reflection_hints["correct"] in record["Feedback"]
    assert record["Inputs"]["input"].startswith(task.question) and "ground truth: identity:" in record["Feedback"]
