"""The wheel's package list in ``pyproject.toml`` is complete: every code folder and every shipped data file.

``pyproject.toml`` lists the packages (the data folders at the repository root are mapped into the package
with ``package-dir``, which setuptools' automatic discovery cannot combine with), so a new subpackage or
data folder must be added there; this fast check names what is missing. ``tests/test_install.py`` builds
and runs the wheel itself.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import pytest

from evotrainer.config import PACKAGE_DATA, PROJECT_ROOT

tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11 reads TOML without a dependency")

SETUPTOOLS = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """The source folder of ``package``: its longest ``package-dir`` prefix, else its dotted path."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        mapped = SETUPTOOLS.get("package-dir", {}).get(".".join(parts[:n]))
        if mapped is not None:
            return PROJECT_ROOT / mapped / Path(*parts[n:])
    return PROJECT_ROOT / Path(*parts)


def test_every_code_folder_is_a_listed_package() -> None:
    code = {".".join(p.parent.relative_to(PROJECT_ROOT).parts)
            for p in (PROJECT_ROOT / "evotrainer").rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(code - set(SETUPTOOLS["packages"]))
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_every_shipped_data_file_is_package_data() -> None:
    assert PACKAGE_DATA == PROJECT_ROOT, "a checkout keeps conf/, populations/, validation_set/ at its root"
    listed = {_folder(p): p for p in SETUPTOOLS["packages"]}
    for top in ("conf", "populations", "validation_set"):
        for path in sorted((PROJECT_ROOT / top).rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts:
                continue
            package = listed.get(path.parent)
            assert package is not None, f"{path.parent.relative_to(PROJECT_ROOT)}/ is not a listed package"
            patterns = SETUPTOOLS["package-data"].get(package, [])
            assert any(fnmatch(path.name, g) for g in patterns), \
                f"{path.relative_to(PROJECT_ROOT)} is not in package-data of {package}"
