"""How ``archive_v3.db`` and ``expected.json`` were made: by the code of main at ac2c480 (archive schema version 3,
before the race estimate got its own name: column ``harness_candidates.screen_s_val``, event key
``outer_generation.incumbent_screen_s_val``).

Run it with that version on the path, from a folder outside the repository: ``python make.py <out dir>``. It is
kept for the record; the tests read the committed files.
"""

import json
import sys
from pathlib import Path

from evotrainer.archive import ArchiveStore, HarnessCandidateRow
from evotrainer.genome import Policy

out = Path(sys.argv[1])
db = out / "archive_v3.db"
db.unlink(missing_ok=True)
seed = Policy.seed("s1", {"role": "You take notes.", "format": "## Topics", "rules": "Be brief."})
with ArchiveStore(db) as store:
    store.create_run("run0", seed=3, config={"mode": "evolve", "seed": 3}, code_version="ac2c480")
    store.add_policies("run0", [seed])
    store.add_harness_candidate("run0", HarnessCandidateRow(
        harness_id="g1c0", outer_generation=1, index=0, vector=(0.25, 0.5), values={"length": 220, "told": 0.3625},
        s_val=0.4125, screen_s_val=0.3625, best_policy_id="s1", status="best"))
    store.add_harness_candidate("run0", HarnessCandidateRow(
        harness_id="g1c1", outer_generation=1, index=1, vector=(0.75, 0.5), values={"length": 400, "told": None},
        s_val=None, screen_s_val=None, best_policy_id=None, status="failed"))
    store.add_event("run0", "outer_generation", {
        "outer_generation": 1, "current_s_val": 0.3625, "current_full_s_val": 0.4125, "incumbent_s_val": 0.4,
        "incumbent_screen_s_val": 0.4, "incumbent_policy_id": "s1", "best_harness_id": "g1c0",
        "rolled_back": False, "sigma": 0.25, "told": [0.3625, None], "archive": [["h0", 0.4]],
        "cma_termination": {}})
    store.add_event("run0", "summary", {
        "initial_best": "s1", "initial_s_val": 0.4, "best": "s1", "best_s_val": 0.4, "best_harness_id": "h0",
        "heldout_s_val": None, "selection_items": 4, "heldout_items": 0, "rollouts": 12, "s_val_curve": [0.4, 0.4],
        "current_curve": [0.4, 0.3625], "rollbacks": 0, "stop_reason": "outer.generations",
        "stop_detail": "1 outer generation(s) run", "candidates": 2, "generated_tokens": 96,
        "archive": [["h0", 0.4]]})
with ArchiveStore(db, read_only=True) as ro:
    expected = {"dump": ro.dump_deterministic("run0"),
                "candidates": [dict(vars(r)) for r in ro.harness_candidates("run0")],
                "events": [[e.kind, e.event.to_payload()] for e in ro.events("run0")]}
(out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True, default=list) + "\n")
print("wrote", db, out / "expected.json")
