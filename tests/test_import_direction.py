"""Problem vs algorithm: searchers never import backends, trainers or SQLite; evaluators never DEAP/pycma."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "evotrainer"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("search", ("evotrainer.backends.hf", "evotrainer.backends.vllm", "torch", "transformers", "sqlite3",
                    "evotrainer.archive", "cma")),
        ("harness", ("evotrainer.backends", "torch", "transformers", "sqlite3", "deap")),
        ("tasks", ("deap", "cma", "torch", "evotrainer.search.inner_loop", "evotrainer.archive")),
        ("archive", ("torch", "transformers", "deap", "cma")),
    ],
)
def test_import_direction(folder: str, forbidden: tuple[str, ...]) -> None:
    for path in sorted((PKG / folder).rglob("*.py")):
        bad = {m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden)}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_rollout_does_not_import_deap_or_cma() -> None:
    bad = {m for m in _imports(PKG / "rollout.py") if m.split(".")[0] in ("deap", "cma")}
    assert not bad
