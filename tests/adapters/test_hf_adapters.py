"""HFBackend adapter loading: one name per folder, mixed-adapter batches, exact restore on unload."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.errors import ModelError

from .conftest import random_adapter

CHATS = [
    ({"role": "user", "content": "Ann will send the budget by Friday."},),
    ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Dana books the room " * 5}),
    ({"role": "user", "content": "hello"},),
]


def _reqs(adapter: str | None) -> list[GenerationRequest]:
    return [GenerationRequest(c, SamplingParams(max_new_tokens=10, no_repeat_ngram_size=0), adapter) for c in CHATS]


@pytest.fixture(scope="module")
def adapters(tiny_backend: HFBackend, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("hf_adapters")
    return [str(random_adapter(tiny_backend, root / f"ad{i}", seed=i)) for i in range(2)]


def test_adapter_changes_outputs_and_unloading_restores_the_base_exactly(
    tiny_backend: HFBackend, adapters: list[str]
) -> None:
    state = {k: v.clone() for k, v in tiny_backend.model.state_dict().items()}
    x = torch.tensor([[1, 5, 9, 200, 33]])
    with torch.no_grad():
        logits = tiny_backend.model(x).logits
    base = tiny_backend.generate(_reqs(None))
    tuned = tiny_backend.generate(_reqs(adapters[0]))
    assert [g.text for g in tuned] != [g.text for g in base]
    assert list(tiny_backend._adapters) == [str(Path(adapters[0]).resolve())]
    with torch.no_grad():  # adapters are dormant outside generate(): a direct call runs the base model
        assert torch.equal(tiny_backend.model(x).logits, logits)
    assert tiny_backend.generate(_reqs(None)) == base
    tiny_backend.unload_adapters()
    assert tiny_backend._adapters == {}
    assert tiny_backend.model.state_dict().keys() == state.keys()
    assert all(torch.equal(v, state[k]) for k, v in tiny_backend.model.state_dict().items())
    with torch.no_grad():
        assert torch.equal(tiny_backend.model(x).logits, logits)
    assert tiny_backend.generate(_reqs(None)) == base


def test_mixed_adapter_batch_equals_one_policy_at_a_time(tiny_backend: HFBackend, adapters: list[str]) -> None:
    alone = {a: tiny_backend.generate(_reqs(a)) for a in (None, *adapters)}
    mixed = [GenerationRequest(c, SamplingParams(max_new_tokens=10, no_repeat_ngram_size=0), a)
             for a in (adapters[1], None, adapters[0]) for c in CHATS]
    out = tiny_backend.generate(mixed)
    assert out[:3] == alone[adapters[1]] and out[3:6] == alone[None] and out[6:] == alone[adapters[0]]
    assert alone[adapters[0]] != alone[adapters[1]]
    names = {k: e.name for k, e in tiny_backend._adapters.items()}
    assert len(names) == 2 and len(set(names.values())) == 2
    assert tiny_backend.load_adapter(adapters[0]) == names[str(Path(adapters[0]).resolve())]  # one name per folder


def test_unload_one_adapter_and_reload_a_rewritten_folder(
    tiny_backend: HFBackend, adapters: list[str], tmp_path: Path
) -> None:
    folder = tmp_path / "moving"
    shutil.copytree(adapters[0], folder)
    first = tiny_backend.generate(_reqs(str(folder)))
    shutil.copyfile(Path(adapters[1]) / "adapter_model.safetensors", folder / "adapter_model.safetensors")
    stat = (folder / "adapter_model.safetensors").stat()
    os.utime(folder / "adapter_model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    second = tiny_backend.generate(_reqs(str(folder)))
    assert first != second and second == tiny_backend.generate(_reqs(adapters[1]))
    assert tiny_backend.unload_adapter(folder) and not tiny_backend.unload_adapter(folder)
    assert str(folder.resolve()) not in tiny_backend._adapters


def test_lru_eviction_keeps_the_cap(tiny_backend: HFBackend, adapters: list[str]) -> None:
    tiny_backend.unload_adapters()
    tiny_backend.max_loaded_adapters = 1
    try:
        tiny_backend.generate(_reqs(adapters[0]))
        tiny_backend.generate(_reqs(adapters[1]))
        assert list(tiny_backend._adapters) == [str(Path(adapters[1]).resolve())]
        both = tiny_backend.generate([*_reqs(adapters[0]), *_reqs(adapters[1])])  # a call may exceed the cap
        assert both[:3] == tiny_backend.generate(_reqs(adapters[0]))
    finally:
        tiny_backend.max_loaded_adapters = 64
        tiny_backend.unload_adapters()


def test_bad_adapter_folders_raise_model_error(tiny_backend: HFBackend, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not a PEFT adapter folder"):
        tiny_backend.generate([GenerationRequest(CHATS[0], adapter=str(tmp_path / "missing"))])
    foreign = random_adapter(tiny_backend, tmp_path / "foreign", seed=3, rank=2)
    (foreign / "adapter_model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelError, match="cannot be loaded.*unreadable"):
        tiny_backend.generate([GenerationRequest(CHATS[0], adapter=str(foreign))])
    assert tiny_backend._adapters == {} and tiny_backend._peft is None
