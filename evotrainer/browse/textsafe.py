"""What every view prints: untrusted (model-written) text shown safely in a terminal, in JSON output and in
one-line cells, and numbers in one format (:func:`fmt`)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["clip", "dumps", "fmt", "terminal_safe"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_C1_DEL = re.compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: Any) -> str:
    """``text`` with control characters (ESC, CR, C1, bidi overrides) shown as ``\\xNN`` / ``\\uNNNN``.

    Keeps line breaks and tabs. Model output can hold terminal escape sequences; printed raw they
    could rewrite the screen.
    """
    s = str(text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)


def fmt(x: Any, digits: int = 4) -> str:
    """One cell: a float with ``digits`` decimals, "–" for None, anything else as :func:`terminal_safe` text
    (an int as its digits)."""
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return terminal_safe(x)


def clip(text: Any, width: int = 60) -> str:
    """One line of at most ``width`` characters (whitespace collapsed, "…" when cut), terminal-safe."""
    s = " ".join(terminal_safe(text).split())
    return s if len(s) <= width else s[: max(1, width - 1)] + "…"


def dumps(obj: Any) -> str:
    """JSON text (indent 2, UTF-8 kept) with DEL, C1 and bidi-control characters escaped as ``\\uNNNN``.

    ``json.dumps`` already escapes C0 controls; the rest can only occur inside strings, where the
    escape keeps the JSON equal.
    """
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False, default=str)
    return _C1_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
