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
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from evotrainer.config import PACKAGE_DATA, register_configs, to_config

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "changelog.md")
_PLACEHOLDER = "PLACEHOLDER"
_PYTHON = re.compile(r"^(?:\S+/)?python3?$")


def _lines_of_blocks(text: str) -> list[str]:
    """The command lines of a page's bash blocks (comments cut, continuation lines joined)."""
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #", 1)[0].strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def _inline(text: str) -> list[str]:
    """Commands in inline code spans (a span may wrap across source lines)."""
    spans = re.findall(r"`((?:\S*python3? -m |make run ARGS=)[^`]+)`", text)
    return [" ".join(span.split()) for span in spans]


def _commands() -> list[tuple[str, str]]:
    found: dict[tuple[str, str], None] = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for command in _lines_of_blocks(text) + _inline(text):
            found[(page.name, command)] = None
    return list(found)


def _words(command: str) -> list[str] | None:
    """The command's words, placeholders replaced, leading ``VAR=value``/``time``/``nice`` dropped; None when the
    line is not shell a user could paste (an ellipsis, an unbalanced quote)."""
    text = re.sub(r"<[^<>]*>", _PLACEHOLDER, command)
    if "..." in text or "…" in text:
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in ("time", "nice")):
        words = words[1:]
    return words


def _split_sweep(value: str) -> str:
    """A multirun value's first choice: ``a,b,c`` -> ``a`` (commas inside brackets or quotes are the value's)."""
    depth = 0
    for i, ch in enumerate(value):
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:
            return value[:i]
    return value


def _overrides(words: list[str]) -> list[str] | None:
    """The Hydra overrides of a ``python -m evotrainer`` or ``make run ARGS=...`` command (None: neither)."""
    if words[:2] == ["make", "run"]:
        args = next((w.split("=", 1)[1] for w in words[2:] if w.startswith("ARGS=")), "")
        words = ["python", "-m", "evotrainer", "+experiment=meeting_minutes", *shlex.split(args)]
    if len(words) < 3 or not _PYTHON.match(words[0]) or words[1:3] != ["-m", "evotrainer"]:
        return None
    rest = words[3:]
    if "--help" in rest or "--cfg" in rest or "-c" in rest:
        return None
    multirun = any(w in ("-m", "--multirun") for w in rest)
    out = []
    for w in rest:
        if w in ("-m", "--multirun") or _PLACEHOLDER in w or "=" not in w or w.startswith(("hydra/", "hydra.")):
            continue
        key, _, value = w.partition("=")
        out.append(f"{key}={_split_sweep(value)}" if multirun else w)
    return out


def _check_module(module: str, words: list[str]) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"no module {module!r}"
    source = Path(spec.origin).read_text(encoding="utf-8")
    for option in (w.split("=", 1)[0] for w in words if w.startswith("--")):
        assert f'"{option}"' in source or f"'{option}'" in source, f"{module} has no option {option}"


@pytest.mark.parametrize(("page", "command"), _commands())
def test_each_docs_command_works_as_written(page: str, command: str) -> None:
    words = _words(command)
    if not words:
        return
    if words[0] == "make":
        targets = set(re.findall(r"(?m)^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8")))
        assert words[1] in targets, f"{page}: no make target {words[1]!r}"
        if words[1] != "run":
            return
    if not _PYTHON.match(words[0]) or len(words) < 3 or words[1] != "-m":
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
    overrides = _overrides(words)
    if overrides is None:
        return
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        to_config(compose(config_name="config", overrides=overrides))  # ConfigError names a bad key


def test_the_pages_show_the_study_and_sweep_commands() -> None:
    """The collection finds what it exists for: the study commands and the sweep table command."""
    commands = [c for _, c in _commands()]
    assert any("+study=ablation" in c and " -m " in c for c in commands)
    assert any("evotrainer.archive sweep" in c for c in commands)
    assert any(c.startswith("make run") for c in commands)
