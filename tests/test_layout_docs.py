"""The package's rooms are written down (issue 27, item 2): docs/layout.md names every module of ``evotrainer/``
and no module that is gone; the README's layout names every folder and every module on the top."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "evotrainer"
LAYOUT = ROOT / "docs" / "layout.md"
README = ROOT / "README.md"
NOT_PACKAGE = ("../", "tests/", "scripts/", "benchmarks/", "docs/")  # paths outside evotrainer/ the page names


def _named(text: str) -> set[str]:
    """Every `code span` of a page."""
    return set(re.findall(r"`([^`\n]+)`", text))


def _rooms() -> list[str]:
    return sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())


def test_the_layout_page_names_every_module() -> None:
    named = _named(LAYOUT.read_text(encoding="utf-8"))
    modules = [p.relative_to(PKG).as_posix() for p in sorted(PKG.rglob("*.py")) if p.name != "__init__.py"]
    missing = [m for m in modules if m not in named]
    assert not missing, f"modules docs/layout.md does not name (add a row to their room's table): {missing}"
    rooms = [f"{r}/" for r in _rooms() if f"{r}/" not in named]
    assert not rooms, f"folders docs/layout.md does not name: {rooms}"


def test_the_layout_page_names_no_module_that_is_gone() -> None:
    stale = [p for p in _named(LAYOUT.read_text(encoding="utf-8"))
             if p.endswith(".py") and not p.startswith(NOT_PACKAGE) and not (PKG / p).is_file()]
    assert not stale, f"docs/layout.md names modules that do not exist: {stale}"


def test_the_readme_names_every_room_and_top_module() -> None:
    text = README.read_text(encoding="utf-8")
    layout = text[text.index("## Layout"):].split("\n## ", 1)[0]
    named = _named(layout)
    missing = [f"{r}/" for r in _rooms() if f"{r}/" not in named]
    missing += [p.name for p in sorted(PKG.glob("*.py")) if p.name not in named]
    assert not missing, f"the README's layout does not name: {missing}"
