"""The commands the user guide shows work as written (issue 40's acceptance: "the study and sweep commands in the
docs work as written"), checked dry as the README's are (tests/test_readme.py): a ``python -m evotrainer`` command's
config composes and validates (a multirun's first sweep value of each key), an ``evotrainer.archive`` subcommand
exists, a ``benchmarks``/``scripts`` module exists and knows every ``--option`` the command passes it, a make target
exists. Placeholders (``<run folder>``) and the overrides that hold one are left out; nothing long runs.

docs/changelog.md is history and is not checked.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests._doc_commands import (
    PYTHON,
    bash_commands,
    command_words,
    composes,
    evotrainer_overrides,
    inline_commands,
)

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "changelog.md")


def _commands() -> list[tuple[str, str]]:
    found: dict[tuple[str, str], None] = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for command in bash_commands(text) + inline_commands(text):
            found[(page.name, command)] = None
    return list(found)


def _check_module(module: str, words: list[str]) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"no module {module!r}"
    source = Path(spec.origin).read_text(encoding="utf-8")
    for option in (w.split("=", 1)[0] for w in words if w.startswith("--")):
        assert f'"{option}"' in source or f"'{option}'" in source, f"{module} has no option {option}"


@pytest.mark.parametrize(("page", "command"), _commands())
def test_each_docs_command_works_as_written(page: str, command: str) -> None:
    words = command_words(command)
    if not words:
        return
    if words[0] == "make":
        targets = set(re.findall(r"(?m)^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8")))
        assert words[1] in targets, f"{page}: no make target {words[1]!r}"
        if words[1] != "run":
            return
    if not PYTHON.match(words[0]) or len(words) < 3 or words[1] != "-m":
        return  # pip, vllm serve, tar, ...: not ours to check
    module = words[2]
    if module == "evotrainer.archive":
        import typer

        from evotrainer.browse.cli import app

        if len(words) > 3 and not words[3].startswith("-"):
            assert words[3] in typer.main.get_command(app).commands, f"{page}: no archive command {words[3]!r}"
        return
    if module.startswith(("benchmarks.", "scripts.")):
        _check_module(module, words[3:])
        return
    overrides = evotrainer_overrides(words)
    if overrides is None:
        return
    composes(overrides)


def test_the_pages_show_the_study_and_sweep_commands() -> None:
    """The collection finds what it exists for: the study commands and the sweep table command."""
    commands = [c for _, c in _commands()]
    assert any("+study=ablation" in c and " -m " in c for c in commands)
    assert any("evotrainer.archive sweep" in c for c in commands)
    assert any(c.startswith("make run") for c in commands)
