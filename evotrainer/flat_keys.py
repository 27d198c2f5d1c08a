"""Nested config mappings as flat dotted keys (``{"outer": {"race": {"level": 0.95}}}`` -> ``outer.race.level``).

Shared by the resume check (which compares two configs key by key) and experiment tracking (which logs
each key as an MLflow param). Imports nothing from EvoTrainer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["flatten"]


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
