"""GEPA's per-item Pareto parents (search/pareto_front.py) and the lead drawn from them (evolve/lead.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.evolve.lead import LeadState
from evotrainer.genome import Policy
from evotrainer.search.pareto_front import choose_parent, item_fronts, item_wins, remove_dominated
from evotrainer.seeding import Seeds

# Three policies where GEPA's dominance and plain Pareto dominance of score vectors disagree: "broad" is best
# on items 0 and 1 but shares item 0 with "left" and item 1 with "right", which each also win an item alone.
# No vector dominates broad's (it beats left on item 1 and right on item 0), so a vector-dominance filter
# keeps it; GEPA removes it: every item it is best on keeps another best candidate.
COVERED = {"broad": [1.0, 1.0, 0.5, 0.5], "left": [1.0, 0.0, 1.0, 0.0], "right": [0.0, 1.0, 0.0, 1.0]}


def test_ties_on_an_item_all_count_as_best() -> None:
    fronts = item_fronts({"a": [0.7, 0.5, 0.2], "b": [0.7, 0.2, 0.2], "c": [0.1, 0.1, 0.2]})
    assert fronts == [{"a", "b"}, {"a"}, {"a", "b", "c"}]
    # a tie on an item counts for each tied policy that stays: "b" wins item 0 with "a", and item 1 alone
    assert item_wins({"a": [0.7, 0.1], "b": [0.7, 0.9]}) == {"b": 2}  # a: its only item is also b's
    assert item_wins({"a": [0.7, 0.1, 0.8], "b": [0.7, 0.9, 0.1]}) == {"a": 2, "b": 2}


def test_a_dominated_policy_is_removed_and_never_drawn() -> None:
    wins = item_wins(COVERED)
    assert wins == {"left": 2, "right": 2}
    rng = random.Random(0)
    assert "broad" not in {choose_parent(wins, rng) for _ in range(2000)}
    # the classic case too: best only where a better-on-average policy is also best
    assert item_wins({"strong": [0.9, 0.9, 0.5], "weak": [0.9, 0.1, 0.1], "other": [0.1, 0.1, 0.9]}) == {
        "strong": 2, "other": 1}


def test_removal_goes_lowest_mean_first_and_keeps_every_item_covered() -> None:
    # "hi" and "lo" are best on exactly the same items: only one can go, the lower mean
    assert item_wins({"lo": [1.0, 0.0, 0.1], "hi": [1.0, 0.0, 0.3], "z": [0.0, 1.0, 0.5]}) == {"hi": 1, "z": 2}
    # equal means: the later policy goes, the earlier stays
    assert item_wins({"first": [0.5, 0.5], "second": [0.5, 0.5]}) == {"first": 2}
    fronts = item_fronts(COVERED)
    stay = remove_dominated(fronts, ["left", "right", "broad"])
    assert stay == ["left", "right"] and all(front & set(stay) for front in fronts)
    # the order decides which of mutually covering policies goes first
    assert remove_dominated([frozenset("ab")], ["a", "b"]) == ["b"]
    assert remove_dominated([frozenset("ab")], ["b", "a"]) == ["a"]


def test_duplicates_by_genome_count_once() -> None:
    # the same genome scored twice with different values (sampling noise): it counts once, as its first policy
    scores = {"a": [0.9, 0.1], "a-again": [0.2, 0.95], "b": [0.1, 0.9]}
    assert item_wins(scores, genomes={"a": "g1", "a-again": "g1", "b": "g2"}) == {"a": 1, "b": 1}
    assert item_wins(scores) == {"a": 1, "a-again": 1}  # as two genomes, a-again would push b out
    # two policies of one genome with the same values: one entry, with the genome's wins, not two
    same = {"x": [0.6, 0.6, 0.6], "x2": [0.6, 0.6, 0.6], "spec": [0.1, 0.1, 0.9]}
    assert item_wins(same, genomes={"x": "g", "x2": "g", "spec": "s"}) == {"x": 2, "spec": 1}
    with pytest.raises(ValueError, match="no genome given for policy 'x2'"):
        item_wins(same, genomes={"x": "g", "spec": "s"})


def test_draw_frequencies_are_proportional_to_items_won() -> None:
    scores = {"gen": [0.6, 0.6, 0.6, 0.6, 0.6, 0.1], "spec": [0.1, 0.1, 0.1, 0.1, 0.1, 0.9],
              "mid": [0.6, 0.5, 0.6, 0.5, 0.4, 0.8], "never": [0.0] * 6}
    wins = item_wins(scores)
    assert wins == {"gen": 5, "spec": 1}  # "mid": its items 0 and 2 are also gen's; "never" wins none
    rng = random.Random(12345)
    n = 6000
    picks = [choose_parent(wins, rng) for _ in range(n)]
    assert set(picks) == {"gen", "spec"}
    # expected 5/6 and 1/6; the standard error at n=6000 is 0.0048, the tolerance ~6 of them
    assert picks.count("gen") / n == pytest.approx(5 / 6, abs=0.03)
    assert picks.count("spec") / n == pytest.approx(1 / 6, abs=0.03)
    # the same generator state gives the same parent (the RNG is the caller's)
    assert choose_parent(wins, random.Random(7)) == choose_parent(wins, random.Random(7))
    assert choose_parent({}, rng) is None and choose_parent({"z": 0}, rng) is None


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="length"):
        item_wins({"a": [1.0], "b": [1.0, 2.0]})
    with pytest.raises(ValueError, match="non-finite score"):
        item_wins({"a": [float("nan")], "b": [1.0]})
    with pytest.raises(ValueError, match="not in order"):
        remove_dominated([frozenset({"a", "b"})], ["a"])
    assert item_wins({}) == {} and item_wins({"a": []}) == {}


class _Screen:
    """The part of Screening that LeadState.choose reads: first-stage vectors per genome."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def first_stage_vector(self, policy: Policy) -> list[float] | None:
        return self.vectors.get(policy.genome_hash)


def test_lead_is_drawn_from_the_gepa_front_with_one_entry_per_genome(tmp_path: Path) -> None:
    pol = {name: Policy.seed(name, {"role": f"You are {name}.", "format": "- one line"})
           for name in ("broad", "left", "right")}
    twin = Policy.seed("left-twin", dict(pol["left"].sections))  # the same genome under another id
    assert twin.genome_hash == pol["left"].genome_hash
    screen = _Screen({pol[k].genome_hash: v for k, v in COVERED.items()})
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run")
    rec.start(0, {})
    leads = LeadState(rec, Seeds(0))
    leads.set_incumbent(pol["broad"])
    for p in (pol["left"], twin, pol["right"]):
        leads.add(p)
    drawn = {leads.choose([], screen, f"g1c{j}", 1).id for j in range(60)}
    events = [e.payload for e in store.events("run", kind="lead")]
    store.close()
    assert drawn == {"left", "right"}  # never the dominated incumbent, never the twin
    assert all(e["front"] == {"left": 2, "right": 2} for e in events) and len(events) == 60
