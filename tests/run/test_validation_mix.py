"""A meta-validation set mixing hand-written and real meetings: loading, the hand-written subset, the transfer
set, stratified split, screen, race order."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evotrainer.config import PACKAGE_DATA, Config, validate
from evotrainer.errors import ConfigError, DataError
from evotrainer.run.runtime import build_family, load_transfer, load_validation
from evotrainer.run.validation_split import race_order, screening_subset, split_validation

CORE = "validation_set/meeting_minutes_core.txt"
QMSUM = "validation_set/qmsum_meetings.jsonl"
TRANSFER = "validation_set/qmsum_transfer.jsonl"


def _main_job() -> Config:
    """The main job's data keys (conf/experiment/meeting_minutes.yaml)."""
    cfg = Config()
    cfg.task.validation_subset = CORE
    cfg.task.validation_extra = [QMSUM]
    cfg.task.transfer_path = TRANSFER
    return cfg


def _mixed() -> list:
    cfg = _main_job()
    return load_validation(cfg, build_family(cfg))


def test_shipped_real_meetings_load_after_the_hand_written_core() -> None:
    items = _mixed()
    sources = Counter(t.source for t in items)
    assert sources == {"evotrainer-handwritten": 40, "qmsum": 64}
    assert items[0].source != "qmsum" and items[-1].source == "qmsum"
    assert sources["qmsum"] > len(items) / 2  # real meetings are the majority
    hand = [t for t in items if t.source != "qmsum"]
    assert all(t.action_items for t in hand)  # the owned-action-item checks stay
    assert [t.task_id for t in hand] == sorted(t.task_id for t in hand)  # file order


def test_split_screen_and_race_order_keep_every_source_in_proportion() -> None:
    items = _mixed()
    selection, heldout = split_validation(items, 0.25)
    held = Counter(t.source for t in heldout)
    assert held == {"evotrainer-handwritten": 10, "qmsum": 14} and len(selection) == 80
    # the QMSum windows' two domains (33 research, 31 committee windows) keep their shares on both sides
    domains = Counter(t.meta["domain"] for t in heldout if t.source == "qmsum")
    assert domains == {"Academic": 7, "Committee": 7}
    meetings = [{t.meta.get("meeting") for t in part if t.source == "qmsum"} for part in (selection, heldout)]
    assert not meetings[0] & meetings[1]  # no real meeting straddles the split
    screen = screening_subset(selection, 8)
    assert len(screen) == 8 and Counter(t.source for t in screen)["qmsum"] == 5
    order = race_order(selection, screen)
    assert order[:8] == screen and len(order) == len(selection)
    real = [i for i, t in enumerate(order) if t.source == "qmsum"]
    assert sum(1 for i in real if i < 24) in (14, 15, 16)  # a stage of 24 items holds its share of real meetings


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


def test_subset_keeps_file_order_and_then_the_limit(tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("# a comment\nmv-b02\n\nmv-a03  # trailing comment\nmv-c01\n", encoding="utf-8")
    cfg = Config()
    cfg.task.validation_subset = str(ids)
    family = build_family(cfg)
    assert [t.task_id for t in load_validation(cfg, family)] == ["mv-a03", "mv-b02", "mv-c01"]
    cfg.task.validation_limit = 2
    assert [t.task_id for t in load_validation(cfg, family)] == ["mv-a03", "mv-b02"]


@pytest.mark.parametrize("content, match", [("mv-a01\nmv-zz9\n", r"id\(s\) \['mv-zz9'\] not in"),
                                            ("# nothing\n\n", "lists no item id"),
                                            (None, "file not found")])
def test_bad_subset_is_a_one_line_config_error(tmp_path: Path, content: str | None, match: str) -> None:
    ids = tmp_path / "ids.txt"
    if content is not None:
        ids.write_text(content, encoding="utf-8")
    cfg = Config()
    cfg.task.validation_subset = str(ids)
    with pytest.raises(ConfigError, match=match) as info:
        load_validation(cfg, build_family(cfg))
    message = str(info.value)
    assert message.startswith("config key 'task.validation_subset'") and "\n" not in message


@pytest.mark.parametrize("key", ["validation_subset", "transfer_path"])
def test_empty_path_keys_are_refused(key: str) -> None:
    cfg = Config()
    setattr(cfg.task, key, " ")
    with pytest.raises(ConfigError, match=rf"task\.{key}"):
        validate(cfg)


def test_transfer_set_is_other_real_meetings() -> None:
    cfg = _main_job()
    family = build_family(cfg)
    validation = load_validation(cfg, family)
    transfer = load_transfer(cfg, family, validation)
    assert len(transfer) == 24 and Counter(t.meta["domain"] for t in transfer) == {"Academic": 12, "Committee": 12}
    assert not {t.meta["meeting"] for t in transfer} & {t.meta.get("meeting") for t in validation}
    assert [t.task_id for t in load_transfer(cfg, family)] == [t.task_id for t in transfer]
    cfg.task.transfer_path = None
    assert load_transfer(cfg, family) == []


def test_transfer_sharing_a_meeting_or_transcript_is_refused(tmp_path: Path) -> None:
    cfg = _main_job()
    family = build_family(cfg)
    validation = load_validation(cfg, family)
    row = json.loads((PACKAGE_DATA / QMSUM).read_text(encoding="utf-8").splitlines()[0])
    row["id"], row["transcript"] = "other-window", "Chair: Another part of the same meeting.\n" + row["transcript"]
    same_meeting = tmp_path / "same_meeting.jsonl"
    same_meeting.write_text(json.dumps(row) + "\n", encoding="utf-8")
    cfg.task.transfer_path = str(same_meeting)
    with pytest.raises(DataError, match=rf"item 'other-window' is of group '{row['meta']['meeting']}'") as info:
        load_transfer(cfg, family, validation)
    assert "\n" not in str(info.value) and str(same_meeting) in str(info.value)
    cfg.task.transfer_path = cfg.task.validation_path  # hand-written: no meeting key, the same transcripts
    with pytest.raises(DataError, match="has the input of meta-validation item 'mv-a06'"):
        load_transfer(cfg, family, validation)
