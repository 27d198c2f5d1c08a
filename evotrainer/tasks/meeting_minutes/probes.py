"""Probe outputs of the meeting-minutes yardstick: texts whose S_val must come out in a known order.

:mod:`evotrainer.harness.yardstick` scores them on the meta-validation set and checks the order
(reference ≫ a policy's minutes > baseline, skeleton ≈ 0, wrong item ≈ 0). The texts, by role:

- ``reference``: the item's own reference minutes (the best any output can do);
- ``baseline``: the first :data:`LEAD_LINES` lines of the transcript (the lazy baseline of
  summarisation papers, "lead-3", applied to dialogue turns);
- ``skeleton``: :data:`SKELETON`, the minutes' template with no meeting content;
- ``wrong_item``: the reference of another meeting from the same source (same template and style,
  wrong meeting).
"""

from __future__ import annotations

from collections.abc import Sequence

from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["LEAD_LINES", "SKELETON", "probe_outputs"]

LEAD_LINES = 5
"""Transcript lines (speaker turns) of the ``baseline`` probe."""

SKELETON = "## Topics\n- The meeting\n## Decisions\n- The decision\n## Action items\n- Owner: task (due: date)"
"""The constant skeleton: the template with no meeting content (80 characters)."""


def _meeting(task: MeetingTask) -> str:
    return task.group if task.group is not None else task.task_id


def _other(items: Sequence[MeetingTask], i: int) -> MeetingTask | None:
    """The next item (cyclically, by task id) of the same source from another meeting, or None."""
    task = items[i]
    ring = sorted((t for t in items if t.source == task.source), key=lambda t: t.task_id)
    start = next(k for k, t in enumerate(ring) if t is task)
    for k in range(1, len(ring)):
        other = ring[(start + k) % len(ring)]
        if _meeting(other) != _meeting(task) and other.reference_minutes.strip():
            return other
    return None


def probe_outputs(items: Sequence[MeetingTask]) -> list[dict[str, str]]:
    """The probe texts of every item (module docstring), in item order.

    Args:
        items: meta-validation items with reference minutes.

    Returns:
        One mapping per item: probe name -> output text. ``wrong_item`` is missing for an item whose
        source has no other meeting. Deterministic: depends only on the items, not on their order.
    """
    out = []
    for i, task in enumerate(items):
        lines = [line for line in task.transcript.splitlines() if line.strip()]
        texts = {"reference": task.reference_minutes, "baseline": "\n".join(lines[:LEAD_LINES]),
                 "skeleton": SKELETON}
        other = _other(items, i)
        if other is not None:
            texts["wrong_item"] = other.reference_minutes
        out.append(texts)
    return out
