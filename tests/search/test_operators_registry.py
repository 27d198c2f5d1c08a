"""The operator registry: probabilities equal to the formula it replaced, and an operator added by one record."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from deap import base

from evotrainer.errors import ConfigError
from evotrainer.genome import Policy, render_system_prompt
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import _mutation_probabilities, _pick, run_inner_loop
from evotrainer.search.operator_stats import OperatorStats, adapted_probabilities
from evotrainer.search.operators_registry import (
    DEFAULT_REGISTRY,
    Operator,
    OperatorRegistry,
    crossover_probabilities,
    mutation_probabilities,
)
from evotrainer.search.toolbox import InnerToolbox, build_toolbox

from ._fakes import keyword_fitness, seed_population


def _formula_before_the_registry(cfg: InnerConfig, toolbox: base.Toolbox, mutator: object,
                                 stats: OperatorStats) -> dict[str, float]:
    """The hand-written formula the registry replaced (inner_loop.py before issue 17), kept as the oracle."""
    llm = cfg.llm_mutation_share if mutator is not None else 0.0
    phrase = cfg.phrase_mutation_share if hasattr(toolbox, "mutate_phrase") else 0.0
    decoding = cfg.decoding_mutation_share if hasattr(toolbox, "mutate_decoding") else 0.0
    exemplar = cfg.exemplar_mutation_share if hasattr(toolbox, "mutate_exemplar") else 0.0
    prefill = cfg.prefill_mutation_share if hasattr(toolbox, "mutate_prefill") else 0.0
    reflective = cfg.reflective_share if hasattr(toolbox, "plan_reflect") else 0.0
    adapter = cfg.adapter_mutation_share if hasattr(toolbox, "mutate_adapter") else 0.0
    free = 1.0 - llm
    base_probs = {"mut_llm_rewrite": llm * (1.0 - reflective), "mut_reflective": llm * reflective,
                  "mut_structural": free * (1.0 - phrase - decoding - exemplar - prefill),
                  "mut_phrase_substitution": free * phrase, "mut_decoding": free * decoding,
                  "mut_exemplar": free * exemplar, "mut_prefill": free * prefill}
    if adapter > 0:
        base_probs = {k: v * (1.0 - adapter) for k, v in base_probs.items()} | {"mut_adapter": adapter}
    base_probs = {k: v for k, v in base_probs.items() if v > 0} or {"mut_structural": 1.0}
    if cfg.adaptive_operators:
        return adapted_probabilities(base_probs, stats, mix=cfg.adaptive_mix)
    total = sum(base_probs.values())
    return {k: v / total for k, v in base_probs.items()}


def _random_config(rng: random.Random) -> InnerConfig:
    shares = [rng.choice([0.0, rng.random()]) for _ in range(4)]
    scale = rng.random() / max(sum(shares), 1e-9) if sum(shares) > 1 else 1.0
    phrase, decoding, exemplar, prefill = (s * scale for s in shares)
    return InnerConfig(
        llm_mutation_share=rng.choice([0.0, 1.0, rng.random()]), reflective_share=rng.choice([0.0, rng.random()]),
        phrase_mutation_share=phrase, decoding_mutation_share=decoding, exemplar_mutation_share=exemplar,
        prefill_mutation_share=prefill, adapter_mutation_share=rng.choice([0.0, 0.0, rng.random()]),
        adaptive_operators=rng.random() < 0.3, adaptive_mix=rng.random(),
    )


def test_probabilities_are_exactly_those_of_the_replaced_formula() -> None:
    rng = random.Random(17)
    aliases = ("mutate_phrase", "mutate_decoding", "mutate_exemplar", "mutate_prefill", "plan_reflect",
               "mutate_adapter")
    stats = OperatorStats({"mut_structural": (5, 2), "mut_phrase_substitution": (3, 0), "mut_llm_rewrite": (2, 1)})
    for _ in range(3000):
        cfg = _random_config(rng)
        cfg.validate()
        mutator = object() if rng.random() < 0.7 else None
        toolbox = InnerToolbox(mutator=mutator)
        for alias in ("mutate", "plan_rewrite", *(a for a in aliases if rng.random() < 0.6)):
            toolbox.register(alias, lambda *a: None)
        new = _mutation_probabilities(cfg, toolbox, stats)
        old = _formula_before_the_registry(cfg, toolbox, mutator, stats)
        assert list(new.items()) == list(old.items())  # same keys, same order, bit-identical values
        draws = random.Random(5), random.Random(5)
        assert [_pick(new, draws[0]) for _ in range(20)] == [_pick(old, draws[1]) for _ in range(20)]


def _mut_shout(parent: Policy, rng: random.Random, generation: int, *, suffix: str) -> Policy:
    """A test operator: upper-cases one section and appends ``suffix``."""
    name, text = parent.sections[rng.randrange(len(parent.sections))]
    sections = tuple((n, (t.upper() + suffix) if n == name else t) for n, t in parent.sections)
    return parent.child(sections, operator=f"mut_shout/{name}", generation=generation)


SHOUT = Operator("mut_shout", "mutation", "mutate_shout", _mut_shout, default_share=0.5,
                 bind=lambda cfg, res: {"suffix": " NOW."})


def test_an_operator_added_by_one_record_is_registered_drawn_and_applied() -> None:
    cfg = InnerConfig(population_size=4, elites=1, tournament_size=2, cx_prob=0.0, mut_prob=1.0,
                      phrase_mutation_share=0.2, decoding_mutation_share=0.1, exemplar_mutation_share=0.1,
                      prefill_mutation_share=0.1)
    toolbox = build_toolbox(cfg, registry=DEFAULT_REGISTRY.added(SHOUT), seed_prompts=seed_population())
    assert hasattr(toolbox, "mutate_shout") and "mut_shout" in toolbox.registry
    probabilities = _mutation_probabilities(cfg, toolbox, OperatorStats())
    # no mutator, no embedder, no exemplars: structural 1 - 0.1 - 0.1 - 0.5, decoding, prefill, shout
    assert probabilities == pytest.approx({"mut_structural": 0.3, "mut_decoding": 0.1, "mut_prefill": 0.1,
                                           "mut_shout": 0.5})
    rng = random.Random(3)
    draws = Counter(_pick(probabilities, rng) for _ in range(2000))
    assert draws["mut_shout"] / 2000 == pytest.approx(0.5, abs=0.04)
    reports = []
    run_inner_loop(seed_population(), toolbox, lambda ps: [keyword_fitness(p) for p in ps],
                   replace(cfg, generations=3), random.Random(0), on_generation=reports.append)
    children = [c for r in reports for c in r.children]
    shouted = [c for c in children if c.operator.startswith("mut_shout/")]
    assert shouted and all(any(t.endswith(" NOW.") for _, t in c.sections) for c in shouted)
    assert all(r.mutation_probabilities.get("mut_shout") == pytest.approx(0.5) for r in reports if not r.initial)
    assert "mut_shout" not in DEFAULT_REGISTRY  # the default registry is never changed


def test_a_registry_operator_share_is_set_from_the_config() -> None:
    registry = DEFAULT_REGISTRY.added(SHOUT)
    cfg = InnerConfig(phrase_mutation_share=0.0, decoding_mutation_share=0.0, exemplar_mutation_share=0.0,
                      prefill_mutation_share=0.0, operator_shares={"mut_shout": 0.25})
    probs = mutation_probabilities(cfg, lambda op: True, False, OperatorStats(), registry)
    assert probs == {"mut_structural": 0.75, "mut_shout": 0.25}
    with pytest.raises(ConfigError, match=r"inner\.operator_shares\.mut_nothing"):
        build_toolbox(InnerConfig(operator_shares={"mut_nothing": 0.1}), registry=registry)
    with pytest.raises(ConfigError, match="model_free pool"):
        build_toolbox(InnerConfig(operator_shares={"mut_shout": 0.9}), registry=registry)
    with pytest.raises(ConfigError, match=r"inner\.operator_shares\.mut_shout"):  # not in the default registry
        build_toolbox(cfg)
    with pytest.raises(ConfigError, match=r"inner\.operator_shares\.x"):
        InnerConfig(operator_shares={"x": 1.5}).validate()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (Operator("mut_structural", "mutation", "m", _mut_shout), "already registered"),
        (Operator("mut_x", "selection", "m", _mut_shout), "kind must be"),
        (Operator("mut_x", "mutation", "m", _mut_shout, pool="elsewhere"), "pool must be"),
        (Operator("mut_x", "mutation", "m", _mut_shout, needs=("gpu",)), "needs from"),
        (Operator("mut_x", "mutation", "m", _mut_shout, share_key="no_such_key"), "not an inner"),
        (Operator("mut_x", "mutation", "m", _mut_shout, rest=True), "rest operator already"),
        (Operator("mut_x", "mutation", "m", _mut_shout, fallback="mut_y"), "fallback"),
        (Operator("mut_x", "mutation", "m", _mut_shout, default_share=2.0), "default_share"),
    ],
)
def test_malformed_records_are_refused(record: Operator, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DEFAULT_REGISTRY.added(record)
    with pytest.raises(ConfigError, match=message):
        OperatorRegistry((*DEFAULT_REGISTRY, record))


def test_the_toolbox_registers_a_record_only_when_its_needs_are_met() -> None:
    needy = Operator("mut_needy", "mutation", "mutate_needy", _mut_shout, default_share=0.1, needs=("exemplars",),
                     bind=lambda cfg, res: {"suffix": res.exemplars[0]})
    registry = DEFAULT_REGISTRY.added(needy)
    assert not hasattr(build_toolbox(InnerConfig(), registry=registry), "mutate_needy")
    toolbox = build_toolbox(InnerConfig(), registry=registry, exemplars=["Example: ok."])
    child = toolbox.mutate_needy(seed_population()[0], random.Random(0), 1)
    assert child.operator.startswith("mut_shout/") and render_system_prompt(child.sections).count("Example: ok.") == 1
    roles = DEFAULT_REGISTRY.roles()
    assert roles["mut_reflective"] == "plan_reflect" and "cx_sections" not in roles


def test_the_registry_is_read_only_and_travels_with_the_toolbox() -> None:
    assert not hasattr(DEFAULT_REGISTRY, "register") and not hasattr(DEFAULT_REGISTRY, "remove")
    smaller = DEFAULT_REGISTRY.removed("mut_prefill")
    assert "mut_prefill" in DEFAULT_REGISTRY and "mut_prefill" not in smaller
    toolbox = build_toolbox(InnerConfig(), registry=smaller)
    assert toolbox.registry is smaller and not hasattr(toolbox, "mutate_prefill")
    assert "mut_prefill" not in _mutation_probabilities(InnerConfig(), toolbox, OperatorStats())
    assert build_toolbox(InnerConfig()).registry is DEFAULT_REGISTRY
    with pytest.raises(KeyError, match="mut_nothing"):
        DEFAULT_REGISTRY.removed("mut_nothing")


def test_the_loop_refuses_a_toolbox_without_a_registry() -> None:
    with pytest.raises(ConfigError, match="build_toolbox"):
        run_inner_loop(seed_population(), base.Toolbox(), lambda ps: [0.0] * len(ps), InnerConfig(),
                       random.Random(0))


def _cx_swap(p1: Policy, p2: Policy, rng: random.Random, generation: int) -> tuple[Policy, Policy]:
    """A test crossover: the children take each other's last section."""
    (n1, t1), (n2, t2) = p1.sections[-1], p2.sections[-1]
    a = p1.child((*p1.sections[:-1], (n1, t2 + " Swapped.")), operator="cx_swap/last", generation=generation,
                 parents=(p2,))
    b = p2.child((*p2.sections[:-1], (n2, t1 + " Swapped.")), operator="cx_swap/last", generation=generation,
                 parents=(p1,))
    return a, b


def test_crossover_goes_through_the_registry() -> None:
    assert crossover_probabilities(InnerConfig(), lambda op: True) == {"cx_sections": 1.0}  # no draw, as before
    swap = Operator("cx_swap", "crossover", "mate_swap", _cx_swap, default_share=0.6)
    registry = DEFAULT_REGISTRY.added(swap)
    cfg = InnerConfig(population_size=6, elites=1, tournament_size=2, cx_prob=1.0, mut_prob=0.0, generations=3)
    assert crossover_probabilities(cfg, lambda op: True, registry) == pytest.approx({"cx_sections": 0.4,
                                                                                   "cx_swap": 0.6})
    assert crossover_probabilities(cfg, lambda op: op.name != "cx_swap", registry) == {"cx_sections": 1.0}
    reports = []
    run_inner_loop(seed_population(), build_toolbox(cfg, registry=registry),
                   lambda ps: [keyword_fitness(p) for p in ps], cfg, random.Random(1), on_generation=reports.append)
    kinds = Counter(c.operator.split("/")[0] for r in reports for c in r.children)
    assert kinds["cx_swap"] > 0 and kinds["cx_sections"] > 0
    with pytest.raises(ConfigError, match="crossover shares"):
        build_toolbox(replace(cfg, operator_shares={"cx_swap": 1.5}), registry=registry)
