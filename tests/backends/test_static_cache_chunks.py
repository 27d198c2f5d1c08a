"""A static KV cache reused across batch sizes (issue 26, line 10; transformers#42454).

``generate(cache_implementation="static")`` keeps one ``StaticCache`` on the model and reuses it on the next
call; a call with another batch size then crashes or reads rows of the previous batch. The backend never
asks ``generate`` for a cache: :meth:`HFBackend._chunk_cache` builds a fresh one for every chunk, sized to that
chunk's rows and width. This test keeps that guard: five requests in chunks of 2, 2 and 1 give the text of
the dynamic cache and of one request at a time, and every chunk had its own cache with its own row count.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.model_schema import ModelConfig

_SYSTEM = ("You write the minutes of a meeting: topics, decisions and action items with their owners. "
           "Keep every name exactly as the transcript spells it and add nothing that was not said.")
_TRANSCRIPTS = [
    "Ann: the budget is fixed. Bob: I will send the report on Friday.",
    "Cho: we move the launch to May. Dev: fine.",
    "Eve: the new chairs arrive next week, Fay orders the desks, and Gus books the room for the review.",
    "Hal: no decision today.",
    "Ivy: the supplier raised prices by ten percent, so we ask two others for quotes before the end of "
    "the month; Jon writes to them.",
]


def _requests() -> list[GenerationRequest]:
    return [GenerationRequest(({"role": "system", "content": _SYSTEM}, {"role": "user", "content": t}),
                              SamplingParams(max_new_tokens=6)) for t in _TRANSCRIPTS]


@pytest.fixture(scope="module")
def backends(tiny_model_dir: Path) -> dict[str, HFBackend]:
    """Chunks of 2 with a static and with a dynamic cache, and one request at a time (static)."""
    def load(kv_cache: str, batch_size: int) -> HFBackend:
        return HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=batch_size, kv_cache=kv_cache,
                                         prefix_min_tokens=8, prefix_cache_mb=0))

    return {"static": load("static", 2), "dynamic": load("dynamic", 2), "single": load("static", 1)}


@pytest.mark.parametrize("prefix_sharing", [False, True], ids=["whole-prompts", "shared-prefix"])
def test_static_cache_is_not_reused_across_chunk_sizes(
    backends: dict[str, HFBackend], prefix_sharing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for backend in backends.values():
        monkeypatch.setattr(backend, "prefix_sharing", prefix_sharing)
    static = backends["static"]
    requests = _requests()
    prepared = [static._prepare(i, r) for i, r in enumerate(requests)]
    order, prefix_len, _ = static._schedule(prepared, requests)
    assert [len(c) for c in static._chunks(order, prepared, requests, prefix_len)] == [2, 2, 1]
    assert prefix_sharing == any(prefix_len)  # the shared system prompt really is shared when asked

    caches: list[tuple[int, object]] = []
    build = static._chunk_cache

    def spy(prepared_rows, chunk_requests, chunk_prefix_len, capacity, sources=None):
        cache = build(prepared_rows, chunk_requests, chunk_prefix_len, capacity, sources)
        caches.append((len(prepared_rows), cache))
        return cache

    monkeypatch.setattr(static, "_chunk_cache", spy)
    chunked = static.generate(requests)
    again = static.generate(requests[:3])  # the next call: chunks of 2 and 1 on the same backend
    assert [rows for rows, _ in caches] == [2, 2, 1, 2, 1]
    assert len({id(cache) for _, cache in caches}) == len(caches)  # a fresh cache for every chunk
    for rows, cache in caches:
        assert type(cache).__name__ == "StaticCache"
        assert cache.layers[0].keys.shape[0] == rows  # (B, kv heads, capacity, head dim)

    dynamic = backends["dynamic"].generate(requests)
    one_at_a_time = [backends["single"].generate([r])[0] for r in requests]
    assert [g.text for g in chunked] == [g.text for g in dynamic] == [g.text for g in one_at_a_time]
    assert chunked == dynamic == one_at_a_time  # token counts and finish reasons too
    assert again == chunked[:3]
