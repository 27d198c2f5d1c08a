"""Build ``validation_set/tool_agent.jsonl``: the tool-agent family's fixed meta-validation set.

Run from the repository root (deterministic: the output depends only on ``SEED`` and the generator code):

    python scripts/make_tool_agent_validation.py validation_set/tool_agent.jsonl

then update that file's line in ``validation_set/SHA256SUMS`` (``sha256sum tool_agent.jsonl``).

40 tasks, 10 per plan length (1-4 tool steps): 7 from the templates and 3 from exploration walks per
length, with distractor facts cycling through 0, 3, 6, 9, 12 and magnitudes through 1-5 (shifted by one every
five tasks, so every pair occurs). Entities come
from the ``validation`` name pool, which shares no syllable, adjective or noun with the ``train`` pool
that task batches use, so no validation entity or fact can appear in a training batch.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from evotrainer.tasks.tool_agent.generator import explore_tasks, generate_tasks
from evotrainer.tasks.tool_agent.tasks import task_to_dict

SEED = 20261201
PER_STEPS = {"generated": 7, "explored": 3}
DISTRACTORS = (0, 3, 6, 9, 12)
MAGNITUDES = (1, 2, 3, 4, 5)


def build() -> list[dict]:
    rng = random.Random(SEED)
    rows: list[dict] = []
    for steps in (1, 2, 3, 4):
        for source, count in PER_STEPS.items():
            make = generate_tasks if source == "generated" else explore_tasks
            for _ in range(count):
                k = len(rows)
                difficulty = {"steps": steps, "distractors": DISTRACTORS[k % 5], "magnitude": MAGNITUDES[(k // 5 + k) % 5]}
                task = make(rng, difficulty, 1, pool="validation")[0]
                row = task_to_dict(task)
                row["id"] = f"tv-{k + 1:02d}"
                rows.append(row)
    return rows


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: python scripts/make_tool_agent_validation.py OUT.jsonl")
    rows = build()
    Path(argv[0]).write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                             encoding="utf-8")
    print(f"wrote {len(rows)} tasks to {argv[0]}")


if __name__ == "__main__":
    main(sys.argv[1:])
