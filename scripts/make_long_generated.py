"""Write ``validation_set/long_generated.jsonl``: long meetings made of generated ones (issue 29).

Each item joins several meetings of the family's generator (``long_meetings.generate_long``): topics drift
and the last decisions and action items come late, so minutes that read only the start lose points. The
file is what the long-meeting smoke experiment and the tests read; it is generated, so it ships (the real
long meetings, ELITR under CC BY-NC-SA, stay in ../shared/data).

Usage: python scripts/make_long_generated.py [--seed 29] [--n 4] [--parts 4] [--length 700]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from evotrainer.tasks.meeting_minutes.generator import DEFAULT_DIFFICULTY
from evotrainer.tasks.meeting_minutes.long_meetings import generate_long

OUT = Path(__file__).resolve().parents[1] / "validation_set" / "long_generated.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--length", type=float, default=700.0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    difficulty = {**DEFAULT_DIFFICULTY, "length": args.length, "topics": 2.0, "action_items": 2.0}
    tasks = generate_long(np.random.default_rng(args.seed), args.n, args.parts, difficulty)
    with args.out.open("w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(json.dumps({
                "id": t.task_id, "source": t.source, "domain": "generated", "transcript": t.transcript,
                "reference_minutes": t.reference_minutes, "topics": list(t.topics), "decisions": list(t.decisions),
                "action_items": [{"owner": a.owner, "task": a.task, **({"due": a.due} if a.due else {})}
                                 for a in t.action_items],
                "meta": dict(t.meta),
            }, ensure_ascii=False) + "\n")
    print(f"{args.out}: {len(tasks)} meetings, {[len(t.transcript.split()) for t in tasks]} words")


if __name__ == "__main__":
    main()
