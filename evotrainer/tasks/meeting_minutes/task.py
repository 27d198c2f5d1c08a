"""The meeting-minutes task record: one meeting's transcript and its ground truth."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evotrainer.tasks.base import content_hash

__all__ = ["ActionItem", "MeetingTask"]


@dataclass(frozen=True)
class ActionItem:
    """An action item: who does what (by when, if said)."""

    owner: str
    task: str
    due: str = ""


@dataclass(frozen=True)
class MeetingTask:
    """One meeting: the transcript and its ground truth.

    Attributes:
        task_id: unique within its source (generated: derived from seed and index).
        transcript: ``Speaker: text`` lines, one turn per line.
        reference_minutes: human or generated reference minutes (may be empty for generated tasks).
        topics: ground-truth topics discussed.
        decisions: ground-truth decisions (final ones; reversed decisions appear in their final form).
        action_items: ground-truth action items with owners.
        source: "generated", a dataset name, or a file name.
        meta: free-form extra fields (domain, difficulty, n_words, the ``meeting`` id of a window); not part of
            identity.
    """

    task_id: str
    transcript: str
    reference_minutes: str = ""
    topics: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    action_items: tuple[ActionItem, ...] = ()
    source: str = "generated"
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def content_hash(self) -> str:
        """Identity of the transcript (see :func:`content_hash`)."""
        return content_hash(self.transcript)

    @property
    def text(self) -> str:
        """The transcript."""
        return self.transcript

    @property
    def group(self) -> str | None:
        """The meeting an item is a window of (``meta["meeting"]``, e.g. QMSum), or None."""
        m = self.meta.get("meeting") if self.meta else None
        return None if m is None else str(m)

    @property
    def size(self) -> int:
        """Transcript words (whitespace-separated, speaker labels included)."""
        return len(self.transcript.split())

    def identity(self) -> list[Any]:
        """Transcript hash, reference minutes, topics, decisions and action items (what a batch id hashes)."""
        items = [[a.owner, a.task, a.due] for a in self.action_items]
        return [self.content_hash, self.reference_minutes, list(self.topics), list(self.decisions), items]
