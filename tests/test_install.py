"""A real install: the wheel carries its configs and data, and runs the smoke experiment outside the checkout.

The wheel is built from a copy of the package and of the top-level data folders that ``pyproject.toml`` maps
into it (``pip wheel --no-deps --no-build-isolation``, so nothing is downloaded and the checkout gets no
``build/`` folder) and installed, not editable, into a fresh venv that sees the test venv's dependencies
through a ``.pth`` line. A ``.pth`` line only adds a folder to ``sys.path``: the ``.pth`` files inside it
(the checkout's editable finder among them) are not run, so the checkout is not importable there. The run
starts from an empty temporary folder. Slow: a wheel build and a smoke run on the tiny model (about a minute
on 2 cores).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.config import PROJECT_ROOT

pytestmark = pytest.mark.slow

_ENV = dict(os.environ, HF_HUB_OFFLINE="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
_ENV.pop("PYTHONPATH", None)


def _check(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=_ENV, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd[:4]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv's python with the wheel installed non-editable and the test venv's dependencies visible."""
    pytest.importorskip("setuptools", reason="building the wheel without build isolation needs setuptools "
                        "(the dev extra installs it)")
    root = tmp_path_factory.mktemp("install")
    src = root / "src"
    shutil.copytree(PROJECT_ROOT / "evotrainer", src / "evotrainer",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("conf", "populations", "validation_set"):  # mapped into the package by pyproject.toml
        shutil.copytree(PROJECT_ROOT / name, src / name)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PROJECT_ROOT / name, src / name)
    _check([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root / "dist"),
            str(src)], cwd=root, timeout=600)
    wheel = next((root / "dist").glob("evotrainer-*.whl"))

    _check([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], cwd=root, timeout=300)
    python = root / "venv" / "bin" / "python"
    purelib = Path(_check([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          cwd=root, timeout=60).stdout.strip())
    _check([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(purelib),
            str(wheel)], cwd=root, timeout=300)
    deps = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    (purelib / "_evotrainer_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    return python


def test_wheel_carries_the_shipped_data(installed: Path, tmp_path: Path) -> None:
    probe = ("import json, evotrainer, evotrainer.config as c; "
             "print(json.dumps({'path': list(evotrainer.__path__), 'data': str(c.PACKAGE_DATA)}))")
    out = json.loads(_check([str(installed), "-c", probe], cwd=tmp_path, timeout=120).stdout)
    venv = installed.parent.parent
    assert out["path"] == [out["data"]], "the checkout is importable beside the installed copy"
    data = Path(out["data"])
    assert data.is_relative_to(venv)
    for rel in ("conf/config.yaml", "conf/experiment/smoke.yaml", "conf/experiment/meeting_minutes.yaml",
                "populations/meeting_minutes.yaml", "validation_set/meeting_minutes.jsonl",
                "validation_set/qmsum_meetings.jsonl", "validation_set/SHA256SUMS", "validation_set/README.md"):
        assert (data / rel).is_file(), rel


def test_console_entry_finds_the_packaged_config(installed: Path, tmp_path: Path) -> None:
    """The console script imports ``evotrainer.__main__`` as a module; Hydra reads the installed ``conf/``."""
    proc = _check([str(installed), "-c", "from evotrainer.__main__ import main; main()", "--help"],
                  cwd=tmp_path, timeout=300)
    assert "smoke" in proc.stdout and "meeting_minutes" in proc.stdout


def test_installed_smoke_run_outside_the_checkout(installed: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    proc = _check([str(installed), "-m", "evotrainer", "+experiment=smoke", f"model.path={tiny_model_dir}",
                   "model.dtype=float32"],
                  cwd=tmp_path, timeout=1800)
    runs = list((tmp_path / "archive" / "runs").glob("*/archive.db"))
    assert len(runs) == 1, proc.stdout[-2000:]
    assert (runs[0].parent / "report.html").is_file()  # the live report, beside the archive
    with ArchiveStore(runs[0], read_only=True) as store:
        (run,) = store.list_runs()
        assert store.events(run.run_id, kind="summary")
    assert run.code_version == version("evotrainer")  # the installed package's version, not a git describe
    shown = _check([str(installed), "-m", "evotrainer.archive", "show", str(runs[0])], cwd=tmp_path, timeout=300)
    assert "S_val" in shown.stdout
