"""The yardstick's own reward-hacking check: probes that S_val must order before a run trusts it.

A meta-objective is tested like a reward (DESIGN.md, turn 3): if a text that says nothing about the
item scores like a real answer, the outer loop optimises the template, not the task (the seed
article's sections 4.1 and 4.3). A family with the probes capability
(:class:`~evotrainer.tasks.base.Probes`) supplies probe texts per item; this module scores them with the
family's own ``meta_score`` and checks, on the means over items:

1. ``reference`` ≫ everything else: at least :attr:`YardstickRules.reference_margin` times every other
   probe and the policy;
2. ``skeleton`` and ``wrong_item`` ≈ 0: at most :attr:`YardstickRules.near_zero` of the reference;
3. with a real policy's outputs (the run's best seed on the selection items, known after generation 0):
   policy > ``baseline``.

Two *targets* are reported beside the rules, not enforced (set for the default model; a weak
policy can miss them while the order holds): ``skeleton`` ≤ :attr:`YardstickRules.skeleton_share`
and ``wrong_item`` ≤ :attr:`YardstickRules.wrong_share` of the policy's S_val (10 % and 25 %).

A failed rule does not stop a run: it is archived and printed at start, so whoever reads the results
knows the yardstick was not trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evotrainer.tasks.base import EmbeddingMeta, Probes

__all__ = ["PROBES", "YardstickReport", "YardstickRules", "check", "probe_values"]

PROBES = ("reference", "baseline", "skeleton", "wrong_item")
"""Probe names by role, in the order they are shown (:class:`~evotrainer.tasks.base.Probes`): the item's own
answer, a lazy answer a policy must beat, the output format with no content, another item's answer of the same
source. A family may supply a subset."""


@dataclass(frozen=True)
class YardstickRules:
    """Thresholds of the probe order (module docstring); shares are of mean S_val, in (0, 1]."""

    reference_margin: float = 2.0
    near_zero: float = 0.05
    skeleton_share: float = 0.10
    wrong_share: float = 0.25


@dataclass(frozen=True)
class YardstickReport:
    """Probe means and the rules they break.

    Attributes:
        means: probe name -> mean S_val over the items that have that probe, in [0, 1].
        items: items scored.
        policy: the real policy's mean S_val on the same items (None before one is known).
        policy_id: whose outputs ``policy`` scores.
        failures: one line per broken rule; empty when the yardstick passes.
        misses: one line per missed target (reported, not a failure).
    """

    means: Mapping[str, float]
    items: int
    policy: float | None = None
    policy_id: str | None = None
    failures: tuple[str, ...] = ()
    misses: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        """The probe table as text lines (a header, one line per probe, the verdict)."""
        base = self.policy if self.policy else None
        rows = [f"S_val probes on {self.items} meta-validation items (mean; share of the policy's S_val):"]
        shown = [*((n, self.means[n]) for n in PROBES if n in self.means)]
        if self.policy is not None:
            shown.insert(1, (f"policy {self.policy_id}", self.policy))
        for name, value in shown:
            share = f"  {value / base:6.1%}" if base and name != "reference" else (
                f"  {value / base:5.1f}x" if base else "")
            rows.append(f"  {name:<32} {value:.4f}{share}")
        rows.append("  yardstick ok" if self.ok else "  yardstick FAILED: " + "; ".join(self.failures))
        if self.misses:
            rows.append("  targets missed: " + "; ".join(self.misses))
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {"means": dict(self.means), "items": self.items, "policy": self.policy,
                "policy_id": self.policy_id, "failures": list(self.failures), "misses": list(self.misses)}


def probe_values(family: Any, items: Sequence[Any],
                 score: Callable[[str, Any], float] | None = None) -> dict[str, list[float | None]]:
    """Every probe's S_val on every item.

    Args:
        family: a task family; one without the :class:`~evotrainer.tasks.base.Probes` capability has none.
        items: meta-validation items.
        score: ``(output, item) -> value`` in [0, 1]; None uses ``family.meta_score(output, item).value``.

    Returns:
        Probe name -> one value per item (None where the family gave no text for that item); empty when
        the family has no probes.
    """
    if not isinstance(family, Probes) or not items:
        return {}
    score = score or (lambda output, item: family.meta_score(output, item).value)
    texts = family.probe_outputs(items)
    if isinstance(family, EmbeddingMeta):
        family.prepare_meta([t for ts in texts for t in ts.values()], items)
    names = [n for n in PROBES if any(n in t for t in texts)]
    return {n: [score(t[n], item) if n in t else None for t, item in zip(texts, items, strict=True)]
            for n in names}


def _mean(values: Sequence[float | None], keep: Sequence[bool] | None = None) -> float | None:
    got = [v for i, v in enumerate(values) if v is not None and (keep is None or keep[i])]
    return sum(got) / len(got) if got else None


def check(values: Mapping[str, Sequence[float | None]], policy: Sequence[float] | None = None,
          policy_id: str | None = None, rules: YardstickRules = YardstickRules(),
          keep: Sequence[bool] | None = None) -> YardstickReport:
    """The probe report of :func:`probe_values` output (module docstring).

    Args:
        values: probe name -> per-item values.
        policy: the real policy's per-item S_val on the items ``keep`` selects, in the same order;
            None checks the model-free rules only.
        policy_id: the policy's id, for the table.
        rules: thresholds.
        keep: which items count (e.g. the selection items); None: all.

    Returns:
        The means, the broken rules and the missed targets.
    """
    means = {n: m for n, v in values.items() if (m := _mean(v, keep)) is not None}
    n_items = sum(keep) if keep is not None else max((len(v) for v in values.values()), default=0)
    pol = _mean(list(policy)) if policy is not None else None
    fail: list[str] = []
    miss: list[str] = []
    ref = means.get("reference")
    if ref is not None:
        others = {n: m for n, m in means.items() if n != "reference"}
        if pol is not None:
            others[f"policy {policy_id}"] = pol
        for name, m in others.items():
            if ref < rules.reference_margin * m:
                fail.append(f"reference {ref:.4f} is not >= {rules.reference_margin:g}x {name} {m:.4f}")
        for name in ("skeleton", "wrong_item"):
            if name in means and means[name] > rules.near_zero * ref:
                fail.append(f"{name} {means[name]:.4f} > {rules.near_zero:.0%} of the reference's {ref:.4f}")
    if pol is not None:
        if "baseline" in means and pol <= means["baseline"]:
            fail.append(f"policy {pol:.4f} is not above baseline {means['baseline']:.4f}")
        for name, share in (("skeleton", rules.skeleton_share), ("wrong_item", rules.wrong_share)):
            if name in means and means[name] > share * pol:
                miss.append(f"{name} {means[name]:.4f} > {share:.0%} of the policy's {pol:.4f}")
    return YardstickReport(means, n_items, pol, policy_id, tuple(fail), tuple(miss))
