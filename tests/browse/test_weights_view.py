"""``archive sweep`` over weight-training runs: each adapter against its prompt alone, pooled over the runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.browse.cli import main
from evotrainer.events.selfevolve import SelfEvolveTransferEvent

IDS = ("w1", "w2", "w3", "w4")
GROUPS = ("m1", "m1", "m2", "m3")


def _selfevolve(folder: Path, run: str, seed: int, final: tuple[float, ...] | None) -> Path:
    folder.mkdir(parents=True)
    with ArchiveStore(folder / "archive.db") as store:
        store.create_run(run, seed=seed, config={"mode": "selfevolve", "seed": seed}, code_version="test")
        if final is not None:
            store.add_event(run, "selfevolve_transfer", SelfEvolveTransferEvent(
                version=1, item_ids=IDS, groups=GROUPS, base_policy="plain_summary", final_policy=f"se-{seed}",
                base_values=(0.1, 0.2, 0.3, 0.1), final_values=final).to_payload())
    return folder


def _distill(folder: Path, run: str, seed: int, *, doc_run: str | None = None) -> Path:
    folder.mkdir(parents=True)
    with ArchiveStore(folder / "archive.db") as store:
        store.create_run(run, seed=seed, config={"mode": "distill", "seed": seed, "distill": {"results": "out"}},
                         code_version="test")
    items = [{"id": i, "group": g, "plain": b, "student": b + 0.05}
             for i, g, b in zip(IDS, GROUPS, (0.1, 0.2, 0.3, 0.1), strict=True)]
    (folder / "out.json").write_text(json.dumps({
        "run_id": doc_run or run, "seed": seed, "student_prompt": "plain_prompt",
        "arms": {"plain": {"policy_id": "plain_prompt"}, "student": {"policy_id": "distill-<b>"}}, "items": items}))
    return folder


def _cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_sweep_pools_selfevolve_and_distill_adapters_and_names_the_runs_it_cannot(tmp_path, capsys) -> None:
    se = _selfevolve(tmp_path / "se0", "se-s0", 0, (0.15, 0.25, 0.35, 0.12))
    di = _distill(tmp_path / "di1", "di-s1", 1)
    unfinished = _selfevolve(tmp_path / "se1", "se-s1", 1, None)
    stale = _distill(tmp_path / "di2", "di-s2", 2, doc_run="di-old")
    code, out, err = _cli(capsys, "sweep", se, di, unfinished, stale, "--json")
    assert code == 0, err
    doc = json.loads(out)
    a = doc["adapters"]
    assert [(r["run_id"], r["mode"], r["seed"], r["items"]) for r in a["runs"]] == [
        ("se-s0", "selfevolve", 0, 4), ("di-s1", "distill", 1, 4)]
    assert a["runs"][1]["diff"]["mean"] == pytest.approx(0.05) and a["runs"][1]["base_id"] == "plain_prompt"
    p = a["pooled"]
    assert (p["runs"], p["items"], p["groups"], p["wins"], p["losses"]) == (2, 4, 3, 8, 0)
    reasons = {s["run_id"]: s["reason"] for s in doc["skipped"]}
    assert "without a transfer comparison" in reasons["se-s1"] and "another run's result file" in reasons["di-s2"]
    assert doc["runs"] == []

    code, out, err = _cli(capsys, "sweep", se, di)
    assert code == 0, err
    assert "weight training" in out and "se-s0" in out and "di-s1" in out and "pooled over 2 runs, 3 groups" in out
    assert "distill-<b>" not in out  # the table names the prompt both arms share, not the adapter policy
    assert "transfer: n/a" not in out  # no evolve run: no prompt-transfer block


def test_sweep_of_weight_runs_without_comparisons_has_nothing_to_summarise(tmp_path, capsys) -> None:
    code, out, err = _cli(capsys, "sweep", _selfevolve(tmp_path / "se", "se-s0", 0, None))
    assert code != 0 and "nothing to summarise" in err and "without a transfer comparison" in out
