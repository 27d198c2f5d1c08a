"""Policy references to adapters a run archived or exported: ``archive:<id>`` finds an adapter stored relative to
its run folder, and an export whose ``policy.json`` names its own folder as the adapter rebuilds the policy."""

from __future__ import annotations

import json
from pathlib import Path

from evotrainer.archive import ArchiveStore
from evotrainer.genome import Policy
from evotrainer.run.policy_refs import load_exported_policy, resolve_policy_ref

SEED = Policy.seed("terse", {"role": "R", "format": "F", "rules": "X"})


def test_an_archived_adapter_relative_to_its_run_folder_is_found_there(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "adapters" / "round_001").mkdir(parents=True)
    trained = Policy("se1-abc", SEED.sections, ("terse",), "selfevolve_lora", 1, "terse", "adapters/round_001")
    gone = Policy("se2-def", SEED.sections, ("terse",), "selfevolve_lora", 2, "terse", "adapters/round_002")
    with ArchiveStore(run / "archive.db") as store:
        store.create_run("r1", seed=0, config={}, code_version="t")
        store.add_policies("r1", [SEED, trained, gone])
    found = resolve_policy_ref("archive:se1", seeds=[SEED], archive=str(run)).policy
    assert found.adapter == str((run / "adapters" / "round_001").resolve())
    # a relative path with nothing under the run folder is left as archived (the backend then names it)
    assert resolve_policy_ref("archive:se2", seeds=[SEED], archive=str(run)).policy.adapter == "adapters/round_002"


def test_an_export_naming_its_own_folder_as_the_adapter_loads_with_that_folder(tmp_path: Path) -> None:
    folder = tmp_path / "student"
    folder.mkdir()
    doc = {"format": 1, "policy": {"id": "distill-1", "sections": [{"name": "role", "text": "Summarize."}],
                                   "adapter": ".", "parent_ids": ["plain_prompt", "no_role"],
                                   "operator": "distill_lora", "generation": 1, "root_id": "plain_prompt"}}
    (folder / "policy.json").write_text(json.dumps(doc))
    policy = load_exported_policy(folder)
    assert policy.adapter == str(folder.resolve())
    assert (policy.id, policy.sections, policy.parent_ids) == ("distill-1", (("role", "Summarize."),),
                                                             ("plain_prompt", "no_role"))
