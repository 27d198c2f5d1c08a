"""Pure parts of self-evolution: curriculum, pool de-duplication and cap, judge, leak guard, config."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from evotrainer.adapters.train import TrainResult
from evotrainer.config import Config, CurriculumConfig, to_config
from evotrainer.errors import ConfigError, DataError
from evotrainer.selfevolve.curriculum import curriculum_bounds, curriculum_step
from evotrainer.selfevolve.examples import TrainItem, check_items, extend_replay, reference_items
from evotrainer.selfevolve.judge import (
    JudgeSettings,
    Verdict,
    combine,
    grade_counts,
    judge_samples,
    parse_grade,
)
from evotrainer.selfevolve.pool import PoolTask, add_to_pool, check_disjoint, draw_real, real_count, split_dev
from evotrainer.selfevolve.round import train_facts
from evotrainer.selfevolve.run import held_apart
from evotrainer.tasks.meeting_minutes import DEFAULT_DIFFICULTY, MeetingMinutes
from tests.selfevolve._fakes import FakeEmbedder, FakeLLM

FAMILY = MeetingMinutes()
BOUNDS = curriculum_bounds(FAMILY.spec.space)
WEIGHTS = {"completeness": 0.5, "format": 0.2, "action_count": 0.3}


def _tasks(n: int, seed: int = 0):
    return FAMILY.generate(np.random.default_rng(seed), DEFAULT_DIFFICULTY, n)


# --- curriculum ------------------------------------------------------------------------------------


def test_curriculum_raises_after_two_high_rounds_and_lowers_on_low():
    cfg = CurriculumConfig(raise_above=0.9, lower_below=0.5, raise_rounds=2, lower_rounds=1, step=0.1,
                           knobs=["speakers", "noise"])
    d = dict(DEFAULT_DIFFICULTY)
    one = curriculum_step(d, BOUNDS, [0.95], cfg)
    assert one.action == "hold" and one.difficulty == d and one.history == (0.95,)
    two = curriculum_step(d, BOUNDS, [0.95, 0.92], cfg)
    assert two.action == "raise" and two.history == ()
    assert two.difficulty["speakers"] == pytest.approx(3 + 0.1 * 6)
    assert two.difficulty["noise"] == pytest.approx(0.1 + 0.1 * 0.6)
    assert two.difficulty["length"] == d["length"]  # not a chosen knob
    assert curriculum_step(d, BOUNDS, [0.95, 0.9], cfg).action == "hold"  # "above" is strict
    assert curriculum_step(d, BOUNDS, [0.5, 0.95], cfg).action == "hold"  # not two in a row
    low = curriculum_step(d, BOUNDS, [0.95, 0.4], cfg)
    assert low.action == "lower" and low.difficulty["speakers"] == pytest.approx(3 - 0.6)
    floor = {**d, "speakers": 2.0, "noise": 0.0}
    assert curriculum_step(floor, BOUNDS, [0.1], cfg).action == "at_bound"
    assert d == dict(DEFAULT_DIFFICULTY)  # input untouched
    with pytest.raises(ConfigError, match="selfevolve.curriculum.knobs"):
        curriculum_step(d, BOUNDS, [0.1], CurriculumConfig(knobs=["nope"]))


def test_curriculum_default_moves_every_knob_within_bounds():
    d = {**DEFAULT_DIFFICULTY, "length": 880.0}
    up = curriculum_step(d, BOUNDS, [1.0, 1.0], CurriculumConfig())
    assert up.action == "raise"
    for k, (lo, hi) in BOUNDS.items():
        assert lo <= up.difficulty[k] <= hi and up.difficulty[k] >= d[k]
    assert up.difficulty["length"] == 900.0


# --- pool --------------------------------------------------------------------------------------------


def test_pool_drops_near_duplicates_by_cosine_and_applies_cap():
    seeds, new = _tasks(2, 0), _tasks(4, 1)
    e = np.eye(4)
    fixed = {seeds[0].transcript: e[0], seeds[1].transcript: e[1],
             new[0].transcript: 0.9 * e[0] + 0.1 * e[2],  # cosine ~0.99 to seed 0: dropped
             new[1].transcript: e[2],
             new[2].transcript: 0.8 * e[2] + 0.6 * e[3],  # cosine 0.8 to new[1]: kept at 0.85
             new[3].transcript: e[3]}
    emb = FakeEmbedder(fixed)
    pool = tuple(PoolTask(t, 0, "seed") for t in seeds)
    cands = [PoolTask(t, 1, "generated") for t in new]
    up = add_to_pool(pool, cands, embed=emb.encode, cosine=0.85, cap=10)
    assert up.duplicates == (new[0].task_id,)
    assert [p.task.task_id for p in up.added] == [new[1].task_id, new[2].task_id, new[3].task_id]
    assert len(up.pool) == 5 and pool == tuple(PoolTask(t, 0, "seed") for t in seeds)  # input untouched
    strict = add_to_pool(pool, cands, embed=emb.encode, cosine=0.75, cap=10)  # new[2] (0.8 to new[1]) drops too
    assert strict.duplicates == (new[0].task_id, new[2].task_id)  # new[3] only neared the dropped new[2]
    # cap: seed tasks stay, the oldest generated ones leave first
    capped = add_to_pool(up.pool, [PoolTask(_tasks(1, 9)[0], 2, "generated")], embed=FakeEmbedder().encode,
                         cosine=0.99, cap=4)
    assert len(capped.pool) == 4 and [p.source for p in capped.pool[:2]] == ["seed", "seed"]
    assert capped.evicted == (new[1].task_id, new[2].task_id) and capped.pool[-1].round == 2
    same = add_to_pool(up.pool, [PoolTask(new[1], 3, "generated")], embed=FakeEmbedder().encode, cosine=1.0,
                       cap=10)
    assert same.duplicates == (new[1].task_id,)  # exact content-hash duplicate


def test_dev_and_val_items_never_enter_pool_or_training():
    dev, val, other = _tasks(2, 5), _tasks(1, 6), _tasks(2, 7)
    forbidden = {**{t.content_hash: "dev set" for t in dev}, **{t.content_hash: "meta-validation set" for t in val}}
    with pytest.raises(DataError, match="dev set"):
        add_to_pool([], [PoolTask(other[0], 1, "generated"), PoolTask(dev[1], 1, "generated")],
                    embed=FakeEmbedder().encode, cosine=0.85, cap=5, forbidden=forbidden)
    with pytest.raises(DataError, match="meta-validation set"):
        check_items([TrainItem(other[1], "x", "sample", 1), TrainItem(val[0], "x", "sample", 1)], forbidden,
                    "training data")
    check_disjoint(other, forbidden, "pool")  # clean tasks pass
    check_items(reference_items(other, MeetingMinutes()), forbidden, "replay data")


def test_the_cap_keeps_the_set_up_tasks_real_ones_included():
    seeds, real, later = _tasks(1, 0), _tasks(1, 1), _tasks(3, 2)
    pool = add_to_pool([], [PoolTask(seeds[0], 0, "seed"), PoolTask(real[0], 0, "real")],
                       embed=FakeEmbedder().encode, cosine=0.99, cap=3).pool
    up = add_to_pool(pool, [PoolTask(t, 1, "generated") for t in later], embed=FakeEmbedder().encode, cosine=0.99,
                     cap=3)
    assert [p.source for p in up.pool] == ["seed", "real", "generated"] and up.pool[-1].task == later[-1]
    with pytest.raises(ValueError, match="below the 2 set-up tasks"):
        add_to_pool([], [PoolTask(seeds[0], 0, "seed"), PoolTask(real[0], 0, "real")], embed=FakeEmbedder().encode,
                    cosine=0.99, cap=1)


def test_real_count_rounds_half_up_and_never_exceeds_what_is_left():
    assert [real_count(4, s, 10) for s in (0.0, 0.1, 0.125, 0.5, 0.6, 1.0)] == [0, 0, 1, 2, 2, 4]
    assert real_count(4, 1.0, 3) == 3 and real_count(0, 1.0, 3) == 0 and real_count(4, 0.5, 0) == 0


def test_draw_real_draws_without_replacement_in_file_order_and_is_pure():
    items = tuple(_tasks(5, 3))
    drawn, left = draw_real(items, 2, np.random.default_rng(0))
    assert len(drawn) == 2 and len(left) == 3 and set(drawn) | set(left) == set(items)
    assert drawn == [t for t in items if t in drawn] and list(left) == [t for t in items if t in left]
    assert draw_real(items, 2, np.random.default_rng(0)) == (drawn, left)  # the rng alone decides
    assert draw_real(items, 0, np.random.default_rng(0)) == ([], items)
    with pytest.raises(ValueError, match="cannot draw 6 of 5"):
        draw_real(items, 6, np.random.default_rng(0))


def test_held_apart_names_every_held_set_and_refuses_a_dev_task_equal_to_a_transfer_item():
    dev, val, transfer = _tasks(2, 5), _tasks(1, 6), _tasks(2, 7)
    held = held_apart(dev, val, transfer)
    assert {held[t.content_hash] for t in transfer} == {"transfer set"}
    assert held[val[0].content_hash] == "meta-validation set" and held[dev[0].content_hash] == "dev set"
    with pytest.raises(ConfigError, match=r"selfevolve\.dev_seed_offset.*transfer"):
        held_apart([transfer[1]], val, transfer)
    with pytest.raises(DataError, match="transfer set"):
        check_disjoint([transfer[0]], held, "pool")


def test_train_facts_give_tokens_per_second_of_the_steps():
    result = TrainResult(adapter_dir="a", losses=(1.0, 0.5), seconds=12.0, trainable_params=10, steps=2,
                         replay_share=0.5, seconds_per_step=5.0, answer_tokens=300, input_tokens=2000,
                         padded_tokens=2400)
    facts = train_facts(result, 3, 4)
    assert facts["input_tokens"] == 2000 and facts["padded_tokens"] == 2400 and facts["answer_tokens"] == 300
    assert facts["tokens_per_second"] == 200.0
    assert facts["seconds_per_step"] == 5.0 and facts["steps"] == 2 and (facts["examples"], facts["replay"]) == (3, 4)
    untimed = train_facts(TrainResult(adapter_dir="a", losses=(1.0,), seconds=0.0, trainable_params=1, steps=1,
                                      replay_share=0.0), 1, 0)
    assert untimed["tokens_per_second"] is None
    assert train_facts(None, 0, 2) == {"examples": 0, "replay": 2}


def test_replay_buffer_keeps_references_and_newest_samples():
    t = _tasks(3, 2)
    refs = reference_items(t[:2], MeetingMinutes())
    new = [TrainItem(t[2], f"s{i}", "sample", 1) for i in range(5)]
    buf = extend_replay(refs, new, cap=4)
    assert [i.answer for i in buf] == [t[0].reference_minutes, t[1].reference_minutes, "s3", "s4"]


# --- judge -------------------------------------------------------------------------------------------


def test_parse_grade_is_strict():
    assert parse_grade(" 7 ") == 7.0 and parse_grade("10/10") == 10.0 and parse_grade("0.") == 0.0
    for bad in ("", "Grade: 7", "7 out of 10", "11", "7.5", "seven", "-1", "7\nbecause"):
        assert parse_grade(bad) is None, bad
    assert combine(0.6, None, 0.3) == pytest.approx(0.6)
    assert combine(0.6, 0.9, 0.3) == pytest.approx(0.7 * 0.6 + 0.3 * 0.9)
    assert combine(1.0, 1.0, 0.3, degenerate="empty") == 0.0


def test_judge_averages_repeats_and_zeroes_degenerate_output():
    tasks = _tasks(2, 3)
    grades = iter(["6", "9", "junk", "4", "8", "x"])

    class Judge(FakeLLM):
        def generate(self, requests):
            assert all(r.adapter is None for r in requests)  # the fixed judge: never an adapter
            assert len({r.params.seed for r in requests}) == len(requests)  # distinct seeds per repeat
            return [FakeLLM.generate(self, [r])[0].__class__(text=next(grades), prompt_tokens=1,
                                                             generated_tokens=1, finish_reason="stop")
                    for r in requests]

    judge = Judge(tasks)
    good = tasks[0].reference_minutes
    loop = "\n".join(["- the same line"] * 8)
    items = [(tasks[0], good), (tasks[1], loop), (tasks[1], tasks[1].reference_minutes)]
    settings = JudgeSettings(WEIGHTS, repeats=3, temperature=0.7, model_weight=0.5)
    v = judge_samples(judge, FAMILY, items, settings, np.random.default_rng(0))
    assert v[0].grades == (6.0, 9.0, None) and v[0].model == pytest.approx(0.75)  # unparsed one ignored
    assert v[0].rule == pytest.approx(1.0) and v[0].score == pytest.approx(0.5 * 1.0 + 0.5 * 0.75)
    assert v[1].degenerate == "repetition" and v[1].score == 0.0 and v[1].grades == ()  # judge not asked
    assert v[2].grades == (4.0, 8.0, None) and v[2].score == pytest.approx(0.5 + 0.5 * 0.6)
    assert len(judge.requests) == 6
    assert grade_counts(v) == (6, 4)  # the degenerate sample asked nothing; two replies did not parse


def test_grade_counts_count_a_failed_judge_call_as_asked_and_unparsed():
    rules_only = Verdict(score=0.5, rule=0.5, components={}, grades=(), model=None)
    failed = Verdict(score=0.5, rule=0.5, components={}, grades=(None, None, None), model=None, error="judge down")
    assert grade_counts([rules_only, failed]) == (3, 0) and grade_counts([]) == (0, 0)


def test_judge_failure_falls_back_to_rules():
    tasks = _tasks(1, 4)

    class Broken:
        name = "broken"

        def generate(self, requests):
            raise RuntimeError("out of memory")

    v = judge_samples(Broken(), FAMILY, [(tasks[0], tasks[0].reference_minutes)], JudgeSettings(WEIGHTS),
                      np.random.default_rng(0))
    assert v[0].model is None and v[0].score == pytest.approx(v[0].rule) and "out of memory" in v[0].error


# --- config ------------------------------------------------------------------------------------------


def test_selfevolve_config_validation_names_keys():
    from omegaconf import OmegaConf

    base = OmegaConf.structured(Config)
    cfg = to_config(OmegaConf.merge(base, {"mode": "selfevolve"}))
    assert cfg.selfevolve.rounds == 2 and cfg.selfevolve.temperature == 0.7 and cfg.selfevolve.judge is None
    for key, value, name in [
        ("selfevolve.pass_threshold", 1.5, "selfevolve.pass_threshold"),
        ("selfevolve.dedup_cosine", 0.0, "selfevolve.dedup_cosine"),
        ("selfevolve.judge_repeats", 0, "selfevolve.judge_repeats"),
        ("selfevolve.lora.replay_ratio", 1.0, "selfevolve.lora.replay_ratio"),
        ("selfevolve.curriculum.step", 2.0, "selfevolve.curriculum.step"),
        ("selfevolve.pool_cap", 1, "selfevolve.pool_cap"),
        ("selfevolve.real_share", 1.5, "selfevolve.real_share"),
        ("selfevolve.real_share", -0.1, "selfevolve.real_share"),
        ("selfevolve.transfer_limit", -1, "selfevolve.transfer_limit"),
    ]:
        bad = OmegaConf.merge(base, OmegaConf.from_dotlist([f"{key}={value}"]))
        with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
            to_config(bad)


def test_split_dev_holds_one_item_of_each_of_k_groups_out_and_is_pure():
    items = tuple(replace(t, meta={"meeting": g})
                  for t, g in zip(_tasks(6, 4), ["A", "B", "B", "C", "C", "D"], strict=True))
    dev, rest = split_dev(items, 2, np.random.default_rng(0))
    assert len(dev) == 2 and len({t.group for t in dev}) == 2 and not {t.group for t in dev} & {t.group for t in rest}
    assert set(dev) | set(rest) <= set(items) and list(rest) == [t for t in items if t in rest]
    assert rest and {t.group for t in rest} | {t.group for t in dev} == {"A", "B", "C", "D"}
    assert split_dev(items, 2, np.random.default_rng(0)) == (dev, rest)  # the rng alone decides
    with pytest.raises(DataError, match=r"cannot hold 4 dev items .* 4 groups .*selfevolve\.dev_size"):
        split_dev(items, 4, np.random.default_rng(0))


def test_a_real_dev_set_needs_training_items():
    from omegaconf import OmegaConf

    base = OmegaConf.structured(Config)
    with pytest.raises(ConfigError, match=r"'selfevolve\.dev_source': expected 'generated' while task\.train_path"):
        to_config(OmegaConf.merge(base, OmegaConf.from_dotlist(["selfevolve.dev_source=real"])))
    with pytest.raises(ConfigError, match=r"'selfevolve\.dev_source': expected one of"):
        to_config(OmegaConf.merge(base, OmegaConf.from_dotlist(["selfevolve.dev_source=held_out"])))


def test_real_share_without_training_items_is_refused():
    from omegaconf import OmegaConf

    base = OmegaConf.structured(Config)
    with pytest.raises(ConfigError, match=r"'selfevolve\.real_share': expected 0 while task\.train_path is null") as e:
        to_config(OmegaConf.merge(base, OmegaConf.from_dotlist(["selfevolve.real_share=0.5"])))
    assert "\n" not in str(e.value)
    ok = to_config(OmegaConf.merge(base, OmegaConf.from_dotlist(
        ["selfevolve.real_share=0.5", "task.train_path=validation_set/qmsum_train.jsonl", "selfevolve.transfer_limit=0"])))
    assert ok.selfevolve.real_share == 0.5 and ok.selfevolve.transfer_limit == 0
