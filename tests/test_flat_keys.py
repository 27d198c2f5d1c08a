"""evotrainer.flat_keys: dotted keys, leaves unchanged, empty mappings kept below the top."""

from __future__ import annotations

from evotrainer.flat_keys import flatten


def test_flatten() -> None:
    tree = {"a": {"b": 1, "c": [1, 2], "d": None, "e": {}, "f": {"g": {}}}, "h": "x", 3: 1.5}
    assert flatten(tree) == {"a.b": 1, "a.c": [1, 2], "a.d": None, "a.e": {}, "a.f.g": {}, "h": "x", "3": 1.5}
    assert list(flatten(tree)) == ["a.b", "a.c", "a.d", "a.e", "a.f.g", "h", "3"]
    assert flatten({}) == {} and flatten({"x": 1}, "p.") == {"p.x": 1}
