"""The base of the typed archive events and their payload codec (:mod:`evotrainer.events.kinds` declares the kinds).

An :class:`Event` subclass is a frozen, slotted dataclass whose fields are the payload's keys in order;
``to_payload`` writes them as JSON-shaped Python and :func:`decode` reads them back, checking each value
against the field's annotation. The annotations this understands: ``str``, ``int``, ``float``, ``bool``,
``None``, unions of these, ``tuple[X, ...]`` and fixed ``tuple[X, Y]``, ``Mapping[str, X]`` and ``Any``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any, ClassVar, Protocol, TypeVar, Union

from evotrainer.errors import DataError

__all__ = ["OMIT_NONE", "Event", "Subscriber", "decode", "payload_key"]


def payload_key(name: str) -> dict[str, Any]:
    """Field metadata: the payload key is ``name`` (a field cannot be called ``kind``)."""
    return {"key": name}


OMIT_NONE = {"omit_none": True}
"""Field metadata: the key is left out of the payload when the value is None (a variant of one kind)."""


def _plain(value: Any) -> Any:
    """``value`` as the JSON-shaped Python the payload holds: tuples -> lists, mappings -> dicts (recursive)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of the event records: ``kind`` names the archive event kind, :meth:`to_payload` is its payload."""

    kind: ClassVar[str] = ""
    merged: ClassVar[str | None] = None
    """Name of the mapping field merged into the payload after the typed keys (None: the keys are fixed)."""

    def to_payload(self) -> dict[str, Any]:
        """The JSON-ready payload the archive stores: keys in field order, the merged mapping last."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == self.merged:
                out.update(_plain(value))
            elif not (value is None and f.metadata.get("omit_none")):
                out[f.metadata.get("key", f.name)] = _plain(value)
        return out


class Subscriber(Protocol):
    """Something that sees each event after the archive stored it (the tracker, a printer)."""

    def __call__(self, event: Event) -> None:
        """Called once per event, in emission order; must not raise."""
        ...


E = TypeVar("E", bound=Event)

_SPECS: dict[type, tuple[dict[str, tuple[Field, Any]], str | None]] = {}


def _spec(cls: type[Event]) -> tuple[dict[str, tuple[Field, Any]], str | None]:
    """Payload key -> (field, resolved type hint) of ``cls``, and its merged field's name (cached)."""
    if cls not in _SPECS:
        hints = typing.get_type_hints(cls)
        by_key = {f.metadata.get("key", f.name): (f, hints[f.name]) for f in fields(cls) if f.name != cls.merged}
        _SPECS[cls] = (by_key, cls.merged)
    return _SPECS[cls]


def _is(value: Any, hint: Any) -> tuple[bool, Any]:
    """``(matches, value converted)``: JSON lists become tuples where ``hint`` is a tuple; numbers keep their
    type (an int where a float is declared stays an int, so the payload is written back unchanged)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True, value
    if origin in (Union, types.UnionType):
        for arg in args:
            ok, out = _is(value, arg)
            if ok:
                return True, out
        return False, value
    if hint is type(None):
        return value is None, value
    if hint is bool:
        return isinstance(value, bool), value
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool), value
    if hint is str:
        return isinstance(value, str), value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return False, value
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) != len(value):
            return False, value
        out = []
        for item, arg in zip(value, items, strict=True):
            ok, converted = _is(item, arg)
            if not ok:
                return False, value
            out.append(converted)
        return True, tuple(out)
    if origin is Mapping:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            return False, value
        return all(_is(v, args[1])[0] for v in value.values()), dict(value)
    raise TypeError(f"events: unsupported field type {hint!r}")  # a class declared here uses a new type


def decode(cls: type[E], kind: str, payload: Mapping[str, Any]) -> E:
    """``cls`` built from an archived payload of ``kind`` (:func:`evotrainer.events.kinds.from_payload` picks ``cls``).

    Raises:
        DataError: an unknown key (for a class without a merged mapping), a value of the wrong type, or a
            missing required key (the message names the kind and the key).
    """
    by_key, merged = _spec(cls)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in payload.items():
        if key not in by_key:
            if merged is None:
                raise DataError(f"event {kind!r}: unknown key {key!r} (known: {', '.join(by_key)})")
            extra[key] = value
            continue
        f, hint = by_key[key]
        ok, converted = _is(value, hint)
        if not ok:
            raise DataError(f"event {kind!r}: key {key!r} holds {value!r:.80}, expected {_hint_text(hint)}")
        values[f.name] = converted
    for key, (f, _) in by_key.items():
        if f.name not in values and f.default is MISSING and f.default_factory is MISSING:
            raise DataError(f"event {kind!r}: missing key {key!r}")
    if merged is not None:
        values[merged] = extra
    return cls(**values)


def _hint_text(hint: Any) -> str:
    if typing.get_origin(hint) is None and hasattr(hint, "__name__"):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")
