"""The meeting-minutes keys live under task.options; the old spellings keep working (evotrainer/flat_keys.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from evotrainer.config import PACKAGE_DATA, PROJECT_ROOT, Config, register_configs, to_config
from evotrainer.errors import ConfigError
from evotrainer.flat_keys import migrate_config, migrate_overrides, moved_key
from evotrainer.run.resume import config_diff
from evotrainer.run.runtime import build_family


def _compose(*overrides: str) -> Config:
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        return to_config(compose(config_name="config", overrides=list(overrides)))


def test_old_overrides_are_respelt_with_one_warning_each() -> None:
    said: list[str] = []
    argv = ["-m", "task.long.mode=cut,window", "+task.action_band=[1,3]", "~task.prompt_layout", "seed=1",
            "task.options.long.mode=cut", "task.longer=1"]
    assert migrate_overrides(argv, said.append) == [
        "-m", "task.options.long.mode=cut,window", "+task.options.action_band=[1,3]", "~task.options.prompt_layout",
        "seed=1", "task.options.long.mode=cut", "task.longer=1"]
    assert said == [
        "task.long.mode is deprecated: use task.options.long.mode (the family's options)",
        "task.action_band is deprecated: use task.options.action_band (the family's options)",
        "task.prompt_layout is deprecated: use task.options.prompt_layout (the family's options)"]
    assert moved_key("task.long") == "task.options.long" and moved_key("task.name") is None


def test_a_stored_config_from_before_the_move_reads_the_same() -> None:
    new = {"task": {"name": "meeting_minutes", "options": {
        "action_band": [2, 5], "prompt_layout": "transcript_first", "long": {"mode": "window", "window_tokens": 1536}}}}
    old = {"task": {"name": "meeting_minutes", "options": {}, "action_band": [2, 5],
                    "prompt_layout": "transcript_first", "long": {"mode": "window", "window_tokens": 1536}}}
    assert migrate_config(old) == new and "long" in old["task"]  # a copy: the stored dict is left as it was
    assert config_diff(old, new) == []
    assert config_diff({**old, "task": {**old["task"], "prompt_layout": "system_first"}}, new) == [
        "task.options.prompt_layout"]


def test_the_family_reads_its_options_and_names_a_bad_one() -> None:
    family = build_family(_compose("task.options.long.mode=cut", "task.options.action_band=[1,3]",
                                   "task.options.prompt_layout=system_first"))
    assert (family.long.mode, family.action_band, family.prompt_layout) == ("cut", (1, 3), "system_first")
    default = build_family(_compose())
    assert (default.long.mode, default.action_band, default.prompt_layout) == ("window", (2, 5), "transcript_first")
    with pytest.raises(ConfigError, match=r"task\.options\.colour: unknown meeting_minutes option"):
        build_family(_compose("+task.options.colour=1"))
    with pytest.raises(ConfigError, match=r"task\.options\.long\.window_tokens"):
        build_family(_compose("task.options.long.window_tokens=8"))
    with pytest.raises(ConfigError, match=r"task\.options\.long: expected keys from"):
        build_family(_compose("+task.options.long.windows=8"))


def test_the_old_spelling_still_runs_from_the_command_line(tmp_path: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-m", "evotrainer", "task.long.mode=cut", f"hydra.run.dir={tmp_path}",
                          "--cfg", "job"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "warning: task.long.mode is deprecated: use task.options.long.mode" in out.stderr
    assert "mode: cut" in out.stdout
