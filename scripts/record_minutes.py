"""Record real minutes of the embedded model for the S_val probe tests: ``tests/data/recorded_minutes.jsonl``.

Greedy decoding, 128 new tokens (the main job's settings), the seed policies named below plus the plain prompt
"Summarize the meeting." and a Markdown answer prefill (the shape every evolved winner so far had), on the
first 10 hand-written items and 10 QMSum windows (of at most 1,600 words) spread over the extract. Run from the repository root (about 5 minutes on 2 cores):

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/record_minutes.py tests/data/recorded_minutes.jsonl

The tests replay these texts: they check the metric's ordering on real model output without loading the model.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from evotrainer.config import DecodingConfig, ModelConfig
from evotrainer.genome import Policy, load_population
from evotrainer.run.runtime import build_llm, sampling_from
from evotrainer.tasks.base import RolloutRequest
from evotrainer.tasks.meeting_minutes.data import load_tasks
from evotrainer.tasks.meeting_minutes.family import MeetingMinutes

HANDWRITTEN = "validation_set/meeting_minutes.jsonl"
QMSUM = "../shared/data/qmsum_meetings.jsonl"  # the 152-window extract (tests only)


def policies() -> list[Policy]:
    seeds = {p.id: p for p in load_population("populations/meeting_minutes.yaml")}
    best = seeds["secretary_markdown"]
    prefilled = Policy.seed("secretary_markdown+prefill", {**dict(best.sections), "prefill": "## Topics\n-"})
    plain = Policy.seed("summarize", {"role": "Summarize the meeting.", "format": "", "rules": ""})
    return [best, prefilled, plain]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    args = parser.parse_args(argv)
    family = MeetingMinutes()
    real = [t for t in load_tasks(QMSUM) if len(t.transcript.split()) <= 1600]
    tasks = load_tasks(HANDWRITTEN, limit=10) + real[:: max(1, len(real) // 10)][:10]
    llm = build_llm(ModelConfig())
    params = sampling_from(DecodingConfig(max_new_tokens=128))
    reqs = [RolloutRequest(family.build_messages(p.sections, t), params, None, p.sections, t, p.id)
            for p in policies() for t in tasks]
    gens = family.roll_out(llm, reqs)
    with open(args.out, "w", encoding="utf-8") as f:
        for r, g in zip(reqs, gens, strict=True):
            t = r.task
            f.write(json.dumps({"task_id": t.task_id, "source": t.source, "policy": r.policy_id, "output": g.text,
                                "transcript": t.transcript, "reference_minutes": t.reference_minutes,
                                "action_items": [asdict(a) for a in t.action_items],
                                "meeting": t.meta.get("meeting", t.task_id)}, ensure_ascii=False, default=str) + "\n")
    print(f"{args.out}: {len(reqs)} outputs")


if __name__ == "__main__":
    main(sys.argv[1:])
