"""Archive queries: lineage back to the seeds, best policy, deterministic dumps."""

import pytest

from evotrainer.archive import ArchiveStore, EvaluationRow, HarnessCandidateRow
from evotrainer.errors import ArchiveError
from evotrainer.genome import Policy
from tests.archive._dump import dump_deterministic

RUN = "r"


def _family() -> dict[str, Policy]:
    """s1, s2 seeds; m1 = mut(s1); c = cx(m1, s2); m2 = mut(c); g = cx(m2, m1) (a diamond)."""
    s1 = Policy.seed("s1", {"role": "A", "format": "F", "rules": "R"})
    s2 = Policy.seed("s2", {"role": "B", "format": "G", "rules": "S"})
    m1 = s1.child([("role", "A'"), ("format", "F"), ("rules", "R")], operator="mut_phrase", generation=1)
    c = m1.child([("role", "A'"), ("format", "G"), ("rules", "S")], operator="cx_sections", generation=2,
                 parents=[s2])
    m2 = c.child([("role", "A''"), ("format", "G"), ("rules", "S")], operator="mut_llm", generation=3)
    g = m2.child([("role", "A''"), ("format", "F"), ("rules", "S")], operator="cx_sections", generation=4,
                 parents=[m1])
    return {"s1": s1, "s2": s2, "m1": m1, "c": c, "m2": m2, "g": g}


def _fill(store: ArchiveStore, run_id: str = RUN) -> dict[str, Policy]:
    fam = _family()
    store.create_run(run_id, seed=3, config={"k": 1}, code_version="t")
    # children first: parents need not be archived before their children
    store.add_policies(run_id, [fam["g"], fam["m2"]])
    store.add_policies(run_id, [fam[k] for k in ("s1", "s2", "m1", "c")])
    return fam


def test_lineage_back_to_seeds_through_crossover_and_mutation(tmp_path):
    with ArchiveStore(tmp_path / "a.db") as store:
        fam = _fill(store)
        nodes = store.lineage(RUN, fam["g"].id)
        ids = [n.policy.id for n in nodes]
        assert ids[0] == fam["g"].id and nodes[0].depth == 0
        assert sorted(ids) == sorted(p.id for p in fam.values())  # every ancestor exactly once
        depth = {n.policy.id: n.depth for n in nodes}
        assert depth[fam["m1"].id] == 1  # reached via the crossover's 2nd parent: shortest path
        assert depth[fam["s2"].id] == 3 and depth[fam["s1"].id] == 2
        assert [n.depth for n in nodes] == sorted(n.depth for n in nodes)
        by_id = {n.policy.id: n for n in nodes}
        assert by_id[fam["c"].id].parent_ids == (fam["m1"].id, "s2")
        leaves = [n for n in nodes if not n.parent_ids]
        assert {n.policy.id for n in leaves} == {"s1", "s2"}
        assert all(n.policy.operator == "seed" for n in leaves)
        assert [n.policy.id for n in store.lineage(RUN, "s1")] == ["s1"]
        with pytest.raises(ArchiveError, match="no policy"):
            store.lineage(RUN, "nope")


def test_lineage_skips_unarchived_ancestors_and_runs_are_separate(tmp_path):
    with ArchiveStore(tmp_path / "a.db") as store:
        fam = _family()
        store.create_run("x", seed=0, config={}, code_version="t")
        store.add_policies("x", [fam["c"], fam["m1"]])  # s1, s2 never archived in run x
        assert [n.policy.id for n in store.lineage("x", fam["c"].id)] == [fam["c"].id, fam["m1"].id]
        _fill(store, "y")
        assert len(store.lineage("y", fam["c"].id)) == 4
        with pytest.raises(ArchiveError):
            store.get_policy("x", "s1")


def test_best_policy_highest_total_ties_to_earliest_and_skips_errors(tmp_path):
    with ArchiveStore(tmp_path / "a.db") as store:
        fam = _fill(store)
        assert store.best_policy(RUN) is None
        store.add_evaluations(RUN, [
            EvaluationRow(fam["m1"].id, "meta_val", "val", 0.40),
            EvaluationRow(fam["c"].id, "meta_val", "val", 0.55),
            EvaluationRow(fam["g"].id, "meta_val", "val", 0.55),
            EvaluationRow(fam["m2"].id, "meta_val", "val", 0.90, error="timeout"),
            EvaluationRow(fam["s1"].id, "fitness", "b0", 0.99),
        ])
        best, score = store.best_policy(RUN)
        assert best == fam["c"] and score == 0.55
        best, score = store.best_policy(RUN, kind="fitness")
        assert best == fam["s1"] and score == 0.99
        assert store.best_policy(RUN, kind="meta_heldout") is None


def _simulated_run(path) -> dict:
    with ArchiveStore(path) as store:
        fam = _fill(store)
        for gen, p in enumerate(fam.values()):
            store.add_evaluations(RUN, [EvaluationRow(p.id, "fitness", f"b{gen}", 0.1 * gen,
                                                      {"format": 0.5}, 4, 100, seconds=gen * 0.37)])
            store.add_event(RUN, "phase", {"name": "evaluate", "seconds": 1.23 * gen})
        store.add_harness_candidate(RUN, HarnessCandidateRow("h0.0", 0, 0, (0.1, 0.9), {"noise": 0.2}, 0.5))
        store.add_event(RUN, "incumbent", {"harness_id": "h0.0"})
        return dump_deterministic(store, RUN)


def test_dump_deterministic_equal_for_identical_runs(tmp_path):
    a = _simulated_run(tmp_path / "a.db")
    b = _simulated_run(tmp_path / "b.db")
    assert a == b
    assert len(a["policies"]) == 6 and len(a["evaluations"]) == 6
    assert [e["kind"] for e in a["events"]] == ["incumbent"]  # phase timings left out
    assert "created_at" not in a["evaluations"][0] and "seconds" not in a["evaluations"][0]
    assert "host" not in a["run"] and "created_at" not in a["run"]
    with ArchiveStore(tmp_path / "a.db", read_only=True) as ro:
        assert len(dump_deterministic(ro, RUN, exclude_event_kinds=())["events"]) == 7
        with pytest.raises(ArchiveError):
            dump_deterministic(ro, "missing")
