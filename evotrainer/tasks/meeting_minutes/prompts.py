"""The chat a meeting-minutes policy sends: its system prompt, a short fixed user turn, an optional prefill."""

from __future__ import annotations

from collections.abc import Sequence

from evotrainer.backends.base import Message
from evotrainer.genome import PREFILL_SECTION, render_system_prompt
from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = ["PROMPT_LAYOUTS", "TRANSCRIPT_FIRST_TEMPLATE", "USER_TEMPLATE", "build_messages"]

USER_TEMPLATE = "Meeting transcript:\n\n{transcript}\n\nWrite the minutes of this meeting."
"""The fixed user turn of the ``system_first`` layout; only the policy's system prompt evolves."""

TRANSCRIPT_FIRST_TEMPLATE = (
    "Meeting transcript:\n\n{transcript}\n\nInstructions:\n\n{instructions}\n\nWrite the minutes of this meeting."
)
"""The user turn of the ``transcript_first`` layout: the transcript, then the policy's instructions."""

PROMPT_LAYOUTS = ("system_first", "transcript_first")
"""Where the policy's text goes: ``system_first`` — the system message, before the transcript;
``transcript_first`` — after the transcript in the user turn (empty system message), so that every policy
reading one transcript sends the same leading tokens and the backend computes them once."""


def build_messages(
    sections: Sequence[tuple[str, str]], task: MeetingTask, layout: str = "system_first"
) -> tuple[Message, ...]:
    """The chat for ``task`` under a policy's prompt ``sections``.

    Args:
        sections: ordered ``(name, text)`` prompt sections of a genome.
        task: the meeting.
        layout: one of :data:`PROMPT_LAYOUTS`.

    Returns:
        ``(system, user)``. ``system_first``: the system message is :func:`render_system_prompt` of
        ``sections``, sent even when empty (chat templates otherwise inject a default persona); the user
        message is :data:`USER_TEMPLATE` filled with the transcript. ``transcript_first``: an empty system
        message, and :data:`TRANSCRIPT_FIRST_TEMPLATE` with the transcript, then the rendered sections
        (the "Instructions" block is left out when they render empty). When the genome carries a non-empty
        :data:`~evotrainer.genome.PREFILL_SECTION`, a third, assistant message holds it: the
        backend pre-fills the answer with it (:func:`~evotrainer.backends.base.split_prefill`).
    """
    system = render_system_prompt(sections)
    transcript = task.transcript.strip()
    if layout == "transcript_first":
        user = (TRANSCRIPT_FIRST_TEMPLATE.format(transcript=transcript, instructions=system.strip())
                if system.strip() else USER_TEMPLATE.format(transcript=transcript))
        system = ""
    elif layout == "system_first":
        user = USER_TEMPLATE.format(transcript=transcript)
    else:
        raise ValueError(f"unknown prompt layout {layout!r}; expected one of {list(PROMPT_LAYOUTS)}")
    chat = ({"role": "system", "content": system}, {"role": "user", "content": user})
    prefill = dict(sections).get(PREFILL_SECTION, "")
    return (*chat, {"role": "assistant", "content": prefill}) if prefill.strip() else chat
