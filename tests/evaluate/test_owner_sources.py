"""``mode=evaluate`` says how the ground-truth owners were read (explicit, read off a sentence, none)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.config import Config, validate
from evotrainer.evaluate.run import run_evaluate


class ActionLLM:
    """Fake policy model: the same minutes for every request."""

    name = "fake-actions"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        text = "## Topics\n- Components\n## Action items\n- Industrial Designer: find out which components are needed"
        return [Generation(text, 10, len(text.split()), "stop") for _ in requests]


def test_evaluate_prints_and_stores_owner_sources(tmp_path: Path) -> None:
    rec = {"id": "ES2002a", "reference_minutes": "The team discussed the components.",
           "transcript": "Project Manager: Components first.\nIndustrial Designer: I can look into that.",
           "action_items": ["The industrial designer will try to find out which components are needed.",
                            "Check the costs.", "Project Manager: write the agenda"]}
    data = tmp_path / "ami.jsonl"
    data.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    cfg = Config(mode="evaluate")
    cfg.evaluate.dataset = str(data)
    cfg.evaluate.bootstrap = 100
    cfg.evaluate.policies = ["terse"]
    cfg.inner.use_embedder = False
    cfg.evaluation.show_best_output = False
    validate(cfg)
    console = Console(record=True, width=200)
    out = run_evaluate(cfg, run_dir=tmp_path / "run", llm=ActionLLM(), console=console)
    text = " ".join(console.export_text().split())
    assert ("ground-truth action items: 3 (1 explicit owner, 1 owner read from the sentence, 1 without owner: "
            "matched on task text alone)") in text
    doc = json.loads(out.files[0].read_text())
    assert doc["action_item_owners"] == {"explicit": 1, "read_from_sentence": 1, "none": 1}
    assert out.results[0].evaluation.parts["action_f1"] > 0  # the read owner matched
