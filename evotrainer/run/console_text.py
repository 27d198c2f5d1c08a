"""What the console prints of a number and of a harness, in every mode that runs the outer loop."""

from __future__ import annotations

from rich.markup import escape

from evotrainer.harness import Harness

__all__ = ["fmt", "fmt_harness"]


def fmt(x: float | None) -> str:
    """``x`` with 4 decimals, or "n/a"."""
    return "n/a" if x is None else f"{x:.4f}"


def fmt_harness(h: Harness) -> str:
    """``[knob=value ... | w: component=weight ...]``, then ``| strategy: key=value ...`` when the harness has
    strategy knobs; markup-escaped."""
    knobs = " ".join(f"{k}={v:.3g}" for k, v in {**h.difficulty, **h.extras}.items())
    weights = " ".join(f"{k}={v:.2f}" for k, v in h.reward_weights.items())
    strategy = " ".join(f"{k}={v:.3g}" for k, v in h.strategy.items())
    return escape(f"[{knobs} | w: {weights}" + (f" | strategy: {strategy}]" if strategy else "]"))
