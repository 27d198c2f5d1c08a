"""Real training meetings in task batches: the shipped file is apart from selection and transfer, the knob
``real_share`` sets how many a batch draws, and the ``content`` reward is S_val's yardstick."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evotrainer.config import PACKAGE_DATA, Config, KnobSpec, validate
from evotrainer.errors import ConfigError, DataError
from evotrainer.evolve.llm_objective import task_batch
from evotrainer.harness.space import Harness
from evotrainer.run.runtime import build_family, load_training, load_transfer, load_validation
from evotrainer.tasks.meeting_minutes import metric, rewards
from evotrainer.tasks.meeting_minutes.family import MeetingMinutes

TRAIN = "validation_set/qmsum_train.jsonl"


def _main_job() -> Config:
    """The main job's data keys (conf/experiment/meeting_minutes.yaml)."""
    cfg = Config()
    cfg.task.validation_subset = "validation_set/meeting_minutes_core.txt"
    cfg.task.validation_extra = ["validation_set/qmsum_meetings.jsonl"]
    cfg.task.transfer_path = "validation_set/qmsum_transfer.jsonl"
    cfg.task.train_path = TRAIN
    return cfg


def _harness(share: float | None) -> Harness:
    extras = {} if share is None else {"real_share": share}
    return Harness(values={}, difficulty={}, reward_weights={}, extras=extras, vector=())


def test_shipped_training_meetings_are_neither_selected_on_nor_reported() -> None:
    cfg = _main_job()
    family = build_family(cfg)
    validation = load_validation(cfg, family)
    transfer = load_transfer(cfg, family, validation)
    train = load_training(cfg, family, validation, transfer)
    assert len(train) == 20 and {t.source for t in train} == {"qmsum"}
    meetings = {t.meta["meeting"] for t in train}
    assert len(meetings) == 12
    assert not meetings & {t.meta.get("meeting") for t in [*validation, *transfer]}
    assert not {t.content_hash for t in train} & {t.content_hash for t in [*validation, *transfer]}
    assert all(t.reference_minutes.strip() for t in train)
    cfg.task.train_path = None
    assert load_training(cfg, family, validation, transfer) == []


def test_a_training_item_from_a_transfer_meeting_is_refused(tmp_path: Path) -> None:
    cfg = _main_job()
    family = build_family(cfg)
    validation = load_validation(cfg, family)
    transfer = load_transfer(cfg, family, validation)
    row = json.loads((PACKAGE_DATA / cfg.task.transfer_path).read_text(encoding="utf-8").splitlines()[0])
    row["id"], row["transcript"] = "leaky-window", "Chair: More of the same meeting.\n" + row["transcript"]
    leaky = tmp_path / "leaky.jsonl"
    leaky.write_text(json.dumps(row) + "\n", encoding="utf-8")
    cfg.task.train_path = str(leaky)
    with pytest.raises(DataError, match=r"item 'leaky-window' is of group .* which the transfer set") as info:
        load_training(cfg, family, validation, transfer)
    assert "\n" not in str(info.value) and str(leaky) in str(info.value)


def test_real_share_sets_how_many_training_items_a_batch_draws() -> None:
    family = MeetingMinutes()
    train = family.load_validation(PACKAGE_DATA / TRAIN)
    plain = task_batch(family, np.random.default_rng(7), _harness(None), 3, train)
    assert [t.source for t in plain] == ["generated"] * 3
    assert [t.task_id for t in plain] == [t.task_id for t in family.generate(np.random.default_rng(7), {}, 3)]
    assert [t.task_id for t in task_batch(family, np.random.default_rng(7), _harness(0.9), 3, ())] == [
        t.task_id for t in plain]  # no training items: the generator's batch
    for share, real in ((0.0, 0), (0.16, 0), (0.17, 1), (0.34, 1), (0.5, 2), (1.0, 3)):
        batch = task_batch(family, np.random.default_rng(7), _harness(share), 3, train)
        assert len(batch) == 3 and sum(t.source == "qmsum" for t in batch) == real, share
    again = task_batch(family, np.random.default_rng(7), _harness(1.0), 3, train)
    assert [t.task_id for t in again] == [t.task_id for t in task_batch(family, np.random.default_rng(7),
                                                                          _harness(1.0), 3, train)]
    assert len({t.task_id for t in task_batch(family, np.random.default_rng(1), _harness(1.0), 20, train)}) == 20
    assert len(task_batch(family, np.random.default_rng(1), _harness(1.0), 25, train)) == 20 + 5


def test_real_share_without_training_items_is_a_config_error() -> None:
    cfg = Config()
    cfg.outer.extras = {"real_share": KnobSpec(low=0.0, high=1.0, init=0.3)}
    with pytest.raises(ConfigError, match=r"outer\.extras\.real_share.*task\.train_path"):
        validate(cfg)
    cfg.task.train_path = TRAIN
    cfg.outer.extras = {"real_share": KnobSpec(low=0.0, high=2.0, init=0.3)}
    with pytest.raises(ConfigError, match=r"outer\.extras\.real_share"):
        validate(cfg)
    cfg.outer.extras = {"real_share": KnobSpec(low=0.0, high=1.0, init=0.3)}
    validate(cfg)
    cfg.task.train_limit = 0
    with pytest.raises(ConfigError, match=r"task\.train_limit"):
        validate(cfg)


def test_content_reward_is_the_yardstick_against_the_reference() -> None:
    family = MeetingMinutes()
    task = family.load_validation(PACKAGE_DATA / TRAIN, limit=1)[0]
    output = task.reference_minutes
    weights = {**rewards.DEFAULT_REWARD_WEIGHTS, "content": 1.0}
    got = family.reward(output, task, weights)
    assert got.components["content"] == pytest.approx(metric.meta_score(output, task).value)
    assert got.components["content"] > 0.5 and got.total == pytest.approx(
        sum(w * got.components[k] * (rewards.content_gate(output, task) if k in rewards.FORM_COMPONENTS else 1.0)
            for k, w in weights.items()) / sum(weights.values()))
    other = family.load_validation(PACKAGE_DATA / TRAIN, limit=2)[1]
    assert family.reward(other.reference_minutes, task, weights).components["content"] < 0.1
    assert family.reward(output, task, rewards.DEFAULT_REWARD_WEIGHTS).components["content"] == 0.0  # weight 0
