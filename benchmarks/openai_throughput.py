"""Requests per second: the openai backend against a local server vs the in-process backend (issue 28's target).

The workload is the smoke run's first call: its seed policies (``+experiment=smoke``: terse, secretary_markdown,
inline_example) on its meta-validation items (the first 4), greedy, 48 new tokens, no n-gram blocking (no server
has it), so ``--policies x --items`` requests. Each backend runs them at the same concurrency: the in-process
backend with ``batch_size = --concurrency``, the server with ``model.openai.concurrency = --concurrency``. One
untimed warm-up request each, then ``--reps`` timed calls (median). Three figures:

- **in process**: :class:`~evotrainer.backends.hf.HFBackend` on the embedded SmolLM2 (or ``--path``);
- **server**: :class:`~evotrainer.backends.openai_compat.OpenAIBackend` against ``--base-url`` / ``--model``
  (any running server: ``vllm serve``, ``llama-server``, ``transformers serve``); without them the script writes
  the in-process model as a served folder and starts ``transformers serve`` on it (which generates one request
  at a time unless ``--continuous-batching`` is given: the ratio then measures that server, not the HTTP path);
- **HTTP path alone**: the same requests against the tests' scripted server (answers at once), i.e. what the
  client, JSON and HTTP cost per request; the target holds when this rate is far above the in-process one.

Target (not a test): server requests/s >= in-process requests/s / 1.5. Prints one line per figure and the ratio;
``--json PATH`` writes them. A tiny check of the script: ``--policies 1 --items 1 --reps 1``.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.openai_throughput --concurrency 4
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.converted import save_served_folder
from evotrainer.backends.hf import HFBackend
from evotrainer.backends.openai_compat import OpenAIBackend
from evotrainer.config import Config
from evotrainer.model_schema import ModelConfig, OpenAIConfig
from evotrainer.run.runtime import build_family, load_seed_population, load_validation

SMOKE_POLICIES = ["terse", "secretary_markdown", "inline_example"]


def workload(policies: int, items: int, max_new_tokens: int) -> list[GenerationRequest]:
    """The smoke run's policies x items as greedy requests (the family's own prompts)."""
    cfg = Config()
    cfg.evaluation.policies = SMOKE_POLICIES[:policies]
    cfg.task.validation_limit = items
    family = build_family(cfg)
    params = SamplingParams(max_new_tokens=max_new_tokens, no_repeat_ngram_size=0)
    return [GenerationRequest(tuple(family.build_messages(tuple(p.sections), t)), params)
            for p in load_seed_population(cfg) for t in load_validation(cfg, family)]


def timed(llm, requests: list[GenerationRequest], reps: int) -> list[float]:
    """Wall seconds of ``reps`` calls, after one untimed warm-up request."""
    llm.generate(requests[:1])
    walls = []
    for _ in range(reps):
        t0 = time.perf_counter()
        llm.generate(requests)
        walls.append(time.perf_counter() - t0)
    return walls


def start_transformers_serve(folder: str, timeout_s: float = 600, continuous_batching: bool = False
                             ) -> tuple[subprocess.Popen, str]:
    """``transformers serve folder`` on a free local port; (process, base URL) once it lists the model.

    ``continuous_batching`` adds ``--continuous-batching`` (transformers' paged-attention scheduler, which
    generates concurrent requests together instead of one at a time)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from transformers.cli.transformers import app; app()", "serve",
                             folder, "--device", "cpu", "--dtype", "float32", "--host", "127.0.0.1", "--port", str(port),
                             *(["--continuous-batching"] if continuous_batching else [])],
                            env=dict(os.environ, HF_HUB_OFFLINE="1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url, deadline = f"http://127.0.0.1:{port}/v1", time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return proc, url
        except OSError:
            time.sleep(1.0)
    proc.kill()
    raise SystemExit(f"transformers serve did not start within {timeout_s:.0f} s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", type=int, default=3)
    ap.add_argument("--items", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--path", default=None, help="in-process model folder (default: the embedded SmolLM2)")
    ap.add_argument("--base-url", default=None, help="a running server (default: start transformers serve)")
    ap.add_argument("--model", default=None, help="the served model's name (with --base-url)")
    ap.add_argument("--continuous-batching", action="store_true",
                    help="start transformers serve with --continuous-batching (default: one request at a time)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)

    requests = workload(args.policies, args.items, args.max_new_tokens)
    n = len(requests)
    local = HFBackend(ModelConfig(path=args.path, batch_size=args.concurrency))
    rates: dict[str, float] = {}
    runs: dict[str, list[float]] = {}
    runs["in process"] = timed(local, requests, args.reps)

    proc = None
    base_url, model = args.base_url, args.model
    with tempfile.TemporaryDirectory() as tmp:
        if base_url is None:
            model = str(save_served_folder(local, Path(tmp) / "served"))
            proc, base_url = start_transformers_serve(model, continuous_batching=args.continuous_batching)
        try:
            remote = OpenAIBackend(OpenAIConfig(base_url=base_url, model=model, concurrency=args.concurrency,
                                                timeout_s=900, max_retries=0))
            runs[f"server ({remote.profile.kind})"] = timed(remote, requests, args.reps)
            remote.close()
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' scripted server
    from tests.backends._fake_openai import FakeServer

    with FakeServer() as fake:
        http = OpenAIBackend(OpenAIConfig(base_url=fake.url, model=fake.model, concurrency=args.concurrency))
        runs["HTTP path alone"] = timed(http, requests, args.reps)
        http.close()

    print(f"{n} requests ({args.policies} policies x {args.items} items, {args.max_new_tokens} new tokens), "
          f"concurrency {args.concurrency}, median of {args.reps}")
    for label, walls in runs.items():
        rates[label] = n / statistics.median(walls)
        print(f"{label:>24}: {rates[label]:8.2f} requests/s  (runs: {', '.join(f'{w:.2f} s' for w in walls)})")
    server = next(k for k in rates if k.startswith("server"))
    ratio = rates["in process"] / rates[server]
    print(f"in process / server: {ratio:.2f}x (target <= 1.5x: {'MET' if ratio <= 1.5 else 'NOT MET'}); "
          f"HTTP path alone / in process: {rates['HTTP path alone'] / rates['in process']:.0f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"requests": n, "concurrency": args.concurrency, "runs": runs,
                                               "requests_per_s": rates, "ratio": ratio}, indent=2) + "\n")


if __name__ == "__main__":
    main()
