"""When the outer loop stops: budget limits, a plateau of the incumbent's S_val, the generation count.

Pure functions returning a :class:`StopReason` (or None). The reason's ``key`` names the config key
(or criterion) that stopped the run, so the run summary can state it: ``outer.budget.seconds``,
``outer.budget.tokens``, ``outer.budget.prompt_tokens``, ``outer.budget.evaluations``, ``outer.budget.rollouts``, ``outer.budget.usd``, ``outer.budget.train_tokens``, ``outer.patience``,
``outer.generations``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BudgetLimits", "StopReason", "Usage", "budget_stop", "plateau_stop"]


@dataclass(frozen=True)
class BudgetLimits:
    """Hard limits (``outer.budget.*``); None = unlimited.

    Attributes:
        seconds: wall-clock seconds since the run started.
        tokens: generated tokens (policy rollouts and mutator calls), not prompt tokens.
        prompt_tokens: prompt tokens read by the policy model and the mutator (every window and merge call of
            a long input counted), the cost measure when items differ 10x in length.
        evaluations: harness-candidate evaluations (one inner run + screening each).
        rollouts: policy rollouts as the archive counts them (``archive.schema.BUDGET_KINDS``): one per
            task or selection item of every uncached training and meta-validation evaluation.
        usd: cost of the model calls in US dollars,, from the configured prices.
        train_tokens: LoRA training tokens (input tokens the trainer read, padding left out).
    """

    seconds: float | None = None
    tokens: int | None = None
    evaluations: int | None = None
    rollouts: int | None = None
    usd: float | None = None
    prompt_tokens: int | None = None
    train_tokens: int | None = None


@dataclass(frozen=True)
class Usage:
    """What the run has spent so far, in the units of :class:`BudgetLimits`."""

    seconds: float = 0.0
    tokens: int = 0
    evaluations: int = 0
    rollouts: int = 0
    usd: float = 0.0
    prompt_tokens: int = 0
    train_tokens: int = 0


@dataclass(frozen=True)
class StopReason:
    """Why the run stopped: ``key`` (a config key or criterion name) and a human ``detail``."""

    key: str
    detail: str


def budget_stop(usage: Usage, limits: BudgetLimits, *, seconds_ahead: float = 0.0,
                ahead_basis: str = "") -> StopReason | None:
    """The first limit reached (usage >= limit), checked in the order seconds, tokens, prompt tokens,
    evaluations, rollouts, usd, training tokens.

    Args:
        usage: what the run has spent.
        limits: the hard limits.
        seconds_ahead: seconds the next step is expected to take, >= 0; the seconds limit counts as reached
            once ``usage.seconds + seconds_ahead > limit``, so a step that would end past the limit does not
            start. 0 = check the seconds spent only.
        ahead_basis: how ``seconds_ahead`` was measured, for the reason's detail.
    """
    if limits.seconds is not None and seconds_ahead > 0 and usage.seconds < limits.seconds < (
            usage.seconds + seconds_ahead):
        return StopReason("outer.budget.seconds",
                          f"{usage.seconds:g} s used + {seconds_ahead:g} s expected for the next step"
                          f"{f' ({ahead_basis})' if ahead_basis else ''} > limit {limits.seconds:g}")
    for name, unit in (("seconds", "s"), ("tokens", "tokens"), ("prompt_tokens", "prompt tokens"),
                       ("evaluations", "evaluations"),
                       ("rollouts", "rollouts"), ("usd", "USD"), ("train_tokens", "training tokens")):
        limit = getattr(limits, name)
        used = getattr(usage, name)
        if limit is not None and used >= limit:
            return StopReason(f"outer.budget.{name}", f"{used:g} {unit} used, limit {limit:g}")
    return None


def plateau_stop(curve: Sequence[float], min_gain: float, patience: int) -> StopReason | None:
    """Early stop when the incumbent's S_val gained less than ``min_gain`` over ``patience`` generations.

    Args:
        curve: the incumbent's whole-selection-set S_val after each outer generation, generation 0
            first (non-decreasing, higher is better).
        min_gain: S_val units, >= 0; a gain counts only when ``> 0`` and ``>= min_gain``.
        patience: outer generations, >= 1.

    Returns:
        A reason keyed ``outer.patience`` once ``len(curve) > patience`` and
        ``curve[-1] - curve[-1 - patience]`` is not a counted gain; else None.
    """
    if len(curve) <= patience:
        return None
    gain = curve[-1] - curve[-1 - patience]
    if gain > 0 and gain >= min_gain:
        return None
    return StopReason("outer.patience", f"incumbent S_val gained {gain:+.4f} (< outer.min_gain={min_gain:g}) "
                                        f"over the last {patience} outer generation(s)")
