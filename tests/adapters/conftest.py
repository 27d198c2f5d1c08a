"""Fixtures for the adapter tests: a tiny HFBackend and small chat examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from evotrainer.adapters import synthetic
from evotrainer.adapters.train import SFTExample
from evotrainer.backends.hf import HFBackend
from evotrainer.model_schema import ModelConfig


@pytest.fixture(scope="module")
def tiny_backend(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=4))


def chat_example(user: str, answer: str, system: str = "Summarise the meeting.", source: str = "pool") -> SFTExample:
    return SFTExample(
        ({"role": "system", "content": system}, {"role": "user", "content": user},
         {"role": "assistant", "content": answer}),
        source=source,
    )


POOL = [
    chat_example("Ann: I will send the budget by Friday. Bob: ok.", "- Ann: send the budget (Friday)"),
    chat_example("Cy: Dana books the room. Dana: fine.", "- Dana: book the room"),
    chat_example("Eve: Let's ship v2 next week; Fay tests it.", "- Fay: test v2"),
]
REPLAY = [chat_example("Gus: nothing to do today.", "No action items.", source="replay")]


def random_adapter(backend: HFBackend, folder: Path, *, seed: int, rank: int = 4, scale: float = 0.5,
                   targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")) -> Path:
    """A genuine PEFT save on the backend's model with random (non-zero) lora_A and lora_B."""
    return synthetic.random_adapter(backend, folder, seed=seed, rank=rank, scale=scale, targets=targets)
