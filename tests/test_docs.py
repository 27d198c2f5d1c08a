"""The user documentation (issue 27, item 6): the MkDocs site builds strictly, and its generated references
match the code (the config schema, the CLIs' --help)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True, timeout=300)


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link or anchor, a nav entry without its page or a page outside the nav
    fails (mkdocs.yml turns those checks into warnings, and --strict turns warnings into errors)."""
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is not a formality: a page linking a missing page or heading stops it."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    page = tmp_path / "docs" / "concepts.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no_such_page.md).\n", encoding="utf-8")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no_such_page.md" in done.stderr
    page.write_text(page.read_text(encoding="utf-8").replace("no_such_page.md", "runs.md#no-such-heading"),
                    encoding="utf-8")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-heading" in done.stderr


def test_the_config_reference_is_up_to_date() -> None:
    """docs/reference/config.md is what scripts/gen_config_reference.py writes from the schema today."""
    gen = _script("gen_config_reference")
    assert gen.OUT.read_text(encoding="utf-8") == gen.config_reference(), (
        "docs/reference/config.md is out of date: run python scripts/gen_config_reference.py")


def test_the_config_reference_names_every_key() -> None:
    """Every leaf key of the composed config has a row (or sits under a row saying "Same keys as ..."), and
    every schema field has help text."""
    from omegaconf import OmegaConf

    gen = _script("gen_config_reference")
    text = gen.OUT.read_text(encoding="utf-8")
    cfg = OmegaConf.to_container(gen._compose([]))

    def keys(node: object, prefix: str) -> list[str]:
        if isinstance(node, dict) and node and prefix not in ("task.difficulty", "task.reward_weights",
                                                               "outer.space", "task.options", "task.field_map",
                                                               "evaluate.field_map", "inner.operator_shares"):
            return [k for name, value in node.items() for k in keys(value, f"{prefix}.{name}" if prefix else name)]
        return [prefix]

    shared = {row.split("`")[1] for row in text.splitlines() if row.startswith("| `") and "Same keys as" in row}
    missing = [k for k in keys(cfg, "") if f"| `{k}` |" not in text
               and not any(k.startswith(prefix + ".") for prefix in shared)]
    assert not missing, f"keys without a row: {missing}"
    undocumented = [row.split("|")[1].strip() for row in text.splitlines()
                    if row.startswith("| `") and row.rstrip().endswith("|  |")]
    assert not undocumented, f"keys without help text (add a comment beside the field): {undocumented}"


def test_the_cli_reference_is_up_to_date() -> None:
    """docs/reference/cli.md is what scripts/gen_cli_reference.py writes from the CLIs' --help today."""
    gen = _script("gen_cli_reference")
    assert gen.OUT.read_text(encoding="utf-8") == gen.cli_reference(), (
        "docs/reference/cli.md is out of date: run python scripts/gen_cli_reference.py")
