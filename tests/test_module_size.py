"""No module of the package is over 500 lines (issue 43's target; 600 since issue 27): a file that grows past it is
split into modules with one job each, rather than this limit being raised."""

from __future__ import annotations

from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "evotrainer"
LIMIT = 501


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_every_module_is_under_the_size_limit() -> None:
    too_long = {
        path.relative_to(PKG).as_posix(): n
        for path in sorted(PKG.rglob("*.py"))
        if (n := _lines(path)) >= LIMIT
    }
    assert not too_long, f"modules of {LIMIT} lines or more (split them by job): " + ", ".join(
        f"evotrainer/{name} ({n})" for name, n in too_long.items()
    )

