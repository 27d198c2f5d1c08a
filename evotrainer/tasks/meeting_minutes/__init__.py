"""Meeting minutes: transcripts in; minutes with topics, decisions and owned action items out."""

from evotrainer.tasks.meeting_minutes.data import load_tasks
from evotrainer.tasks.meeting_minutes.family import MeetingMinutes
from evotrainer.tasks.meeting_minutes.generator import (
    DEFAULT_DIFFICULTY,
    DIFFICULTY_BOUNDS,
    generate,
    resolve_difficulty,
)
from evotrainer.tasks.meeting_minutes.guard import degenerate_reason
from evotrainer.tasks.meeting_minutes.metric import SCORER_VERSION, meta_score, s_val
from evotrainer.tasks.meeting_minutes.minutes_format import format_minutes, parse_minutes
from evotrainer.tasks.meeting_minutes.prompts import USER_TEMPLATE, build_messages
from evotrainer.tasks.meeting_minutes.rewards import (
    DEFAULT_ACTION_BAND,
    DEFAULT_REWARD_WEIGHTS,
    REWARD_COMPONENTS,
    reward,
)

__all__ = ["DEFAULT_ACTION_BAND", "DEFAULT_DIFFICULTY", "DEFAULT_REWARD_WEIGHTS", "DIFFICULTY_BOUNDS",
           "MeetingMinutes", "REWARD_COMPONENTS", "SCORER_VERSION", "USER_TEMPLATE", "build_messages",
           "degenerate_reason", "format_minutes", "generate", "load_tasks", "meta_score", "parse_minutes",
           "resolve_difficulty", "reward", "s_val"]
