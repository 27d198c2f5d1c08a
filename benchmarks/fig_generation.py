"""Figures 1 and 2: batched vs sequential generation, and shared-prefix vs per-pair population generation.

Both run real requests: the seed population's prompts on transcripts of the shipped validation set,
built by the family's ``build_messages`` as rollouts build them, greedy with n-gram blocking 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.report import Figure, median
from benchmarks.workloads import (
    Bench,
    Run,
    batch_size,
    build_requests,
    decoding,
    default_layout,
    family_for,
    has_prefix_sharing,
    mean_words,
    prefix_sharing,
    timed_generate,
)

__all__ = ["GenerationSizes", "PrefixSizes", "generation_figure", "prefix_figure"]


@dataclass(frozen=True)
class GenerationSizes:
    """Figure 1's workload: one seed policy on ``requests`` generated meetings (generator ``length`` knob
    ``words``), ``max_new_tokens`` each (short prompts: the one-at-a-time pass over validation transcripts
    alone would take about a minute per repeat)."""

    requests: int = 16
    words: int = 120
    max_new_tokens: int = 16
    batch_sizes: tuple[int, ...] = (8, 16)

    @classmethod
    def for_bench(cls, bench: Bench) -> GenerationSizes:
        return cls(4, 80, 8, (2, 4)) if bench.quick else cls()

    def requests_for(self, bench: Bench) -> list:
        """The figure's requests (also figure 8's batched workload)."""
        return build_requests(family_for(None), bench.population(1), bench.meetings(self.requests, self.words),
                              decoding(self.max_new_tokens))


@dataclass(frozen=True)
class PrefixSizes:
    """Figure 2's workload: ``policies`` seeds x ``transcripts`` validation transcripts."""

    policies: int = 8
    transcripts: int = 3
    max_new_tokens: int = 16

    @classmethod
    def for_bench(cls, bench: Bench) -> PrefixSizes:
        return cls(4, 2, 8) if bench.quick else cls()


def _runs_line(runs: list[Run]) -> str:
    return f"{runs[0].prompt_tokens} prompt + {runs[0].generated_tokens} generated tokens"


def generation_figure(bench: Bench) -> Figure:
    """Generated tokens/s with one request per ``generate`` call vs batches of 8 and 16, same requests."""
    z = GenerationSizes.for_bench(bench)
    fig = Figure("generation", "generation tokens/s: sequential (one request per call) vs batched")
    backend = bench.backend
    reqs = z.requests_for(bench)
    backend.generate(reqs[:1])  # warm-up: first-call allocations
    seq = bench.timings(lambda: timed_generate(backend, reqs, one_at_a_time=True))
    words = mean_words(bench.meetings(z.requests, z.words))
    fig.workload = (f"seed policy '{bench.population(1)[0].id}' on {z.requests} generated meetings (length knob "
                    f"{z.words}: {words:.0f} words on average; {default_layout()} layout), greedy, "
                    f"max_new_tokens {z.max_new_tokens}: {_runs_line(seq)}; the backend's defaults otherwise; "
                    f"median of {bench.repeats}")
    base = median(r.tokens_per_s for r in seq)
    fig.add("sequential: tokens/s", base, "tok/s", [r.tokens_per_s for r in seq])
    fig.add("sequential: wall time", median(r.seconds for r in seq), "s", [r.seconds for r in seq])
    speedup = None
    for size in z.batch_sizes:
        with batch_size(backend, size):
            runs = bench.timings(lambda: timed_generate(backend, reqs))
        rate = median(r.tokens_per_s for r in runs)
        speedup = rate / base
        fig.add(f"batch {size}: tokens/s", rate, "tok/s", [r.tokens_per_s for r in runs])
        fig.add(f"batch {size}: wall time", median(r.seconds for r in runs), "s", [r.seconds for r in runs])
        fig.add(f"batch {size} / sequential", speedup, "x")
        fig.data[f"batch_{size}"] = [r.record() for r in runs]
    fig.data["sequential"] = [r.record() for r in seq]
    fig.metrics["generation.speedup"] = speedup
    return fig


_UNAVAILABLE = "not available in this commit"


def prefix_figure(bench: Bench) -> Figure:
    """A population generation (policies x transcripts) per pair vs with shared prefixes, per chat layout."""
    z = PrefixSizes.for_bench(bench)
    fig = Figure("prefix", "population generation: shared-prefix vs per-pair prefill")
    backend = bench.backend
    policies, tasks = bench.population(z.policies), bench.transcripts(z.transcripts)
    params = decoding(z.max_new_tokens)
    sharing = has_prefix_sharing(backend)
    fig.workload = (f"{z.policies} seed policies x the first {z.transcripts} validation transcripts = "
                    f"{z.policies * z.transcripts} requests in one generate call, greedy, max_new_tokens "
                    f"{z.max_new_tokens}, prefix store emptied before each run; median of {bench.repeats}")
    configs = [("per-pair, system_first (today)", "system_first", False),
               ("shared prefix, system_first", "system_first", True),
               ("shared prefix, transcript_first", "transcript_first", True)]
    base: float | None = None
    base_texts: tuple[str, ...] = ()
    for label, layout, share in configs:
        family = family_for(layout) or (family_for(None) if layout == "system_first" else None)
        if family is None or (share and not sharing):
            missing = "the family's prompt_layout" if family is None else "model.prefix_sharing"
            fig.add(f"{label}: wall time", None, "s", note=f"{_UNAVAILABLE} (no {missing})")
            continue
        reqs = build_requests(family, policies, tasks, params)
        if sharing:
            with prefix_sharing(backend, share):
                runs = bench.timings(lambda: timed_generate(backend, reqs))  # noqa: B023
        else:
            runs = bench.timings(lambda: timed_generate(backend, reqs))  # noqa: B023
        seconds = median(r.seconds for r in runs)
        stats = runs[-1].stats
        reused = f"; {int(stats.get('prefix_tokens_reused', 0))} prefix tokens reused" if stats else ""
        fig.add(f"{label}: wall time", seconds, "s", [r.seconds for r in runs],
                note=f"{runs[-1].prompt_tokens} prompt tokens{reused}")
        if base is None:
            base, base_texts = seconds, runs[-1].texts
        else:
            fig.add(f"{label}: speed-up vs today", base / seconds, "x")
            if layout == "system_first":
                same = sum(a == b for a, b in zip(base_texts, runs[-1].texts, strict=True))
                fig.add(f"{label}: same text as per-pair", same, f"/ {len(reqs)}")
        fig.data[label] = {"runs": [r.record() for r in runs]}
        if share == sharing and layout == default_layout():
            bench.memo["prefix.default"] = (label, seconds)
            if base is not None and seconds != base:
                fig.metrics["prefix.speedup"] = base / seconds
    if not sharing:
        fig.data["note"] = f"shared prefixes {_UNAVAILABLE}: only today's path was timed"
    return fig
