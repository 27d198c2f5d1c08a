"""Task families: the records and protocol (``base``) and a registry that finds a family by name or class path.

A family is a class implementing :class:`~evotrainer.tasks.base.TaskFamily`. ``task.name`` is either a
registered name (:data:`TASK_FAMILIES`) or the dotted path of such a class (``my_pkg.my_family.MyFamily``,
found with Hydra's ``get_class`` as ``_target_`` is); a user adds a family with one module and a config
(``docs/adding_a_task_family.md``). The class is built by its ``from_config(task_cfg)`` classmethod when it
has one (:class:`FromConfig`), else as ``cls(**task.options)``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from evotrainer.errors import ConfigError
from evotrainer.tasks.base import TaskFamily

__all__ = ["TASK_FAMILIES", "FromConfig", "family_class", "get_task_family"]

TASK_FAMILIES: dict[str, str] = {
    "meeting_minutes": "evotrainer.tasks.meeting_minutes.MeetingMinutes",
    "tool_agent": "evotrainer.tasks.tool_agent.ToolAgent",
}
"""Registered family name -> class path."""


def family_class(name: str) -> type:
    """The family class of ``name``: a key of :data:`TASK_FAMILIES` or a dotted class path.

    Raises:
        ConfigError: an unknown name or a path that does not name a class (names ``task.name``).
    """
    path = TASK_FAMILIES.get(name, name)
    if "." not in path:
        raise ConfigError(f"task.name: unknown task family {name!r}; expected one of {sorted(TASK_FAMILIES)} "
                          "or a class path such as my_pkg.my_family.MyFamily")
    from hydra.utils import get_class

    try:
        cls = get_class(path)
    except Exception as exc:  # ImportError, AttributeError, ValueError from Hydra's locate
        raise ConfigError(f"task.name: cannot import the task family class {path!r} "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    missing = [m for m in _REQUIRED_MEMBERS if m not in dir(cls)]
    if missing:
        raise ConfigError(f"task.name: {path!r} is not a task family: it lacks {missing} "
                          "(see the TaskFamily protocol in evotrainer/tasks/base.py)")
    return cls


_REQUIRED_MEMBERS = ("name", "spec", "generate", "build_messages", "roll_out", "reward", "meta_score",
                     "load_validation")
"""The core members every family class has (:class:`~evotrainer.tasks.base.TaskFamily`)."""


@runtime_checkable
class FromConfig(Protocol):
    """A family class that builds itself from the ``task.*`` config (checking ``task.options``)."""

    def from_config(self, task_cfg: Any) -> TaskFamily:
        ...


def get_task_family(name: str, task_cfg: Any = None, **kwargs: Any) -> TaskFamily:
    """Build the task family ``name``.

    Args:
        name: registered name or class path (see :func:`family_class`).
        task_cfg: the ``task.*`` config; with it the class's ``from_config(task_cfg)`` builds the family
            (or ``cls(**task_cfg.options)`` when it has none).
        kwargs: constructor arguments, used when ``task_cfg`` is None.

    Raises:
        ConfigError: unknown name, or bad options (names the key).
    """
    cls = family_class(name)
    try:
        if task_cfg is not None:
            return cls.from_config(task_cfg) if isinstance(cls, FromConfig) else cls(**dict(task_cfg.options))
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"task.options: bad arguments for task family {name!r} ({exc})") from None
