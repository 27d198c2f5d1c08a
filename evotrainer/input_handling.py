"""How an item's input reached the model: whole, windowed into N parts, or cut (nothing silent).

A compact *code* travels with each generation (``Generation.handling``), each evaluation record, the results
files and the archive: ``"whole"``, ``"windowed:N"`` (N windows, then a merge call), ``"cut:S"`` (the backend
cut the middle of the prompt; S is the share of the input's words the model saw, in [0, 1], 3 decimals)
or ``"windowed:N:S"`` (windowed, but some window or the merge prompt was still cut; S as before, the least
share of any of its prompts); a bare ``"cut"`` is a cut of unknown share (a backend that does not count the
words it dropped). An empty code means the family did not say (read as ``whole`` unless the
backend reported a cut). This module is neutral: it imports nothing from the project.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["InputHandling", "handling_summary"]


@dataclass(frozen=True)
class InputHandling:
    """How one item's input was handled.

    Attributes:
        how: ``"whole"``, ``"windowed"`` or ``"cut"``.
        windows: windows the input was read in (1 unless windowed), >= 1.
        share_seen: share of the input's words the model saw, in [0, 1] (1.0 unless words were cut);
            None: words were cut but the backend did not say how many.
    """

    how: str = "whole"
    windows: int = 1
    share_seen: float | None = 1.0

    @property
    def lost_words(self) -> bool:
        """True when the model did not see every word of the input."""
        return self.share_seen is None or self.share_seen < 1.0

    def code(self) -> str:
        """The compact code (module docstring)."""
        share = "" if self.share_seen is None else f":{min(max(self.share_seen, 0.0), 1.0):.3f}"
        if self.how == "windowed":
            return f"windowed:{self.windows}" + (share if self.lost_words else "")
        if self.how == "cut":
            return f"cut{share}"
        return "whole"

    def label(self) -> str:
        """A human line: ``whole``, ``windowed into 4``, ``cut: 23% of words seen``."""
        pct = "share of words seen unknown" if self.share_seen is None else f"{self.share_seen * 100:.0f}% of words seen"
        if self.how == "windowed":
            return f"windowed into {self.windows}" + (f" (cut: {pct})" if self.lost_words else "")
        if self.how == "cut":
            return f"cut: {pct}"
        return "whole"

    @classmethod
    def parse(cls, code: str, truncated: bool = False) -> InputHandling:
        """The handling of a code; ``""`` reads as whole, or as a cut of unknown share when ``truncated``
        (the backend said it cut the prompt).

        Raises:
            ValueError: a malformed code (names it).
        """
        if not code:
            return cls("cut", 1, None) if truncated else cls()
        parts = code.split(":")
        try:
            if parts[0] == "whole" and len(parts) == 1:
                return cls()
            if parts[0] == "cut" and len(parts) <= 2:
                return cls("cut", 1, float(parts[1]) if len(parts) == 2 else None)
            if parts[0] == "windowed" and len(parts) in (2, 3):
                return cls("windowed", int(parts[1]), float(parts[2]) if len(parts) == 3 else 1.0)
        except ValueError:
            pass
        raise ValueError(f"input handling code {code!r}: expected whole, windowed:N[:share] or cut:share")


def handling_summary(codes: Iterable[str]) -> str:
    """Counts of each kind in a set of codes, e.g. ``"3 whole, 2 windowed, 1 cut"`` (``""`` for none)."""
    counts = Counter(InputHandling.parse(c).how for c in codes)
    return ", ".join(f"{counts[k]} {k}" for k in ("whole", "windowed", "cut") if counts[k])
