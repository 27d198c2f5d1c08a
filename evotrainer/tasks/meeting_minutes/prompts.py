"""The chat a meeting-minutes policy sends: its system prompt, a short fixed user turn, an optional prefill."""

from __future__ import annotations

from collections.abc import Sequence

from evotrainer.backends.base import Message
from evotrainer.search.genome import PREFILL_SECTION, render_system_prompt
from evotrainer.tasks.base import MeetingTask

__all__ = ["USER_TEMPLATE", "build_messages"]

USER_TEMPLATE = "Meeting transcript:\n\n{transcript}\n\nWrite the minutes of this meeting."
"""The fixed user turn; only the policy's system prompt evolves."""


def build_messages(sections: Sequence[tuple[str, str]], task: MeetingTask) -> tuple[Message, ...]:
    """The chat for ``task`` under a policy's prompt ``sections``.

    Args:
        sections: ordered ``(name, text)`` prompt sections of a genome.
        task: the meeting.

    Returns:
        ``(system, user)``: the system message is :func:`render_system_prompt` of ``sections``, sent
        even when empty (chat templates otherwise inject a default persona); the user message is
        :data:`USER_TEMPLATE` filled with the transcript. When the genome carries a non-empty
        :data:`~evotrainer.search.genome.PREFILL_SECTION`, a third, assistant message holds it: the
        backend pre-fills the answer with it (:func:`~evotrainer.backends.base.split_prefill`).
    """
    system = render_system_prompt(sections)
    user = USER_TEMPLATE.format(transcript=task.transcript.strip())
    chat = ({"role": "system", "content": system}, {"role": "user", "content": user})
    prefill = dict(sections).get(PREFILL_SECTION, "")
    return (*chat, {"role": "assistant", "content": prefill}) if prefill.strip() else chat
