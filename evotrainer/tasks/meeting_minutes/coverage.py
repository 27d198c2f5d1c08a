"""Late coverage: how much of what the reference says about the last part of a meeting the minutes keep
(minutes that read only the start of a long meeting lose points a whole-meeting ROUGE hides; docs/long_meetings.md).

``late_coverage(output, reference, transcript)``:

1. The transcript is cut into segments of consecutive speaker turns of about :data:`SEGMENT_WORDS` words;
   each segment's position is the relative word offset of its middle, in [0, 1].
2. Each content unit of the reference (:func:`~evotrainer.tasks.meeting_minutes.content.content_units`:
   a sentence or bullet, template removed) is aligned to the segment it is most similar to (cosine of
   all-MiniLM-L6-v2 sentence embeddings), and takes that segment's position. The units aligned to the last
   ``tail`` of the transcript (default the last third) are the *late* reference units.
3. The score is the recall of the late units: the mean over them of the best rescaled cosine to a unit of
   the output, ``max(0, (cos - b) / (1 - b))`` with BERTScore's baseline rescaling (``b`` =
   :data:`~evotrainer.tasks.meeting_minutes.metric.SEMANTIC_BASELINE`), in [0, 1], higher is better.

Sources: aligning each reference-summary sentence to its most similar source position to study where in
the source the summary's content lies is the position analysis of Jung et al. 2019, "Earlier Isn't Always
Better: Sub-aspect Analysis on Corpus and System Biases in Summarization" (EMNLP) and of Kedzie et al. 2018,
"Content Selection in Deep Learning Models of Summarization" (EMNLP); the greedy embedding recall is
BERTScore's (Zhang et al. 2020, ICLR) at sentence level, as in :mod:`~evotrainer.tasks.meeting_minutes.metric`.
The combination, the segment size and the one-third tail are ours. The score is reported as a part of the
meta score (``late_coverage``) for transcripts of at least :data:`LONG_MEETING_WORDS` words; it does not
enter S_val's value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from evotrainer.tasks.meeting_minutes.content import content_units
from evotrainer.tasks.meeting_minutes.windows import speaker_turns

__all__ = ["LATE_TAIL", "LONG_MEETING_WORDS", "SEGMENT_WORDS", "late_coverage", "late_reference_units",
           "transcript_segments"]

SEGMENT_WORDS = 60
"""Target words per transcript segment (short turns such as "Yes." are joined with their neighbours)."""
LATE_TAIL = 1 / 3
"""The share of the transcript (by words, from the end) whose reference content late coverage measures."""
LONG_MEETING_WORDS = 1500
"""Transcripts of at least this many words get a ``late_coverage`` part in their meta score."""


def transcript_segments(transcript: str, segment_words: int = SEGMENT_WORDS) -> list[tuple[str, float]]:
    """Consecutive turns joined into segments of about ``segment_words`` words (never splitting a turn), each
    with the relative position of its middle word in [0, 1]; ``[]`` for an empty transcript."""
    turns = speaker_turns(transcript)
    total = sum(len(t.split()) for t in turns)
    if not total:
        return []
    out: list[tuple[str, float]] = []
    start = 0
    chunk: list[str] = []
    size = 0
    for turn in turns:
        chunk.append(turn)
        size += len(turn.split())
        if size >= segment_words:
            out.append((" ".join(chunk), (start + size / 2) / total))
            start, chunk, size = start + size, [], 0
    if chunk:
        out.append((" ".join(chunk), (start + size / 2) / total))
    return out


def late_reference_units(reference: str, transcript: str, embed: Callable[[Sequence[str]], np.ndarray],
                         tail: float = LATE_TAIL) -> list[str]:
    """The texts of the reference's content units aligned (by embedding) to the last ``tail`` of the transcript.

    Args:
        reference: reference minutes or summary.
        transcript: the meeting.
        embed: texts -> unit vectors, shape (n, dim).
        tail: share of the transcript from its end, in (0, 1].

    Raises:
        ValueError: ``tail`` outside (0, 1].
    """
    if not 0 < tail <= 1:
        raise ValueError(f"late coverage: tail must be in (0, 1], got {tail}")
    units = [u.text for u in content_units(reference)]
    segments = transcript_segments(transcript)
    if not units or not segments:
        return []
    sims = embed(units) @ embed([s for s, _ in segments]).T  # (n_units, n_segments)
    where = np.asarray([p for _, p in segments])[sims.argmax(axis=1)]  # (n_units,)
    return [u for u, p in zip(units, where, strict=True) if p >= 1.0 - tail]


def late_coverage(output: str, reference: str, transcript: str, embed: Callable[[Sequence[str]], np.ndarray], *,
                  baseline: float, tail: float = LATE_TAIL) -> float | None:
    """Recall of the late reference units by the output (module docstring).

    Args:
        output: the minutes scored (untrusted text).
        reference: the reference minutes.
        transcript: the meeting.
        embed: texts -> unit vectors, shape (n, dim) (the metric's cached embedder).
        baseline: cosine rescaled to 0, in [0, 1).
        tail: share of the transcript from its end, in (0, 1].

    Returns:
        In [0, 1], higher is better; 0.0 for an output without content units; None when no reference unit
        aligns to the tail (nothing to cover there).
    """
    late = late_reference_units(reference, transcript, embed, tail)
    if not late:
        return None
    out = [u.text for u in content_units(output)]
    if not out:
        return 0.0
    sims = np.clip((embed(late) @ embed(out).T - baseline) / (1.0 - baseline), 0.0, 1.0)  # (n_late, n_out)
    return float(sims.max(axis=1).mean())
