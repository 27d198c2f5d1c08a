"""Version floors that allow broken pairs (issue 26, line 2).

pyproject.toml's ranges must not admit a combination known to break this package:

- pycma 3.3 with NumPy 2: ``CMAEvolutionStrategy`` with ``bounds`` (every harness search) raises "Unable to
  avoid copy while creating an array" (pycma#253; fixed in cma 3.4.0). Checked by hand with cma 3.3.0 and
  NumPy 2.4.6: ``CMASearch(3, [0.5] * 3, 0.25, 6, seed=0)`` raises; with cma 3.4.0 it asks and tells.
- Hydra 1.3 on Python 3.14: argparse's new help check rejects Hydra's lazy ``--shell-completion`` help, so
  every ``@hydra.main`` app crashes before it starts (hydra#3121). No released hydra-core has the fix (1.3.8
  is the newest; the fix is on Hydra's 1.4 line), so the interpreter is refused at install instead.

- MkDocs 2.0: announced as a ground-up rewrite without a plugin system, with a rewritten theming system and a
  new configuration format, and no migration path (the MkDocs project's announcement, summarised by the
  Material for MkDocs team: squidfunk.github.io/mkdocs-material/blog/2026/02/18/mkdocs-2.0/). The dev extra's
  ``mkdocs>=1.6`` would take it and ``tests/test_docs.py``'s build of ``mkdocs.yml`` would break: bounded ``<2``.

The declared ranges come from the checkout's pyproject.toml, the installed versions from
``importlib.metadata``.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python >= 3.11")

_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _project() -> dict:
    return tomllib.loads(_PYPROJECT.read_text(encoding="utf-8"))["project"]


def _declared() -> dict[str, Requirement]:
    """The core dependencies that apply to this interpreter, by normalised name."""
    reqs = [Requirement(line) for line in _project()["dependencies"]]
    return {r.name.lower().replace("_", "-"): r for r in reqs if r.marker is None or r.marker.evaluate()}


def test_installed_versions_meet_the_declared_floors() -> None:
    missing, outside = [], []
    for name, req in _declared().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            missing.append(name)
            continue
        if not req.specifier.contains(installed, prereleases=True):
            outside.append(f"{name} {installed} not in {req.specifier}")
    assert not missing, f"declared but not installed: {missing}"
    assert not outside, outside


def test_declared_floors_exclude_pycma_3_3_with_numpy_2() -> None:
    declared = _declared()
    cma, numpy = declared["cma"].specifier, declared["numpy"].specifier
    assert numpy.contains("2.0.0"), "the numpy range no longer admits NumPy 2: this check needs updating"
    assert not cma.contains("3.3.0"), f"cma{cma} admits pycma 3.3, which cannot build a bounded CMA-ES on NumPy 2"
    assert cma.contains("3.4.0")
    installed_cma, installed_numpy = Version(version("cma")), Version(version("numpy"))
    assert not (installed_cma < Version("3.4") and installed_numpy.major >= 2), (installed_cma, installed_numpy)


def test_python_3_14_is_refused_while_hydra_1_3_is_allowed() -> None:
    python = SpecifierSet(_project()["requires-python"])
    hydra = _declared()["hydra-core"].specifier
    hydra_13 = [v for v in ("1.3.2", "1.3.8") if hydra.contains(v)]
    if hydra_13:  # every released 1.3 crashes in argparse on 3.14 (hydra#3121)
        assert not python.contains("3.14.0"), f"requires-python {python} admits 3.14 with hydra-core {hydra_13}"
    assert python.contains("3.13.9") and python.contains("3.10.0")
    here = ".".join(map(str, sys.version_info[:3]))
    assert python.contains(here), f"this interpreter {here} is outside requires-python {python}"


def test_mkdocs_2_with_no_plugins_and_a_new_config_format_is_excluded() -> None:
    (mkdocs,) = [Requirement(r) for r in _project()["optional-dependencies"]["dev"] if Requirement(r).name == "mkdocs"]
    assert mkdocs.specifier.contains("1.6.1"), f"mkdocs{mkdocs.specifier} no longer admits the 1.x line docs/ is built with"
    assert not mkdocs.specifier.contains("2.0.0", prereleases=True), (
        f"mkdocs{mkdocs.specifier} admits MkDocs 2, which cannot build mkdocs.yml")
    assert not mkdocs.specifier.contains("2.0.0a1", prereleases=True)
