"""How ``archive_v2.db`` and ``expected.json`` were made: by the code of main at f44bae6 (archive schema
version 2, before issue 27 renamed the pool's ``transcript`` / ``reference_minutes`` columns).

Run it from a folder outside the repository with that version installed, so the installed package is imported:
``python make.py <out dir>``. It is kept for the record; the tests read the committed files.
"""

import json
import sys
from pathlib import Path

from evotrainer.archive import ArchiveStore, EvaluationRow
from evotrainer.archive.schema import PoolTaskRow, RoundRow, SampleRow
from evotrainer.genome import Policy

out = Path(sys.argv[1])
db = out / "archive_v2.db"
db.unlink(missing_ok=True)
seed = Policy.seed("s1", {"role": "You take notes.", "format": "## Topics", "rules": "Be brief."})
with ArchiveStore(db) as store:
    store.create_run("run0", seed=3, config={"mode": "selfevolve", "seed": 3}, code_version="f44bae6")
    store.add_policies("run0", [seed])
    store.add_evaluations("run0", [EvaluationRow(policy_id="s1", kind="meta_val", batch_id="b1", total=0.25,
                                                 components={"rouge_l": 0.25}, n_tasks=2, generated_tokens=40)])
    store.add_pool_tasks("run0", [
        PoolTaskRow(0, "t1", "h1", "seed", {"length": 220.0}, "Ana: hi\nBo: send it by Friday.",
                    "## Topics\n- sending", {"topics": ["sending"], "decisions": [],
                                              "action_items": [["Bo", "send it", "Friday"]]}),
        PoolTaskRow(1, "t2", "h2", "generated", {"length": 300.0}, "Cy: budget talk.", "",
                    {"identity": ["h2"]}),
    ])
    store.add_round("run0", RoundRow(round=1, policy_id="s1", status="kept", difficulty={"length": 220.0},
                                     next_difficulty={"length": 300.0}, curriculum="raise", config={"rounds": 1},
                                     pool_size=2, n_added=1, n_duplicates=0, n_samples=1, n_kept=1, pass_rate=1.0,
                                     mean_score=0.8, losses=(1.5, 1.2), train={"steps": 2}, dev_score=0.5,
                                     prev_dev_score=0.4))
    store.add_samples("run0", [SampleRow(round=1, task_id="t2", index=0, output="- budget", score=0.8, rule=0.8,
                                         components={"format": 1.0}, grades=(8.0,), model=0.8, degenerate=None,
                                         passed=True)])
    store.add_event("run0", "note", {"text": "made for the schema-3 migration test"})
with ArchiveStore(db, read_only=True) as ro:
    expected = {"dump": ro.dump_deterministic("run0"),
                "pool": [dict(vars(r)) if hasattr(r, "__dict__") else r.__dict__ for r in ro.selfevolve_pool("run0")]}
(out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True, default=list) + "\n")
print("wrote", db, out / "expected.json")
