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


# The design's layering (issue 17): records every layer shares (``evotrainer.genome``, ``errors``, ``config``)
# sit outside these folders. Lazy imports inside functions count: ast.walk sees them too.
RULES = [
    ("archive", ("evotrainer.search", "torch", "transformers", "deap", "cma")),  # archive never imports search
    ("tasks", ("evotrainer.search", "evotrainer.archive", "deap", "cma", "torch")),  # nor search nor archive
    ("search", ("evotrainer.archive", "evotrainer.backends.hf", "evotrainer.backends.vllm", "torch",
                "transformers", "sqlite3", "cma")),  # search never imports archive
    ("harness", ("evotrainer.search", "evotrainer.backends", "torch", "transformers", "sqlite3", "deap")),
    ("backends", ("evotrainer.tasks",)),  # backends never import tasks
]


@pytest.mark.parametrize(("folder", "forbidden"), RULES)
def test_import_direction(folder: str, forbidden: tuple[str, ...]) -> None:
    for path in sorted((PKG / folder).rglob("*.py")):
        bad = {m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden)}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_graph() -> dict[str, set[str]]:
    """Folder-level import graph of the package: ``search`` -> {``archive``, ...} (top-level modules by name)."""
    def unit(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "evotrainer" and len(parts) > 1 else None

    graph: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        src = unit(_module(path)) if path.parent != PKG else None
        if src is None:
            continue
        targets = {unit(m) for m in _imports(path)} - {None, src}
        graph.setdefault(src, set()).update(t for t in targets if (PKG / t).is_dir())
    return graph


def test_no_cycle_between_the_layers() -> None:
    """The sub-packages (archive, tasks, search, harness, backends, ...) import each other without a cycle."""
    graph = _package_graph()
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                pytest.fail("import cycle between sub-packages: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])


def test_rollout_does_not_import_deap_or_cma() -> None:
    bad = {m for m in _imports(PKG / "rollout.py") if m.split(".")[0] in ("deap", "cma")}
    assert not bad


@pytest.mark.parametrize("name", ["events.py", "event_base.py", "transfer_event.py", "selfevolve_event.py"])
def test_events_modules_are_neutral(name: str) -> None:
    """The typed archive events are read and written by every layer: their modules import none of them
    (search, archive, tasks, backends, ...), only the error classes and each other."""
    allowed = {"evotrainer.errors", "evotrainer.event_base", "evotrainer.transfer_event",
               "evotrainer.selfevolve_event"}
    bad = {m for m in _imports(PKG / name) if m.startswith("evotrainer") and m not in allowed}
    assert not bad, f"{name} imports {sorted(bad)}"
