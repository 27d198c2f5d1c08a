"""The fixed selection / held-out split of the meta-validation set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from evotrainer.config import Config
from evotrainer.errors import ConfigError
from evotrainer.run.runtime import build_family, load_validation
from evotrainer.run.validation_split import screening_subset, split_validation
from evotrainer.tasks.meeting_minutes.task import MeetingTask


def test_split_is_deterministic_disjoint_and_stratified() -> None:
    cfg = Config()
    items = load_validation(cfg, build_family(cfg))
    sel, held = split_validation(items, 0.25)
    sel2, held2 = split_validation(list(reversed(items)), 0.25)
    assert {t.task_id for t in held} == {t.task_id for t in held2}
    assert {t.task_id for t in sel} == {t.task_id for t in sel2}
    assert len(held) == round(0.25 * len(items)) and len(sel) + len(held) == len(items)
    assert not {t.task_id for t in sel} & {t.task_id for t in held}
    words = sorted(len(t.transcript.split()) for t in held)
    all_words = sorted(len(t.transcript.split()) for t in items)
    assert words[0] < all_words[len(all_words) // 4] and words[-1] > all_words[3 * len(all_words) // 4]
    screen = screening_subset(sel, 8)
    assert {t.task_id for t in screen} <= {t.task_id for t in sel}
    assert split_validation(items, 0.0) == (list(items), [])
    with pytest.raises(ConfigError, match=r"outer\.heldout_share"):
        split_validation(items[:1], 0.9)


def _task(task_id: str, words: int, meeting: str | None = None, source: str = "qmsum") -> MeetingTask:
    meta = {"meeting": meeting} if meeting else {}
    return MeetingTask(task_id=task_id, transcript=" ".join(["w"] * words), reference_minutes="- x",
                       source=source, meta=meta)


def test_items_without_a_meeting_split_by_the_per_item_rule() -> None:
    """Singletons: ranks (size, id) 2, 6, 10, ... held out, as before the split went by meeting."""
    items = [_task(f"t{i:02d}", 10 + i, source="hand") for i in range(44)]
    _, held = split_validation(list(reversed(items)), 0.25)
    assert sorted(int(t.task_id[1:]) for t in held) == list(range(2, 44, 4))


def test_no_meeting_straddles_selection_and_heldout() -> None:
    # 30 meetings of 1-4 windows each, sizes spread, plus 20 hand-written singletons
    items = [_task(f"q{m:02d}-{w}", 100 + 37 * ((m * 7 + w * 3) % 29), meeting=f"M{m:02d}")
             for m in range(30) for w in range(1 + m % 4)]
    items += [_task(f"h{i:02d}", 150 + 40 * i, source="hand") for i in range(20)]
    sel, held = split_validation(items, 0.25)
    assert len(sel) + len(held) == len(items)
    assert not {t.meta["meeting"] for t in sel if t.meta} & {t.meta["meeting"] for t in held if t.meta}
    n_real = sum(1 for t in items if t.source == "qmsum")
    real_held = sum(1 for t in held if t.source == "qmsum")
    assert abs(real_held - round(0.25 * n_real)) <= 4 / 2  # off by at most half the largest meeting (4 windows)
    assert sum(1 for t in held if t.source == "hand") == 5
    words = sorted(t.size for t in held if t.source == "qmsum")
    all_words = sorted(t.size for t in items if t.source == "qmsum")
    assert words[0] < all_words[len(all_words) // 4] and words[-1] > all_words[3 * len(all_words) // 4]
    sel2, held2 = split_validation(list(reversed(items)), 0.25)
    assert {t.task_id for t in held2} == {t.task_id for t in held}


def test_a_meeting_split_is_the_same_as_splitting_its_meetings() -> None:
    """Whole groups: holding out a meeting holds out every one of its windows."""
    items = [_task(f"q{m}-{w}", 200 + 100 * m, meeting=f"M{m}") for m in range(8) for w in range(2)]
    _, held = split_validation(items, 0.25)
    assert sorted(t.task_id for t in held) == ["q2-0", "q2-1", "q6-0", "q6-1"]


@dataclass(frozen=True)
class _Part:
    """A task of a generic family: parts of one document share ``group`` (no domain meta field)."""

    task_id: str
    size: int
    group: str | None = None
    source: str = "docs"
    meta: Mapping[str, str] = field(default_factory=dict)


def test_items_of_one_group_stay_on_one_side() -> None:
    items = [_Part(f"d{d}-{p}", 100 + 50 * d, group=f"D{d}") for d in range(8) for p in range(2)]
    sel, held = split_validation(items, 0.25)
    assert held and not {t.group for t in sel} & {t.group for t in held}


def test_domain_labels_that_group_a_source_split_it_further() -> None:
    """24 windows of 12 two-window documents, 8 documents of one kind listed first: by source alone the held-out
    walk ranks by size only; with the ``domain`` labels each kind keeps its share in both parts and the screen."""
    kinds = ["A"] * 8 + ["B"] * 4
    items = [_Part(f"d{d:02d}-{p}", 100 + 10 * d, group=f"D{d}", meta={"domain": kinds[d]})
             for d in range(12) for p in range(2)]
    sel, held = split_validation(items, 0.25)
    assert sorted(t.meta["domain"] for t in held) == ["A", "A", "A", "A", "B", "B"]
    assert not {t.group for t in sel} & {t.group for t in held}
    assert sorted(t.meta["domain"] for t in screening_subset(sel, 3)) == ["A", "A", "B"]


@pytest.mark.parametrize("labels", [
    [f"k{d}" for d in range(12)],                 # one label per document: labels that do not group
    ["A"] * 11 + ["B"],                           # a label on one document only
    ["A"] * 6 + [""] * 6,                         # unlabelled items
])
def test_labels_that_do_not_group_leave_the_source_whole(labels: list[str]) -> None:
    items = [_Part(f"d{d:02d}-{p}", 100 + 10 * d, group=f"D{d}", meta={"domain": labels[d]} if labels[d] else {})
             for d in range(12) for p in range(2)]
    plain = [_Part(t.task_id, t.size, group=t.group) for t in items]
    assert ([t.task_id for t in split_validation(items, 0.25)[1]]
            == [t.task_id for t in split_validation(plain, 0.25)[1]])


def test_a_group_under_two_labels_leaves_the_source_whole() -> None:
    items = [_Part(f"d{d:02d}-{p}", 100 + 10 * d, group=f"D{d}", meta={"domain": "AB"[(d + p) % 2]})
             for d in range(12) for p in range(2)]
    plain = [_Part(t.task_id, t.size, group=t.group) for t in items]
    assert ([t.task_id for t in split_validation(items, 0.25)[1]]
            == [t.task_id for t in split_validation(plain, 0.25)[1]])
