"""A meta-validation set mixing hand-written and real meetings: loading, stratified split, screen, race order."""

from __future__ import annotations

from collections import Counter

import pytest

from evotrainer.config import Config
from evotrainer.errors import DataError
from evotrainer.runtime import build_family, load_validation
from evotrainer.validation_split import race_order, screening_subset, split_validation


def _mixed() -> list:
    cfg = Config()
    cfg.task.validation_extra = ["validation_set/qmsum_meetings.jsonl"]
    return load_validation(cfg, build_family(cfg))


def test_shipped_real_meetings_load_after_the_hand_written_ones() -> None:
    items = _mixed()
    sources = Counter(t.source for t in items)
    assert sources["qmsum"] == 20 and len(items) == 120
    assert items[0].source != "qmsum" and items[-1].source == "qmsum"


def test_split_screen_and_race_order_keep_every_source_in_proportion() -> None:
    items = _mixed()
    selection, heldout = split_validation(items, 0.25)
    assert Counter(t.source for t in heldout)["qmsum"] == 5 and len(heldout) == 30
    screen = screening_subset(selection, 8)
    assert len(screen) == 8 and Counter(t.source for t in screen)["qmsum"] == 1
    order = race_order(selection, screen)
    assert order[:8] == screen and len(order) == len(selection)
    real = [i for i, t in enumerate(order) if t.source == "qmsum"]
    assert sum(1 for i in real if i < 24) in (3, 4)  # a stage of 24 items holds its share of real meetings


def test_single_source_split_is_unchanged() -> None:
    cfg = Config()
    items = load_validation(cfg, build_family(cfg))
    selection, heldout = split_validation(items, 0.25)
    assert len(heldout) == 25 and len(selection) == 75


def test_duplicate_task_ids_across_files_name_both(tmp_path) -> None:
    cfg = Config()
    cfg.task.validation_extra = [cfg.task.validation_path]
    with pytest.raises(DataError, match="already used"):
        load_validation(cfg, build_family(cfg))
