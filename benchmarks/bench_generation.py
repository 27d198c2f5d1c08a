"""Batched vs one-at-a-time greedy generation on the embedded SmolLM2-135M (HFBackend, CPU).

Prints the model load time and generated tokens/s for requests run one at a time and in batches, and
the batched/sequential throughput ratio measured in this run. Prompts are synthetic meeting
transcripts of about ``--words`` words; the default run takes about 1-2 minutes on 2 CPU cores.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_generation.py [--batch-sizes 8,16] [--sequential 2]
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from evotrainer.backends.base import GenerationRequest, SamplingParams  # noqa: E402
from evotrainer.backends.hf import HFBackend  # noqa: E402
from evotrainer.model_schema import ModelConfig

NAMES = ["Dana", "Ravi", "Mei", "Tom", "Aisha", "Lukas"]
TOPICS = ["the budget", "the launch date", "hiring", "the vendor contract", "the office move", "QA"]


def transcript(rng: random.Random, words: int) -> str:
    """A synthetic meeting transcript of about ``words`` words."""
    lines: list[str] = []
    while sum(len(line.split()) for line in lines) < words:
        who, what, other = rng.choice(NAMES), rng.choice(TOPICS), rng.choice(NAMES)
        lines.append(f"{who}: About {what}, I think {other} should send an update by Friday, agreed?")
    return "\n".join(lines)


def requests(n: int, words: int, max_new_tokens: int, seed: int) -> list[GenerationRequest]:
    rng = random.Random(seed)
    params = SamplingParams(max_new_tokens=max_new_tokens)
    return [
        GenerationRequest(
            (
                {"role": "system", "content": "You write meeting minutes: decisions, then action items."},
                {"role": "user", "content": f"Transcript:\n{transcript(rng, words)}\n\nWrite the minutes."},
            ),
            params,
        )
        for _ in range(n)
    ]


def timed(backend: HFBackend, reqs: list[GenerationRequest], batch: bool) -> tuple[int, float]:
    """(generated tokens, seconds) for ``reqs`` run as one batched call or one call per request."""
    start = time.perf_counter()
    outs = backend.generate(reqs) if batch else [g for r in reqs for g in backend.generate([r])]
    return sum(g.generated_tokens for g in outs), time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-sizes", default="8,16", help="comma-separated batch sizes")
    ap.add_argument("--sequential", type=int, default=2, help="requests timed one at a time")
    ap.add_argument("--words", type=int, default=300, help="approximate transcript length in words")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.batch_sizes.split(",") if s]

    backend = HFBackend(ModelConfig(batch_size=max(sizes, default=1), threads=args.threads))
    print(f"model load: {backend.load_seconds:.1f} s ({backend.name})")
    backend.generate(requests(1, 20, 4, seed=99))  # warm-up

    reqs = requests(args.sequential, args.words, args.max_new_tokens, seed=0)
    tokens, seconds = timed(backend, reqs, batch=False)
    prompt_len = sum(len(backend._prepare(i, r).ids) for i, r in enumerate(reqs)) / len(reqs)
    base = tokens / seconds
    print(f"prompt ≈ {prompt_len:.0f} tokens, max_new_tokens {args.max_new_tokens}")
    print(f"{'mode':<12}{'requests':>9}{'gen tokens':>12}{'seconds':>9}{'tok/s':>8}{'ratio':>7}")
    print(f"{'sequential':<12}{len(reqs):>9}{tokens:>12}{seconds:>9.1f}{base:>8.1f}{1.0:>7.2f}")
    for size in sizes:
        tokens, seconds = timed(
            backend, requests(size, args.words, args.max_new_tokens, seed=size), batch=True
        )
        rate = tokens / seconds
        print(f"{f'batch {size}':<12}{size:>9}{tokens:>12}{seconds:>9.1f}{rate:>8.1f}{rate / base:>7.2f}")


if __name__ == "__main__":
    main()
