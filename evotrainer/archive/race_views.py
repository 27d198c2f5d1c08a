"""Racing views: how a run's candidates raced the incumbent and how promotions were decided.

Read from the ``race`` and ``promotion`` events (``evotrainer/harness/racing.py``,
``evotrainer/coevolution.py``); JSON-ready dicts for the archive CLI and the HTML report (re-exported by
:mod:`evotrainer.archive.views`). Differences are policy − incumbent in S_val units, higher is better.
"""

from __future__ import annotations

from typing import Any

from evotrainer.archive.store import ArchiveStore

__all__ = ["promotions", "race_entries", "race_summary"]


def race_summary(store: ArchiveStore, run_id: str) -> dict[str, Any]:
    """How the run's candidates raced the incumbent and how promotions were decided.

    Returns:
        ``races`` (race events), ``evaluations`` (policy-item evaluations spent racing), ``entries`` (policies
        raced), ``by_status`` (status -> count: worse, futile, cut, better, undecided), ``promotions``
        (whole-set decisions), ``promoted`` (decisions whose paired lower bound was above 0).
    """
    races = [e.payload for e in store.events(run_id, kind="race")]
    decisions = [e.payload for e in store.events(run_id, kind="promotion")]
    by_status: dict[str, int] = {}
    for race in races:
        for entry in race.get("entries", []):
            by_status[str(entry.get("status"))] = by_status.get(str(entry.get("status")), 0) + 1
    return {"races": len(races), "evaluations": sum(int(r.get("evaluations", 0)) for r in races),
            "entries": sum(by_status.values()), "by_status": by_status, "promotions": len(decisions),
            "promoted": sum(1 for d in decisions if d.get("promoted"))}


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
    for race in (e.payload for e in store.events(run_id, kind="race")):
        for entry in race.get("entries", []):
            rows.append({"outer_generation": race.get("outer_generation"), "harness_id": race.get("harness_id"),
                         "reference": race.get("reference"), "policy_id": entry.get("policy_id"),
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
    for d in (e.payload for e in store.events(run_id, kind="promotion")):
        paired = d.get("paired") or {}
        rows.append({**{k: d.get(k) for k in ("outer_generation", "harness_id", "policy_id", "incumbent_policy_id",
                                               "s_val", "incumbent_s_val")},
                     "promoted": bool(d.get("promoted")),
                     **{k: paired.get(k) for k in ("mean", "low", "high", "n", "wins", "losses", "ties")}})
    return rows
