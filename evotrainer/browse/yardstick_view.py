"""A run's S_val yardstick in the archive (:mod:`evotrainer.harness.yardstick`): ``archive show`` and the report.

Read from the run's last ``yardstick`` event (the probes against the best seed's outputs on the selection
items, written after generation 0), or, before that event exists, from the ``setup`` event's model-free
``probes`` (all meta-validation items, no policy yet). Runs written before the probes existed have neither;
runs written before the probes were named by role show their old names under the role names
(:data:`OLD_PROBE_NAMES`).

Probe names, policy ids and the failure lines come from the archive and are untrusted: the rich printer
here shows them as plain ``Text`` (terminal-safe), the HTML report escapes them (``browse/report.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evotrainer.archive.store import ArchiveStore
from evotrainer.browse.textsafe import terminal_safe
from evotrainer.errors import DataError
from evotrainer.events.base import decode
from evotrainer.events.kinds import YardstickEvent

__all__ = ["ArchivedYardstick", "print_yardstick", "read_yardstick"]

OLD_PROBE_NAMES = {"lead_lines": "baseline", "wrong_meeting": "wrong_item"}
"""Probe names archived before the probes were named by role -> the role names (``harness/yardstick.py``)."""

OLDER_CODE = "yardstick: not recorded (made by older code)"
"""The line for runs archived before every evolve run checked its probes."""


@dataclass(frozen=True)
class ArchivedYardstick:
    """The probe report of a run, or why there is none.

    Attributes:
        report: the probes (the setup event's model-free probes read as a yardstick event without a policy);
            None when the run has none.
        source: ``"yardstick"`` (checked against the best seed after generation 0) or ``"setup"`` (model-free,
            before generation 0 ended); None without a report.
        note: one line saying why there is no report; None with one.
    """

    report: YardstickEvent | None
    source: str | None = None
    note: str | None = None

    @property
    def ok(self) -> bool | None:
        """True when no probe rule broke, False when one did, None without a report."""
        return None if self.report is None else not self.report.failures

    def title(self) -> str:
        """What the table shows (plain text; ids not escaped)."""
        r = self.report
        if r is None:
            return self.note or OLDER_CODE
        if self.source == "yardstick":
            return (f"yardstick: S_val probes vs the best seed {r.policy_id} on {r.items} selection items "
                    "(after generation 0; higher is better)")
        return (f"yardstick: model-free S_val probes on {r.items} meta-validation items (the check against the "
                "best seed's outputs comes after generation 0)")

    def share_header(self) -> str:
        """Header of the share column of :meth:`rows`."""
        return "share of the policy's" if self.report is not None and self.report.policy else "share of the reference's"

    def rows(self) -> list[tuple[str, float, str]]:
        """``(probe, mean S_val, share)``: the reference first, then the policy (when known), then the other
        probes in archived order; the share is of the policy's mean (the reference's as ``N.Nx``) or, without
        a policy, of the reference's mean; "" where the base is 0 or missing."""
        r = self.report
        if r is None:
            return []
        means = dict(r.means or {})
        shown = [(n, means[n]) for n in ("reference",) if n in means]
        if r.policy is not None:
            shown.append((f"policy {r.policy_id}", r.policy))
        shown += [(n, m) for n, m in means.items() if n != "reference"]
        base = r.policy or means.get("reference")
        rows = []
        for name, value in shown:
            if not base:
                share = ""
            elif name == "reference" and r.policy:
                share = f"{value / base:.1f}x"
            else:
                share = f"{value / base:.1%}"
            rows.append((name, value, share))
        return rows

    def verdict(self) -> str:
        """``yardstick ok`` or ``yardstick FAILED: <broken rules>`` (the note without a report)."""
        if self.report is None:
            return self.title()
        return "yardstick ok" if self.ok else "yardstick FAILED: " + "; ".join(self.report.failures)

    def misses(self) -> str | None:
        """The missed targets in one line (reported, not a failure), None when none."""
        return "targets missed: " + "; ".join(self.report.misses) if self.report and self.report.misses else None

    def payload(self) -> dict[str, Any]:
        """JSON for ``show --json``: ``source``, ``ok``, ``note`` and the event's keys (None without a report)."""
        keys = YardstickEvent().to_payload()
        body = self.report.to_payload() if self.report is not None else dict.fromkeys(keys)
        return {"source": self.source, "ok": self.ok, "note": self.note, **body}


def read_yardstick(store: ArchiveStore, run_id: str) -> ArchivedYardstick:
    """The run's yardstick: the last ``yardstick`` event, else the ``setup`` event's ``probes``, else a note.

    Never raises for the archive's content: an unreadable event gives a note.
    """
    rows = store.events(run_id, kind="yardstick")
    try:
        if rows:
            return ArchivedYardstick(_event(rows[-1].payload, "yardstick event"), "yardstick")
        setups = store.events(run_id, kind="setup")
        payload = setups[-1].payload if setups and isinstance(setups[-1].payload, Mapping) else {}
        if payload.get("mode") == "selfevolve":
            return ArchivedYardstick(None, note="yardstick: not checked (a mode=selfevolve run)")
        if "probes" not in payload:
            return ArchivedYardstick(None, note=OLDER_CODE)
        if payload["probes"] is None:
            return ArchivedYardstick(None, note="yardstick: not run (the task family supplies no probes)")
        return ArchivedYardstick(_event(payload["probes"], "setup event's probes"), "setup")
    except DataError as exc:
        return ArchivedYardstick(None, note=f"yardstick: unreadable ({exc})")


def _event(payload: Any, what: str) -> YardstickEvent:
    if not isinstance(payload, Mapping):
        raise DataError(f"{what}: a {type(payload).__name__}, expected an object")
    event = decode(YardstickEvent, "yardstick", payload)
    if event.means is None:
        return event
    return replace(event, means={OLD_PROBE_NAMES.get(n, n): m for n, m in event.means.items()})


def print_yardstick(console: Console, y: ArchivedYardstick) -> None:
    """The probe table, the verdict (green ok, red FAILED) and the missed targets; one line without a report."""
    if y.report is None:
        console.print(Text(terminal_safe(y.verdict()), style="yellow" if y.note != OLDER_CODE else ""))
        return
    console.print(Text(terminal_safe(y.title()), style="italic"))  # above the table: too long for its title
    t = Table()
    for col in ("probe", "mean S_val", y.share_header()):
        t.add_column(col, justify="left" if col == "probe" else "right")
    for name, value, share in y.rows():
        t.add_row(Text(terminal_safe(name)), f"{value:.4f}", share)
    console.print(t)
    console.print(Text(terminal_safe(y.verdict()), style="green" if y.ok else "bold red"))
    if (missed := y.misses()) is not None:
        console.print(Text(terminal_safe(missed), style="yellow"))
