"""How ``archive_v4.db`` and ``expected.json`` were made: by the code of main at bbb66ae (archive schema version 4,
before a self-evolution round counted its model-judge grades: columns ``selfevolve_rounds.grades_requested`` and
``grades_parsed``).

Run it with that version on the path, from a folder outside the repository: ``python make.py <out dir>``. It is
kept for the record; the tests read the committed files.
"""

import json
import sys
from pathlib import Path

from evotrainer.archive import ArchiveStore
from evotrainer.archive.schema import PoolTaskRow, RoundRow, SampleRow
from evotrainer.genome import Policy

out = Path(sys.argv[1])
db = out / "archive_v4.db"
db.unlink(missing_ok=True)
seed = Policy.seed("s1", {"role": "You take notes.", "format": "## Topics", "rules": "Be brief."})
with ArchiveStore(db) as store:
    store.create_run("run0", seed=3, config={"mode": "selfevolve", "seed": 3}, code_version="bbb66ae")
    store.add_policies("run0", [seed])
    store.add_pool_tasks("run0", [PoolTaskRow(0, "t1", "h1", "seed", {"length": 220.0}, "Ana: hi\nBo: send it.",
                                              "## Topics\n- sending", {"topics": ["sending"]})])
    for k, status in ((1, "kept"), (2, "no_pass")):
        store.add_round("run0", RoundRow(
            round=k, policy_id="s1", status=status, difficulty={"length": 220.0}, next_difficulty={"length": 220.0},
            curriculum="hold", config={"rounds": 2}, pool_size=1, n_added=0, n_duplicates=0, n_samples=2,
            n_kept=2 if status == "kept" else 0, pass_rate=1.0 if status == "kept" else 0.0,
            mean_score=0.8 if status == "kept" else 0.1, losses=(1.5, 1.2) if status == "kept" else (),
            train={"examples": 2, "replay": 1, "steps": 2, "seconds": 3.5} if status == "kept" else {"examples": 0},
            dev_score=0.5, prev_dev_score=0.4, timings={"rollout": 1.0}, note=None if status == "kept" else "none"))
    store.add_samples("run0", [SampleRow(round=1, task_id="t1", index=i, output="- sending", score=0.8, rule=0.8,
                                         components={"format": 1.0}, grades=(8.0, None), model=0.8, passed=True)
                               for i in range(2)])
with ArchiveStore(db, read_only=True) as ro:
    expected = {"rounds": [dict(vars(r)) for r in ro.selfevolve_rounds("run0")]}
(out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True, default=list) + "\n")
print("wrote", db, out / "expected.json")
