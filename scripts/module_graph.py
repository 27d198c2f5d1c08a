"""The import graph of the ``evotrainer`` package's modules, and its rooms' figures (issue 27, item 2).

``python scripts/module_graph.py [package folder]`` prints the modules on the package's top
(``evotrainer/*.py``), the largest module (lines) and every import circle: a strongly connected component of
two or more modules. Imports inside functions count (a lazy import still ties two modules together), and so
do imports under ``if TYPE_CHECKING:`` (a circle of types is still a circle of ideas).
``tests/test_import_direction.py`` uses :func:`imported_names`, :func:`import_graph` and :func:`circles`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "evotrainer"


def module_name(path: Path, pkg: Path = PKG) -> str:
    """``evotrainer/search/ops.py`` -> ``evotrainer.search.ops``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(pkg: Path = PKG) -> dict[str, Path]:
    """Every module of the package by dotted name -> its file."""
    return {module_name(p, pkg): p for p in sorted(pkg.rglob("*.py"))}


def imported_names(path: Path, name: str | None = None) -> set[str]:
    """The dotted names ``path`` imports, anywhere in the file: ``import a.b`` -> ``a.b``, ``from a import b``
    -> ``a.b`` (``b`` a module or a name defined in ``a``); relative imports made absolute from ``name`` (the
    file's module, :func:`module_name` when None)."""
    name = name or module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package upwards
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if path.name == "__init__.py" else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def _imported(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``path`` (module ``name``) imports: each imported name's longest prefix that
    is a module (``evotrainer.a.b.f``, ``f`` a function -> ``evotrainer.a.b``)."""
    found: set[str] = set()
    for target in imported_names(path, name):
        parts = target.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts:
            found.add(".".join(parts))
    found.discard(name)
    return found


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from evotrainer.a import b`` names ``evotrainer.a.b`` when
    ``b`` is a module, else ``evotrainer.a``)."""
    known = modules(pkg)
    return {name: _imported(path, name, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of two or more modules (Tarjan 1972), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:  # recursion depth = longest import chain, well under Python's limit
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def top_modules(pkg: Path = PKG) -> list[str]:
    """The file names of the modules on the package's top (``evotrainer/*.py``)."""
    return sorted(p.name for p in pkg.glob("*.py"))


def main(argv: list[str]) -> int:
    pkg = Path(argv[0]).resolve() if argv else PKG  # another checkout's package folder ("before" figures)
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules(pkg).items()}
    largest = max(lines, key=lines.__getitem__)
    found = circles(import_graph(pkg))
    top = top_modules(pkg)
    print(f"modules on top: {len(top)} ({', '.join(top)})")
    print(f"modules in all: {len(lines)}; largest: {largest} ({lines[largest]} lines)")
    print(f"import circles: {len(found)}")
    for circle in found:
        print("  " + " <-> ".join(circle))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
