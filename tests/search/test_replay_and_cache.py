"""The replay backend (tests only) and the fitness cache key."""

from __future__ import annotations

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams, request_hash
from evotrainer.errors import DataError, ModelError
from evotrainer.search.fitness_cache import CacheKey, FitnessCache, settings_key

from ._fakes import FakeMutator
from ._replay import RecordingLLM, ReplayLLM


def _request(text: str, seed: int = 0) -> GenerationRequest:
    return GenerationRequest(({"role": "user", "content": f"Current instruction:\n<<<\n{text}\n>>>\n\nChange: x"},),
                             SamplingParams(temperature=0.7, seed=seed))


def test_record_then_replay(tmp_path) -> None:
    path = tmp_path / "rec.jsonl"
    recorder = RecordingLLM(FakeMutator(), path)
    requests = [_request("Be brief."), _request("Name owners.", seed=3)]
    recorded = recorder.generate(requests)
    replay = ReplayLLM(path)
    assert [g.text for g in replay.generate(requests[::-1])] == [g.text for g in recorded][::-1]
    with pytest.raises(ModelError, match="no recorded generation"):
        replay.generate([_request("Be brief.", seed=1)])  # the seed is part of the identity


def test_request_hash_covers_messages_params_and_adapter() -> None:
    r = _request("a")
    assert request_hash(r) == request_hash(_request("a"))
    assert request_hash(r) != request_hash(_request("b"))
    assert request_hash(r) != request_hash(_request("a", seed=1))
    assert request_hash(r) != request_hash(GenerationRequest(r.messages, r.params, adapter="ad"))


def test_replay_rejects_malformed_files(tmp_path) -> None:
    with pytest.raises(DataError, match="not found"):
        ReplayLLM(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hash": "a", "text": "x"}\nnot json\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2"):
        ReplayLLM(bad)
    bad.write_text('{"hash": "a"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:1"):
        ReplayLLM(bad)


def test_settings_key_changes_with_every_part() -> None:
    base = dict(model="m", sampling=SamplingParams(), adapter_version="base",
                reward_weights={"a": 0.5, "b": 0.5}, scorer_version="v1")
    key = settings_key(**base)
    assert key == settings_key(**{**base, "reward_weights": {"b": 0.5, "a": 0.5}})  # key order irrelevant
    for change in ({"sampling": SamplingParams(seed=1)}, {"adapter_version": "r1"}, {"scorer_version": "v2"},
                   {"reward_weights": {"a": 0.6, "b": 0.4}}, {"model": "other"},
                   {"sampling": SamplingParams(temperature=0.7)}):
        assert settings_key(**{**base, **change}) != key, change


def test_fitness_cache_counts_hits_and_misses() -> None:
    cache: FitnessCache[float] = FitnessCache()
    key = CacheKey("reward", "g", "b", "s")
    assert cache.get(key) is None and cache.misses == 1
    cache.put(key, 0.5)
    assert cache.get(key) == 0.5 and cache.hits == 1 and len(cache) == 1
    assert cache.get(CacheKey("reward", "g", "b", "other")) is None
