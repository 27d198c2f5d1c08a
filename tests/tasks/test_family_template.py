"""The task-family template in docs/adding_a_task_family.md loads by config alone and scores through the
evaluator the loops use; the shipped task config groups equal their families' defaults."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from evotrainer.backends.base import Generation
from evotrainer.config import PACKAGE_DATA, Config, register_configs, to_config
from evotrainer.genome import Policy
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.runtime import build_family, load_validation, task_settings
from evotrainer.tasks import TASK_FAMILIES, family_class

DOC = Path(__file__).resolve().parents[2] / "docs" / "adding_a_task_family.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


class _Sorter:
    """Answers with the words of the user turn sorted when the system prompt says 'sort', else as given."""

    name = "sorter"

    def generate(self, requests):
        out = []
        for r in requests:
            words = r.messages[-1]["content"].removeprefix("Words: ").split(", ")
            text = ", ".join(sorted(words) if "sort" in r.messages[0]["content"].lower() else words)
            out.append(Generation(text, 1, len(words), "stop"))
        return out


def test_template_family_loads_by_config_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_family.py").write_text(_blocks("python")[0], encoding="utf-8")
    (tmp_path / "sort_words.jsonl").write_text(_blocks("json")[0], encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = Config()
    cfg.task.name = "my_family.SortWords"
    cfg.task.validation_path = str(tmp_path / "sort_words.jsonl")
    family = build_family(cfg)
    assert family.name == "sort_words"
    settings = task_settings(cfg, family)
    assert settings.difficulty == {"words": 5.0} and set(settings.space) == {"words"}
    items = load_validation(cfg, family)
    assert [t.task_id for t in items] == ["v1", "v2", "v3"]
    good = Policy.seed("good", {"role": "", "format": "Sort the words alphabetically.", "rules": "Commas."})
    lazy = Policy.seed("lazy", {"role": "", "format": "Repeat the words.", "rules": "Commas."})
    scores = RolloutEvaluator(_Sorter(), family).meta_evaluate([good, lazy], items)
    assert scores[0].s_val == 1.0 and scores[1].s_val < 1.0
    generated = family.generate(__import__("numpy").random.default_rng(0), settings.difficulty, 2)
    assert all(t.size == 5 for t in generated)
    sys.modules.pop("my_family", None)


def test_unknown_family_path_names_the_key() -> None:
    from evotrainer.errors import ConfigError

    with pytest.raises(ConfigError, match="task.name"):
        family_class("no_such_module.Family")
    with pytest.raises(ConfigError, match="task.name"):
        family_class("poetry")
    with pytest.raises(ConfigError, match="is not a task family: it lacks"):
        family_class("collections.OrderedDict")


@pytest.mark.parametrize("name", sorted(TASK_FAMILIES))
def test_task_group_equals_the_family_defaults(name: str) -> None:
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        cfg = to_config(compose(config_name="config", overrides=[f"task={name}"]))
    family = build_family(cfg)
    assert family.name == name
    assert repr(family) == repr(type(family)())  # the group's task.options are the constructor's defaults
    assert dict(cfg.task.difficulty) == dict(family.spec.difficulty)
    assert dict(cfg.task.reward_weights) == dict(family.spec.reward_weights)
    got = {k: {f: getattr(v, f) for f in ("low", "high", "log", "integer")} for k, v in cfg.outer.space.items()}
    want = {k: {"low": v["low"], "high": v["high"], "log": v.get("log", False), "integer": v.get("integer", False)}
            for k, v in family.spec.space.items()}
    assert got == want
