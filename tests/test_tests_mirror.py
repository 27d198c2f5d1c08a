"""The tests mirror the package: ``tests/<room>/...`` holds the tests of ``evotrainer/<room>/...``, and ``tests/``
itself holds the tests of the top-level modules and of the checkout as a whole (docs, README, layout, packaging,
the golden check, the command line end to end). ``tests/benchmark_scripts/`` holds the tests of ``benchmarks/``
(a ``tests/benchmarks`` package would shadow the real one, as pytest puts ``tests/`` on ``sys.path``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "evotrainer"
OUTSIDE_THE_PACKAGE = {"benchmark_scripts": ROOT / "benchmarks"}  # test folder -> the folder it mirrors


def _test_folders() -> list[Path]:
    return sorted({f.parent for f in TESTS.rglob("test_*.py")} - {TESTS})


def test_a_test_folder_that_mirrors_no_package_folder_is_found() -> None:
    strays = []
    for folder in _test_folders():
        relative = folder.relative_to(TESTS)
        mirrored = OUTSIDE_THE_PACKAGE.get(relative.parts[0], PACKAGE / relative.parts[0]) / Path(*relative.parts[1:])
        if not mirrored.is_dir():
            strays.append(f"tests/{relative.as_posix()}")
    assert not strays, f"test folders that mirror no folder of evotrainer/: {strays}"


def test_a_top_level_test_named_after_a_room_or_a_room_module_is_found() -> None:
    top_modules = {p.stem for p in PACKAGE.glob("*.py")}
    rooms = [p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    owners: dict[str, list[str]] = {room.name: [room.name] for room in rooms}
    for room in rooms:
        for module in room.glob("*.py"):
            if not module.stem.startswith("__") and module.stem not in top_modules:
                owners.setdefault(module.stem, []).append(room.name)
    misplaced = []
    for test in sorted(TESTS.glob("test_*.py")):
        subject = test.stem.removeprefix("test_")
        names = [name for name in owners if subject == name or subject.startswith(name + "_")]
        if names:
            misplaced.append(f"{test.name} -> tests/{' or '.join(sorted(owners[max(names, key=len)]))}/")
    assert not misplaced, f"top-level tests of a room's module, to move into the room's folder: {misplaced}"


def test_a_test_folder_without_init_py_is_found() -> None:
    """Every test folder is a package, so two folders may hold test files of the same name (pytest's default
    ``prepend`` import mode names a module by its folder's package path)."""
    loose = [f"tests/{f.relative_to(TESTS).as_posix()}" for f in _test_folders() if not (f / "__init__.py").is_file()]
    assert not loose, f"test folders without __init__.py: {loose}"
