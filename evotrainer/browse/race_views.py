"""Racing views: how a run's candidates raced the incumbent and how promotions were decided.

Read from the ``race`` and ``promotion`` events (``evotrainer/harness/racing.py``,
``evotrainer/evolve/coevolution.py``); JSON-ready dicts for the archive CLI and the HTML report (re-exported by
:mod:`evotrainer.browse.views`). Differences are policy − incumbent in S_val units, higher is better.
"""

from __future__ import annotations

from typing import Any

from evotrainer.archive.store import ArchiveStore
from evotrainer.events.kinds import PromotionEvent, RaceEvent

__all__ = ["promotions", "race_entries", "race_summary"]


def _races(store: ArchiveStore, run_id: str) -> list[RaceEvent]:
    return [ev for ev in (e.event for e in store.events(run_id, kind="race")) if isinstance(ev, RaceEvent)]


def _promotions(store: ArchiveStore, run_id: str) -> list[PromotionEvent]:
    return [ev for ev in (e.event for e in store.events(run_id, kind="promotion")) if isinstance(ev, PromotionEvent)]


def race_summary(store: ArchiveStore, run_id: str) -> dict[str, Any]:
    """How the run's candidates raced the incumbent and how promotions were decided.

    Returns:
        ``races`` (race events), ``evaluations`` (policy-item evaluations spent racing), ``entries`` (policies
        raced), ``by_status`` (status -> count: worse, futile, cut, better, undecided), ``promotions``
        (whole-set decisions), ``promoted`` (decisions whose paired lower bound was above 0).
    """
    races = _races(store, run_id)
    decisions = _promotions(store, run_id)
    by_status: dict[str, int] = {}
    for race in races:
        for entry in race.entries:
            by_status[str(entry.get("status"))] = by_status.get(str(entry.get("status")), 0) + 1
    return {"races": len(races), "evaluations": sum(r.evaluations or 0 for r in races),
            "entries": sum(by_status.values()), "by_status": by_status, "promotions": len(decisions),
            "promoted": sum(1 for d in decisions if d.promoted)}


def race_entries(store: ArchiveStore, run_id: str) -> list[dict[str, Any]]:
    """Every policy that raced the incumbent, one row each, in archive order (for tables and plots).

    Returns:
        Rows with ``outer_generation``, ``harness_id``, ``reference`` (the incumbent raced), ``policy_id``,
        ``items`` (selection items it was scored on before its race ended), ``status`` (``worse`` / ``futile``
        / ``cut`` / ``better`` / ``undecided``), ``mean`` (paired mean difference policy − incumbent, S_val
        units, higher is better), ``low`` / ``high`` (the race's interval at its last stage; None when the
        race kept none), ``wins`` / ``losses`` / ``ties`` over those items. Missing keys read as None.
    """
    rows: list[dict[str, Any]] = []
    for race in _races(store, run_id):
        for entry in race.entries:
            rows.append({"outer_generation": race.outer_generation, "harness_id": race.harness_id,
                         "reference": race.reference, "policy_id": entry.get("policy_id"),
                         **{k: entry.get(k) for k in ("items", "status", "mean", "low", "high", "wins", "losses",
                                                      "ties")}})
    return rows


def promotions(store: ArchiveStore, run_id: str) -> list[dict[str, Any]]:
    """The run's whole-selection-set promotion decisions (``promotion`` events), in archive order.

    Returns:
        Rows with ``outer_generation``, ``harness_id``, ``policy_id``, ``incumbent_policy_id``, ``promoted``
        (bool), ``s_val`` / ``incumbent_s_val`` and the paired ``mean`` / ``low`` / ``high`` / ``n`` /
        ``wins`` / ``losses`` / ``ties`` (None where the event lacks them).
    """
    rows = []
    for d in _promotions(store, run_id):
        paired = d.paired or {}
        rows.append({"outer_generation": d.outer_generation, "harness_id": d.harness_id, "policy_id": d.policy_id,
                     "incumbent_policy_id": d.incumbent_policy_id, "s_val": d.s_val,
                     "incumbent_s_val": d.incumbent_s_val, "promoted": bool(d.promoted),
                     **{k: paired.get(k) for k in ("mean", "low", "high", "n", "wins", "losses", "ties")}})
    return rows
