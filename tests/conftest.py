"""Shared fixtures: a tiny random Llama model folder with the embedded SmolLM2 tokenizer, the config of a
short co-evolution run on it, and a smoke ablation study sweep run on it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from evotrainer.config import Config

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a 2-layer random Llama (hidden 64) and SmolLM2's tokenizer and chat template.

    The config mimics the GGUF's flaw ``pad = eos = <|im_end|>`` so the pad fix is exercised.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from evotrainer.backends.embedded import embedded_gguf

    gguf = embedded_gguf("smollm2-135m")
    folder = tmp_path_factory.mktemp("tiny_llama")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        tie_word_embeddings=True,
        initializer_range=0.2,  # spread logits so greedy picks are far from ties
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_run_config(tiny_model_dir: Path) -> Callable[[], Config]:
    """A maker of fresh :class:`~evotrainer.config.Config` objects for a short co-evolution run on
    :func:`tiny_model_dir`: 6 meta-validation items, 2 tasks of about 100 words per generation, 8 new
    tokens, 3 seed policies (terse, secretary_markdown, inline_example) in an inner population of 3 (1
    elite, tournaments of 2), 2 harness candidates a generation screened on 2 items. Everything else is
    the default (seed 0, 2 inner and 2 outer generations); a test sets what it needs on the copy it gets.
    """

    def make() -> Config:
        from evotrainer.config import Config

        cfg = Config()
        cfg.model.path = str(tiny_model_dir)
        cfg.model.dtype = "float32"  # the equalities the tests check were measured in float32
        cfg.model.max_context = 1024
        cfg.decoding.max_new_tokens = 8
        cfg.task.validation_limit = 6
        cfg.task.tasks_per_generation = 2
        cfg.task.difficulty["length"] = 100
        cfg.evaluation.policies = ["terse", "secretary_markdown", "inline_example"]
        cfg.inner.population_size = 3
        cfg.inner.elites = 1
        cfg.inner.tournament_size = 2
        cfg.outer.popsize = 2
        cfg.outer.screen_size = 2
        return cfg

    return make


@pytest.fixture(scope="session")
def smoke_study(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """``+study=ablation_smoke`` on :func:`tiny_model_dir` (3 arms x 2 seeds, about a minute): (sweep folder, the
    finished ``subprocess.CompletedProcess``). Tests only read the folder (copy it to change it)."""
    from evotrainer.config import PROJECT_ROOT

    sweep = tmp_path_factory.mktemp("study") / "s"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        ["timeout", "900", sys.executable, "-m", "evotrainer", "-m", "+study=ablation_smoke",
         f"model.path={tiny_model_dir}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=12",
         "task.difficulty.length=100", "inner.llm_mutation_share=0", f"hydra.sweep.dir={sweep}"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=960)
    return sweep, proc
