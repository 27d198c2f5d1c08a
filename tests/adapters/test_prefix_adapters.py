"""Shared prefixes with adapter rows in the batch: a prefix's states are per adapter (issue 14)."""

from __future__ import annotations

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend

from .conftest import random_adapter

TRANSCRIPT = "\n".join(f"Eve: release step {k}; Fay tests build {k} and reports on Monday." for k in range(6))
POLICIES = ["Be brief.", "Decisions first, then action items."]


@pytest.fixture(scope="module")
def adapters(tiny_backend: HFBackend, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("prefix_adapters")
    return [str(random_adapter(tiny_backend, root / f"ad{i}", seed=10 + i)) for i in range(2)]


def test_mixed_adapter_rows_share_prefixes_per_adapter(tiny_backend: HFBackend, adapters: list[str]) -> None:
    params = SamplingParams(max_new_tokens=8, no_repeat_ngram_size=0)
    requests = [
        GenerationRequest(
            ({"role": "system", "content": ""},
             {"role": "user", "content": f"Transcript:\n{TRANSCRIPT}\n\nInstructions: {policy}"}),
            params,
            adapter,
        )
        for adapter in (None, adapters[0], adapters[1])
        for policy in POLICIES
    ]
    tiny_backend.prefix_store.clear()
    misses = tiny_backend.prefix_store.misses
    shared = tiny_backend.generate(requests)
    computed_prefixes = tiny_backend.prefix_store.misses - misses
    tiny_backend.prefix_sharing = False
    try:
        alone = [tiny_backend.generate([r])[0] for r in requests]
    finally:
        tiny_backend.prefix_sharing = True
    assert shared == alone
    assert len({g.text for g in shared}) > 1  # the adapters really change the text
    assert computed_prefixes == 3  # one prefix computation per adapter (base, a0, a1), not per row
