"""The README is a front door (issue 27, item 6): at most 150 lines, the two commands first, links that resolve,
and every command it shows still works as written (checked dry: the config composes and validates, the archive
command exists, the make target exists; nothing long runs)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests._doc_commands import bash_commands, composes

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HEAD = """# EvoTrainer

```bash
make run    # set up (first time) and run the main job: python -m evotrainer +experiment=meeting_minutes
make test   # set up (first time) and run the tests (ruff + pytest, the smoke run included)
```
"""


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _commands() -> list[str]:
    """The command lines of the README's bash blocks (comments cut, continuation lines joined)."""
    return bash_commands(_text())


def _slug(heading: str) -> str:
    """MkDocs' heading id (Python-Markdown's toc slugify)."""
    text = re.sub(r"[^\w\s-]", "", re.sub(r"`", "", heading)).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = _text()
    assert len(text.splitlines()) <= 150, f"README.md has {len(text.splitlines())} lines (at most 150)"
    assert text.startswith(HEAD)


def test_the_readme_links_resolve() -> None:
    """Relative links point at files of the repository, and an anchor at a heading of that page."""
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _text()):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path
        headings = re.findall(r"(?m)^#+ (.+)$", page.read_text("utf-8")) if page.is_file() else []
        if not page.exists() or (anchor and anchor not in {_slug(h) for h in headings}):
            bad.append(target)
    assert not bad, f"README links that do not resolve: {bad}"


def _evotrainer_overrides(command: str) -> list[str] | None:
    """The overrides of a single-run ``python -m evotrainer`` command, or of ``make run ARGS=...``."""
    words = shlex.split(command)
    if words[:2] == ["make", "run"]:
        args = next((w.split("=", 1)[1] for w in words[2:] if w.startswith("ARGS=")), "")
        return ["+experiment=meeting_minutes", *shlex.split(args)]
    if len(words) >= 3 and words[0].endswith("python") and words[1:3] == ["-m", "evotrainer"]:
        return None if "--help" in words else words[3:]
    return None


def test_the_readme_shows_commands() -> None:
    commands = _commands()
    assert any(c.startswith(".venv/bin/python -m evotrainer ") for c in commands)
    assert any(c.startswith(".venv/bin/python -m evotrainer.archive ") for c in commands)


@pytest.mark.parametrize("command", _commands())
def test_each_readme_command_works_as_written(command: str) -> None:
    words = shlex.split(command)
    if words[0] == "make":
        targets = set(re.findall(r"(?m)^([a-z]+):", (ROOT / "Makefile").read_text(encoding="utf-8")))
        assert words[1] in targets, f"no make target {words[1]!r}"
    if words[0].endswith("python") and words[1:3] == ["-m", "evotrainer.archive"]:
        import typer

        from evotrainer.browse.cli import app

        assert words[3] in typer.main.get_command(app).commands, f"no archive command {words[3]!r}"
        return
    overrides = _evotrainer_overrides(command)
    if overrides is not None:
        composes(overrides)  # ConfigError names a bad key
        return
    if words[0] == "make" or words[1:3] == ["-m", "evotrainer"]:  # make targets, `--help` (tests/test_docs.py)
        return
    pytest.fail(f"a README command this test does not know how to check: {command}")
