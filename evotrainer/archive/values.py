"""Column values of archive rows: the timestamp, JSON text and checked finite numbers (shared by the stores)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

from evotrainer.errors import ArchiveError

__all__ = ["finite", "now", "to_json"]


def now() -> str:
    """ISO 8601 UTC timestamp with milliseconds: the only non-deterministic content of the archive."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def to_json(obj: Any, what: str) -> str:
    """``obj`` as JSON text; ArchiveError naming ``what`` when it is not serialisable with finite numbers."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, sort_keys=False)
    except (TypeError, ValueError) as exc:
        raise ArchiveError(f"{what}: not JSON-serialisable with finite numbers ({exc})") from None


def finite(value: Any, what: str, optional: bool = False) -> float | None:
    """``value`` as a finite float (None allowed when ``optional``); ArchiveError naming ``what`` otherwise."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ArchiveError(f"{what}: expected a finite number, got {value!r}")
    return float(value)
