"""Write ``docs/reference/config.md``: every config key, its type, its default and its help, from the schema.

The schema is the structured config Hydra composes (:class:`evotrainer.config.Config` and the dataclasses it
nests, in ``evotrainer/config_schema.py``, ``evotrainer/search/inner_config.py`` and
``evotrainer/model_schema.py``). A key's help is the comment beside its field (and the comment lines just above
it), else its entry in the class docstring (``name: text`` lines, as :class:`~evotrainer.config.InnerConfig`
writes them). Defaults are read off the composed config, so they are what ``python -m evotrainer`` runs with
(schema defaults with the ``conf/`` files applied); the main-job column gives the value under
``+experiment=meeting_minutes`` where it differs.

Usage (from the repository root)::

    python scripts/gen_config_reference.py           # rewrite docs/reference/config.md
    python scripts/gen_config_reference.py --check   # exit 1 when the file is out of date

``tests/test_docs.py`` runs the check, so a schema change without a regenerated page fails the tests.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import json
import re
import sys
import tokenize
import typing
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference" / "config.md"
MAIN_JOB = "+experiment=meeting_minutes"
_MAX_VALUE = 48  # longer rendered values are summarised ("12 items")


@cache
def _comments(path: str) -> dict[int, tuple[str, bool]]:
    """``{line: (comment text, whole line is a comment)}`` of a source file."""
    source = Path(path).read_text(encoding="utf-8")
    lines = source.splitlines()
    out: dict[int, tuple[str, bool]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            out[row] = (tok.string.lstrip("#").strip(), lines[row - 1][:col].strip() == "")
    return out


def _docstring_entries(cls: type) -> dict[str, str]:
    """``name: text`` entries of a class docstring (continuation lines indented deeper are joined)."""
    doc = inspect.getdoc(cls) or ""
    entries: dict[str, str] = {}
    current: str | None = None
    indent = 0
    for line in doc.splitlines():
        m = re.match(r"^(\s+)(\w+): (.*)$", line)
        if m and (current is None or len(m.group(1)) <= indent):
            current, indent = m.group(2), len(m.group(1))
            entries[current] = m.group(3).strip()
        elif current is not None and line.strip() and len(line) - len(line.lstrip()) > indent:
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


def field_help(cls: type) -> dict[str, tuple[str, str]]:
    """``{field: (annotation as written, help text)}`` of a dataclass, from its source."""
    path = inspect.getsourcefile(cls)
    assert path is not None
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    comments = _comments(path)
    from_doc = _docstring_entries(cls)
    out: dict[str, tuple[str, str]] = {}
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        above: list[str] = []
        row = stmt.lineno - 1
        while row in comments and comments[row][1]:
            above.insert(0, comments[row][0])
            row -= 1
        beside = [comments[r][0] for r in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)
                  if r in comments and not comments[r][1]]
        text = " ".join(above + beside) or from_doc.get(stmt.target.id, "")
        out[stmt.target.id] = (ast.unparse(stmt.annotation), text)
    return out


def _dataclass_of(tp: Any) -> type | None:
    """The dataclass in ``tp`` (``X`` or ``X | None``), else None."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if len(args) == 1 and dataclasses.is_dataclass(args[0]) and isinstance(args[0], type) else None


def _dict_of_dataclass(tp: Any) -> type | None:
    """``V`` of ``dict[str, V]`` when ``V`` is a dataclass, else None."""
    if typing.get_origin(tp) is dict:
        value = typing.get_args(tp)[1]
        return value if dataclasses.is_dataclass(value) and isinstance(value, type) else None
    return None


def _selected(cfg: Any, key: str) -> Any:
    """The plain value at ``key`` of a composed config (None when absent)."""
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key, default=None)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _value(f: dataclasses.Field) -> Any:
    """A field's own default (for the keys under a ``<name>`` of a mapping, which no config composes)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return None


def _plain_text(text: str) -> str:
    """Docstring markup as Markdown: ``x`` -> `x`, :func:`~a.b.c` -> `c`, :mod:`a.b` -> `a.b`."""
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: "`" + (m.group(1).rsplit(".", 1)[-1] if "~" in m.group(0) else m.group(1)) + "`", text)
    return text.replace("``", "`")


def _join(first: str, second: str) -> str:
    """Two sentences, the first closed with a full stop."""
    first = first.strip()
    if first and not first.endswith("."):
        first += "."
    return f"{first} {second}".strip()


def _render(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if value == "" or value != value.strip() else value
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        if len(text) > _MAX_VALUE:
            return f"({len(value)} {'items' if isinstance(value, list) else 'keys'})"
        return text
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: str) -> str:
    return f"`{value}`" if value else ""


@dataclasses.dataclass
class Section:
    """One table of the page: the keys of one dataclass under a prefix."""

    prefix: str  # e.g. "outer.race"
    cls: type
    note: str = ""
    rows: list[tuple[str, str, str, str, str]] = dataclasses.field(default_factory=list)


def walk(cls: type, prefix: str, note: str, sections: list[Section], seen: dict[type, str], defaults: Any,
         main: Any) -> None:
    """Add the section of ``cls`` at ``prefix`` (and those of its nested dataclasses) to ``sections``."""
    section = Section(prefix, cls, note)
    sections.append(section)
    hints = typing.get_type_hints(cls)
    helps = field_help(cls)
    nested: list[tuple[str, type, str]] = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        annotation, text = helps.get(f.name, ("", ""))
        text = _plain_text(text)
        sub, mapped = _dataclass_of(hints[f.name]), _dict_of_dataclass(hints[f.name])
        plain, job = (_value(f) for _ in (0, 1)) if "<name>" in prefix else (
            _selected(defaults, key), _selected(main, key))
        if sub is not None and sub in seen and (plain is None or plain == _selected(defaults, seen[sub])):
            text = _join(text, f"Same keys as [`{seen[sub]}`](#{_anchor(seen[sub])}).")
        elif sub is not None:
            nested.append((key, sub, text))
            continue
        elif mapped is not None and mapped in seen:
            text = _join(text, f"Each entry has the keys of [`{seen[mapped]}`](#{_anchor(seen[mapped])}).")
        elif mapped is not None:
            text = _join(text, f"Each entry has the keys of [`{key}.<name>`](#{_anchor(key + '.<name>')}).")
            nested.append((f"{key}.<name>", mapped, ""))
            seen[mapped] = f"{key}.<name>"
        section.rows.append((key, annotation.replace(" | ", " or "), _render(plain),
                             "" if job == plain else _render(job), text))
    for key, sub, text in nested:
        seen.setdefault(sub, key)  # (a mapping's entry class is seen already)
        walk(sub, key, text, sections, seen, defaults, main)


def _anchor(prefix: str) -> str:
    """The id MkDocs gives the heading ``prefix`` (its toc slugify: lower case, word characters and hyphens)."""
    text = re.sub(r"[^\w\s-]", "", prefix).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _compose(overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir

    from evotrainer.config import PACKAGE_DATA, register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def config_reference() -> str:
    """The page's text."""
    from evotrainer.config import Config

    sections: list[Section] = []
    walk(Config, "", "", sections, {Config: ""}, _compose([]), _compose([MAIN_JOB]))
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by scripts/gen_config_reference.py from the config schema; do not edit by hand. -->",
        "",
        "Every key of `python -m evotrainer`, set on the command line as `key=value` (Hydra overrides) or in a",
        "YAML file under `conf/`. *default* is what a plain `python -m evotrainer` runs with (the schema",
        "with `conf/config.yaml` and the `meeting_minutes` task group applied); *main job* is the value under",
        f"`{MAIN_JOB}` where it differs. Long values are summarised (`(12 items)`); `python -m evotrainer",
        f"{MAIN_JOB} --cfg job` prints them whole. A bad value stops the run before it starts with one line",
        "naming the key. The keys most runs change are explained in [Configuration](../configuration.md).",
        "",
    ]
    for s in sections:
        title = s.prefix or "top level"
        out += [f"## `{title}`" if s.prefix else f"## {title}", ""]
        doc = _plain_text((inspect.getdoc(s.cls) or "").split("\n\n")[0].replace("\n", " "))
        intro = _join(s.note, doc if s.cls.__name__ != "Config" else "")
        if intro:
            out += [_cell(intro) + f" (`{s.cls.__name__}`)", ""]
        out += ["| key | type | default | main job | meaning |", "|---|---|---|---|---|"]
        for key, annotation, plain, job, text in s.rows:
            out.append(f"| `{key}` | {_code(annotation)} | {_code(_cell(plain))} | {_code(_cell(job))} | {_cell(text)} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = config_reference()
    if "--check" in argv:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python scripts/gen_config_reference.py")
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
