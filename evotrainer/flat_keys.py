"""Config keys as flat dotted paths, and the keys that moved.

- :func:`flatten`: nested config mappings as flat dotted keys (``{"outer": {"race": {"level": 0.95}}}`` ->
  ``outer.race.level``), shared by the resume check (which compares two configs key by key) and experiment
  tracking (which logs each key as an MLflow param).
- The deprecation path of moved keys. The default family's own keys moved from the generic ``task.*``
  schema to its options: ``task.long.*``, ``task.action_band`` and ``task.prompt_layout`` are now
``task.options.long.*``, ``task.options.action_band`` and ``task.options.prompt_layout``
(:data:`MOVED_KEYS`). Old spellings keep working for a while:

- a command-line override (``task.long.mode=cut``, ``+task.action_band=[1,3]``, a sweep
  ``task.long.mode=cut,window``) is rewritten before Hydra reads it (:func:`migrate_overrides`, called by
  ``python -m evotrainer``), with one warning line naming the new key;
- a stored run config (an archive written before the move) is read with its keys moved
  (:func:`migrate_config`), so ``resume`` compares like with like.

Imports nothing from EvoTrainer.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["MOVED_KEYS", "flatten", "migrate_config", "migrate_overrides", "moved_key"]


def flatten(tree: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys -> leaf values, in the mappings' own order.

    Args:
        tree: a nested mapping (a config as a dict); keys are joined with ``.`` as ``str(key)``.
        prefix: put before every key (``"outer."`` flattens a sub-tree under its place).

    Returns:
        One entry per leaf: a value that is not a mapping (lists and None included, unchanged), or an empty
        mapping below the top (kept as a leaf, so a key holding ``{}`` is not lost). An empty ``tree``
        gives ``{}``.
    """
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


log = logging.getLogger("evotrainer")

MOVED_KEYS: dict[str, str] = {
    "task.long": "task.options.long",
    "task.action_band": "task.options.action_band",
    "task.prompt_layout": "task.options.prompt_layout",
}
"""Old dotted key (or key prefix) -> its new place."""

_OVERRIDE = re.compile(r"^(?P<op>\+\+|\+|~)?(?P<key>[A-Za-z_][\w.]*)(?P<rest>(=|@).*)?$", re.S)


def moved_key(key: str) -> str | None:
    """The new spelling of a dotted ``key`` that moved (``task.long.mode`` -> ``task.options.long.mode``), or
    None when it did not."""
    for old, new in MOVED_KEYS.items():
        if key == old or key.startswith(old + "."):
            return new + key[len(old):]
    return None


def migrate_overrides(overrides: Sequence[str], warn: Callable[[str], None] | None = None) -> list[str]:
    """Hydra overrides with moved keys respelt, one warning per moved key.

    Args:
        overrides: command-line arguments (``key=value``, ``+key=value``, ``~key``; anything else, such as
            ``-m`` or ``--help``, is passed through unchanged).
        warn: called with each warning line; default: a ``WARNING`` on the ``evotrainer`` logger.

    Returns:
        The arguments in order, a moved key replaced by its new spelling (the value untouched).
    """
    say = warn if warn is not None else log.warning
    out: list[str] = []
    for arg in overrides:
        m = _OVERRIDE.match(arg)
        new = moved_key(m.group("key")) if m else None
        if m is None or new is None:
            out.append(arg)
            continue
        say(f"{m.group('key')} is deprecated: use {new} (the family's options)")
        out.append(f"{m.group('op') or ''}{new}{m.group('rest') or ''}")
    return out


def migrate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a stored run config (plain nested mappings) with moved keys in their new place.

    A key already present at its new place wins over the old one. Nothing else changes.
    """
    out = copy.deepcopy(dict(config))
    for old, new in MOVED_KEYS.items():
        *old_path, old_leaf = old.split(".")
        parent = _node(out, old_path)
        if not isinstance(parent, dict) or old_leaf not in parent:
            continue
        value = parent.pop(old_leaf)
        *new_path, new_leaf = new.split(".")
        target = out
        for part in new_path:
            nxt = target.get(part)
            if not isinstance(nxt, dict):
                nxt = target[part] = {}
            target = nxt
        target.setdefault(new_leaf, value)
    return out


def _node(tree: dict[str, Any], path: Sequence[str]) -> Any:
    for part in path:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(part)  # type: ignore[assignment]
    return tree
