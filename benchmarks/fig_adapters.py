"""Figure 4: requests spread over several LoRA adapters in one mixed batch vs one adapter at a time.

The adapters are random (non-zero) LoRA factors saved as real PEFT folders for the loaded model, shaped
like the inner loop's adapter genes (``inner.adapter_lora``: rank 8, alpha 16, on q/k/v/o), made the
way ``tests/adapters/conftest.py`` makes them.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.report import Figure, median
from benchmarks.workloads import Bench, Run, build_requests, decoding, family_for, mean_words, timed_generate
from evotrainer.adapters.synthetic import random_adapter

__all__ = ["AdapterSizes", "adapters_figure", "random_adapter"]


@dataclass(frozen=True)
class AdapterSizes:
    """``adapters`` adapters, each on the same ``requests_per_adapter`` requests (generated meetings, length
    knob ``words``), ``max_new_tokens`` each."""

    adapters: int = 3
    requests_per_adapter: int = 4
    words: int = 120
    max_new_tokens: int = 16
    rank: int = 8

    @classmethod
    def for_bench(cls, bench: Bench) -> AdapterSizes:
        return cls(2, 2, 80, 8) if bench.quick else cls()


def _grouped(backend: Any, reqs: list, folders: list[str]) -> Run:
    """One ``generate`` call per adapter; the runs summed."""
    runs = [timed_generate(backend, [r for r in reqs if r.adapter == f]) for f in folders]
    by_adapter = {f: iter(run.texts) for f, run in zip(folders, runs, strict=True)}
    return Run(sum(r.seconds for r in runs), sum(r.generated_tokens for r in runs), sum(r.prompt_tokens for r in runs),
               None, tuple(next(by_adapter[r.adapter]) for r in reqs))


def adapters_figure(bench: Bench) -> Figure:
    """Wall time of requests over several adapters as one mixed batch vs grouped per adapter."""
    z = AdapterSizes.for_bench(bench)
    backend = bench.backend
    fig = Figure("adapters", "mixed-adapter batch vs one adapter at a time")
    n = z.adapters * z.requests_per_adapter
    fig.workload = (f"{z.adapters} random LoRA adapters (rank {z.rank}, q/k/v/o) x the same {z.requests_per_adapter} "
                    f"requests each (seed policy '{bench.population(1)[0].id}' on {z.requests_per_adapter} generated "
                    f"meetings, {mean_words(bench.meetings(z.requests_per_adapter, z.words)):.0f} words on average) = "
                    f"{n} requests, max_new_tokens {z.max_new_tokens}; mixed: one "
                    f"generate call (PEFT per-row adapter_names); grouped: one call per adapter; median of "
                    f"{bench.repeats}")
    base = build_requests(family_for(None), bench.population(1), bench.meetings(z.requests_per_adapter, z.words),
                          decoding(z.max_new_tokens))
    with tempfile.TemporaryDirectory(prefix="evotrainer-bench-") as tmp:
        folders = [str(random_adapter(backend, Path(tmp) / f"a{k}", seed=k, rank=z.rank)) for k in range(z.adapters)]
        reqs = [replace(r, adapter=f) for f in folders for r in base]
        for f in folders:
            backend.load_adapter(f)
        backend.generate(reqs[:2])  # warm-up
        plain = bench.timings(lambda: timed_generate(backend, [replace(r, adapter=None) for r in reqs]))
        mixed = bench.timings(lambda: timed_generate(backend, reqs))
        grouped = bench.timings(lambda: _grouped(backend, reqs, folders))
        backend.unload_adapters()
    t_plain, t_mixed, t_grouped = (median(r.seconds for r in runs) for runs in (plain, mixed, grouped))
    fig.add("base model, no adapter (reference)", t_plain, "s", [r.seconds for r in plain])
    fig.add("mixed: one call, adapters per row", t_mixed, "s", [r.seconds for r in mixed])
    fig.add("grouped: one call per adapter", t_grouped, "s", [r.seconds for r in grouped])
    fig.add("grouped / mixed (>1: mixing is faster)", t_grouped / t_mixed, "x")
    fig.add("same text mixed vs grouped", sum(a == b for a, b in zip(mixed[-1].texts, grouped[-1].texts, strict=True)),
            f"/ {n}")
    fig.metrics["adapters.grouped_over_mixed"] = t_grouped / t_mixed
    fig.data.update({k: [r.record() for r in v] for k, v in (("plain", plain), ("mixed", mixed), ("grouped", grouped))})
    return fig
