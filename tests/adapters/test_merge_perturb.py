"""Adapter crossover (weighted ΔW sum, truncated SVD) and relative-noise mutation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from evotrainer.adapters.merge import cx_adapters, truncated_factors
from evotrainer.adapters.perturb import mut_adapter_noise
from evotrainer.backends.adapter_files import ADAPTER_META_FILE, read_adapter, write_adapter
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.errors import ConfigError, ModelError

from .conftest import random_adapter


@pytest.fixture(scope="module")
def pair(tiny_backend: HFBackend, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("merge")
    a = random_adapter(tiny_backend, root / "a", seed=11, rank=4)
    b = random_adapter(tiny_backend, root / "b", seed=12, rank=4, targets=("q_proj", "v_proj", "o_proj", "up_proj"))
    return a, b


def _deltas(folder: Path | str) -> dict[str, torch.Tensor]:
    f = read_adapter(folder)
    return {m: f.delta(m) for m in f.modules}


def test_crossover_with_itself_returns_the_parent_update(pair, tmp_path: Path) -> None:
    a, _ = pair
    child = cx_adapters(a, a, tmp_path / "aa", weight=0.3)
    parent, merged = _deltas(a), _deltas(child)
    assert parent.keys() == merged.keys()
    for m in parent:
        torch.testing.assert_close(merged[m], parent[m], rtol=1e-4, atol=1e-5)
    meta = json.loads((Path(child) / ADAPTER_META_FILE).read_text())
    assert meta["operator"] == "cx_adapters" and meta["energy_kept"] == pytest.approx(1.0)


def test_crossover_is_the_weighted_sum_truncated_by_svd(pair, tmp_path: Path) -> None:
    a, b = pair
    da, db = _deltas(a), _deltas(b)
    exact = _deltas(cx_adapters(a, b, tmp_path / "r8", weight=0.25, rank=8))  # rank 4 + 4: nothing lost
    cut = _deltas(cx_adapters(a, b, tmp_path / "r4", weight=0.25))  # a's rank 4
    assert set(exact) == set(da) | set(db)  # union of modules; up_proj only in b, k_proj only in a
    for m in exact:
        want = 0.25 * da.get(m, 0) + 0.75 * db.get(m, 0)
        torch.testing.assert_close(exact[m], want, rtol=1e-4, atol=1e-5)
        u, s, vh = torch.linalg.svd(want, full_matrices=False)
        best = u[:, :4] @ torch.diag(s[:4]) @ vh[:4]  # Eckart-Young rank-4 optimum
        torch.testing.assert_close(cut[m], best, rtol=1e-4, atol=1e-5)
    child = read_adapter(tmp_path / "r4")
    assert child.config["r"] == 4 and child.config["lora_alpha"] == read_adapter(a).config["lora_alpha"]
    assert sorted(child.config["target_modules"]) == ["k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


def test_weight_one_returns_the_first_parent(pair, tmp_path: Path) -> None:
    a, b = pair
    child, parent = _deltas(cx_adapters(a, b, tmp_path / "w1", weight=1.0)), _deltas(a)
    for m, d in child.items():
        torch.testing.assert_close(d, parent.get(m, torch.zeros_like(d)), rtol=1e-4, atol=1e-5)


def test_children_load_in_the_backend(tiny_backend: HFBackend, pair, tmp_path: Path) -> None:
    a, b = pair
    child = cx_adapters(a, b, tmp_path / "child")
    noisy = mut_adapter_noise(a, tmp_path / "noisy", rng=np.random.default_rng(0), scale=0.5)
    req = ({"role": "user", "content": "Ann sends the budget."},)
    outs = tiny_backend.generate([GenerationRequest(req, SamplingParams(max_new_tokens=6), x)
                                  for x in (None, child, noisy)])
    assert len(outs) == 3
    tiny_backend.unload_adapters()


def test_truncated_factors_matches_dense_svd() -> None:
    gen = torch.Generator().manual_seed(0)
    left, right = torch.randn(30, 6, generator=gen, dtype=torch.float64), torch.randn(6, 20, generator=gen,
                                                                                      dtype=torch.float64)
    u, s, vh = truncated_factors(left, right, 3)
    torch.testing.assert_close(s, torch.linalg.svdvals(left @ right)[:3])
    assert u.shape == (30, 3) and vh.shape == (3, 20)


def test_noise_is_relative_reproducible_and_leaves_the_parent(pair, tmp_path: Path) -> None:
    a, _ = pair
    before = (Path(a) / "adapter_model.safetensors").read_bytes()
    one = read_adapter(mut_adapter_noise(a, tmp_path / "n1", rng=np.random.default_rng(5), scale=0.05))
    two = read_adapter(mut_adapter_noise(a, tmp_path / "n2", rng=np.random.default_rng(5), scale=0.05))
    parent = read_adapter(a)
    assert (Path(a) / "adapter_model.safetensors").read_bytes() == before
    for m, (pa, pb) in parent.modules.items():
        for old, new, same in zip((pa, pb), one.modules[m], two.modules[m], strict=True):
            assert torch.equal(new, same)
            rel = float(torch.linalg.norm(new - old) / torch.linalg.norm(old))
            assert 0.02 < rel < 0.09  # expected 0.05
    assert one.config["r"] == parent.config["r"]


def test_bad_operator_inputs_raise(tiny_backend: HFBackend, pair, tmp_path: Path) -> None:
    a, b = pair
    with pytest.raises(ConfigError):
        cx_adapters(a, b, tmp_path / "x", weight=1.5)
    with pytest.raises(ConfigError):
        mut_adapter_noise(a, tmp_path / "y", rng=np.random.default_rng(0), scale=0.0)
    parent = read_adapter(a)
    zero_b = {m: (fa, torch.zeros_like(fb)) for m, (fa, fb) in parent.modules.items()}
    untrained = write_adapter(tmp_path / "zero", parent.config, zero_b, {})
    with pytest.raises(ModelError, match="zero"):
        mut_adapter_noise(untrained, tmp_path / "z", rng=np.random.default_rng(0))
    wide = {m: (torch.zeros(fa.shape[0], fa.shape[1] + 1), fb) for m, (fa, fb) in parent.modules.items()}
    other_base = write_adapter(tmp_path / "wide", parent.config, wide, {})
    with pytest.raises(ModelError, match="shapes"):
        cx_adapters(a, other_base, tmp_path / "w")
    with pytest.raises(ModelError, match="another base model"):
        tiny_backend.load_adapter(other_base)
    assert str(Path(other_base).resolve()) not in tiny_backend._adapters
