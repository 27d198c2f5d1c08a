"""The inner generation loop: config checks, operator checks, failures, determinism, progress."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from evotrainer.errors import ConfigError, EvoTrainerError, OperatorError
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import GenerationReport, run_inner_loop
from evotrainer.search.operators import is_valid
from evotrainer.search.toolbox import build_toolbox
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

from ._fakes import FailingMutator, FakeMutator, keyword_fitness, seed_population
from ._replay import RecordingLLM, ReplayLLM


def _evaluate_keywords(policies):
    return [keyword_fitness(p) for p in policies]


MEETING = InnerConfig().with_texts(MEETING_TEXTS)  # the seeds and the toy fitness are about minutes


def _run(seed: int, mutator=None, generations: int = 4, toolbox=None, **kw):
    """The loop on the seed population, the toolbox built here (with ``mutator``) unless one is given."""
    reports: list[GenerationReport] = []
    cfg = replace(kw.pop("cfg", MEETING), generations=generations)
    toolbox = toolbox or build_toolbox(cfg, mutator=mutator, seed_prompts=seed_population())
    result = run_inner_loop(seed_population(), toolbox, kw.pop("evaluate", _evaluate_keywords), cfg,
                            random.Random(seed), on_generation=reports.append, **kw)
    return result, reports


@pytest.mark.parametrize(
    ("cfg", "generations", "key"),
    [
        (InnerConfig(population_size=2, elites=3), 1, "inner.elites"),
        (InnerConfig(population_size=4, tournament_size=5), 1, "inner.tournament_size"),
        (InnerConfig(), 0, "inner.generations"),
        (InnerConfig(cx_prob=1.5), 1, "inner.cx_prob"),
        (InnerConfig(llm_mutation_share=-0.1), 1, "inner.llm_mutation_share"),
        (InnerConfig(population_size=0, elites=0), 1, "inner.population_size"),
        (InnerConfig(max_prompt_words=2.5), 1, "inner.max_prompt_words"),
    ],
)
def test_bad_settings_fail_at_start_naming_the_key(cfg, generations, key) -> None:
    calls = []
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        cfg = replace(cfg, generations=generations)
        run_inner_loop(seed_population(), build_toolbox(InnerConfig()), lambda ps: calls.append(ps), cfg,
                       random.Random(0))
    assert not calls  # nothing was evaluated


def test_empty_population_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="inner.population"):
        run_inner_loop([], build_toolbox(InnerConfig()), _evaluate_keywords, InnerConfig(), random.Random(0))


@pytest.mark.parametrize(
    ("alias", "operator"),
    [
        ("mate", lambda p1, p2, rng, gen: p1),  # one policy instead of a pair
        ("mate", lambda p1, p2, rng, gen: (p1, p2, p1)),  # three
        ("mutate", lambda p, rng, gen: p.sections),  # not a Policy
        ("select", lambda pop, fit, k, rng: pop[:1]),  # wrong count
        ("plan_rewrite", lambda p, rng, gen: "rewrite it"),  # not a MutationPlan
    ],
)
def test_wrong_shape_custom_operator_is_caught(alias, operator) -> None:
    cfg = InnerConfig(cx_prob=1.0, mut_prob=1.0, llm_mutation_share=1.0 if alias == "plan_rewrite" else 0.0)
    toolbox = build_toolbox(cfg, mutator=FakeMutator())
    toolbox.register(alias, operator)
    with pytest.raises(OperatorError, match=alias):
        _run(0, cfg=cfg, toolbox=toolbox)


def test_evaluate_returning_the_wrong_length_is_caught() -> None:
    with pytest.raises(OperatorError, match="evaluate"):
        _run(0, evaluate=lambda ps: [0.5])


def test_operators_keep_genomes_valid_and_only_new_genomes_are_evaluated() -> None:
    evaluated: list[str] = []

    def evaluate(policies):
        evaluated.extend(p.id for p in policies)
        return _evaluate_keywords(policies)

    cfg = InnerConfig(population_size=8, max_prompt_words=40)
    result, reports = _run(3, mutator=FakeMutator(), generations=5, cfg=cfg, evaluate=evaluate)
    assert [r.generation for r in reports] == [0, 1, 2, 3, 4, 5] and reports[0].initial
    assert max(Counter(evaluated).values()) == 1  # no policy scored twice
    for report in reports[1:]:
        assert len(report.population) == cfg.population_size
        for policy in report.population + report.children:
            assert is_valid(policy, max_words=40)
        genomes = [c.genome_hash for c in report.children]
        assert len(genomes) == len(set(genomes))
        for child in report.children:
            assert child.generation == report.generation and child.parent_ids
        assert report.record["nevals"] == len(report.children)
        assert set(report.timings) == {"select", "vary", "evaluate"}
    assert len(result.logbook) == 6
    operators = {c.operator.split("/")[0] for r in reports for c in r.children}
    assert {"mut_llm_rewrite", "mut_structural", "cx_sections"} <= operators


def test_elites_survive() -> None:
    result, reports = _run(4, cfg=InnerConfig(elites=2), generations=3)
    for before, after in zip(reports, reports[1:], strict=False):
        best_before = max(before.fitness.values())
        assert max(after.fitness.values()) >= best_before


def test_all_failed_generation_is_skipped_and_logged(caplog) -> None:
    seeds = {p.id for p in seed_population()}

    def evaluate(policies):
        return [keyword_fitness(p) if p.id in seeds else None for p in policies]

    with caplog.at_level("WARNING"):
        result, reports = _run(0, generations=2, evaluate=evaluate)
    assert [r.skipped for r in reports] == [False, True, True]
    assert result.skipped_generations == (1, 2)
    assert {p.id for p in result.population} == seeds
    assert [rec["skipped"] for rec in result.logbook] == [0, 1, 1]
    assert "skipped" in caplog.text


def test_failing_children_are_dropped_and_nan_counts_as_failed() -> None:
    def evaluate(policies):
        return [float("nan") if p.operator.startswith("cx") else keyword_fitness(p) for p in policies]

    result, reports = _run(1, generations=3, evaluate=evaluate, cfg=InnerConfig(cx_prob=1.0))
    for report in reports:
        assert all(not p.operator.startswith("cx") for p in report.population)
        assert set(report.fitness) == {p.id for p in report.population}


def test_initial_population_all_failing_raises() -> None:
    with pytest.raises(EvoTrainerError, match="initial population"):
        _run(0, evaluate=lambda ps: [None] * len(ps))


def test_failing_mutator_falls_back_to_structural_mutation() -> None:
    cfg = InnerConfig(mut_prob=1.0, llm_mutation_share=1.0, cx_prob=0.0)
    result, reports = _run(0, mutator=FailingMutator(), generations=2, cfg=cfg)
    assert all("mutator is down" in (r.mutator_error or "") for r in reports[1:])
    assert all(r.rejected > 0 for r in reports[1:])
    assert all(c.operator.startswith("mut_structural") for r in reports for c in r.children)


def test_llm_plans_go_out_in_one_call_per_generation() -> None:
    mutator = FakeMutator()
    cfg = InnerConfig(mut_prob=1.0, llm_mutation_share=1.0, llm_merge_share=1.0)
    _run(0, mutator=mutator, generations=3, cfg=cfg)
    assert mutator.calls == 3 and mutator.requests >= 3 * (cfg.population_size - cfg.elites) // 2


def test_determinism_for_a_fixed_seed() -> None:
    def summary(result, reports):
        return ([p.id for p in result.population], result.fitness, [p.id for p in result.hall_of_fame],
                [[c.id for c in r.children] for r in reports])

    a = summary(*_run(7, mutator=FakeMutator(), generations=4))
    b = summary(*_run(7, mutator=FakeMutator(), generations=4))
    c = summary(*_run(8, mutator=FakeMutator(), generations=4))
    assert a == b
    assert a != c


def test_determinism_with_recorded_mutator_calls(tmp_path) -> None:
    path = tmp_path / "mutator.jsonl"
    recorded, _ = _run(5, mutator=RecordingLLM(FakeMutator(), path), generations=3)
    replay = ReplayLLM(path, name="fake-mutator")
    replayed, _ = _run(5, mutator=replay, generations=3)
    assert [p.id for p in replayed.population] == [p.id for p in recorded.population]
    assert replayed.fitness == recorded.fitness
    assert replay.calls == 3


def test_the_loop_improves_a_toy_fitness() -> None:
    for seed in range(3):
        result, reports = _run(seed, mutator=FakeMutator(), generations=8)
        initial_best = reports[0].record["max"]
        assert result.best_fitness > initial_best
        assert result.best_fitness >= 0.6
        assert result.best == result.hall_of_fame[0]
    # model-free operators alone also make progress (the CPU default must not depend on the mutator)
    result, reports = _run(0, mutator=None, generations=8)
    assert result.best_fitness > reports[0].record["max"]


def test_start_generation_numbers_children() -> None:
    result, reports = _run(0, generations=2, start_generation=10)
    assert [r.generation for r in reports] == [10, 11, 12]
    assert [rec["gen"] for rec in result.logbook] == [10, 11, 12]
    assert all(c.generation in (11, 12) for r in reports for c in r.children)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_child_parent_is_reported(seed: int) -> None:
    """Crossover-then-mutation and repaired children name intermediates; those are reported too."""
    cfg = InnerConfig(cx_prob=1.0, mut_prob=1.0)
    result, reports = _run(seed, mutator=FakeMutator(), generations=4, cfg=cfg)
    known = {p.id for p in seed_population()}
    for report in reports:
        known |= {p.id for p in report.intermediates} | {p.id for p in report.children}
        for child in (*report.intermediates, *report.children):
            missing = [pid for pid in child.parent_ids if pid not in known]
            assert not missing, (child.operator, missing)
    assert any(r.intermediates for r in reports)
