"""Problem vs algorithm: searchers never import backends, trainers or SQLite; evaluators never DEAP/pycma; the
rooms of the package (issue 27, item 2) import each other one way, and no two modules import each other."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "evotrainer"
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ is not an installed package
import module_graph  # noqa: E402  (the one import parser of these checks and of the rooms' figures)

# The rooms above problem and algorithm: the app, the run modes and what they share (run/); no room below
# imports them.
MODES = tuple(f"evotrainer.{room}" for room in ("evolve", "evaluate", "selfevolve", "distill", "run", "app"))

# The design's layering (issue 17, issue 27 item 2): a room (folder) or a module on the top, and what it never
# imports. Records every layer shares (``genome``, ``errors``, ``config``, ...) sit on the top. Lazy imports
# inside functions count: the parser walks the whole file.
RULES = [
    # storage never imports search, a mode or the browsing room (its CLI, views and HTML)
    ("archive", ("evotrainer.search", "evotrainer.browse", *MODES, "torch", "transformers", "deap", "cma")),
    # browsing reads what the archive stores: no model, search or run mode
    ("browse", ("evotrainer.search", "evotrainer.harness", "evotrainer.tasks", *MODES, "torch", "transformers",
                "deap", "cma")),
    ("tasks", ("evotrainer.search", "evotrainer.archive", *MODES, "deap", "cma", "torch")),  # nor search nor archive
    ("search", ("evotrainer.archive", "evotrainer.backends.hf", "evotrainer.backends.vllm", *MODES, "torch",
                "transformers", "sqlite3", "cma")),  # search never imports archive
    ("harness", ("evotrainer.search", "evotrainer.backends", *MODES, "torch", "transformers", "sqlite3", "deap")),
    # backends never import tasks; the executor and the thread choice beside them never the run that builds them
    ("backends", ("evotrainer.tasks", "evotrainer.search", "evotrainer.harness", "evotrainer.archive", *MODES)),
    ("adapters", ("evotrainer.search", "evotrainer.archive", "evotrainer.tasks", *MODES, "deap", "cma")),
    # numbers in, records out: no model, archive, search or loop
    ("stats", ("evotrainer.archive", "evotrainer.search", "evotrainer.backends", "evotrainer.harness",
               "evotrainer.tasks", "evotrainer.adapters", *MODES, "torch", "transformers", "deap", "cma", "sqlite3")),
    # what every mode shares knows no mode
    ("run", ("evotrainer.search", "evotrainer.evolve", "evotrainer.evaluate", "evotrainer.selfevolve",
             "evotrainer.distill", "evotrainer.app", "deap")),
    ("evolve", ("evotrainer.evaluate", "evotrainer.selfevolve", "evotrainer.app")),  # one mode never another's
    ("evaluate", ("evotrainer.search", "evotrainer.harness", "evotrainer.selfevolve", "evotrainer.app", "deap",
                  "cma")),  # evaluators never DEAP/pycma
    ("selfevolve", ("evotrainer.evaluate", "evotrainer.app")),
    ("distill", ("evotrainer.search", "evotrainer.harness", "evotrainer.app", "deap", "cma")),  # no search loop
    ("app", ("evotrainer.search", "evotrainer.backends", "evotrainer.evolve", "evotrainer.run", "torch",
             "transformers")),  # the Hydra app's callbacks stay light: a sweep's launcher imports them
    ("rollout.py", ("deap", "cma", "evotrainer.archive", "evotrainer.harness", *MODES)),  # the problem side
    ("tracking.py", ("evotrainer.archive", "evotrainer.search", "evotrainer.backends", *MODES)),
]

# The modules on the top that every room may import: they import no room themselves (other top modules only).
GROUND = ("atomic.py", "errors.py", "flat_keys.py", "genome.py", "input_handling.py", "model_schema.py",
          "progress.py", "resolvers.py", "seeding.py", "sweep_index.py", "testhooks.py")
TOP_LIMIT = 16  # modules on the top (issue 27 item 2: "about 15 ground modules"); a new one goes into a room


def _files(unit: str) -> list[Path]:
    """The modules of a room (an entry point, ``<room>/__main__.py``, aside: it sits in the app's layer) or the
    one module on the top."""
    return [PKG / unit] if unit.endswith(".py") else [p for p in sorted((PKG / unit).rglob("*.py"))
                                                      if p.name != "__main__.py"]


def _bad(path: Path, forbidden: tuple[str, ...]) -> set[str]:
    names = module_graph.imported_names(path)
    return {m for m in names if any(m == f or m.startswith(f + ".") for f in forbidden)}


@pytest.mark.parametrize(("unit", "forbidden"), RULES)
def test_import_direction(unit: str, forbidden: tuple[str, ...]) -> None:
    paths = _files(unit)
    assert paths and all(p.is_file() for p in paths), f"no module at evotrainer/{unit}"
    for path in paths:
        bad = _bad(path, forbidden)
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_no_mode_imports_another_mode() -> None:
    """The run modes are siblings: each ``mode=<name>`` (``config.MODES``) is a room of its own, and none imports
    another mode's room (a lazy import inside a function included); what two modes share lives in ``run/``."""
    from evotrainer.config import MODES as RUN_MODES

    missing = [m for m in RUN_MODES if not (PKG / m / "__init__.py").is_file()]
    assert not missing, f"modes without a room evotrainer/<mode>/: {missing}"
    for mode in RUN_MODES:
        others = tuple(f"evotrainer.{m}" for m in RUN_MODES if m != mode)
        for path in _files(mode):
            bad = _bad(path, others)
            assert not bad, f"{path.relative_to(PKG)} (mode={mode}) imports another mode: {sorted(bad)}"


def test_ground_modules_import_no_room() -> None:
    """The ground of the package (on the top, shared by every room) imports only other modules on the top."""
    rooms = tuple(f"evotrainer.{p.name}" for p in PKG.iterdir() if (p / "__init__.py").is_file())
    for name in GROUND:
        bad = _bad(PKG / name, rooms)
        assert not bad, f"{name} imports {sorted(bad)}"


def test_events_are_neutral() -> None:
    """The typed archive events are read and written by every layer: their modules import none of them
    (search, archive, tasks, backends, ...), only the error classes and each other."""
    for path in _files("events"):
        bad = {m for m in module_graph.imported_names(path) if m.startswith("evotrainer.")
               and not m.startswith(("evotrainer.errors.", "evotrainer.events."))}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def _unit_graph() -> dict[str, set[str]]:
    """Room-level import graph: a folder of the package (``search``) or a module on its top (``genome``) ->
    the rooms and top modules it imports."""
    def unit(module: str) -> str:  # a room's entry point (``python -m evotrainer.archive``) is a unit of its own
        parts = module.split(".")
        return f"{parts[1]}/__main__" if len(parts) == 3 and parts[2] == "__main__" else parts[1]

    graph: dict[str, set[str]] = {}
    for module, targets in module_graph.import_graph(PKG).items():
        if module == "evotrainer":
            continue
        imported = {unit(t) for t in targets if t != "evotrainer"}
        graph.setdefault(unit(module), set()).update(imported - {unit(module)})
    return graph


def test_no_cycle_between_the_rooms() -> None:
    """The sub-packages (archive, tasks, search, harness, backends, evolve, run, ...) and the modules on the top
    import each other without a cycle: files on the top count as rooms of their own."""
    found = module_graph.circles(_unit_graph())
    assert not found, "import cycles between rooms: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_circle_between_modules() -> None:
    """No module imports itself through others (a lazy import inside a function included)."""
    found = module_graph.circles(module_graph.import_graph(PKG))
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_circle_finder_finds_a_circle() -> None:
    """The check is not a formality: a lazy import back is a circle, a one-way chain is none."""
    assert module_graph.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert module_graph.circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_top_holds_few_modules() -> None:
    top = module_graph.top_modules(PKG)
    assert len(top) <= TOP_LIMIT, f"{len(top)} modules on the top of evotrainer/ (at most {TOP_LIMIT}): {top}"
    assert set(GROUND) <= set(top)


def _layers() -> list[list[str]]:
    """docs/layout.md's layer table, top to bottom: the rooms of each layer (``evolve/`` -> ``evolve``,
    ``rollout.py`` -> ``rollout``)."""
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    table = text[text.index("| layer | rooms |"):].split("\n\n", 1)[0].splitlines()[2:]
    return [[name.removesuffix("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", row.split("|")[2])
             if name.endswith(("/", ".py"))] for row in table]


def test_rooms_import_their_layer_or_below() -> None:
    level = {unit: i for i, layer in enumerate(_layers()) for unit in layer}
    graph = _unit_graph()
    placed = set(graph)
    unplaced = placed - set(level)
    assert not unplaced, f"rooms in no layer (add them to the table in docs/layout.md): {sorted(unplaced)}"
    upward = sorted(f"{a} -> {b}" for a in placed for b in graph[a] if level[b] < level[a])
    assert not upward, "imports of a layer above: " + ", ".join(upward)
