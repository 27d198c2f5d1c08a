"""The co-evolution end to end: lineage from the archive, no meta-validation leak, determinism.

The fast tests run the whole loop on a tiny random model (same tokenizer and chat template as the
embedded SmolLM2); ``test_smoke_experiment_real_model`` runs ``+experiment=smoke`` on the real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.config import PROJECT_ROOT, Config
from evotrainer.events.kinds import SummaryEvent
from evotrainer.evolve.coevolution import run_evolve, screening_subset
from evotrainer.rollout import batch_id_for
from evotrainer.run.runtime import build_family, load_validation
from evotrainer.run.validation_split import split_validation
from evotrainer.tasks.meeting_minutes import DEFAULT_REWARD_WEIGHTS
from tests.archive._dump import dump_deterministic

DATA = Path(__file__).resolve().parents[1] / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _tiny_config(tiny_run_config: Callable[[], Config]) -> Config:
    cfg = tiny_run_config()
    cfg.seed = 7
    cfg.decoding.max_new_tokens = 12
    cfg.evaluation.policies = ["terse", "secretary_markdown", "inline_example", "no_role"]
    cfg.inner.population_size = 4
    cfg.inner.generations = 1
    cfg.outer.generations = 2
    return cfg


class _Run(NamedTuple):
    """A finished run: what ``run_evolve`` returned (the archived summary event), the archive and the run id."""

    summary: SummaryEvent
    archive: Path
    run_id: str


def _run(cfg: Config, run_dir: Path) -> _Run:
    summary = run_evolve(cfg, run_dir=run_dir)
    with ArchiveStore(run_dir / "archive.db", read_only=True) as store:
        (run,) = store.list_runs()
        assert store.events(run.run_id, kind="summary")[-1].event == summary  # the summary returned is the archived one
    return _Run(summary, run_dir / "archive.db", run.run_id)


@pytest.fixture(scope="module")
def two_runs(tiny_run_config: Callable[[], Config], tmp_path_factory: pytest.TempPathFactory):
    cfg = _tiny_config(tiny_run_config)
    return cfg, [_run(cfg, tmp_path_factory.mktemp(f"run_{name}")) for name in ("a", "b")]


def test_same_seed_same_archive(two_runs) -> None:
    _, (a, b) = two_runs
    assert a.run_id == b.run_id
    with ArchiveStore(a.archive, read_only=True) as sa, ArchiveStore(b.archive, read_only=True) as sb:
        dump_a, dump_b = dump_deterministic(sa, a.run_id), dump_deterministic(sb, b.run_id)
    assert dump_a == dump_b
    assert dump_a["policies"], "the run archived no policies"


def test_best_policy_lineage_reaches_seeds(two_runs) -> None:
    cfg, (a, _) = two_runs
    with ArchiveStore(a.archive, read_only=True) as store:
        best, score = store.best_policy(a.run_id)
        assert score == pytest.approx(a.summary.best_s_val)
        nodes = store.lineage(a.run_id, best.id)
    seeds = {n.policy.id for n in nodes if n.policy.operator == "seed"}
    assert seeds and seeds <= set(cfg.evaluation.policies)
    by_id = {n.policy.id: n for n in nodes}
    for node in nodes:  # every edge ends at an archived node, and walking parents ends at a seed
        assert all(p in by_id for p in node.parent_ids)
    node = by_id[best.id]
    while node.parent_ids:
        node = by_id[node.parent_ids[0]]
    assert node.policy.operator == "seed"


def test_meta_validation_never_in_task_batches(two_runs) -> None:
    cfg, (a, _) = two_runs
    family = build_family(cfg)
    val_hashes = {t.content_hash for t in load_validation(cfg, family)}
    with ArchiveStore(a.archive, read_only=True) as store:
        batches = store.events(a.run_id, kind="task_batch")
        fitness_batch_ids = {e.batch_id for e in store.evaluations(a.run_id, kind="fitness")}
    assert batches
    logged = {e.payload["batch_id"] for e in batches}
    assert fitness_batch_ids <= logged  # every fitness evaluation used a logged, generated batch
    for e in batches:
        assert not set(e.payload["content_hashes"]) & val_hashes
    assert batch_id_for(load_validation(cfg, family)) not in fitness_batch_ids


def test_incumbent_curve_logged_and_held_out_never_selects(two_runs) -> None:
    cfg, (a, _) = two_runs
    items = load_validation(cfg, build_family(cfg))
    selection, heldout = split_validation(items, cfg.outer.heldout_share)
    assert heldout and a.summary.heldout_items == len(heldout) and a.summary.selection_items == len(selection)
    with ArchiveStore(a.archive, read_only=True) as store:
        gens = store.events(a.run_id, kind="outer_generation")
        (summary,) = store.events(a.run_id, kind="summary")
        (setup,) = store.events(a.run_id, kind="setup")
        meta_val = store.evaluations(a.run_id, kind="meta_val")
        screens = store.evaluations(a.run_id, kind="meta_screen")
        held = store.evaluations(a.run_id, kind="meta_heldout")
    # one event per outer generation with the current and the incumbent S_val
    assert [e.payload["outer_generation"] for e in gens] == list(range(1, cfg.outer.generations + 1))
    curve = [summary.payload["initial_s_val"]] + [e.payload["incumbent_s_val"] for e in gens]
    assert all("current_s_val" in e.payload for e in gens)
    assert curve == sorted(curve) and curve[-1] == max(curve) == pytest.approx(a.summary.best_s_val)
    assert summary.payload["stop_reason"] == "outer.generations" == a.summary.stop_reason
    # selection uses only the selection part; the final best alone is scored on the held-out part
    held_ids = {t.task_id for t in heldout}
    assert {e.batch_id for e in meta_val} == {batch_id_for(selection)}
    assert all(e.n_tasks <= len(selection) for e in screens)
    # the final best and the best seed alone are scored on the held-out part (one row each; one if the same)
    assert {e.policy_id for e in held} == {a.summary.best, a.summary.initial_best} and len(held) <= 2
    assert all(e.batch_id == batch_id_for(heldout) for e in held)
    best_row = next(e for e in held if e.policy_id == a.summary.best)
    assert summary.payload["heldout_s_val"] == pytest.approx(a.summary.heldout_s_val) == pytest.approx(best_row.total)
    (gen,) = store_events(a, "generalisation")
    assert gen.payload["heldout"]["n"] == len(heldout) and gen.payload["baseline_id"] == a.summary.initial_best
    assert gen.payload["best_id"] == a.summary.best
    assert not store_events(a, "transfer")  # task.transfer_path null: nothing scored
    assert set(setup.payload["heldout_items"]) == held_ids
    assert held_ids.isdisjoint(setup.payload["selection_items"] + setup.payload["screen_items"])


def store_events(run: _Run, kind: str):
    with ArchiveStore(run.archive, read_only=True) as store:
        return store.events(run.run_id, kind=kind)


def test_screening_subset_is_fixed_and_stratified() -> None:
    cfg = Config()
    items = load_validation(cfg, build_family(cfg))
    a, b = screening_subset(items, 8), screening_subset(list(reversed(items)), 8)
    assert [t.task_id for t in a] == [t.task_id for t in b]
    words = sorted(len(t.transcript.split()) for t in a)
    assert words[0] < 300 and words[-1] > 700  # spans short and long meetings


@pytest.mark.real_model
def test_smoke_experiment_real_model(tmp_path: Path) -> None:
    """``+experiment=smoke`` on the embedded model: completes, prints the summary, archive traceable."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "evotrainer", "+experiment=smoke", "decoding.max_new_tokens=16",
         "inner.mutator_max_new_tokens=40", f"hydra.run.dir={tmp_path}"],  # shorter answers: a third less time
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "summary" in proc.stdout and "best prompt" in proc.stdout
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        (run,) = store.list_runs()
        best, _ = store.best_policy(run.run_id)
        ops = {n.policy.operator for n in store.lineage(run.run_id, best.id)}
    assert "seed" in ops


def test_prompt_token_budget_stops_before_the_first_candidate(tiny_run_config: Callable[[], Config],
                                                              tmp_path: Path) -> None:
    """``outer.budget.prompt_tokens`` counts every prompt token the model read (generation 0 alone exceeds 1),
    so the run stops at the first candidate boundary with that key, and the archive says so."""
    cfg = _tiny_config(tiny_run_config)
    cfg.inner.llm_mutation_share = 0.0
    cfg.outer.budget.prompt_tokens = 1
    run = _run(cfg, tmp_path)
    assert run.summary.stop_reason == "outer.budget.prompt_tokens" and run.summary.candidates == 0
    (stop,) = store_events(run, "stop")
    assert stop.event.key == "outer.budget.prompt_tokens" and "prompt tokens used" in stop.event.detail


def test_one_dimensional_harness_end_to_end_with_budget_stop(tiny_run_config: Callable[[], Config],
                                                            tmp_path: Path) -> None:
    """``outer.knobs=[length]`` with fixed reward weights runs on the tiny model; the budget stops it. With
    ``task.transfer_path`` (3 real QMSum windows) the final best, the best seed and the plain prompt are scored
    there in one call (``meta_transfer``) and a ``transfer`` event is archived after the generalisation one."""
    cfg = _tiny_config(tiny_run_config)
    cfg.inner.llm_mutation_share = 0.0  # model-free operators only: keeps the test fast
    cfg.outer.knobs = ["length"]
    cfg.outer.evolve_reward_weights = False
    cfg.outer.generations = 3
    cfg.outer.budget.evaluations = 2
    cfg.task.transfer_path = str(DATA / "transfer_3.jsonl")
    cfg.task.plain_prompt = "Summarize the meeting."
    summary, archive, run_id = _run(cfg, tmp_path)
    assert summary.stop_reason == "outer.budget.evaluations" and summary.candidates == 2
    with ArchiveStore(archive, read_only=True) as store:
        (setup,) = store.events(run_id, kind="setup")
        rows = store.harness_candidates(run_id)
        kinds = [e.kind for e in store.events(run_id)]
        (transfer,) = store.events(run_id, kind="transfer")
        scored = store.evaluations(run_id, kind="meta_transfer")
    assert kinds.index("generalisation") < kinds.index("transfer") < kinds.index("summary")
    t = transfer.event
    assert t.item_ids == tuple(json.loads(line)["id"] for line in (DATA / "transfer_3.jsonl").open())
    assert t.roles == ("final_best", "best_seed", "plain_prompt") and t.policy_ids[2] == "plain_prompt"
    assert t.policy_ids[:2] == (summary.best, summary.initial_best) and len(t.values[0]) == 3
    assert {e.policy_id for e in scored} == set(t.policy_ids) and all(e.n_tasks == 3 for e in scored)
    assert setup.payload["harness_names"] == ["length"]
    defaults = DEFAULT_REWARD_WEIGHTS  # task.reward_weights is empty in a config built in code: the family's
    weights = {k: w / sum(defaults.values()) for k, w in defaults.items()}
    for row in rows:
        assert len(row.vector) == 1 and 80 <= row.values["difficulty"]["length"] <= 900
        assert row.values["reward_weights"] == pytest.approx(weights)


def test_each_candidate_races_its_policies_against_the_incumbent(two_runs) -> None:
    """``outer.screen_top_k`` policies per candidate race the incumbent (never the incumbent itself when
    there is a new genome): the race event names the leader
    (the candidate's best), counts exactly the archived item evaluations, and the told estimate is the
    whole-set S_val of the incumbent as of the race (the last one archived before it, also within the outer
    generation) plus the leader's paired mean difference."""
    cfg, (a, _) = two_runs
    with ArchiveStore(a.archive, read_only=True) as store:
        candidates = [c for c in store.harness_candidates(a.run_id) if c.race_estimate is not None]
        screens = [e for e in store.evaluations(a.run_id, kind="meta_screen") if e.harness_id != "h0"]
        events = store.events(a.run_id)
    races = {e.payload["harness_id"]: e for e in events if e.kind == "race"}
    assert candidates
    for cand in candidates:
        race = races[cand.harness_id].payload
        assert 1 <= len(race["entries"]) <= cfg.outer.screen_top_k
        assert race["leader"] == cand.best_policy_id
        mine = [e for e in screens if e.harness_id == cand.harness_id]
        assert race["evaluations"] == sum(e.n_tasks for e in mine)
        assert {x["status"] for x in race["entries"]} <= {"worse", "futile", "cut", "better", "undecided"}
        leader = next(x for x in race["entries"] if x["policy_id"] == race["leader"])
        ref = [e.payload for e in events if e.kind == "incumbent" and e.id < races[cand.harness_id].id][-1]
        assert race["reference"] == ref["policy_id"]
        ids = [x["policy_id"] for x in race["entries"]]  # the incumbent never races itself beside new genomes
        assert race["reference"] not in ids or ids == [race["reference"]]
        assert cand.race_estimate == pytest.approx(ref["s_val"] + leader["mean"])


def test_promotions_are_paired_decisions(two_runs) -> None:
    """Every whole-set score of a candidate is a promotion decision with paired evidence; an incumbent
    change happens only when its lower bound is above 0."""
    _, (a, _) = two_runs
    with ArchiveStore(a.archive, read_only=True) as store:
        events = store.events(a.run_id)
    promotions = [e.payload for e in events if e.kind == "promotion"]
    changes = [e.payload for e in events if e.kind == "incumbent" and e.payload["outer_generation"] > 0]
    for p in promotions:
        assert p["paired"] is not None and p["paired"]["n"] >= 1
        assert p["promoted"] == (p["paired"]["low"] is not None and p["paired"]["low"] > 0)
    assert len(changes) == sum(p["promoted"] for p in promotions)


def test_first_candidate_screens_a_mutant_of_the_best_seed(two_runs) -> None:
    """``inner.lead_offspring``: each candidate's lead is drawn from the Pareto front over the screening
    items (the screened seeds and the incumbent at first; the incumbent always belongs to it), and the
    candidate's racers include a mutant of that lead, compared with it on the same items."""
    cfg, (a, _) = two_runs
    assert cfg.inner.lead_offspring >= 1
    with ArchiveStore(a.archive, read_only=True) as store:
        screens = store.evaluations(a.run_id, kind="meta_screen")
        leads = {e.payload["harness_id"]: e.payload for e in store.events(a.run_id, kind="lead")}
        first = [store.get_policy(a.run_id, e.policy_id) for e in screens if e.harness_id == "g1c0"]
        incumbent = [e.payload["policy_id"] for e in store.events(a.run_id, kind="incumbent_reference")][0]
    lead = leads["g1c0"]
    assert lead["front"] and all(w >= 1 for w in lead["front"].values())
    assert lead["policy_id"] in lead["front"] or lead["policy_id"] == incumbent
    assert any(p.operator.startswith("mut_") and lead["policy_id"] in (p.root_id, *p.parent_ids) for p in first)


def test_seeds_are_screened_on_their_own_larger_subset(tiny_run_config: Callable[[], Config],
                                                        tmp_path: Path) -> None:
    """``outer.seed_screen_size``: generation 0 ranks the seeds on that many selection items (stratified like the
    screen), while harness candidates are still screened on ``outer.screen_size`` items."""
    cfg = _tiny_config(tiny_run_config)
    cfg.outer.generations, cfg.outer.screen_size, cfg.outer.seed_screen_size = 1, 2, 4
    a = _run(cfg, tmp_path / "run")
    with ArchiveStore(a.archive, read_only=True) as store:
        screens = store.evaluations(a.run_id, kind="meta_screen")
    seeds = [e for e in screens if e.harness_id == "h0"]
    assert len(seeds) == len(cfg.evaluation.policies) and {e.n_tasks for e in seeds} == {4}
    assert {e.n_tasks for e in screens if e.harness_id != "h0"} <= {1, 2}


def test_seed_screen_size_below_one_is_a_config_error(tiny_run_config: Callable[[], Config]) -> None:
    from evotrainer.config import validate
    from evotrainer.errors import ConfigError

    cfg = _tiny_config(tiny_run_config)
    cfg.outer.seed_screen_size = 0
    with pytest.raises(ConfigError, match="outer.seed_screen_size"):
        validate(cfg)
