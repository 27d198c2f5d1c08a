"""Policy export: prompt + a PEFT adapter folder that PeftModel.from_pretrained loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from evotrainer.adapters.export import export_policy
from evotrainer.backends.hf import HFBackend
from evotrainer.errors import ConfigError

from .conftest import random_adapter


def test_export_loads_with_peft_from_pretrained(tiny_backend: HFBackend, tiny_model_dir: Path,
                                                tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapter = random_adapter(tiny_backend, tmp_path / "adapter", seed=4)
    out = export_policy("## Role\nYou write minutes.", adapter, tmp_path / "export", meta={"policy_id": "p1"})
    assert (out / "prompt.md").read_text() == "## Role\nYou write minutes.\n"
    doc = json.loads((out / "policy.json").read_text())
    assert doc["meta"] == {"policy_id": "p1"} and doc["adapter"]["r"] == 4
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    x = torch.tensor([[1, 7, 42, 99]])
    with torch.no_grad():
        plain = base(x).logits
        loaded = PeftModel.from_pretrained(base, str(out)).eval()
        tuned = loaded(x).logits
    assert not torch.allclose(plain, tuned)


def test_prompt_only_export_and_bad_targets(tmp_path: Path) -> None:
    out = export_policy("Be brief.", None, tmp_path / "p", meta={"score": 0.5})
    assert sorted(p.name for p in out.iterdir()) == ["policy.json", "prompt.md"]
    with pytest.raises(ConfigError, match="not an empty folder"):
        export_policy("x", None, out, meta={})
    with pytest.raises(ConfigError, match="JSON"):
        export_policy("x", None, tmp_path / "q", meta={"bad": object()})
    assert not (tmp_path / "q").exists()
