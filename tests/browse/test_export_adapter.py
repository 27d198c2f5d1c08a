"""Exporting an adapter-carrying policy: the folder loads with ``PeftModel.from_pretrained`` and reproduces it."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch

from evotrainer.adapters import SFTExample
from evotrainer.archive import ArchiveStore
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.browse.policy_export import export_policy
from evotrainer.config import Config, LoraSettings
from evotrainer.errors import ArchiveError
from evotrainer.evolve.llm_objective import lora_workshop
from evotrainer.genome import Policy, render_system_prompt
from evotrainer.model_schema import ModelConfig
from evotrainer.run.policy_refs import load_exported_policy
from evotrainer.search.adapter_ops import mut_adapter

RUN = "run-export"
USER = "Minutes please:\nAnn: I send the budget by Friday.\nBob: ok"


def _chat(policy: Policy) -> tuple:
    return ({"role": "system", "content": render_system_prompt(policy.sections)}, {"role": "user", "content": USER})


@pytest.fixture(scope="module")
def archived(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A tiny backend, and an archive holding a seed and its Lamarckian fine-tuned child (real adapter)."""
    backend = HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=4))
    root = tmp_path_factory.mktemp("export-run")
    cfg = Config()
    cfg.inner.adapter_lora = LoraSettings(rank=4, alpha=8, lr=5e-2, steps=3, batch_size=2, max_length=128)
    seed = Policy.seed("seed", {"role": "You take minutes.", "format": "Bullets.", "rules": "Name every owner."})
    examples = [SFTExample((*_chat(seed), {"role": "assistant", "content": "- Ann: send the budget (Friday)"}))]
    workshop = lora_workshop(backend, root / "adapters", cfg, lambda p: examples)
    child = mut_adapter(seed, random.Random(0), 1, workshop=workshop, noise_share=0.0)
    assert child is not None and child.adapter is not None
    with ArchiveStore(root / "archive.db") as store:
        store.create_run(RUN, seed=0, config={"seed": 0}, code_version="test")
        store.add_policies(RUN, [seed, child])
    return backend, root, seed, child


def _greedy_peft(model_dir: Path, folder: Path, backend: HFBackend, policy: Policy, n: int) -> str:
    """Greedy answer of ``PeftModel.from_pretrained(base, folder)`` on the policy's chat, cut like the backend."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(folder)).eval()
    ids = backend.tokenizer(backend.render(_chat(policy)), add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                             eos_token_id=list(backend.stop_token_ids), pad_token_id=backend.pad_token_id)
    new = out[0, ids.shape[1]:].tolist()
    end = next((k for k, t in enumerate(new) if t in set(backend.stop_token_ids)), len(new))
    return backend.tokenizer.decode(new[:end], skip_special_tokens=True).strip()


def test_exported_adapter_loads_with_peft_and_reproduces_the_policy(archived, tiny_model_dir, tmp_path) -> None:
    backend, root, _, child = archived
    out = tmp_path / "best"
    with ArchiveStore(root / "archive.db") as store:
        result = export_policy(store, RUN, child, out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["adapter_config.json", "adapter_model.safetensors", "evotrainer_adapter.json", "policy.json",
                     "prompt.md"]  # no scratch folder left behind
    assert sorted(Path(f).name for f in result["files"]) == names and result["adapter"] == child.adapter
    doc = json.loads((out / "policy.json").read_text(encoding="utf-8"))
    assert doc["policy"]["id"] == child.id and doc["policy"]["adapter"] == "."  # the folder holds the adapter
    assert doc["adapter_export"]["source"] == child.adapter
    assert load_exported_policy(out).adapter == str(out.resolve())
    assert doc["adapter_export"]["r"] == 4 and "adapter_model.safetensors" in doc["adapter_export"]["files"]
    assert (out / "prompt.md").read_text(encoding="utf-8") == render_system_prompt(child.sections) + "\n"

    n = 10
    params = SamplingParams(max_new_tokens=n)
    with_adapter, base = backend.generate([GenerationRequest(_chat(child), params, child.adapter),
                                           GenerationRequest(_chat(child), params, None)])
    backend.unload_adapters()
    assert with_adapter.text != base.text  # the adapter matters, so equality below is evidence
    assert _greedy_peft(tiny_model_dir, out, backend, child, n) == with_adapter.text


def test_prompt_only_export_is_unchanged_and_force_rewrites_with_adapter(archived, tmp_path) -> None:
    _, root, seed, child = archived
    out = tmp_path / "seed"
    with ArchiveStore(root / "archive.db") as store:
        export_policy(store, RUN, seed, out)
        assert sorted(p.name for p in out.iterdir()) == ["policy.json", "prompt.md"]
        assert "adapter_export" not in json.loads((out / "policy.json").read_text(encoding="utf-8"))
        export_policy(store, RUN, child, out, force=True)  # into the non-empty folder
    assert (out / "adapter_model.safetensors").is_file() and not any(p.name.startswith(".") for p in out.iterdir())


def test_adapter_archived_relative_to_its_run_is_found_beside_the_archive(archived, tmp_path, monkeypatch) -> None:
    """Self-evolution archives adapters relative to the run folder; the export finds them from any working folder."""
    from dataclasses import replace

    _, root, _, child = archived
    relative = replace(child, adapter=str(Path(child.adapter).resolve().relative_to(root.resolve())))
    monkeypatch.chdir(tmp_path)  # not the run folder
    with ArchiveStore(root / "archive.db") as store:
        export_policy(store, RUN, relative, tmp_path / "out")
    assert (tmp_path / "out" / "adapter_model.safetensors").is_file()
    assert json.loads((tmp_path / "out" / "policy.json").read_text(encoding="utf-8"))["adapter_export"]["source"] \
        == str(Path(child.adapter).resolve())


def test_missing_adapter_folder_is_an_archive_error(archived, tmp_path) -> None:
    _, root, _, child = archived
    moved = tmp_path / "moved"
    shutil.copytree(child.adapter, moved)
    shutil.rmtree(child.adapter)
    try:
        with ArchiveStore(root / "archive.db") as store, pytest.raises(ArchiveError, match=child.id):
            export_policy(store, RUN, child, tmp_path / "out")
    finally:
        shutil.copytree(moved, child.adapter)
