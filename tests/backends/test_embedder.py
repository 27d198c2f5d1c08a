"""MiniLMEmbedder on the embedded all-MiniLM-L6-v2 (loads in ~0.1 s)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evotrainer.backends.base import Embedder
from evotrainer.backends.embedder import MiniLMEmbedder
from evotrainer.errors import ModelError


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.mark.real_model
def test_rows_are_normalised_float32(embedder: MiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    vectors = embedder.encode(["Dana will send the budget by Friday.", "hello", ""])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.encode([]).shape == (0, 384)


@pytest.mark.real_model
def test_similar_sentences_are_closer(embedder: MiniLMEmbedder) -> None:
    a, b, c = embedder.encode(
        [
            "Dana will send the revised budget to finance by Friday.",
            "By Friday, Dana sends finance the updated budget.",
            "The cat slept on the warm windowsill all afternoon.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.3  # rows are L2-normalised: a dot product is the cosine


def test_missing_embedder_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no_such_dir"):
        MiniLMEmbedder(path=str(tmp_path / "no_such_dir"))
