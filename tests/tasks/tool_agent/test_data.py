"""The shipped tool-agent meta-validation set and seed population."""

from __future__ import annotations

import collections
import json
import runpy
from pathlib import Path

from evotrainer.config import PACKAGE_DATA
from evotrainer.genome import load_population, render_system_prompt
from evotrainer.tasks.tool_agent.env import ToolEnv
from evotrainer.tasks.tool_agent.tasks import check_answer, load_tasks

VAL = PACKAGE_DATA / "validation_set" / "tool_agent.jsonl"
SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "make_tool_agent_validation.py"


def test_validation_set_schema_balance_and_gold() -> None:
    tasks = load_tasks(VAL)
    assert len(tasks) == 40 and len({t.task_id for t in tasks}) == 40
    assert len({t.content_hash for t in tasks}) == 40
    assert collections.Counter(len(t.plan) for t in tasks) == {1: 10, 2: 10, 3: 10, 4: 10}
    assert collections.Counter(t.source for t in tasks) == {"generated": 28, "explored": 12}
    for t in tasks:
        env = ToolEnv.of(t.facts)
        assert all(env.run(s.tool, s.tool_input).text == s.output for s in t.plan), t.task_id
        assert check_answer(t.answer, t), t.task_id


def test_validation_set_is_what_the_script_writes() -> None:
    rows = runpy.run_path(str(SCRIPT))["build"]()
    expected = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    assert VAL.read_text(encoding="utf-8") == expected


def test_seed_population_loads_and_stays_short() -> None:
    policies = load_population(PACKAGE_DATA / "populations" / "tool_agent.yaml")
    assert len(policies) == 6 and len({p.genome_hash for p in policies}) == 6
    for p in policies:
        assert 10 <= len(render_system_prompt(p.sections).split()) <= 80, p.id
