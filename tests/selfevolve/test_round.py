"""One self-evolution round with fakes: keep/revert on the dev score, no-pass rounds, training data, archive."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evotrainer.archive.recorder import RunRecorder
from evotrainer.archive.store import ArchiveStore
from evotrainer.backends.base import SamplingParams
from evotrainer.config import LoraSettings, SelfEvolveConfig
from evotrainer.errors import DataError
from evotrainer.genome import Policy, render_system_prompt
from evotrainer.rollout import RolloutEvaluator
from evotrainer.selfevolve.examples import reference_items
from evotrainer.selfevolve.pool import PoolTask
from evotrainer.selfevolve.round import RoundModels, RoundSetup, SelfEvolveState, run_round, score_policy
from evotrainer.tasks.meeting_minutes import DEFAULT_DIFFICULTY, USER_TEMPLATE, MeetingMinutes
from tests.selfevolve._fakes import FakeEmbedder, FakeLLM, FakeTrainer

POLICY = Policy.seed("p0", {"role": "You write meeting minutes.", "format": "Use Markdown headers.",
                            "rules": "Name owners."})
CFG = SelfEvolveConfig(seed_tasks=2, new_tasks_per_round=2, pool_cap=4, samples_per_task=2, judge_repeats=2,
                       dev_size=2, lora=LoraSettings(steps=3, batch_size=2))


class RecordingFamily(MeetingMinutes):
    """The real family; every generated task is also registered with the fake model."""

    def __init__(self, fake: FakeLLM) -> None:
        super().__init__(prompt_layout="system_first")  # the chat shape the asserts read
        self.fake = fake

    def generate(self, rng, difficulty, n):
        tasks = super().generate(rng, difficulty, n)
        self.fake.tasks += tasks
        return tasks


def _world(tmp_path: Path, answer, grade: str = "8"):
    fake = FakeLLM([], answer=answer, grade=grade)
    family = RecordingFamily(fake)
    dev = family.generate(np.random.default_rng(100), DEFAULT_DIFFICULTY, 2)
    val = family.generate(np.random.default_rng(200), DEFAULT_DIFFICULTY, 2)
    seeds = family.generate(np.random.default_rng(1), DEFAULT_DIFFICULTY, 2)
    forbidden = {**{t.content_hash: "dev set" for t in dev}, **{t.content_hash: "meta-validation set" for t in val}}
    evaluator = RolloutEvaluator(fake, family, sampling=SamplingParams(max_new_tokens=64))
    models = RoundModels(llm=fake, judge=fake, embedder=FakeEmbedder(), trainer=object(), evaluator=evaluator)
    setup = RoundSetup(dev=tuple(dev), val=tuple(val), forbidden=forbidden,
                       reward_weights={"completeness": 0.5, "format": 0.2, "action_count": 0.3},
                       decoding=SamplingParams(max_new_tokens=64), bounds=family.spec.difficulty_bounds,
                       run_dir=tmp_path, adapter_root=tmp_path / "adapters")
    pool = tuple(PoolTask(t, 0, "seed") for t in seeds)
    state = SelfEvolveState(round=0, policy=POLICY, pool=pool, replay=reference_items(seeds, MeetingMinutes()),
                            difficulty=dict(DEFAULT_DIFFICULTY),
                            dev_score=float(score_policy(evaluator, POLICY, dev).s_val))
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run0")
    rec.start(0, {"mode": "selfevolve"})
    rec.policies([POLICY])
    return fake, family, models, setup, state, store, rec


def _answer_breaks_in_round_1(task, adapter):
    """Base model and later adapters answer with the reference; the round-1 adapter writes junk."""
    return "- nothing useful" if adapter and adapter.endswith("round_001") else task.reference_minutes


def test_round_reverts_when_dev_falls_then_keeps(tmp_path):
    fake, family, models, setup, state, store, rec = _world(tmp_path, _answer_breaks_in_round_1)
    trainer = FakeTrainer()
    base = state.dev_score  # the reference itself: S_val (mm-5) > 0.9, < 1 where a due date is not in the transcript
    assert base > 0.9
    one = run_round(state, models, family, CFG, setup, np.random.default_rng(1), rec, train=trainer)
    assert one.row.status == "reverted" and one.candidate is not None
    assert one.row.dev_score < one.row.prev_dev_score == pytest.approx(base)
    assert one.state.policy == POLICY and one.state.dev_score == pytest.approx(base)  # adapter reverted
    assert one.state.replay == state.replay  # a reverted round adds nothing to replay
    assert one.row.pass_rate == 1.0 and one.row.n_samples == 4 * CFG.samples_per_task
    assert one.row.losses == pytest.approx(tuple(np.linspace(2.0, 1.0, 3)))
    assert one.row.adapter_path == "adapters/round_001" and (tmp_path / "adapters/round_001").is_dir()

    # round 1 trains on the passing samples with the seed references as replay, from the base model
    call = trainer.calls[0]
    assert call["parent"] is None and len(call["examples"]) == one.row.n_kept
    assert [e.source for e in call["replay"]] == ["replay"] * 2
    assert [e.messages[-1]["content"] for e in call["replay"]] == [p.task.reference_minutes for p in state.pool]
    ex = call["examples"][0]
    assert [m["role"] for m in ex.messages] == ["system", "user", "assistant"]
    assert ex.messages[0]["content"] == render_system_prompt(POLICY.sections)
    assert ex.messages[1]["content"].startswith(USER_TEMPLATE.split("{")[0])
    trained_on = {m["content"] for e in call["examples"] + call["replay"] for m in e.messages}
    for t in setup.dev + setup.val:  # dev / meta-validation never trained on
        assert not any(t.transcript.strip() in text for text in trained_on)

    two = run_round(one.state, models, family, CFG, setup, np.random.default_rng(2), rec, train=trainer)
    assert two.row.status == "kept" and two.state.policy == two.candidate
    assert two.state.policy.adapter.endswith("round_002") and two.state.policy.parent_ids == (POLICY.id,)
    assert len(two.state.replay) == 2 + two.row.n_kept
    three = run_round(two.state, models, family, CFG, setup, np.random.default_rng(3), rec, train=trainer)
    assert trainer.calls[2]["parent"] == two.state.policy.adapter  # continues from the kept adapter
    assert len(three.state.pool) <= CFG.pool_cap

    # judge requests never carry an adapter; rollouts carry the current policy's
    judge = [r for r in fake.requests if r.messages[0]["content"].startswith("You grade")]
    assert judge and all(r.adapter is None for r in judge)
    store.close()


def test_archive_round_trip_of_round_records(tmp_path):
    _, family, models, setup, state, store, rec = _world(tmp_path, _answer_breaks_in_round_1)
    outs = []
    for k in (1, 2):
        out = run_round(state, models, family, CFG, setup, np.random.default_rng(k), rec, train=FakeTrainer())
        outs.append(out)
        state = out.state
    store.close()
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as ro:
        rows = ro.selfevolve_rounds("run0")
        assert rows == [o.row for o in outs]
        added = ro.selfevolve_pool("run0", round=1)
        assert [r.task_id for r in added] == [p.task.task_id for p in outs[0].state.pool if p.round == 1]
        assert added[0].task_input and added[0].truth["topics"]
        samples = ro.selfevolve_samples("run0", round=2)
        assert len(samples) == outs[1].row.n_samples
        assert [s.output for s in samples] == [s.text for s in outs[1].samples]
        assert len(ro.selfevolve_samples("run0", passed=True)) == sum(o.row.n_kept for o in outs)
        assert {p.id for p in ro.policies("run0")} >= {POLICY.id, outs[0].candidate.id, outs[1].candidate.id}
        archived = {p.id: p for p in ro.policies("run0")}[outs[1].candidate.id]
        assert archived.adapter == "adapters/round_002"  # stored relative to the run dir
        assert [e.kind for e in ro.evaluations("run0")] == ["meta_val", "meta_val"]


def test_round_without_passing_samples_trains_nothing(tmp_path):
    fake, family, models, setup, state, store, rec = _world(tmp_path, lambda task, adapter: "")
    trainer = FakeTrainer()
    out = run_round(state, models, family, CFG, setup, np.random.default_rng(0), rec, train=trainer)
    assert out.row.status == "no_pass" and not trainer.calls and out.candidate is None
    assert out.row.pass_rate == 0.0 and "nothing trained" in out.row.note
    assert out.state.policy == POLICY and out.row.losses == ()
    assert out.row.curriculum == "lower"  # pass rate 0 < 0.5 for one round
    assert out.state.difficulty["speakers"] < DEFAULT_DIFFICULTY["speakers"]
    store.close()


def test_leaked_dev_task_in_pool_raises(tmp_path):
    fake, family, models, setup, state, store, rec = _world(tmp_path, _answer_breaks_in_round_1)
    leaky = replace(state, pool=(*state.pool, PoolTask(setup.dev[0], 0, "seed")))
    with pytest.raises(DataError, match="dev set"):
        run_round(leaky, models, family, CFG, setup, np.random.default_rng(0), rec, train=FakeTrainer())
    leaky_replay = replace(state, replay=(*state.replay, *reference_items(setup.val[:1], MeetingMinutes())))
    with pytest.raises(DataError, match="meta-validation set"):
        run_round(leaky_replay, models, family, CFG, setup, np.random.default_rng(0), rec, train=FakeTrainer())
    store.close()


def test_a_round_draws_its_share_of_real_items_once_each(tmp_path):
    fake, family, models, setup, state, store, rec = _world(tmp_path, lambda task, adapter: task.reference_minutes)
    real = tuple(family.generate(np.random.default_rng(300), DEFAULT_DIFFICULTY, 3))  # stand-ins for training items
    cfg = replace(CFG, real_share=0.5)  # 2 new tasks a round: 1 real, 1 generated
    out = run_round(replace(state, real=real), models, family, cfg, setup, np.random.default_rng(1), rec,
                    train=FakeTrainer())
    added = [p for p in out.state.pool if p.round == 1]
    assert sorted(p.source for p in added) == ["generated", "real"]
    (drawn,) = [p.task for p in added if p.source == "real"]
    assert drawn in real and drawn not in out.state.real and len(out.state.real) == 2
    assert [p.difficulty for p in added if p.source == "real"] == [{}]
    again = run_round(out.state, models, family, cfg, setup, np.random.default_rng(2), rec, train=FakeTrainer())
    assert len(again.state.real) == 1 and not {p.task for p in again.state.pool} & set(again.state.real)
    store.close()
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as ro:
        assert [r.source for r in ro.selfevolve_pool("run0") if r.task_id == drawn.task_id] == ["real"]


def test_a_round_counts_the_judges_grades_and_its_training_tokens(tmp_path):
    _, family, models, setup, state, store, rec = _world(tmp_path, lambda task, adapter: task.reference_minutes)
    out = run_round(state, models, family, CFG, setup, np.random.default_rng(1), rec, train=FakeTrainer())
    r = out.row
    assert r.grades_requested == r.n_samples * CFG.judge_repeats and r.grades_parsed == r.grades_requested
    assert r.parse_rate == 1.0
    assert r.train["input_tokens"] == 100 * CFG.lora.steps and r.train["answer_tokens"] == 20 * CFG.lora.steps
    assert r.train["seconds_per_step"] == 0.005 and r.train["tokens_per_second"] == pytest.approx(100 / 0.005)
    store.close()
    _, family, models, setup, state, store, rec = _world(tmp_path / "b", lambda task, adapter: task.reference_minutes,
                                                         grade="Grade: 8")
    prose = run_round(state, models, family, CFG, setup, np.random.default_rng(1), rec, train=FakeTrainer()).row
    assert (prose.grades_requested, prose.grades_parsed, prose.parse_rate) == (r.grades_requested, 0, 0.0)
    store.close()
    with ArchiveStore(tmp_path / "b" / "archive.db", read_only=True) as ro:
        assert [(x.grades_requested, x.grades_parsed) for x in ro.selfevolve_rounds("run0")] == [
            (r.grades_requested, 0)]
