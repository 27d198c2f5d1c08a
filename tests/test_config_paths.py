"""Configured data paths: the current folder first, then the shipped data (the checkout's root here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evotrainer.config import PACKAGE_DATA, find_data_path, resolve_path
from evotrainer.errors import ConfigError

SHIPPED = "validation_set/meeting_minutes.jsonl"


def test_a_relative_path_means_the_shipped_copy_unless_the_current_folder_has_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_path(SHIPPED, "task.validation_path") == (PACKAGE_DATA / SHIPPED).resolve()
    assert find_data_path("populations/meeting_minutes.yaml") == PACKAGE_DATA / "populations" / "meeting_minutes.yaml"
    mine = tmp_path / SHIPPED
    mine.parent.mkdir()
    mine.write_text("{}\n")
    assert resolve_path(SHIPPED, "task.validation_path") == mine.resolve()
    assert find_data_path(str(mine)) == mine.resolve()  # absolute: as given


def test_a_missing_path_is_one_line_naming_the_key_and_both_places(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_data_path("validation_set/nothing.jsonl") is None
    with pytest.raises(ConfigError) as err:
        resolve_path("validation_set/nothing.jsonl", "task.validation_extra")
    message = str(err.value)
    assert "\n" not in message and message.startswith("config key 'task.validation_extra': file not found")
    assert str(Path.cwd()) in message and str(PACKAGE_DATA) in message
    with pytest.raises(ConfigError, match=r"file not found: /no/such/file\.jsonl$"):
        resolve_path("/no/such/file.jsonl", "evaluate.dataset")
