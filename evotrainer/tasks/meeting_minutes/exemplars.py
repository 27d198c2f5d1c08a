"""Few-shot exemplar texts of the meeting-minutes family, built from a generated task's ground truth.

The exemplar gene and its swap mutation are domain-neutral (:mod:`evotrainer.search.exemplars`); what an
exemplar of good minutes looks like is this family's knowledge.
"""

from __future__ import annotations

from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["exemplar_text"]

_LEAD = "Example minutes of a different meeting (use the real names of your meeting, not these):"


def exemplar_text(task: MeetingTask, *, max_items: int = 2) -> str:
    """A compact exemplar from one task's ground truth: Topics, Decisions, Action items headings.

    Args:
        task: a generated task (its topics, decisions and action items are used; not its transcript).
        max_items: at most this many bullets per heading, >= 1.

    Returns:
        Markdown text of a few lines (about 30-60 words).
    """
    lines = [_LEAD, "## Topics"]
    lines += [f"- {t}" for t in task.topics[:max_items]] or ["- None."]
    lines.append("## Decisions")
    lines += [f"- {d}" for d in task.decisions[:max_items]] or ["- None."]
    lines.append("## Action items")
    items = []
    for item in task.action_items[:max_items]:
        due = f" (due: {item.due})" if getattr(item, "due", "") else ""
        items.append(f"- {item.owner}: {item.task}{due}")
    lines += items or ["- None."]
    return "\n".join(lines)
