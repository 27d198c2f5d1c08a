"""Figure 3: prefill and decode rates on the model, against this machine's limits measured in the same run.

Limits: the fp32 GEMM rate of the model's own linear shapes (``torch.nn.functional.linear`` with the
threads torch uses) for prefill, which is compute-bound; the copy bandwidth of a large tensor for decode,
which reads every weight once per step. Counts (:func:`prefill_flops`, :func:`decode_bytes`) are the usual
first-order ones (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", table 1: 2 FLOPs per
parameter per token plus attention); norms, activations, RoPE and softmax are left out, so the fractions
are slightly optimistic about the work done and approximate.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.report import Figure, median
from benchmarks.workloads import Bench

__all__ = ["ModelFacts", "decode_bytes", "model_facts", "prefill_flops", "roofline_figure"]


@dataclass(frozen=True)
class ModelFacts:
    """Sizes read off the loaded model.

    Attributes:
        params: parameters (tied embeddings counted once).
        weight_bytes: bytes of all parameters (what one decode step reads).
        embedding_params: parameters of the input embedding (a lookup, no FLOPs; it is also the LM head
            when ``tied``).
        layers, hidden, heads, kv_heads, head_dim, intermediate, vocab: the architecture.
        dtype_bytes: bytes per element of the weights (4 for fp32).
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
    """Prefill: ``prefill_rows`` x ``prefill_tokens``; decode: ``decode_rows`` rows of ``decode_prompt``
    tokens, ``decode_steps`` steps; ``min_seconds`` per limit measurement."""

    prefill_rows: int = 4
    prefill_tokens: int = 512
    decode_rows: int = 8
    decode_prompt: int = 32
    decode_steps: int = 32
    min_seconds: float = 0.3
    copy_mib: int = 256

    @classmethod
    def for_bench(cls, bench: Bench) -> RooflineSizes:
        return cls(2, 256, 4, 16, 8, 0.1, 64) if bench.quick else cls()


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


def gemm_rate(f: ModelFacts, tokens: int, min_seconds: float) -> float:
    """FLOP/s of one block's linear layers (q, k, v, o, gate, up, down) on ``tokens`` rows, fp32."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    kv = f.kv_heads * f.head_dim
    shapes = [(f.hidden, f.heads * f.head_dim), (f.hidden, kv), (f.hidden, kv), (f.heads * f.head_dim, f.hidden),
              (f.hidden, f.intermediate), (f.hidden, f.intermediate), (f.intermediate, f.hidden)]
    gen = torch.Generator().manual_seed(0)
    total_flops, total_seconds = 0.0, 0.0
    with torch.inference_mode():
        for d_in, d_out in shapes:
            x = torch.randn(tokens, d_in, generator=gen)  # (T, in)
            w = torch.randn(d_out, d_in, generator=gen)  # (out, in), as nn.Linear stores it
            flops = 2.0 * tokens * d_in * d_out
            rate = _rate(lambda x=x, w=w: F.linear(x, w), flops, min_seconds / len(shapes))
            total_flops += flops
            total_seconds += flops / rate
    return total_flops / total_seconds


def copy_bandwidth(mib: int, min_seconds: float) -> float:
    """Bytes/s of ``dst.copy_(src)`` on ``mib`` MiB fp32 tensors, counting read + write (STREAM "copy")."""
    import torch

    src = torch.ones(mib * 2**20 // 4)
    dst = torch.empty_like(src)
    return _rate(lambda: dst.copy_(src), 2.0 * src.numel() * 4, min_seconds)


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


def roofline_figure(bench: Bench) -> Figure:
    """Prefill tokens/s vs the GEMM limit, decode tokens/s vs the copy-bandwidth limit."""
    z = RooflineSizes.for_bench(bench)
    model = bench.backend.model
    f = model_facts(model)
    fig = Figure("roofline", "prefill and decode rates vs this machine's measured GEMM and bandwidth limits")
    fig.workload = (f"prefill: one forward over {z.prefill_rows} x {z.prefill_tokens} transcript tokens; decode: "
                    f"greedy generate, {z.decode_rows} rows of {z.decode_prompt}-token prompts, per-step time = "
                    f"(time of {z.decode_steps + 1} steps - time of 1) / {z.decode_steps}; limits: fp32 linear "
                    f"layers of one block on {z.prefill_rows * z.prefill_tokens} rows, copy of {z.copy_mib} MiB; "
                    f"{bench.threads} threads; median of {bench.repeats}")
    tokens = z.prefill_rows * z.prefill_tokens
    gemm = [gemm_rate(f, tokens, z.min_seconds) for _ in range(bench.repeats)]
    bw = [copy_bandwidth(z.copy_mib, z.min_seconds) for _ in range(bench.repeats)]
    ids = _prompt_ids(bench, z.prefill_rows, z.prefill_tokens)
    _prefill_seconds(model, ids[:1, :64])  # warm-up
    prefill = [_prefill_seconds(model, ids) for _ in range(bench.repeats)]
    last_only = prefill[0][1]
    flops = prefill_flops(f, [z.prefill_tokens] * z.prefill_rows, None if last_only else tokens)
    short = _prompt_ids(bench, z.decode_rows, z.decode_prompt)
    _generate_seconds(bench, short, 2)  # warm-up
    steps = [(_generate_seconds(bench, short, z.decode_steps + 1) - _generate_seconds(bench, short, 1))
             / z.decode_steps for _ in range(bench.repeats)]
    step_bytes = decode_bytes(f, z.decode_rows, z.decode_prompt + z.decode_steps / 2)

    gemm_m, bw_m = median(gemm), median(bw)
    prefill_s = median(s for s, _ in prefill)
    step_s = median(steps)
    fig.add("model parameters", f.params / 1e6, "M", note=f"{f.linear_params / 1e6:.1f} M in the blocks' matrices")
    fig.add("model weight bytes (read per decode step)", f.weight_bytes / 1e6, "MB")
    fig.add("limit: fp32 GEMM (model's linear shapes)", gemm_m / 1e9, "GFLOP/s", [g / 1e9 for g in gemm])
    fig.add("limit: copy bandwidth (read + write)", bw_m / 1e9, "GB/s", [b / 1e9 for b in bw])
    fig.add("prefill: tokens/s", tokens / prefill_s, "tok/s", [tokens / s for s, _ in prefill])
    fig.add("prefill: achieved", flops / prefill_s / 1e9, "GFLOP/s", note=f"{flops / 1e12:.2f} TFLOP per forward")
    fig.add("prefill / GEMM limit", flops / prefill_s / gemm_m, "%")
    fig.add(f"decode: time per step (batch {z.decode_rows})", 1e3 * step_s, "ms", [1e3 * s for s in steps])
    fig.add("decode: tokens/s", z.decode_rows / step_s, "tok/s")
    fig.add("decode: achieved", step_bytes / step_s / 1e9, "GB/s", note=f"{step_bytes / 1e6:.0f} MB per step")
    fig.add("decode / bandwidth limit", step_bytes / step_s / bw_m, "%")
    fig.metrics["roofline.prefill_fraction"] = flops / prefill_s / gemm_m
    fig.metrics["roofline.decode_fraction"] = step_bytes / step_s / bw_m
    fig.data.update(model=asdict(f), gemm_flops_per_s=gemm, copy_bytes_per_s=bw,
                    prefill_seconds=[s for s, _ in prefill], prefill_flops=flops,
                    prefill_last_logits_only=last_only, decode_step_seconds=steps, decode_step_bytes=step_bytes)
    return fig
