"""Lead offspring (``inner.lead_offspring``): mutants of the best-validated policy in every generation."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from evotrainer.genome import Policy
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import GenerationReport, initial_population, run_inner_loop
from evotrainer.search.operators import is_valid
from evotrainer.search.toolbox import build_toolbox

from ._fakes import FakeMutator, keyword_fitness, seed_population

LEAD = Policy.seed("lead", {"role": "You take minutes.", "format": "## Topics\n- one line per topic",
                            "rules": "Name the owner of each action item. Be brief."})


def _evaluate(policies):
    return [keyword_fitness(p) for p in policies]


def _spy_toolbox(cfg: InnerConfig, calls: list[tuple[str, str]]):
    """The default toolbox with every model-free mutation role recording (role, parent id)."""
    toolbox = build_toolbox(cfg)
    for role in ("mutate", "mutate_decoding", "mutate_prefill", "mutate_exemplar", "plan_rewrite", "plan_reflect"):
        if not hasattr(toolbox, role):
            continue
        original = getattr(toolbox, role)

        def spy(policy, rng, gen, _original=original, _role=role):
            calls.append((_role, policy.id))
            return _original(policy, rng, gen)

        toolbox.register(role, spy)
    return toolbox


def _run(cfg: InnerConfig, seed: int = 0, generations: int = 3, lead: Policy | None = LEAD, toolbox=None,
         mutator=None, **kw):
    reports: list[GenerationReport] = []
    cfg = replace(cfg, generations=generations)
    toolbox = toolbox or build_toolbox(cfg, mutator=mutator,
                                       seed_prompts=initial_population(seed_population(), cfg, lead))
    result = run_inner_loop(seed_population(), toolbox, _evaluate, cfg, random.Random(seed),
                            on_generation=reports.append, lead=lead, **kw)
    return result, reports


def test_lead_is_added_evaluated_and_gets_its_mutants_every_generation() -> None:
    cfg = InnerConfig(population_size=6, elites=1, lead_offspring=2)
    result, reports = _run(cfg)
    assert "lead" in result.fitness  # evaluated with the initial population
    assert "lead" in {p.id for p in reports[0].population}
    assert result.lead_children
    for report in reports[1:]:
        from_lead = [c for c in report.children if c.parent_ids == ("lead",)]
        assert 1 <= len(from_lead) <= cfg.lead_offspring
    for child in result.lead_children:  # valid, new, scored, descended from the lead
        assert is_valid(child, max_words=cfg.max_prompt_words) and child.id in result.fitness
        assert child.genome_hash != LEAD.genome_hash and child.root_id == "lead"


def test_each_operator_kind_is_tried_on_the_lead_before_one_repeats() -> None:
    calls: list[tuple[str, str]] = []
    cfg = InnerConfig(population_size=6, elites=1, lead_offspring=2, cx_prob=0.0, mut_prob=0.0)
    toolbox = _spy_toolbox(cfg, calls)
    _run(cfg, generations=3, toolbox=toolbox)
    kinds = [role for role, parent in calls if parent == "lead"]
    available = {"mutate", "mutate_decoding", "mutate_prefill"}  # no mutator, embedder or exemplars here
    assert len(kinds) >= 2 * 3  # two slots per generation, mut_prob 0 elsewhere
    first = kinds[: len(available)]
    assert set(first) == available  # one full round before any kind repeats


def test_lead_slots_are_never_crossed_and_other_slots_still_are() -> None:
    cfg = InnerConfig(population_size=6, elites=0, lead_offspring=2, cx_prob=1.0, mut_prob=0.0)
    _, reports = _run(cfg, generations=2)
    for report in reports[1:]:
        crossed = [c for c in report.children if c.operator.startswith("cx_")]
        assert crossed and all("lead" not in c.parent_ids or len(c.parent_ids) == 2 for c in crossed)
        assert any(c.parent_ids == ("lead",) for c in report.children)


@pytest.mark.parametrize("lead", [None, LEAD])
def test_zero_lead_offspring_or_no_lead_is_the_plain_loop(lead) -> None:
    plain, _ = _run(InnerConfig(), lead=None)
    other, _ = _run(InnerConfig(lead_offspring=0), lead=lead)
    assert [p.id for p in plain.population] == [p.id for p in other.population]
    assert not other.lead_children


def test_lead_offspring_with_the_mutator_is_deterministic() -> None:
    cfg = InnerConfig(population_size=6, elites=1, lead_offspring=3, llm_mutation_share=0.5)
    a, _ = _run(cfg, seed=5, mutator=FakeMutator())
    b, _ = _run(cfg, seed=5, mutator=FakeMutator())
    assert [p.id for p in a.lead_children] == [p.id for p in b.lead_children]
    assert [p.id for p in a.population] == [p.id for p in b.population]



def test_the_rotation_continues_across_calls_from_lead_tried() -> None:
    cfg = InnerConfig(population_size=6, elites=1, lead_offspring=1, cx_prob=0.0, mut_prob=0.0)
    result, _ = _run(cfg, generations=4, lead_tried=("mut_structural", "mut_decoding"))
    kinds = result.lead_kinds
    assert len(kinds) == 4 and kinds[0] == "mut_prefill"  # the only kind not tried yet comes first
    assert sorted(kinds[1:4]) == ["mut_decoding", "mut_prefill", "mut_structural"]  # then a full round
