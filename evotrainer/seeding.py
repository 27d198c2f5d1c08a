"""One root seed, explicit RNGs: every component asks for its own named stream.

Streams are derived with ``numpy.random.SeedSequence`` from (root seed, stable hash of the stream
name), so adding a new stream never shifts the numbers of existing ones (numpy's recommended way
to make independent streams: https://numpy.org/doc/stable/reference/random/parallel.html).
"""

from __future__ import annotations

import hashlib
import random

import numpy as np

__all__ = ["Seeds"]


class Seeds:
    """Named, independent random streams from one root seed.

    Args:
        root: the run's root seed (any non-negative int).
    """

    def __init__(self, root: int) -> None:
        if root < 0:
            raise ValueError(f"seed must be >= 0, got {root}")
        self.root = int(root)

    def _entropy(self, name: str) -> list[int]:
        digest = hashlib.sha256(name.encode("utf-8")).digest()
        return [self.root, int.from_bytes(digest[:8], "little")]

    def numpy(self, name: str) -> np.random.Generator:
        """A numpy Generator for stream ``name``."""
        return np.random.default_rng(np.random.SeedSequence(self._entropy(name)))

    def python(self, name: str) -> random.Random:
        """A ``random.Random`` for stream ``name`` (for code that wants the stdlib API)."""
        return random.Random(self.int(name))

    def int(self, name: str, high: int = 2**31 - 1) -> int:
        """A reproducible integer seed in [0, high) for stream ``name`` (e.g. pycma's seed)."""
        return int(np.random.SeedSequence(self._entropy(name)).generate_state(1)[0]) % high
