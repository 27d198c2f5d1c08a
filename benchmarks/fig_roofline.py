"""Figure 3: prefill and decode rates on the model, against this machine's limits measured in the same run.

Limits (issue 39, item 3 "Speed against this machine's limits"), measured with the threads torch uses:

- the GEMM peak: ``torch.mm`` of large square matrices (4096 x 4096 x 4096) in float32, and in bfloat16 where
  the CPU lists a native-bf16 flag (``amx_bf16``, ``avx512_bf16``) or the model runs in it (elsewhere torch
  emulates bf16 at about 1 % of the fp32 rate, so that figure would bound nothing); prefill, which is
  compute-bound, is compared with the peak of the model's own dtype;
- the read bandwidth: ``sum`` over a large fp32 tensor (each byte read once, nothing written); a decode step
  reads every weight once, so its limit is ``read bandwidth / weight bytes`` steps per second, whatever the
  batch (the KV cache at these contexts is well under 1 % of the weights, and is left out of the limit).

Counts (:func:`prefill_flops`, :func:`decode_bytes`) are the usual first-order ones (Kaplan et al. 2020,
"Scaling Laws for Neural Language Models", table 1: 2 FLOPs per parameter per token plus attention); norms,
activations, RoPE and softmax are left out, so the fractions are slightly optimistic about the work done and
approximate. Every figure names its model, dtype and engine (``backend.name``, transformers' version).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.report import Figure, median
from benchmarks.workloads import Bench
from evotrainer.backends.numerics import auto_reason, cpu_bf16_flags

__all__ = ["ModelFacts", "decode_bytes", "gemm_peak", "model_facts", "prefill_flops", "read_bandwidth",
           "roofline_figure"]


@dataclass(frozen=True)
class ModelFacts:
    """Sizes read off the loaded model.

    Attributes:
        params: parameters (tied embeddings counted once).
        weight_bytes: bytes of all parameters (what one decode step reads).
        embedding_params: parameters of the input embedding (a lookup, no FLOPs; it is also the LM head
            when ``tied``).
        layers, hidden, heads, kv_heads, head_dim, intermediate, vocab: the architecture.
        dtype_bytes: bytes per element of the weights (4 for fp32, 2 for bf16).
        tied: the LM head shares the embedding matrix.
    """

    params: int
    weight_bytes: int
    embedding_params: int
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    dtype_bytes: int
    tied: bool

    @property
    def linear_params(self) -> int:
        """Parameters of the transformer blocks' matrices (everything but embeddings and the LM head)."""
        head = 0 if self.tied else self.vocab * self.hidden
        return self.params - self.embedding_params - head


def model_facts(model: Any) -> ModelFacts:
    """The :class:`ModelFacts` of a transformers causal LM (read from its parameters and config)."""
    c = model.config
    params = list(model.parameters())
    heads = int(c.num_attention_heads)
    head_dim = int(getattr(c, "head_dim", None) or c.hidden_size // heads)
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings()
    return ModelFacts(
        params=sum(p.numel() for p in params), weight_bytes=sum(p.numel() * p.element_size() for p in params),
        embedding_params=emb.numel(), layers=int(c.num_hidden_layers), hidden=int(c.hidden_size), heads=heads,
        kv_heads=int(getattr(c, "num_key_value_heads", heads)), head_dim=head_dim,
        intermediate=int(c.intermediate_size), vocab=int(c.vocab_size), dtype_bytes=emb.element_size(),
        tied=out is not None and out.weight.data_ptr() == emb.data_ptr(),
    )


def prefill_flops(f: ModelFacts, lengths: Sequence[int], logits_rows: int | None = None) -> float:
    """FLOPs of one causal forward over sequences of ``lengths`` tokens (no padding).

    ``2 * linear_params`` per token (multiply + add), causal attention ``2 * 2 * heads * head_dim`` per
    (query, key) pair with key <= query (scores and the weighted sum), and the LM head
    (``2 * vocab * hidden``) for ``logits_rows`` positions (one per sequence when None).
    """
    tokens = sum(lengths)
    pairs = sum(n * (n + 1) // 2 for n in lengths)
    rows = len(lengths) if logits_rows is None else logits_rows
    attention = 4.0 * f.layers * f.heads * f.head_dim * pairs
    return 2.0 * f.linear_params * tokens + attention + 2.0 * f.vocab * f.hidden * rows


def decode_bytes(f: ModelFacts, batch: int, context: float) -> float:
    """Bytes one decode step reads: every weight once plus the KV cache of ``batch`` rows of ``context``
    tokens (keys and values, every layer)."""
    return f.weight_bytes + 2.0 * f.layers * f.kv_heads * f.head_dim * f.dtype_bytes * batch * context


@dataclass(frozen=True)
class RooflineSizes:
    """Prefill: ``prefill_rows`` x ``prefill_tokens``; decode: each of ``decode_batches`` rows of
    ``decode_prompt`` tokens, ``decode_steps`` steps; limits: ``gemm_n``-cubed matmuls, a ``read_mib`` MiB sum,
    each timed for at least ``min_seconds``."""

    prefill_rows: int = 4
    prefill_tokens: int = 512
    decode_batches: tuple[int, ...] = (1, 8)
    decode_prompt: int = 32
    decode_steps: int = 32
    min_seconds: float = 0.3
    gemm_n: int = 4096
    read_mib: int = 512

    @classmethod
    def for_bench(cls, bench: Bench) -> RooflineSizes:
        return cls(2, 256, (1, 8), 16, 8, 0.1, 2048, 128) if bench.quick else cls()


def _rate(fn: Any, work: float, min_seconds: float) -> float:
    """``work`` units per second of ``fn()``, repeated for at least ``min_seconds`` after one warm-up."""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds:
            return work * n / elapsed


def gemm_peak(dtype: Any, n: int, min_seconds: float) -> float:
    """FLOP/s of ``torch.mm`` on two ``(n, n)`` matrices of ``dtype`` (``2 n^3`` FLOPs a product), with the
    threads torch uses: the machine's practical GEMM peak in that dtype."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(dtype)  # (n, n)
    b = torch.randn(n, n, generator=gen).to(dtype)  # (n, n)
    c = torch.empty(n, n, dtype=dtype)  # (n, n)
    with torch.inference_mode():
        return _rate(lambda: torch.mm(a, b, out=c), 2.0 * n**3, min_seconds)


def read_bandwidth(mib: int, min_seconds: float) -> float:
    """Bytes/s read by ``x.sum()`` over a ``mib`` MiB fp32 tensor (every byte read once, one scalar written)."""
    import torch

    x = torch.ones(mib * 2**20 // 4)
    with torch.inference_mode():
        return _rate(lambda: x.sum(), float(x.numel() * 4), min_seconds)


def _prompt_ids(bench: Bench, rows: int, tokens: int) -> Any:
    """``(rows, tokens)`` token ids cut from the validation transcripts (real text, no padding)."""
    import torch

    tok = bench.backend.tokenizer
    ids = [tok(t.transcript, add_special_tokens=False)["input_ids"] for t in bench.transcripts(rows * 2)]
    ids = [x for x in ids if len(x) >= tokens][:rows]
    if len(ids) < rows:  # short transcripts: join them
        flat = [i for x in (tok(t.transcript)["input_ids"] for t in bench.transcripts(100)) for i in x]
        ids = [flat[k * tokens:(k + 1) * tokens] for k in range(rows)]
    return torch.tensor([x[:tokens] for x in ids], dtype=torch.long)  # (B, T)


def _prefill_seconds(model: Any, ids: Any) -> tuple[float, bool]:
    """Seconds of one forward over ``ids`` building the KV cache, and whether only the last position's
    logits were computed (``logits_to_keep=1``, as ``generate`` does)."""
    import torch

    with torch.inference_mode():
        t0 = time.perf_counter()
        try:
            model(input_ids=ids, use_cache=True, logits_to_keep=1)
            last_only = True
        except TypeError:  # an older transformers: logits for every position
            model(input_ids=ids, use_cache=True)
            last_only = False
        return time.perf_counter() - t0, last_only


def _generate_seconds(bench: Bench, ids: Any, steps: int) -> float:
    """Seconds of greedy ``generate`` of exactly ``steps`` new tokens per row (end-of-turn suppressed)."""
    import torch
    from transformers import GenerationConfig

    backend = bench.backend
    cfg = GenerationConfig(do_sample=False, max_new_tokens=steps, min_new_tokens=steps,
                           eos_token_id=list(backend.stop_token_ids), pad_token_id=backend.pad_token_id)
    with torch.inference_mode():
        t0 = time.perf_counter()
        backend.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=cfg)
        return time.perf_counter() - t0


def _step_seconds(bench: Bench, ids: Any, steps: int) -> list[float]:
    """Per-step decode seconds of ``ids`` (``(B, T)``), one per repeat: ``(time of steps + 1 new tokens -
    time of 1) / steps``, so the prefill and the first step cancel out."""
    _generate_seconds(bench, ids, 2)  # warm-up at this batch size
    return [(_generate_seconds(bench, ids, steps + 1) - _generate_seconds(bench, ids, 1)) / steps
            for _ in range(bench.repeats)]


def roofline_figure(bench: Bench) -> Figure:
    """Prefill FLOP/s vs the GEMM peak of the model's dtype; decode steps/s vs read bandwidth / weight bytes."""
    import torch
    import transformers

    z = RooflineSizes.for_bench(bench)
    backend = bench.backend
    model = backend.model
    f = model_facts(model)
    dtype = model.get_input_embeddings().weight.dtype
    dtype_name = str(dtype).removeprefix("torch.")
    engine = f"transformers {transformers.__version__}"
    threads = torch.get_num_threads()
    # bf16 only where the CPU computes it natively (or the model runs in it): emulated, a 4096^3 bf16 product takes
    # minutes and bounds nothing the run does
    native_bf16 = bool(cpu_bf16_flags()) or dtype == torch.bfloat16
    fig = Figure("roofline", f"prefill and decode rates of {backend.name} on {engine} vs this machine's measured "
                             "GEMM peak and read bandwidth")
    fig.workload = (f"model {backend.name}, weights {dtype_name}, engine {engine}, {threads} threads; prefill: "
                    f"one forward over {z.prefill_rows} x {z.prefill_tokens} transcript tokens; decode: greedy "
                    f"generate of {z.decode_prompt}-token prompts at batch "
                    f"{' and '.join(str(b) for b in z.decode_batches)}, per-step time = (time of "
                    f"{z.decode_steps + 1} steps - time of 1) / {z.decode_steps}; limits: torch.mm {z.gemm_n}^3 "
                    f"in {'bf16 and ' if native_bf16 else ''}fp32, sum over {z.read_mib} MiB fp32; median of {bench.repeats}")

    bench.log("  roofline: GEMM peaks and read bandwidth ...")
    peak_dtypes = list(dict.fromkeys([*([torch.bfloat16] if native_bf16 else []), torch.float32, dtype]))
    peaks = {str(d).removeprefix("torch."): [gemm_peak(d, z.gemm_n, z.min_seconds) for _ in range(bench.repeats)]
             for d in peak_dtypes}
    bw = [read_bandwidth(z.read_mib, z.min_seconds) for _ in range(bench.repeats)]
    bench.log("  roofline: prefill ...")
    ids = _prompt_ids(bench, z.prefill_rows, z.prefill_tokens)
    _prefill_seconds(model, ids[:1, :64])  # warm-up
    prefill = [_prefill_seconds(model, ids) for _ in range(bench.repeats)]
    last_only = prefill[0][1]
    tokens = z.prefill_rows * z.prefill_tokens
    flops = prefill_flops(f, [z.prefill_tokens] * z.prefill_rows, None if last_only else tokens)
    bench.log("  roofline: decode ...")
    short = _prompt_ids(bench, max(z.decode_batches), z.decode_prompt)
    steps = {b: _step_seconds(bench, short[:b], z.decode_steps) for b in z.decode_batches}

    peak_m = {k: median(v) for k, v in peaks.items()}
    bw_m = median(bw)
    prefill_s = median(s for s, _ in prefill)
    achieved = flops / prefill_s
    limit_step_s = f.weight_bytes / bw_m  # the fastest a step can be: read every weight once
    fig.add("model parameters", f.params / 1e6, "M", note=f"{f.linear_params / 1e6:.1f} M in the blocks' matrices")
    fig.add(f"model weight bytes ({dtype_name})", f.weight_bytes / 1e6, "MB", note="read once per decode step")
    for name, runs in peaks.items():
        fig.add(f"limit: GEMM peak {name} ({z.gemm_n}^3)", peak_m[name] / 1e12, "TFLOP/s",
                [r / 1e12 for r in runs])
    if not native_bf16:
        fig.add("limit: GEMM peak bfloat16", None, "TFLOP/s", note=f"not measured: {auto_reason()}")
    fig.add("limit: read bandwidth", bw_m / 1e9, "GB/s", [b / 1e9 for b in bw])
    fig.add("limit: decode steps/s (bandwidth / weight bytes)", 1.0 / limit_step_s, "steps/s",
            note=f"{1e3 * limit_step_s:.0f} ms per step")
    fig.add("prefill: tokens/s", tokens / prefill_s, "tok/s", [tokens / s for s, _ in prefill])
    fig.add("prefill: achieved", achieved / 1e12, "TFLOP/s", note=f"{flops / 1e12:.2f} TFLOP per forward")
    fig.add(f"prefill / GEMM peak {dtype_name}", achieved / peak_m[dtype_name], "%",
            note=f"{100 * achieved / peak_m['float32']:.0f} % of the fp32 peak")
    fractions: dict[int, float] = {}
    for b, runs in steps.items():
        step_s = median(runs)
        fractions[b] = limit_step_s / step_s
        kv_mb = (decode_bytes(f, b, z.decode_prompt + z.decode_steps / 2) - f.weight_bytes) / 1e6
        fig.add(f"decode batch {b}: time per step", 1e3 * step_s, "ms", [1e3 * s for s in runs])
        fig.add(f"decode batch {b}: tokens/s", b / step_s, "tok/s")
        fig.add(f"decode batch {b} / bandwidth limit", fractions[b], "%",
                note=f"KV cache {kv_mb:.1f} MB per step, not in the limit")
    fig.metrics["roofline.prefill_fraction"] = achieved / peak_m[dtype_name]
    fig.metrics["roofline.decode_fraction"] = fractions.get(1)
    fig.metrics["roofline.decode_fraction_batch8"] = fractions.get(8)
    fig.data.update(model_name=backend.name, dtype=dtype_name, engine=engine, threads=threads, model=asdict(f),
                    gemm_n=z.gemm_n, gemm_flops_per_s=peaks, read_mib=z.read_mib, read_bytes_per_s=bw,
                    prefill_seconds=[s for s, _ in prefill], prefill_flops=flops,
                    prefill_last_logits_only=last_only,
                    decode_step_seconds={str(b): runs for b, runs in steps.items()},
                    decode_limit_step_seconds=limit_step_s)
    return fig
