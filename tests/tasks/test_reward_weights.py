"""Reward weights are checked in one function, once, where the config meets the family (runtime.task_settings)."""

from __future__ import annotations

import pytest

from evotrainer.config import Config
from evotrainer.errors import ConfigError
from evotrainer.run.runtime import task_settings
from evotrainer.tasks import get_task_family


def _settings(weights: dict) -> dict[str, float]:
    cfg = Config()
    cfg.task.reward_weights = weights
    return task_settings(cfg, get_task_family("meeting_minutes", cfg.task)).reward_weights


def test_config_weights_over_the_family_defaults_are_checked_once() -> None:
    got = _settings({"format": 2})
    assert got["format"] == 2.0 and all(isinstance(w, float) for w in got.values())
    assert _settings({"format": 0})["format"] == 0.0  # the family's other weights stay positive
    with pytest.raises(ConfigError, match=r"task\.reward_weights\.format"):
        _settings({"format": -1.0})
    with pytest.raises(ConfigError, match=r"task\.reward_weights\.style.*unknown reward component"):
        _settings({"style": 1.0})
    with pytest.raises(ConfigError, match="at least one weight > 0"):
        _settings(dict.fromkeys(("completeness", "format", "action_count", "action_f1"), 0.0))
