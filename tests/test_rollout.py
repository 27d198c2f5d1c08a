"""Rollout evaluation: deduplication, the fitness cache, decoding genes, failures, meta-validation."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from evotrainer.backends.base import Generation, GenerationRequest, SamplingParams
from evotrainer.genome import Policy, render_system_prompt
from evotrainer.rollout import RolloutEvaluator, batch_id_for, sampling_for
from evotrainer.search.fitness_cache import FitnessCache
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import run_inner_loop
from evotrainer.search.toolbox import build_toolbox
from evotrainer.tasks.base import FamilySpec, MetaScore, RewardBreakdown, single_turn_roll_out
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask


class EchoLLM:
    """Deterministic policy model: answers with the system prompt and the user message's length."""

    name = "echo"

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False
        self.seen: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.calls += 1
        if self.fail:
            raise RuntimeError("backend crashed")
        self.seen += list(requests)
        out = []
        for r in requests:
            text = f"{r.messages[0]['content']} | {len(r.messages[-1]['content'])} seed={r.params.seed}"
            out.append(Generation(text, 10, len(text.split()), "stop"))
        return out


class KeywordFamily:
    """Fake task family: reward = weighted keyword coverage and length; meta = keyword coverage."""

    name = "fake"

    def __init__(self, scorer_version: str = "v1") -> None:
        self.spec = FamilySpec(scorer_version, {}, {}, {"kw": 0.5, "short": 0.5})
        self.reward_calls = 0
        self.broken_task: str | None = None

    def build_messages(self, sections, task):
        return ({"role": "system", "content": render_system_prompt(sections)},
                {"role": "user", "content": task.transcript})

    def roll_out(self, llm, requests):
        return single_turn_roll_out(llm, requests)

    def reward(self, output: str, task: MeetingTask, weights: Mapping[str, float]) -> RewardBreakdown:
        self.reward_calls += 1
        if task.task_id == self.broken_task:
            raise ValueError("scorer exploded")
        kw = sum(t in output.lower() for t in task.topics) / len(task.topics)
        short = 1.0 if len(output.split()) < 30 else 0.5
        comps = {"kw": kw, "short": short}
        return RewardBreakdown(sum(weights[k] * v for k, v in comps.items()), comps)

    def meta_score(self, output: str, task: MeetingTask) -> MetaScore:
        kw = sum(t in output.lower() for t in task.topics) / len(task.topics)
        return MetaScore(kw, {"kw": kw, "one": 1.0})


TASKS = [
    MeetingTask("t1", "Ann: budget is tight\nBob: ok", topics=("budget", "owner")),
    MeetingTask("t2", "Cy: the launch slips\nDee: fine", topics=("launch", "decision"),
                action_items=(ActionItem("Dee", "tell sales"),)),
    MeetingTask("t3", "Eve: hiring plan\nFay: agreed", topics=("hiring", "plan")),
]
WEIGHTS = {"kw": 0.7, "short": 0.3}


def _policy(name: str, rules: str = "Name the owner of each decision.") -> Policy:
    return Policy.seed(name, {"role": "You take minutes.", "format": "Bullets.", "rules": rules})


def _evaluator(**kw) -> tuple[RolloutEvaluator, EchoLLM, KeywordFamily]:
    llm, family = EchoLLM(), kw.pop("family", KeywordFamily())
    return RolloutEvaluator(llm, family, **kw), llm, family


def test_identical_population_costs_one_rollout_per_task() -> None:
    ev, llm, _ = _evaluator()
    pop = [_policy(f"p{i}") for i in range(6)]  # different ids, one genome
    results = ev.evaluate(pop, TASKS, WEIGHTS)
    assert ev.rollouts == len(TASKS) and llm.calls == 1
    assert len({r.fitness for r in results}) == 1 and [r.policy_id for r in results] == [p.id for p in pop]
    assert [r.cached for r in results] == [False] + [True] * 5
    assert results[0].generated_tokens > 0 and results[1].generated_tokens == 0


def test_identical_population_through_the_inner_loop_costs_one_rollout_per_task() -> None:
    ev, _, _ = _evaluator()
    pop = [_policy(f"p{i}") for i in range(4)]
    cfg = InnerConfig(population_size=4, elites=1, tournament_size=2, mut_prob=0.0, cx_prob=0.0, generations=1)
    run_inner_loop(pop, build_toolbox(cfg), ev.fitness_function(TASKS, WEIGHTS), cfg, random.Random(0))
    assert ev.rollouts == len(TASKS)  # unvaried copies keep their fitness: nothing new to roll out


def test_all_uncached_requests_go_out_in_one_call() -> None:
    ev, llm, _ = _evaluator()
    ev.evaluate([_policy("a"), _policy("b", "Other rules here."), _policy("c", "Third set.")], TASKS, WEIGHTS)
    assert llm.calls == 1 and ev.rollouts == 3 * len(TASKS)


def test_second_call_hits_the_cache() -> None:
    ev, llm, family = _evaluator()
    first = ev.evaluate([_policy("a")], TASKS, WEIGHTS)
    calls = family.reward_calls
    second = ev.evaluate([_policy("a2")], TASKS, WEIGHTS)
    assert ev.rollouts == len(TASKS) and llm.calls == 1
    assert family.reward_calls == calls  # scores were cached too
    assert second[0].cached and second[0].fitness == first[0].fitness
    assert second[0].policy_id == "a2"


def test_changed_weights_rescore_without_new_rollouts() -> None:
    ev, _, family = _evaluator()
    first = ev.evaluate([_policy("a")], TASKS, WEIGHTS)
    calls = family.reward_calls
    second = ev.evaluate([_policy("a")], TASKS, {"kw": 0.0, "short": 1.0})
    assert family.reward_calls == calls + len(TASKS)  # stale score not reused
    assert ev.rollouts == len(TASKS)  # outputs do not depend on reward weights
    assert second[0].fitness != first[0].fitness
    assert second[0].fitness == pytest.approx(sum(1.0 for _ in TASKS) / len(TASKS))


def test_changed_seed_or_scorer_version_misses_the_cache() -> None:
    cache = FitnessCache()
    family = KeywordFamily()
    ev1, _, _ = _evaluator(cache=cache, family=family, sampling=SamplingParams(seed=1))
    ev1.evaluate([_policy("a")], TASKS, WEIGHTS)
    ev2, _, _ = _evaluator(cache=cache, family=family, sampling=SamplingParams(seed=2))
    (r2,) = ev2.evaluate([_policy("a")], TASKS, WEIGHTS)
    assert ev2.rollouts == len(TASKS) and not r2.cached  # new seed: new rollouts
    ev3, _, _ = _evaluator(cache=cache, family=family, sampling=SamplingParams(seed=1))
    ev3.evaluate([_policy("a")], TASKS, WEIGHTS)
    assert ev3.rollouts == 0  # back to the first settings: shared cache hit
    calls = family.reward_calls
    family.spec = replace(family.spec, scorer_version="v2")
    ev3.evaluate([_policy("a")], TASKS, WEIGHTS)
    assert family.reward_calls == calls + len(TASKS)
    ev4, _, _ = _evaluator(cache=cache, family=family, sampling=SamplingParams(seed=1), adapter_version="r1")
    ev4.evaluate([_policy("a")], TASKS, WEIGHTS)
    assert ev4.rollouts == len(TASKS)  # retrained model: new rollouts


def test_decoding_genes_override_sampling() -> None:
    ev, llm, _ = _evaluator()
    base = _policy("a")
    genes = (("max_new_tokens", 64.0), ("repetition_penalty", 1.1), ("no_repeat_ngram_size", 3))
    child = base.child(base.sections, operator="x", generation=1, decoding=genes)
    ev.evaluate([base, child], TASKS, WEIGHTS)
    params = {r.params for r in llm.seen}
    assert SamplingParams() in params
    assert SamplingParams(max_new_tokens=64, repetition_penalty=1.1, no_repeat_ngram_size=3) in params
    assert ev.rollouts == 2 * len(TASKS)  # different genomes despite equal sections
    with pytest.raises(ValueError, match="unknown decoding gene"):
        sampling_for(base.child(base.sections, operator="x", generation=1, decoding=(("beam", 2),)),
                     SamplingParams())


def test_a_reading_gene_reaches_the_family_not_the_sampling_params() -> None:
    seen: list = []

    class Recording(KeywordFamily):
        def roll_out(self, llm, requests):
            seen.extend(requests)
            return super().roll_out(llm, requests)

    ev, llm, _ = _evaluator(family=Recording())
    base = _policy("a")
    genes = (("max_new_tokens", 64), ("window_tokens", 768))
    child = base.child(base.sections, operator="x", generation=1, decoding=genes)
    ev.evaluate([base, child], TASKS, WEIGHTS)
    assert {r.params for r in llm.seen} == {SamplingParams(), SamplingParams(max_new_tokens=64)}
    assert {r.decoding for r in seen} == {(), genes}  # the family gets the genes, the backend no window
    assert sampling_for(child, SamplingParams()) == SamplingParams(max_new_tokens=64)
    with pytest.raises(ValueError, match="finite number"):
        sampling_for(base.child(base.sections, operator="x", generation=1, decoding=(("window_tokens", math.nan),)),
                     SamplingParams())


def test_bad_decoding_gene_fails_that_policy_only() -> None:
    ev, _, _ = _evaluator()
    base = _policy("a")
    bad = base.child(base.sections, operator="x", generation=1, decoding=(("beam", 2.0),))
    good, broken = ev.evaluate([base, bad], TASKS, WEIGHTS)
    assert good.fitness is not None and broken.fitness is None and "unknown decoding gene" in broken.error


def test_backend_failure_gives_none_and_is_not_cached() -> None:
    ev, llm, _ = _evaluator()
    llm.fail = True
    results = ev.evaluate([_policy("a"), _policy("b", "Other.")], TASKS, WEIGHTS)
    assert all(r.fitness is None and "backend crashed" in r.error for r in results)
    llm.fail = False
    (r,) = ev.evaluate([_policy("a")], TASKS, WEIGHTS)
    assert r.fitness is not None and not r.cached


def test_failing_task_scores_zero_and_is_reported() -> None:
    family = KeywordFamily()
    family.broken_task = "t2"
    ev, _, _ = _evaluator(family=family)
    (r,) = ev.evaluate([_policy("a")], TASKS, WEIGHTS)
    assert r.per_task[1] is None and r.per_task[0] is not None
    assert r.fitness == pytest.approx((r.per_task[0] + r.per_task[2]) / 3)
    assert "t2" in r.error and "scorer exploded" in r.error
    assert set(r.components) == {"kw", "short"}


def test_evaluation_record_fields() -> None:
    ev, _, _ = _evaluator()
    (r,) = ev.evaluate([_policy("a")], TASKS, WEIGHTS)
    assert r.batch_id == batch_id_for(TASKS) and r.genome_hash == _policy("a").genome_hash
    assert len(r.per_task) == len(r.outputs) == len(r.degenerate) == len(TASKS)
    assert 0.0 <= r.fitness <= 1.0 and r.error is None and r.seconds >= 0.0
    assert r.components["kw"] == pytest.approx(sum(
        sum(t in o.lower() for t in task.topics) / 2 for o, task in zip(r.outputs, TASKS, strict=True)) / 3)


def test_batch_id() -> None:
    assert batch_id_for(TASKS) == batch_id_for(list(TASKS))
    assert batch_id_for(TASKS) != batch_id_for(TASKS[::-1])
    renamed = [MeetingTask("other", t.transcript, topics=t.topics, action_items=t.action_items) for t in TASKS]
    assert batch_id_for(renamed) == batch_id_for(TASKS)
    changed_truth = [TASKS[0], TASKS[1], MeetingTask("t3", TASKS[2].transcript, topics=("x",))]
    assert batch_id_for(changed_truth) != batch_id_for(TASKS)


def test_meta_evaluate() -> None:
    ev, llm, _ = _evaluator()
    pop = [_policy("a"), _policy("a-copy"), _policy("b", "Talk about the budget and hiring plan.")]
    results = ev.meta_evaluate(pop, TASKS)
    assert ev.rollouts == 2 * len(TASKS)
    a, a_copy, b = results
    assert a.s_val == a_copy.s_val and a_copy.cached
    assert b.s_val == pytest.approx(sum(v for v in b.per_item) / len(TASKS))
    assert b.s_val > a.s_val
    assert b.parts["one"] == 1.0 and b.stderr is not None and b.stderr >= 0.0
    again = ev.meta_evaluate([_policy("b2", "Talk about the budget and hiring plan.")], TASKS)
    assert again[0].cached and again[0].s_val == b.s_val and ev.rollouts == 2 * len(TASKS)


def test_rollout_module_does_not_import_deap() -> None:
    code = "import sys, evotrainer.rollout; assert 'deap' not in sys.modules, 'deap imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- reflective feedback ---------------------------------------------------------------------------


def test_per_task_components_and_worst_task_feedback() -> None:
    from evotrainer.rollout import FeedbackRecorder

    evaluator, _, _ = _evaluator()
    policy = _policy("a", "Mention the budget.")
    ev = evaluator.evaluate([policy], TASKS, {"kw": 0.5, "short": 0.5})[0]
    assert len(ev.per_task_components) == len(TASKS) and set(ev.per_task_components[0]) == {"kw", "short"}

    def worst_task_feedback(ev, tasks, reference_of=None):
        recorder = FeedbackRecorder(tasks, reference_of=reference_of)
        recorder.record([ev])
        return recorder(policy)

    info = worst_task_feedback(ev, TASKS)
    worst = min(range(len(TASKS)), key=lambda i: (ev.per_task[i], i))
    assert info.task_id == TASKS[worst].task_id and info.content_hash == TASKS[worst].content_hash
    assert info.output == ev.outputs[worst] and info.score == ev.per_task[worst]
    assert info.low_components and info.low_components[0][0] == "kw"
    assert info.reference == ""
    named = worst_task_feedback(ev, TASKS, reference_of=lambda t: f"reference of {t.task_id}")
    assert named.reference == f"reference of {TASKS[worst].task_id}"


def test_feedback_recorder_refuses_meta_validation_transcripts_and_other_batches() -> None:
    from evotrainer.errors import DataError
    from evotrainer.rollout import FeedbackRecorder

    with pytest.raises(DataError, match="meta-validation"):
        FeedbackRecorder(TASKS, forbidden={TASKS[1].content_hash})
    evaluator, _, _ = _evaluator()
    with pytest.raises(DataError, match="another task batch"):
        evaluator.fitness_function(TASKS[:2], {"kw": 0.5, "short": 0.5}, feedback=FeedbackRecorder(TASKS))


def test_reflective_mutation_sees_training_tasks_only() -> None:
    from evotrainer.rollout import FeedbackRecorder
    from evotrainer.search.reflection import TaskFeedback

    validation = [MeetingTask("v1", "Gus: the audit is due\nHal: noted", topics=("audit", "owner"))]
    forbidden = {t.content_hash for t in validation}
    recorder = FeedbackRecorder(TASKS, forbidden=forbidden)
    given: list[TaskFeedback] = []

    def feedback(policy):
        info = recorder(policy)
        if info is not None:
            given.append(info)
        return info

    class EchoMutator:
        name = "echo-mutator"

        def generate(self, requests):
            return [Generation(r.messages[-1]["content"].split("<<<\n")[1].split("\n>>>")[0] + " Name the owner.",
                               5, 5, "stop") for r in requests]

    evaluator, _, _ = _evaluator()
    evaluator.meta_evaluate([_policy("a")], validation)  # meta-validation runs never reach the recorder
    evaluate = evaluator.fitness_function(TASKS, {"kw": 0.5, "short": 0.5}, feedback=recorder)
    cfg = InnerConfig(population_size=4, elites=1, mut_prob=1.0, cx_prob=0.0, llm_mutation_share=1.0,
                          reflective_share=1.0, min_on_topic=0.0, generations=2)
    population = [_policy("a", "Mention the budget."), _policy("b", "Mention the launch."),
                  _policy("c", "Be brief."), _policy("d", "Be kind.")]
    toolbox = build_toolbox(cfg, mutator=EchoMutator(), feedback=feedback, seed_prompts=population)
    result = run_inner_loop(population, toolbox, evaluate, cfg, random.Random(0))
    assert given and all(info.content_hash in {t.content_hash for t in TASKS} for info in given)
    assert not any(info.content_hash in forbidden for info in given)
    assert "mut_reflective" in result.operator_stats.counts
