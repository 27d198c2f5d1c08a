"""Strategy knobs (issue 40, item 4): the outer loop evolves inner-loop settings (operator shares, the mutator's
temperature) per harness candidate; each candidate's values reach its own inner loop, every candidate source treats
them as harness coordinates, bad keys are one-line config errors, and the archive's views show them."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from evotrainer.archive import ArchiveStore, HarnessCandidateRow
from evotrainer.archive.recorder import RunRecorder
from evotrainer.backends.base import Generation, GenerationRequest, SamplingParams
from evotrainer.backends.usage import RunUsage
from evotrainer.browse.views import harness_trajectory
from evotrainer.config import Config, KnobSpec, validate
from evotrainer.errors import ConfigError
from evotrainer.evolve.llm_objective import LLMObjective
from evotrainer.genome import Policy
from evotrainer.harness import space_from_specs
from evotrainer.harness.candidates import candidate_source
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.console_text import fmt_harness
from evotrainer.search.inner_config import InnerConfig
from evotrainer.seeding import Seeds
from evotrainer.stats.sensitivity import knob_values
from evotrainer.tasks.meeting_minutes import MeetingMinutes
from tests.search._fakes import FakeMutator  # the search tests' deterministic mutator

BOUNDS = {"length": (40.0, 2000.0), "noise": (0.0, 1.0)}
SPECS = {"length": KnobSpec(80.0, 600.0), "noise": KnobSpec(0.0, 0.5)}
STRATEGY = {"mutator_temperature": KnobSpec(0.3, 1.2, init=0.8), "reflective_share": KnobSpec(0.0, 1.0, init=0.42),
            "prefill_mutation_share": KnobSpec(0.0, 0.5, init=0.27)}


def _space(strategy=STRATEGY):
    return space_from_specs(SPECS, BOUNDS, {"length": 120, "noise": 0.1}, {"completeness": 0.5, "format": 0.5},
                            strategy=strategy)


class _Minutes:
    """Policy model stand-in: every answer is the same short minutes."""

    name = "fixed-minutes"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        return [Generation("## Topics\n- budget\n## Action items\n- Ann: send the plan", 10, 12, "stop")
                for _ in requests]


class _RecordingMutator(FakeMutator):
    """The fake mutator, keeping each request's sampling settings."""

    def __init__(self) -> None:
        super().__init__()
        self.params: list[SamplingParams] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.params += [r.params for r in requests]
        return super().generate(requests)


def _candidate(tmp_path: Path, strategy: dict[str, KnobSpec], inner: dict[str, float], mutator=None):
    """(the inner loop's result under the start harness of ``strategy``, the mutator) on fakes, no model."""
    cfg = Config()
    cfg.inner.use_embedder = False
    cfg.inner.population_size, cfg.inner.generations, cfg.inner.elites = 4, 1, 1
    cfg.inner.tournament_size, cfg.inner.cx_prob, cfg.inner.mut_prob, cfg.inner.lead_offspring = 2, 0.0, 1.0, 0
    cfg.inner.style_evolution_every = 0
    for key, value in inner.items():
        setattr(cfg.inner, key, value)
    family = MeetingMinutes()
    usage = RunUsage()
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run-s")
    rec.start(0, {"seed": 0})
    objective = LLMObjective(
        evaluator=RolloutEvaluator(usage.wrap(_Minutes(), "model"), family, sampling=SamplingParams(max_new_tokens=8)),
        mutator=mutator, usage=usage, family=family, rec=rec, console=Console(file=io.StringIO()), timings={},
        cfg=cfg, seeds=Seeds(0), selection=[], screen=[], forbidden=set())
    space = space_from_specs(SPECS, BOUNDS, {"length": 120, "noise": 0.1}, {"completeness": 1.0}, strategy=strategy)
    harness = space.decode(space.initial_vector())
    tasks = family.generate(np.random.default_rng(0), harness.difficulty, 2)
    pop = [Policy.seed(f"s{i}", {"role": "You take minutes.", "format": "## Topics", "rules": r})
           for i, r in enumerate(("Name every owner.", "Keep dates.", "Be brief.", "No chat."))]
    result = objective._inner(pop, tasks, harness, "g1c0", 1)
    store.close()
    return result, mutator


def test_a_candidates_mutator_temperature_reaches_the_mutator(tmp_path: Path) -> None:
    knob = {"mutator_temperature": KnobSpec(0.3, 1.2, init=0.37)}
    inner = {"llm_mutation_share": 1.0, "reflective_share": 0.0, "mutator_temperature": 0.8}
    _, mutator = _candidate(tmp_path, knob, inner, _RecordingMutator())
    assert mutator.params and {round(p.temperature, 9) for p in mutator.params} == {0.37}  # not the run's 0.8


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_an_operator_share_of_zero_is_never_chosen_for_that_candidate(tmp_path: Path, share: float) -> None:
    knob = {"prefill_mutation_share": KnobSpec(0.0, 1.0, init=share)}
    inner = {"llm_mutation_share": 0.0, "phrase_mutation_share": 0.0, "decoding_mutation_share": 0.0,
             "exemplar_mutation_share": 0.0, "prefill_mutation_share": 1.0 - share}  # the run's own: the opposite
    result, _ = _candidate(tmp_path, knob, inner)
    children = [p for p in (*result.population, *result.hall_of_fame) if p.generation > 0]
    prefill = [p for p in children if p.operator.startswith("mut_prefill")]
    assert children and (prefill == [] if share == 0.0 else len(prefill) >= len(children) / 2)


def test_model_free_shares_past_one_are_scaled_to_sum_one() -> None:
    base = InnerConfig(phrase_mutation_share=0.16, decoding_mutation_share=0.11, exemplar_mutation_share=0.2,
                       prefill_mutation_share=0.27)
    out = base.with_strategy({"exemplar_mutation_share": 0.5, "prefill_mutation_share": 0.5, "reflective_share": 0.9})
    shares = [out.phrase_mutation_share, out.decoding_mutation_share, out.exemplar_mutation_share,
              out.prefill_mutation_share]
    assert sum(shares) <= 1.0 and sum(shares) == pytest.approx(1.0)
    assert out.exemplar_mutation_share == pytest.approx(0.5 / 1.27) and out.phrase_mutation_share == pytest.approx(
        0.16 / 1.27)
    assert out.reflective_share == 0.9 and base.reflective_share == 0.5  # the run's config is not changed
    out.validate()
    kept = base.with_strategy({"prefill_mutation_share": 0.3})  # 0.77: within 1, applied as given
    assert kept.prefill_mutation_share == 0.3 and kept.phrase_mutation_share == 0.16
    assert base.with_strategy({}) is base


def test_frozen_keeps_random_draws_and_cma_moves_the_strategy_knobs() -> None:
    space = _space()
    assert space.names_of("strategy") == tuple(STRATEGY) and space.dim == 2 + 2 + 3
    x0 = space.initial_vector()

    def source(name: str):
        return candidate_source(name, x0=x0, sigma0=0.25, popsize=8, cma_seed=Seeds(0).int("cma"),
                                rng=Seeds(0).numpy("random_harness"), sigma_floor=0.02)

    frozen = [space.decode(x).strategy for x in source("frozen_harness").ask()]
    assert all(s == pytest.approx({k: v.init for k, v in STRATEGY.items()}) for s in frozen)
    rand = source("random_harness")
    drawn = np.array([[space.decode(x).strategy[k] for k in STRATEGY] for _ in range(25) for x in rand.ask()])
    lows, highs = np.array([STRATEGY[k].low for k in STRATEGY]), np.array([STRATEGY[k].high for k in STRATEGY])
    assert np.all(drawn >= lows) and np.all(drawn <= highs)
    spread = (drawn - lows) / (highs - lows)  # (200, 3) in [0, 1]: uniform over each knob's bounds
    assert np.all(spread.min(axis=0) < 0.05) and np.all(spread.max(axis=0) > 0.95)
    assert np.allclose(spread.mean(axis=0), 0.5, atol=0.06)
    cma = [space.decode(x).strategy for x in source("coevolve").ask()]
    assert all(len({round(s[k], 6) for s in cma}) == len(cma) for k in STRATEGY)  # every candidate its own values
    for s in (*frozen, *cma):
        assert all(STRATEGY[k].low <= v <= STRATEGY[k].high for k, v in s.items())


def _error(cfg: Config) -> str:
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("name", "spec", "expected"), [
    ("temperature", KnobSpec(0.3, 1.2, init=0.8), "outer.strategy.temperature': expected the name of an inner-loop"),
    ("reflective_share", KnobSpec(0.0, 1.5, init=0.4), "outer.strategy.reflective_share': expected bounds inside"),
    ("mutator_temperature", KnobSpec(-0.5, 1.0, init=0.8), "outer.strategy.mutator_temperature': expected bounds"),
    ("llm_merge_share", KnobSpec(0.0, 1.0), "outer.strategy.llm_merge_share.init'"),
    ("prefill_mutation_share", KnobSpec(0.0, 0.5, init=0.7), "outer.strategy.prefill_mutation_share.init'"),
    ("cx_prob", KnobSpec(0.0, 1.0, integer=True, init=0.5), "outer.strategy.cx_prob.integer'"),
])
def test_a_bad_strategy_key_is_a_one_line_config_error(name: str, spec: KnobSpec, expected: str) -> None:
    cfg = Config()
    cfg.outer.strategy = {name: spec}
    assert expected in _error(cfg)
    with pytest.raises(ConfigError, match="outer.strategy.temperature"):
        InnerConfig().with_strategy({"temperature": 0.5})
    with pytest.raises(ConfigError, match="outer.strategy.cx_prob"):
        InnerConfig().with_strategy({"cx_prob": 1.5})


def test_the_archive_views_the_console_and_sensitivity_show_the_strategy_knobs(tmp_path: Path) -> None:
    space = _space()
    h = space.decode(np.full(space.dim, 0.5))
    values = h.as_dict()
    assert values["strategy"] == h.strategy and set(h.strategy) == set(STRATEGY)
    assert "strategy" not in _space(strategy=None).decode(np.full(4, 0.5)).as_dict()  # archived as before
    with ArchiveStore(tmp_path / "archive.db") as store:
        store.create_run("run-v", seed=0, config={"seed": 0}, code_version="test")
        store.add_harness_candidate("run-v", HarnessCandidateRow(
            harness_id="g1c0", outer_generation=1, index=0, vector=h.vector, values=values, s_val=None,
            race_estimate=0.2, best_policy_id=None, status="screened"))
        (row,) = harness_trajectory(store, "run-v")
    assert row["params"]["reflective_share"] == pytest.approx(0.5)
    assert row["params"]["mutator_temperature"] == pytest.approx(0.75)
    assert "strategy: mutator_temperature=0.75 reflective_share=0.5" in fmt_harness(h)
    assert knob_values(values)["prefill_mutation_share"] == pytest.approx(0.25)
    assert math.isfinite(knob_values(values)["length"])
