"""Shared-prefix generation (issue 14): the plan, the prefix store, and equal text with sharing on or off."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.backends.prefix import PrefixStore, common_prefix_length, plan_prefixes
from evotrainer.errors import ConfigError
from evotrainer.model_schema import ModelConfig

TRANSCRIPTS = [
    "\n".join(f"Ann: item {k} of the budget review, Bob will check the vendor quote by Friday." for k in range(6)),
    "\n".join(f"Cy: room booking step {k}; Dana confirms the projector and the catering." for k in range(5)),
]
POLICIES = ["Be brief.", "List decisions, then action items with owners.", "Write minutes as a table of topics."]


def _chat(transcript: str, policy: str, prefill: str = "") -> tuple[dict[str, str], ...]:
    user = f"Meeting transcript:\n\n{transcript}\n\nInstructions:\n\n{policy}\n\nWrite the minutes."
    chat = ({"role": "system", "content": ""}, {"role": "user", "content": user})
    return (*chat, {"role": "assistant", "content": prefill}) if prefill else chat


def _population(params: SamplingParams, prefill: str = "") -> list[GenerationRequest]:
    return [GenerationRequest(_chat(t, p, prefill), params) for p in POLICIES for t in TRANSCRIPTS]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=4))


# ---------------------------------------------------------------- the plan
def test_common_prefix_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([5, 6], [5, 6, 7]) == 2


def test_plan_groups_rows_that_share_a_long_prefix() -> None:
    shared_a, shared_b = list(range(100, 150)), list(range(200, 260))
    seqs = [shared_a + [1, 2], shared_b + [3], shared_a + [4, 5, 6], [9, 9, 9], shared_b + [7, 8]]
    groups = plan_prefixes(seqs, [None] * len(seqs), min_tokens=32)
    by_rows = {g.rows: g.length for g in groups}
    assert by_rows == {(0, 2): 50, (1, 4): 60, (3,): 0}
    assert sorted(i for g in groups for i in g.rows) == list(range(len(seqs)))


def test_plan_never_shares_across_keys_nor_a_whole_row() -> None:
    seq = list(range(40))
    groups = plan_prefixes([seq, seq, seq], ["a", "b", "a"], min_tokens=8)
    assert {(g.key, g.rows, g.length) for g in groups} == {("a", (0, 2), 39), ("b", (1,), 0)}
    assert plan_prefixes([seq[:5], seq[:5]], [None, None], min_tokens=8)[0].length == 0  # shorter than min
    with pytest.raises(ValueError, match="min_tokens"):
        plan_prefixes([seq], [None], min_tokens=0)
    with pytest.raises(ValueError, match="keys"):
        plan_prefixes([seq], [], min_tokens=4)


def test_plan_keeps_a_long_group_rather_than_shrinking_it_for_one_row() -> None:
    long_shared = list(range(300))
    seqs = [long_shared + [1], long_shared + [2], long_shared + [3], long_shared[:40] + [7]]
    groups = plan_prefixes(seqs, [None] * 4, min_tokens=32)
    assert {g.rows: g.length for g in groups} == {(0, 1, 2): 300, (3,): 0}


def test_prefix_store_is_a_byte_bounded_lru() -> None:
    def states(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]  # 16 bytes per token

    store = PrefixStore(max_bytes=16 * 10)
    store.put(None, [1], states(4))
    store.put(None, [2], states(4))
    assert store.get(None, [1]) is not None  # [1] is now the most recent
    store.put(None, [3], states(4))  # evicts [2]
    assert store.get(None, [2]) is None and store.get(None, [3]) is not None
    store.put(None, [4], states(20))  # larger than the whole store: not kept
    assert store.get(None, [4]) is None
    assert store.bytes <= store.max_bytes and (store.hits, store.misses) == (2, 2)
    store.clear()
    assert len(store) == 0 and store.bytes == 0


def test_prefix_store_matches_the_longest_common_prefix() -> None:
    """A stored prefix serves any prompt that starts with part of it (causal states), capped at ``limit``."""
    store = PrefixStore(max_bytes=10**6)
    meeting_a, meeting_b = list(range(100, 160)), list(range(300, 340))
    store.put(None, meeting_a + [1, 2, 3], [(torch.zeros(1, 1, 63, 2), torch.zeros(1, 1, 63, 2))])
    store.put(None, meeting_b, [(torch.zeros(1, 1, 40, 2), torch.zeros(1, 1, 40, 2))])
    assert store.match(None, meeting_a + [9, 9], limit=61) == (60, tuple(meeting_a + [1, 2, 3]))
    assert store.match(None, meeting_a + [1, 2, 3, 4], limit=10) == (10, tuple(meeting_a + [1, 2, 3]))
    assert store.match(None, meeting_b[:20] + [7], limit=20) == (20, tuple(meeting_b))
    assert store.match("adapter", meeting_a, limit=59) == (0, ())  # other states never match
    assert (store.hits, store.misses) == (0, 0)  # matching counts nothing; get does


def test_prefix_store_evicts_entries_never_served_first() -> None:
    """A scan of prompts read once does not push out a prefix that was served (the screening items)."""
    def states(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]  # 16 bytes per token

    store = PrefixStore(max_bytes=16 * 12)
    store.put(None, [1], states(4))
    assert store.get(None, [1]) is not None  # served: kept over the scan below
    for k in range(2, 8):
        store.put(None, [k], states(4))  # each evicts the oldest never-served entry
    assert store.get(None, [1]) is not None and store.get(None, [7]) is not None
    assert store.get(None, [2]) is None and len(store) == 3
    store.put(None, [8], states(4))  # order now [1], [7] (both served), [8]
    store.put(None, [9], states(8))  # two slots: the never-served [8], then the least recently used [1]
    assert store.get(None, [7]) is not None and store.get(None, [1]) is None and store.get(None, [8]) is None


# ---------------------------------------------------------------- the backend
@pytest.mark.parametrize("prefill", ["", "## Decisions\n-"])
@pytest.mark.parametrize(
    "params",
    [SamplingParams(max_new_tokens=10), SamplingParams(max_new_tokens=10, temperature=0.9, top_p=0.9, seed=7)],
    ids=["greedy", "seeded-sampling"],
)
def test_shared_prefix_gives_the_text_of_each_pair_alone(tiny: HFBackend, params: SamplingParams, prefill: str) -> None:
    requests = _population(params, prefill)
    tiny.prefix_store.clear()
    before = tiny.stats.prefix_tokens_reused
    shared = tiny.generate(requests)
    assert tiny.stats.prefix_tokens_reused > before  # the transcripts really were shared
    tiny.prefix_sharing = False
    try:
        alone = [tiny.generate([r])[0] for r in requests]
    finally:
        tiny.prefix_sharing = True
    assert [g.text for g in shared] == [g.text for g in alone]
    assert shared == alone  # token counts and finish reasons too
    if prefill:
        assert all(g.text.startswith(prefill) or g.text == "" for g in shared)


def test_prefix_store_serves_a_second_call(tiny: HFBackend) -> None:
    requests = _population(SamplingParams(max_new_tokens=6))
    tiny.prefix_store.clear()
    first = tiny.generate(requests)
    computed = tiny.stats.prefix_tokens_computed
    second = tiny.generate(requests)
    assert second == first
    assert tiny.stats.prefix_tokens_computed == computed  # nothing recomputed: all from the store
    assert tiny.prefix_store.hits >= len(TRANSCRIPTS)


def test_a_meeting_read_before_serves_later_policies_alone(tiny: HFBackend) -> None:
    """One policy alone stores its prompts; another policy alone on the same meetings, a later call, reuses
    the meeting part (the longest common prefix) and computes no prefix; the text equals a store-less run."""
    params = SamplingParams(max_new_tokens=8)
    first = [GenerationRequest(_chat(t, POLICIES[0]), params) for t in TRANSCRIPTS]
    later = [GenerationRequest(_chat(t, POLICIES[2]), params) for t in TRANSCRIPTS]
    tiny.prefix_store.clear()
    tiny.generate(first)
    assert len(tiny.prefix_store) == len(TRANSCRIPTS)  # each lone row stored its prompt
    computed, reused = tiny.stats.prefix_tokens_computed, tiny.stats.prefix_tokens_reused
    served = tiny.generate(later)
    assert tiny.stats.prefix_tokens_computed == computed  # nothing recomputed
    assert tiny.stats.prefix_tokens_reused - reused >= sum(len(t) // 8 for t in TRANSCRIPTS)
    tiny.prefix_sharing = False
    try:
        alone = [tiny.generate([r])[0] for r in later]
    finally:
        tiny.prefix_sharing = True
    assert served == alone


def test_prefix_settings_are_validated(tiny_model_dir: Path) -> None:
    with pytest.raises(ConfigError, match="prefix_min_tokens"):
        HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", prefix_min_tokens=0))
    with pytest.raises(ConfigError, match="prefix_cache_mb"):
        HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", prefix_cache_mb=-1))


def test_token_budget_closes_chunks(tiny_model_dir: Path) -> None:
    backend = HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=8, max_batch_tokens=1))
    requests = _population(SamplingParams(max_new_tokens=4))
    prepared = [backend._prepare(i, r) for i, r in enumerate(requests)]
    order, prefix_len, _ = backend._schedule(prepared, requests)
    assert [len(c) for c in backend._chunks(order, prepared, requests, prefix_len)] == [1] * len(requests)
    roomy = HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=4, max_batch_tokens=10**6))
    assert [len(c) for c in roomy._chunks(order, prepared, requests, prefix_len)] == [4, 2]
    assert roomy.generate(requests) == backend.generate(requests)  # chunking never changes the text


def test_converted_model_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evotrainer.backends.converted import converted_dir as _converted_dir

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", str(tmp_path / "cache"))
    folder = _converted_dir(str(tmp_path), "m.gguf", torch.float32)
    assert folder is not None and folder.parent == tmp_path / "cache" and folder.name.startswith("m-4-")
    assert "float32" in folder.name
    assert _converted_dir(str(tmp_path), None, torch.float32) is None  # not a GGUF: nothing to cache
    monkeypatch.setenv("EVOTRAINER_MODEL_CACHE", "off")
    assert _converted_dir(str(tmp_path), "m.gguf", torch.float32) is None
