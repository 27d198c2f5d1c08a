import numpy as np
import pytest

from evotrainer.errors import ConfigError
from evotrainer.tasks import get_task_family
from evotrainer.tasks.base import MetaScore, RewardBreakdown
from evotrainer.tasks.meeting_minutes import (
    DEFAULT_REWARD_WEIGHTS,
    USER_TEMPLATE,
    MeetingMinutes,
    build_messages,
)

from ._fixtures import GOOD, TASK


def test_family_implements_the_protocol():
    fam = get_task_family("meeting_minutes", action_band=(1, 3))
    assert isinstance(fam, MeetingMinutes)
    assert fam.name == "meeting_minutes" and fam.spec.scorer_version == "mm-5"
    assert tuple(fam.spec.reward_weights) == ("completeness", "format", "action_count", "action_f1", "content")
    assert fam.spec.difficulty_bounds["speakers"] == (2.0, 8.0)
    tasks = fam.generate(np.random.default_rng(0), {}, 2)
    assert len(tasks) == 2
    assert isinstance(fam.reward(GOOD, TASK, DEFAULT_REWARD_WEIGHTS), RewardBreakdown)
    assert isinstance(fam.meta_score(GOOD, TASK), MetaScore)
    # the band is the family's: three items are inside (1, 3)
    assert fam.reward(GOOD, TASK, DEFAULT_REWARD_WEIGHTS).components["action_count"] == 1.0


def test_registry_and_band_errors():
    with pytest.raises(ConfigError, match="task.name"):
        get_task_family("poetry")
    with pytest.raises(ConfigError, match="task.options.action_band"):
        MeetingMinutes(action_band=(5, 2))
    with pytest.raises(ConfigError):
        get_task_family("meeting_minutes", colour="red")


def test_build_messages_sends_system_even_when_empty():
    msgs = build_messages([("role", "You write minutes."), ("format", "  "), ("rules", "Be brief.")], TASK)
    assert msgs[0] == {"role": "system", "content": "You write minutes.\n\nBe brief."}
    assert msgs[1]["role"] == "user" and TASK.transcript in msgs[1]["content"]
    assert msgs[1]["content"] == USER_TEMPLATE.format(transcript=TASK.transcript)
    empty = build_messages([], TASK)
    assert empty[0] == {"role": "system", "content": ""}
    braces = TASK.__class__(task_id="b", transcript="A: {x} and {}")
    assert "{x} and {}" in build_messages([], braces)[1]["content"]
