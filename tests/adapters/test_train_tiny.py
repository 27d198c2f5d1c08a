"""train_lora on the tiny model: adapters change, the base does not, parents continue, runs reproduce."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from evotrainer.adapters.sft_data import collate, encode_chat
from evotrainer.adapters.train import _answer_loss, train_lora
from evotrainer.backends.adapter_files import ADAPTER_META_FILE
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.errors import ConfigError, DataError
from evotrainer.model_schema import LoraSettings

from .conftest import POOL, REPLAY

CFG = LoraSettings(rank=4, alpha=8, steps=3, batch_size=2, max_length=128, lr=1e-2)


def _base_state(backend: HFBackend) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in backend.model.state_dict().items()}


def _lora(folder: Path | str, kind: str) -> dict[str, torch.Tensor]:
    return {k: v for k, v in load_file(str(Path(folder) / "adapter_model.safetensors")).items() if kind in k}


def _requests(adapter: str | None = None) -> list[GenerationRequest]:
    return [GenerationRequest(POOL[i].messages[:2], SamplingParams(max_new_tokens=8), adapter) for i in range(3)]


@pytest.fixture(scope="module")
def trained(tiny_backend: HFBackend, tmp_path_factory: pytest.TempPathFactory):
    before = _base_state(tiny_backend)
    flags = {n: p.requires_grad for n, p in tiny_backend.model.named_parameters()}
    base_out = tiny_backend.generate(_requests())
    out = tmp_path_factory.mktemp("adapters") / "round1"
    torch_state = torch.random.get_rng_state()
    result = train_lora(tiny_backend, POOL, REPLAY, CFG, out, rng=np.random.default_rng(0))
    assert torch.equal(torch_state, torch.random.get_rng_state())  # global torch RNG untouched
    return {"result": result, "before": before, "flags": flags, "base_out": base_out, "dir": out}


def test_training_changes_every_lora_b_and_not_the_base(tiny_backend: HFBackend, trained) -> None:
    result = trained["result"]
    assert result.trainable_params > 0 and result.steps == 3 and len(result.losses) == 3
    assert all(np.isfinite(result.losses))
    lora_b = _lora(trained["dir"], "lora_B")
    assert len(lora_b) == 2 * 4  # 2 layers x q/k/v/o
    assert all(torch.any(b != 0) for b in lora_b.values())  # PEFT initialises every lora_B to zero
    after = _base_state(tiny_backend)
    assert after.keys() == trained["before"].keys()
    assert all(torch.equal(after[k], trained["before"][k]) for k in after)
    assert {n: p.requires_grad for n, p in tiny_backend.model.named_parameters()} == trained["flags"]
    assert not tiny_backend.model.training
    assert tiny_backend.generate(_requests()) == trained["base_out"]  # backend generates exactly as before
    assert (Path(result.adapter_dir) / ADAPTER_META_FILE).is_file()


def test_replay_share_is_reported(trained) -> None:
    assert abs(trained["result"].replay_share - 0.3) <= 0.5 / 6 + 1e-9  # 3 steps x 2 rows


def test_continuing_from_a_reloaded_parent_changes_every_factor(
    tiny_backend: HFBackend, trained, tmp_path: Path
) -> None:
    child = tmp_path / "child"
    before = _base_state(tiny_backend)
    result = train_lora(tiny_backend, POOL[:1], [], replace(CFG, rank=2, steps=2), child,
                        rng=np.random.default_rng(1), parent_adapter=trained["dir"])
    assert result.trainable_params == trained["result"].trainable_params  # the parent's rank 4 is kept
    for kind in ("lora_B", "lora_A"):
        parent, new = _lora(trained["dir"], kind), _lora(child, kind)
        assert parent.keys() == new.keys()
        assert all(not torch.equal(parent[k], new[k]) for k in parent), kind
    assert all(torch.equal(v, before[k]) for k, v in _base_state(tiny_backend).items())


def test_training_is_reproducible_given_the_rng(tiny_backend: HFBackend, tmp_path: Path) -> None:
    cfg = replace(CFG, steps=2)
    a = train_lora(tiny_backend, POOL, REPLAY, cfg, tmp_path / "a", rng=np.random.default_rng(7))
    b = train_lora(tiny_backend, POOL, REPLAY, cfg, tmp_path / "b", rng=np.random.default_rng(7))
    assert a.losses == b.losses
    ta, tb = _lora(a.adapter_dir, "lora_"), _lora(b.adapter_dir, "lora_")
    assert all(torch.equal(ta[k], tb[k]) for k in ta)


def test_max_passes_caps_the_steps(tiny_backend: HFBackend, tmp_path: Path) -> None:
    cfg = replace(CFG, steps=50, replay_ratio=0.0, max_passes=1.0)
    result = train_lora(tiny_backend, POOL, [], cfg, tmp_path / "a", rng=np.random.default_rng(0))
    assert result.steps == len(result.losses) == -(-len(POOL) // cfg.batch_size)  # one pass over the pool
    with pytest.raises(ConfigError, match="lora.max_passes"):
        replace(CFG, max_passes=-1.0).check()


def test_answer_only_loss_equals_the_plain_labelled_loss(tiny_backend: HFBackend) -> None:
    from peft import LoraConfig, get_peft_model

    eot = tiny_backend.stop_token_ids[0]
    batch = collate([encode_chat(tiny_backend.tokenizer, ex.messages, max_length=128, end_token_id=eot)
                     for ex in POOL], pad_token_id=tiny_backend.pad_token_id, end_token_id=eot)
    peft_model = get_peft_model(tiny_backend.model, LoraConfig(r=2, target_modules=["q_proj"]))
    try:
        with torch.no_grad():
            fast = _answer_loss(peft_model, batch)
            plain = peft_model(**batch, use_cache=False).loss
    finally:
        peft_model.unload()
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-6)


def test_bad_inputs_raise(tiny_backend: HFBackend, tmp_path: Path) -> None:
    bad = replace(POOL[0], messages=POOL[0].messages[:2])  # no assistant answer
    with pytest.raises(DataError, match="none of the 1 pool examples"):
        train_lora(tiny_backend, [bad], REPLAY, CFG, tmp_path / "x", rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="lora.rank"):
        LoraSettings(rank=0).check()
    with pytest.raises(ConfigError, match="target_modules"):
        train_lora(tiny_backend, POOL, [], replace(CFG, target_modules=("no_such_proj",)), tmp_path / "y",
                   rng=np.random.default_rng(0))
    assert not hasattr(tiny_backend.model, "peft_config") or not tiny_backend.model.peft_config


def test_bfloat16_base_trains_a_float32_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``model.dtype=auto`` picks bfloat16 on a CPU with AMX: LoRA trains on it, the adapter stays float32."""
    from evotrainer.model_schema import ModelConfig

    backend = HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="bfloat16", batch_size=4))
    before = _base_state(backend)
    result = train_lora(backend, POOL, REPLAY, CFG, tmp_path / "bf16", rng=np.random.default_rng(0))
    assert all(np.isfinite(result.losses)) and result.steps == 3
    lora_b = _lora(tmp_path / "bf16", "lora_B")
    assert len(lora_b) == 2 * 4 and all(torch.any(b != 0) for b in lora_b.values())  # q/k/v/o, read off the model
    assert all(b.dtype == torch.float32 for b in lora_b.values())
    after = _base_state(backend)
    assert all(torch.equal(after[k], before[k]) for k in after) and backend.model.dtype == torch.bfloat16


def test_lora_targets_are_read_off_the_architecture(tiny_backend: HFBackend) -> None:
    from evotrainer.adapters.targets import attention_projections
    from evotrainer.errors import ModelError

    assert attention_projections(tiny_backend.model) == ["k_proj", "o_proj", "q_proj", "v_proj"]
    with pytest.raises(ModelError, match="no attention block"):
        attention_projections(torch.nn.Sequential(torch.nn.Linear(2, 2)))
