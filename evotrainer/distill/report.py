"""The pure parts of ``mode=distill``: which teacher outputs train, prompt tokens per call, the arms compared.

Arms (roles), each scored by the family's fixed meta metric on the same comparison items:

- ``plain``: the base model with the plain prompt (``task.plain_prompt`` as the whole prompt);
- ``teacher``: the teacher prompt alone (with its own adapter, if it has one);
- ``student_prompt``: the student's short prompt alone, when it is not already the plain prompt or the teacher;
- ``student``: the short prompt with the distilled adapter.

Differences are paired by item: ``a − b`` per item, its mean (a difference of S_val) with the paired percentile
bootstrap interval over items (Efron & Tibshirani 1993, ch. 16; as the run's transfer report,
:mod:`evotrainer.stats.transfer`), and the cluster bootstrap that resamples whole groups (``Task.group``: windows
of one long input move together, so their correlation does not narrow the interval; Davison & Hinkley 1997,
sec. 3.8), with wins, losses and ties counted per item.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from rich.markup import escape
from rich.table import Table

from evotrainer.backends.base import Message
from evotrainer.stats.bootstrap import (
    PairedDifference,
    bootstrap_interval,
    cluster_difference,
    item_values,
    paired_difference,
    rng_for,
    tally,
)

__all__ = ["LABELS", "PAIRS", "ROLES", "ArmComparison", "ArmScore", "KeptOutputs", "PromptTokens", "compare_arms",
           "keep_outputs", "prompt_tokens", "render_arms", "render_comparisons", "result_json", "score_arms",
           "token_savings"]

ROLES = ("plain", "teacher", "student_prompt", "student")
LABELS = {"plain": "base + plain prompt", "teacher": "teacher prompt", "student_prompt": "student prompt alone",
          "student": "student prompt + adapter"}
PAIRS = (("student", "teacher"), ("student", "plain"), ("student", "student_prompt"), ("teacher", "plain"))
"""``(a, b)`` compared as ``a − b``, in table order; a pair whose arm is absent is left out."""


@dataclass(frozen=True)
class KeptOutputs:
    """The teacher's outputs on the training items, split into what trains and what was dropped.

    Attributes:
        kept: ``(item, output)`` pairs in item order: outputs the family's guard passed.
        dropped: why each other output was left out, counted: ``failed`` (no output or no reward), ``empty``
            (blank), or the guard's reason (``RewardBreakdown.degenerate``, e.g. ``repetition``).
    """

    kept: tuple[tuple[Any, str], ...]
    dropped: Mapping[str, int] = field(default_factory=dict)


def keep_outputs(items: Sequence[Any], outputs: Sequence[str], per_item: Sequence[float | None],
                 degenerate: Sequence[str | None]) -> KeptOutputs:
    """Keep each output the guard passed; count the others by reason.

    Args:
        items: the training items, shape (n,).
        outputs: the teacher's output per item, shape (n,) ("" where its rollout failed).
        per_item: its reward per item, shape (n,); None where the rollout or the reward failed.
        degenerate: the guard's reason per item, shape (n,); None where it did not fire.

    Raises:
        ValueError: the lengths differ.
    """
    if not len(items) == len(outputs) == len(per_item) == len(degenerate):
        raise ValueError(f"keep_outputs: {len(items)} items, {len(outputs)} outputs, {len(per_item)} rewards, "
                         f"{len(degenerate)} guard results")
    kept: list[tuple[Any, str]] = []
    dropped: Counter[str] = Counter()
    for item, text, value, reason in zip(items, outputs, per_item, degenerate, strict=True):
        why = "failed" if value is None else reason or ("empty" if not text.strip() else None)
        if why is None:
            kept.append((item, text))
        else:
            dropped[why] += 1
    return KeptOutputs(tuple(kept), dict(sorted(dropped.items())))


@dataclass(frozen=True)
class PromptTokens:
    """Prompt tokens one call sends, averaged over the comparison items.

    Attributes:
        total: mean prompt tokens per call, the item's input and the chat template included.
        policy: mean tokens the policy's own text adds per call: ``total`` minus the same call built with an
            empty prompt (the family's opening chat of the item with no section text).
    """

    total: float
    policy: float


def prompt_tokens(count: Callable[[Sequence[Message]], int],
                  build: Callable[[Sequence[tuple[str, str]], Any], Sequence[Message]],
                  sections: Sequence[tuple[str, str]], items: Sequence[Any]) -> PromptTokens:
    """Tokens of the opening chat ``build(sections, item)`` (``TaskFamily.build_messages``), per call.

    An item read in several windows sends the policy's text once per window call: the figures are per call.

    Args:
        count: prompt token count of a chat (the policy model's tokenizer and chat template), >= 0.
        build: the family's chat builder.
        sections: the policy's prompt sections.
        items: the comparison items, at least one.

    Raises:
        ValueError: no item.
    """
    if not items:
        raise ValueError("prompt_tokens: no item")
    empty = tuple((name, "") for name, _ in sections)
    full = [count(build(sections, item)) for item in items]
    bare = [count(build(empty, item)) for item in items]
    return PromptTokens(float(np.mean(full)), float(np.mean(np.subtract(full, bare))))


def token_savings(teacher: PromptTokens, student: PromptTokens) -> dict[str, float | None]:
    """Tokens per call the student's prompt saves against the teacher's: absolute, and as shares of the teacher's
    policy tokens and of its whole call (None when the teacher's figure is 0)."""
    saved = teacher.policy - student.policy
    return {"saved_per_call": saved,
            "share_of_policy_tokens": saved / teacher.policy if teacher.policy > 0 else None,
            "share_of_call": saved / teacher.total if teacher.total > 0 else None}


@dataclass(frozen=True)
class ArmScore:
    """One arm on the comparison items.

    Attributes:
        role: a key of :data:`LABELS`.
        policy_id: its policy.
        values: S_val per item, shape (n,), in [0, 1] (a failed item counts 0.0).
        mean: their mean (the arm's S_val), higher is better.
        low, high: the percentile bootstrap interval of the mean over items.
        tokens: prompt tokens per call.
    """

    role: str
    policy_id: str
    values: tuple[float, ...]
    mean: float
    low: float
    high: float
    tokens: PromptTokens


@dataclass(frozen=True)
class ArmComparison:
    """``a − b`` on the same items.

    Attributes:
        a, b: roles (keys of :data:`LABELS`).
        diff: mean per-item difference (positive: ``a`` scores higher) with its paired bootstrap interval over items.
        by_group: the cluster bootstrap over groups: the mean over groups of each group's mean difference (equal to
            ``diff.mean`` when every group holds one item), its interval resampling whole groups; ``n``: groups.
        wins, losses, ties: items where ``a`` scores higher, lower, the same (:func:`~evotrainer.stats.bootstrap.tally`).
    """

    a: str
    b: str
    diff: PairedDifference
    by_group: PairedDifference
    wins: int
    losses: int
    ties: int

    @property
    def label(self) -> str:
        return f"{LABELS[self.a]} − {LABELS[self.b]}"


def score_arms(policy_ids: Mapping[str, str], values: Mapping[str, Sequence[float | None]],
               tokens: Mapping[str, PromptTokens], *, seed: int, level: float = 0.95,
               n_resamples: int = 2000) -> dict[str, ArmScore]:
    """Each arm's S_val with its item bootstrap interval (generator ``rng_for(seed, "distill", policy id)``).

    Args:
        policy_ids, values, tokens: by role; ``values`` per item, shape (n,), None or NaN counts 0.0.
    """
    out: dict[str, ArmScore] = {}
    for role in (r for r in ROLES if r in policy_ids):
        vals = item_values(values[role])
        low, high = bootstrap_interval(vals, rng=rng_for(seed, "distill", policy_ids[role]), n_resamples=n_resamples,
                                       level=level)
        out[role] = ArmScore(role, policy_ids[role], vals, float(np.mean(vals)) if vals else 0.0, low, high,
                             tokens[role])
    return out


def compare_arms(arms: Mapping[str, ArmScore], groups: Sequence[str], *, seed: int, level: float = 0.95,
                 n_resamples: int = 2000) -> list[ArmComparison]:
    """The pairs of :data:`PAIRS` whose arms are both present, compared item by item.

    Args:
        arms: by role (:func:`score_arms`), every ``values`` of shape (n,).
        groups: each item's group id, shape (n,) (an item with no group: its own id).
        seed: the run's root seed (generators ``rng_for(seed, "distill", a id, b id[, "group"])``).

    Raises:
        ValueError: an arm's values and ``groups`` differ in length.
    """
    out = []
    for a, b in PAIRS:
        if a not in arms or b not in arms:
            continue
        d = np.asarray(arms[a].values) - np.asarray(arms[b].values)  # (n,)
        if d.shape != (len(groups),):
            raise ValueError(f"compare_arms: {d.size} differences for {len(groups)} items")
        ids = (arms[a].policy_id, arms[b].policy_id)
        diff = paired_difference(arms[b].values, arms[a].values, rng=rng_for(seed, "distill", *ids),
                                 n_resamples=n_resamples, level=level)
        clustered = cluster_difference([(groups, d)], rng=rng_for(seed, "distill", *ids, "group"), level=level,
                                       n_resamples=n_resamples)
        out.append(ArmComparison(a, b, diff, clustered.diff if clustered else diff, *tally(d)))
    return out


def _signed(x: float) -> str:
    return f"{x:+.4f}"


def render_arms(arms: Mapping[str, ArmScore], *, level: float) -> Table:
    """The arms: role, policy, S_val with its interval, prompt tokens per call (whole call; the policy's text)."""
    table = Table(title=f"arms on {len(next(iter(arms.values())).values) if arms else 0} items "
                        f"(S_val, higher is better; {round(level * 100)}% bootstrap intervals over items)")
    for col in ("arm", "policy", "S_val", "interval", "prompt tokens/call", "policy tokens/call"):
        table.add_column(col, justify="left" if col in ("arm", "policy") else "right")
    for arm in arms.values():
        table.add_row(LABELS[arm.role], escape(arm.policy_id), f"{arm.mean:.4f}", f"[{arm.low:.3f}, {arm.high:.3f}]",
                      f"{arm.tokens.total:.0f}", f"{arm.tokens.policy:.0f}")
    return table


def render_comparisons(comps: Sequence[ArmComparison], *, level: float) -> Table:
    """Paired differences: mean, interval over items, interval over groups, W/L/T."""
    pct = f"{round(level * 100)}%"
    table = Table(title=f"paired differences a − b on the same items ({pct} intervals; W/L/T per item)")
    for col in ("a − b", "mean", f"{pct} over items", f"{pct} over groups", "groups", "W/L/T"):
        table.add_column(col, justify="left" if col == "a − b" else "right")
    for c in comps:
        table.add_row(c.label, _signed(c.diff.mean), f"[{_signed(c.diff.low)}, {_signed(c.diff.high)}]",
                      f"[{_signed(c.by_group.low)}, {_signed(c.by_group.high)}]", str(c.by_group.n),
                      f"{c.wins}/{c.losses}/{c.ties}")
    return table


def result_json(header: Mapping[str, Any], arms: Mapping[str, ArmScore], comps: Sequence[ArmComparison],
                item_ids: Sequence[str], groups: Sequence[str]) -> str:
    """The result file's text: ``header`` (run, teacher, training, tokens, timings, ...), each arm, each
    comparison and the per-item values (JSON, 2-space indent)."""
    doc = {
        **dict(header),
        "arms": {r: {"label": LABELS[r], "policy_id": a.policy_id, "s_val": a.mean, "low": a.low, "high": a.high,
                     "prompt_tokens_per_call": asdict(a.tokens)} for r, a in arms.items()},
        "comparisons": [{"a": c.a, "b": c.b, "label": c.label, "diff": c.diff.mean, "low": c.diff.low,
                         "high": c.diff.high, "group_mean": c.by_group.mean, "group_low": c.by_group.low, "group_high": c.by_group.high,
                         "items": c.diff.n, "groups": c.by_group.n, "wins": c.wins, "losses": c.losses,
                         "ties": c.ties} for c in comps],
        "items": [{"id": i, "group": g, **{r: a.values[k] for r, a in arms.items()}}
                  for k, (i, g) in enumerate(zip(item_ids, groups, strict=True))],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
