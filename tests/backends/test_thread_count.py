"""Results that could depend on the thread count (pytorch#88718; issue 26, item 4): the embedded model at 1 and
2 torch threads. Measured on the 2-core development machine (torch 2.13 CPU, MKL): bit-identical logits and
text, also at 3, 4 and 8 threads (``evotrainer/backends/threads.py``). On a machine where this fails, a run's archive
depends on its thread count: the run records it and a resume reuses it, but two fresh runs with automatic
threads may differ."""

from __future__ import annotations

import json

import pytest
import torch

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.config import PACKAGE_DATA
from evotrainer.model_schema import ModelConfig

pytestmark = pytest.mark.real_model


def test_real_model_logits_and_text_are_bit_identical_at_1_and_2_threads() -> None:
    path = PACKAGE_DATA / "validation_set" / "meeting_minutes.jsonl"
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:2]]
    chats = [({"role": "system", "content": "Write the minutes of this meeting."},
              {"role": "user", "content": item["transcript"][:1200]}) for item in items]
    requests = [GenerationRequest(chats[0], SamplingParams(max_new_tokens=8)),
                GenerationRequest(chats[1], SamplingParams(temperature=0.8, top_p=0.95, seed=11, max_new_tokens=8))]
    saved = torch.get_num_threads()
    backend = HFBackend(ModelConfig(path="smollm2-135m", dtype="float32", batch_size=8, threads=1))
    prompt = backend.tokenizer(backend.render(list(chats[0])), return_tensors="pt", add_special_tokens=False)
    seen = {}
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with torch.no_grad():
                logits = backend.model(**prompt).logits.float()  # (1, prompt tokens, vocabulary)
            seen[threads] = (logits, [g.text for g in backend.generate(requests)])
    finally:
        torch.set_num_threads(saved)
    (one, text_one), (two, text_two) = seen[1], seen[2]
    assert one.shape[1] > 200  # a real prompt, long enough for the matrix products to be split over threads
    assert torch.equal(one, two), f"max |difference| {(one - two).abs().max().item():.3g}"
    assert text_one == text_two
