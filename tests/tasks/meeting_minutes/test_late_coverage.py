"""Late coverage (issue 29) on the shipped long generated meetings: minutes of the meeting's last part cover
its late content, minutes of its first part do not; the shipped file is what its script makes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evotrainer.config import PACKAGE_DATA
from evotrainer.tasks.meeting_minutes.coverage import late_coverage, late_reference_units, transcript_segments
from evotrainer.tasks.meeting_minutes.generator import DEFAULT_DIFFICULTY, generate
from evotrainer.tasks.meeting_minutes.long_meetings import join_meetings
from evotrainer.tasks.meeting_minutes.metric import SEMANTIC_BASELINE, _embed, default_embedder, meta_score

SHIPPED = PACKAGE_DATA / "validation_set" / "long_generated.jsonl"
DIFFICULTY = {**DEFAULT_DIFFICULTY, "length": 700.0, "topics": 2.0, "action_items": 2.0}  # the script's defaults


@pytest.fixture(scope="module")
def meetings():
    """The shipped meetings rebuilt from their parts (seed 29, 4 parts each, as scripts/make_long_generated.py)."""
    rng = np.random.default_rng(29)
    rows = [json.loads(line) for line in SHIPPED.read_text(encoding="utf-8").splitlines()]
    out = []
    for row in rows:
        parts = generate(rng, DIFFICULTY, 4)
        joined = join_meetings(parts)
        assert joined.task_id == row["id"] and joined.transcript == row["transcript"]
        out.append((joined, parts))
    return out


def embed(texts):
    return _embed(default_embedder(), list(texts))


def test_segments_cover_the_transcript_in_order() -> None:
    transcript = "\n".join(f"S{i % 2}: " + "word " * 25 for i in range(12))
    segs = transcript_segments(transcript, segment_words=60)
    positions = [p for _, p in segs]
    assert positions == sorted(positions) and 0 < positions[0] < positions[-1] < 1
    assert sum(len(s.split()) for s, _ in segs) == len(transcript.split())


def test_late_reference_units_come_from_the_last_part(meetings) -> None:
    hits = total = 0
    for joined, parts in meetings:
        late = late_reference_units(joined.reference_minutes, joined.transcript, embed)
        last = {u.strip("- ").split(": ", 1)[-1] for u in parts[-1].reference_minutes.splitlines()}
        total += len(late)
        hits += sum(any(u in x or x in u for x in last) for u in late)
    assert total > 0 and hits / total >= 0.6  # most units aligned to the tail belong to the last meeting


def test_minutes_of_the_end_cover_the_end_and_minutes_of_the_start_do_not(meetings) -> None:
    for joined, parts in meetings:
        end = late_coverage(parts[-1].reference_minutes, joined.reference_minutes, joined.transcript, embed,
                            baseline=SEMANTIC_BASELINE)
        start = late_coverage(parts[0].reference_minutes, joined.reference_minutes, joined.transcript, embed,
                              baseline=SEMANTIC_BASELINE)
        whole = late_coverage(joined.reference_minutes, joined.reference_minutes, joined.transcript, embed,
                              baseline=SEMANTIC_BASELINE)
        assert whole == pytest.approx(1.0)
        assert end > start + 0.2, (joined.task_id, end, start)
        assert late_coverage("", joined.reference_minutes, joined.transcript, embed, baseline=SEMANTIC_BASELINE) == 0.0


def test_meta_score_reports_late_coverage_for_long_meetings_only(meetings) -> None:
    joined, parts = meetings[0]
    score = meta_score(parts[-1].reference_minutes, joined)
    assert 0.0 <= score.parts["late_coverage"] <= 1.0
    assert "late_coverage" not in meta_score(parts[0].reference_minutes, parts[0]).parts  # a short meeting
