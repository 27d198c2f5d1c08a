"""Every bad ``distill.*`` setting gives one line naming its key, before any model is loaded; comparison items may
not share an input with the training items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from evotrainer.config import PACKAGE_DATA, Config, to_config
from evotrainer.distill.run import run_distill
from evotrainer.errors import ConfigError, DataError

LINES = (PACKAGE_DATA / "validation_set" / "meeting_minutes.jsonl").read_text(encoding="utf-8").splitlines()


def _cfg(tmp_path: Path, *overrides: str) -> Config:
    train, transfer = tmp_path / "train.jsonl", tmp_path / "transfer.jsonl"
    train.write_text("\n".join(LINES[2:4]) + "\n", encoding="utf-8")
    transfer.write_text("\n".join(LINES[4:6]) + "\n", encoding="utf-8")
    base = ["mode=distill", "task.validation_limit=2", f"task.train_path={train}", f"task.transfer_path={transfer}",
            "task.plain_prompt=Summarize the meeting.", "model.path=/no/such/model"]  # never loaded: errors come first
    return to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist([*base, *overrides])))


@pytest.mark.parametrize(("overrides", "message"), [
    (["distill.train_limit=0"], "config key 'distill.train_limit': expected >= 1 or null, got 0"),
    (["distill.eval_limit=-1"], "config key 'distill.eval_limit': expected >= 1 or null"),
    (["distill.dataset=' '"], "config key 'distill.dataset': expected a JSONL file or null"),
    (["distill.results=a/b"], "config key 'distill.results': expected a file name stem"),
    (["distill.lora.steps=0"], "config key 'distill.lora.steps': expected >= 1"),
    (["distill.lora.replay_ratio=1.0"], "config key 'distill.lora.replay_ratio'"),
    (["task.train_path=null"], "config key 'task.train_path': expected a JSONL file of training items"),
    (["task.transfer_path=null"], "config key 'distill.dataset': expected a JSONL file of comparison items"),
    (["task.plain_prompt=null"], "config key 'distill.student': expected a seed name or export folder"),
    (["model.backend=vllm"], "config key 'model.backend': expected hf with mode=distill"),
    (["executor.kind=ray"], "config key 'executor': expected local with mode=distill"),
])
def test_bad_settings_name_their_key(tmp_path: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _cfg(tmp_path, *overrides)


def test_distill_keys_are_checked_in_every_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="distill.train_limit"):
        _cfg(tmp_path, "mode=evaluate", "distill.train_limit=0")
    _cfg(tmp_path, "mode=evaluate", "task.train_path=null")  # the data checks are mode=distill's own


@pytest.mark.parametrize(("overrides", "message"), [
    (["distill.teacher=nobody"], r"distill.teacher: 'nobody' is not a seed name.*known seeds: \["),
    (["distill.teacher=archive:abc"], "evaluate.archive: needed by distill.teacher entry 'archive:abc'"),
    (["distill.student=nobody"], r"distill.student: 'nobody' is not a seed name"),
])
def test_unknown_teachers_and_students_are_refused_before_the_model_loads(tmp_path: Path, overrides: list[str],
                                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        run_distill(_cfg(tmp_path, *overrides), run_dir=tmp_path / "run")


def test_a_student_that_carries_an_adapter_is_refused(tmp_path: Path) -> None:
    export = tmp_path / "with_adapter"
    export.mkdir()
    (export / "policy.json").write_text(json.dumps({"policy": {
        "id": "se3", "sections": [{"name": "role", "text": "Short."}], "adapter": "/elsewhere/round_003"}}))
    with pytest.raises(ConfigError, match=r"config key 'distill.student': .* carries an adapter \(/elsewhere/round_003\)"):
        run_distill(_cfg(tmp_path, f"distill.student={export}"), run_dir=tmp_path / "run")


def test_comparison_items_sharing_an_input_with_the_training_items_are_refused(tmp_path: Path) -> None:
    dataset = tmp_path / "compare.jsonl"
    dataset.write_text("\n".join([LINES[6], LINES[3]]) + "\n", encoding="utf-8")  # LINES[3] also trains
    item = json.loads(LINES[3])["id"]
    with pytest.raises(DataError, match=f"compare.jsonl: item '{item}' has the input of training item '{item}'"):
        run_distill(_cfg(tmp_path, f"distill.dataset={dataset}"), run_dir=tmp_path / "run")
