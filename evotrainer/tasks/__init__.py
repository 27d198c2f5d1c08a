"""Task families: the records and protocol (``base``) and a name -> family registry."""

from __future__ import annotations

from typing import Any

from evotrainer.errors import ConfigError
from evotrainer.tasks.base import TaskFamily

__all__ = ["TASK_FAMILIES", "get_task_family"]

TASK_FAMILIES: tuple[str, ...] = ("meeting_minutes",)


def get_task_family(name: str, **kwargs: Any) -> TaskFamily:
    """Build the task family called ``name`` with its constructor ``kwargs``.

    Raises:
        ConfigError: unknown name (names ``task.name`` and the known families) or bad kwargs.
    """
    if name == "meeting_minutes":
        from evotrainer.tasks.meeting_minutes import MeetingMinutes

        try:
            return MeetingMinutes(**kwargs)
        except TypeError as exc:
            raise ConfigError(f"task: bad arguments for {name!r} ({exc})") from None
    raise ConfigError(f"task.name: unknown task family {name!r}; expected one of {list(TASK_FAMILIES)}")
