"""Reading the commands a page shows, for the dry checks of tests/test_readme.py and tests/test_docs_commands.py:
the command lines of its bash blocks and inline spans, their words with placeholders marked, the Hydra overrides of
a ``python -m evotrainer`` command, and the check that those compose and validate."""

from __future__ import annotations

import re
import shlex

from hydra import compose, initialize_config_dir

from evotrainer.config import PACKAGE_DATA, register_configs, to_config

PLACEHOLDER = "PLACEHOLDER"
PYTHON = re.compile(r"^(?:\S+/)?python3?$")


def bash_commands(text: str) -> list[str]:
    """The command lines of a page's bash blocks (comments cut, continuation lines joined)."""
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #", 1)[0].strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def inline_commands(text: str) -> list[str]:
    """Commands in inline code spans (a span may wrap across source lines)."""
    spans = re.findall(r"`((?:\S*python3? -m |make run ARGS=)[^`]+)`", text)
    return [" ".join(span.split()) for span in spans]


def command_words(command: str) -> list[str] | None:
    """The command's words, placeholders replaced, leading ``VAR=value``/``time``/``nice`` dropped; None when the
    line is not shell a user could paste (an ellipsis, an unbalanced quote)."""
    text = re.sub(r"<[^<>]*>", PLACEHOLDER, command)
    if "..." in text or "…" in text:
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in ("time", "nice")):
        words = words[1:]
    return words


def first_sweep_value(value: str) -> str:
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


def evotrainer_overrides(words: list[str]) -> list[str] | None:
    """The Hydra overrides of a ``python -m evotrainer`` or ``make run ARGS=...`` command (None: neither)."""
    if words[:2] == ["make", "run"]:
        args = next((w.split("=", 1)[1] for w in words[2:] if w.startswith("ARGS=")), "")
        words = ["python", "-m", "evotrainer", "+experiment=meeting_minutes", *shlex.split(args)]
    if len(words) < 3 or not PYTHON.match(words[0]) or words[1:3] != ["-m", "evotrainer"]:
        return None
    rest = words[3:]
    if "--help" in rest or "--cfg" in rest or "-c" in rest:
        return None
    multirun = any(w in ("-m", "--multirun") for w in rest)
    out = []
    for w in rest:
        if w in ("-m", "--multirun") or PLACEHOLDER in w or "=" not in w or w.startswith(("hydra/", "hydra.")):
            continue
        key, _, value = w.partition("=")
        out.append(f"{key}={first_sweep_value(value)}" if multirun else w)
    return out


def composes(overrides: list[str]) -> None:
    """The config of these overrides composes and validates (ConfigError names a bad key)."""
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        to_config(compose(config_name="config", overrides=overrides))
