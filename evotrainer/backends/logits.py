"""Per-row logits processors for one batched ``generate`` call run with greedy decoding.

Every decoding setting of :class:`~evotrainer.backends.base.SamplingParams` is applied per row here, so
requests with different settings can share one batch and a row's output never depends on its
neighbours:

1. :class:`GeneratedRepetitionPenalty` — CTRL penalty (Keskar et al. 2019, arXiv:1909.05858) over the
   row's *generated* tokens only;
2. :class:`GeneratedNgramBlocker` — no-repeat-n-gram blocking (Paulus et al. 2017, arXiv:1705.04304)
   over the row's *generated* tokens only;
3. :class:`SeededSampler` — temperature + nucleus (top-p, Holtzman et al. 2019, arXiv:1904.09751)
   Gumbel-max sampling with the row's own ``torch.Generator``; leaves one finite logit, so greedy
   picks it;
4. :class:`RowBudget` — forces end-of-turn once a row has used its own ``max_new_tokens``.

transformers' built-in ``repetition_penalty`` and ``no_repeat_ngram_size`` look at the whole sequence,
prompt included; penalising the prompt makes a small model misspell the names and figures it must
copy from its input, hence these versions. Each processor is told the padded prompt length
``prompt_length`` (the ``input_ids`` width passed to ``generate``); columns from there on are generated.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from evotrainer.backends.base import SamplingParams

__all__ = ["GeneratedNgramBlocker", "GeneratedRepetitionPenalty", "RowBudget", "SeededSampler",
           "build_processors"]


class GeneratedRepetitionPenalty(LogitsProcessor):
    """Divide positive (multiply negative) logits of already-generated tokens by a per-row penalty.

    Args:
        prompt_length: padded prompt width; ``input_ids[:, prompt_length:]`` are the generated tokens.
        penalties: one penalty per row, >= 1.0; 1.0 leaves the row unchanged.
    """

    def __init__(self, prompt_length: int, penalties: Sequence[float]) -> None:
        if any(p < 1.0 for p in penalties):
            raise ValueError(f"repetition penalties must be >= 1.0, got {list(penalties)}")
        self.prompt_length = prompt_length
        self.penalties = torch.tensor(list(penalties), dtype=torch.float32).unsqueeze(1)  # (B, 1)
        self.active = any(p != 1.0 for p in penalties)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = input_ids[:, self.prompt_length :]  # (B, L)
        if not self.active or generated.shape[1] == 0:
            return scores
        penalty = self.penalties.to(scores.device, scores.dtype)  # (B, 1)
        picked = scores.gather(1, generated)  # (B, L); duplicates read and write the same value
        picked = torch.where(picked < 0, picked * penalty, picked / penalty)
        return scores.scatter(1, generated, picked)


class GeneratedNgramBlocker(LogitsProcessor):
    """Ban any token that would repeat an n-gram already present in the row's generated tokens.

    Args:
        prompt_length: padded prompt width; ``input_ids[:, prompt_length:]`` are the generated tokens.
        sizes: n per row (>= 1 blocks, 0 disables). Prompt n-grams are never blocked, so the model
            may still copy names and figures from its input.
    """

    def __init__(self, prompt_length: int, sizes: Sequence[int]) -> None:
        if any(n < 0 for n in sizes):
            raise ValueError(f"no_repeat_ngram_size must be >= 0, got {list(sizes)}")
        self.prompt_length = prompt_length
        self.sizes = list(sizes)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = input_ids[:, self.prompt_length :]  # (B, L)
        length = generated.shape[1]
        out = scores
        for n in sorted(set(self.sizes)):
            if n == 0 or length < n:
                continue
            rows = torch.tensor([i for i, size in enumerate(self.sizes) if size == n], device=scores.device)
            windows = generated[rows].unfold(1, n, 1)  # (R, L - n + 1, n): every generated n-gram
            prefix = generated[rows, length - n + 1 :].unsqueeze(1)  # (R, 1, n - 1): the last n-1 tokens
            hits = (windows[:, :, : n - 1] == prefix).all(dim=2)  # (R, W): n-grams starting with prefix
            hit_row, hit_win = hits.nonzero(as_tuple=True)
            if hit_row.numel() == 0:
                continue
            if out is scores:
                out = scores.clone()
            out[rows[hit_row], windows[hit_row, hit_win, n - 1]] = -float("inf")
        return out


class SeededSampler(LogitsProcessor):
    """Sample each sampling row with its own generator and leave only the chosen token finite.

    Run with greedy decoding (``do_sample=False``): the argmax of the returned row is the sampled
    token. Rows with temperature 0 pass through unchanged (greedy). Because each row owns a
    generator seeded from its request, the text depends only on the request and its seed, not on
    which other requests share the batch.

    Args:
        temperatures: one per row, >= 0; 0 means greedy.
        top_ps: one per row, in (0, 1]; nucleus mass kept before sampling.
        seeds: one per row; seeds ``torch.Generator().manual_seed(seed)``.
    """

    def __init__(self, temperatures: Sequence[float], top_ps: Sequence[float], seeds: Sequence[int]) -> None:
        if not len(temperatures) == len(top_ps) == len(seeds):
            raise ValueError("temperatures, top_ps and seeds must have one entry per row")
        if any(t < 0 for t in temperatures) or any(not 0 < p <= 1 for p in top_ps):
            raise ValueError(f"need temperature >= 0 and top_p in (0, 1], got {temperatures}, {top_ps}")
        self.temperatures = list(temperatures)
        self.top_ps = list(top_ps)
        self.generators = [
            torch.Generator().manual_seed(int(seed)) if t > 0 else None
            for t, seed in zip(temperatures, seeds, strict=True)
        ]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if all(g is None for g in self.generators):
            return scores
        out = scores.clone()
        for row, gen in enumerate(self.generators):
            if gen is None:
                continue
            token = _sample_row(scores[row].float().cpu(), self.temperatures[row], self.top_ps[row], gen)
            out[row] = -float("inf")
            out[row, token] = 0.0
        return out


def _sample_row(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator) -> int:
    """Sample one token id from ``logits`` (shape (V,)) with temperature and top-p by the Gumbel-max trick.

    ``argmax(logits / T + g)`` with i.i.d. standard Gumbel noise ``g`` is an exact sample of
    ``softmax(logits / T)`` (Gumbel 1954; Maddison et al. 2014, arXiv:1411.0030). Unlike inverse-CDF
    sampling over sorted probabilities, it is robust to the ~1e-6 logit differences between a batched
    and a one-row forward pass: the pick changes only if the top two perturbed scores are that close.
    Exactly one ``rand(V)`` draw per call keeps the generator in step with the row's token count.
    """
    scaled = logits.double() / temperature  # (V,)
    if top_p < 1.0:
        probs = torch.softmax(scaled, dim=-1)
        sorted_probs, sorted_ids = probs.sort(descending=True)
        outside = (sorted_probs.cumsum(0) - sorted_probs) >= top_p  # the most likely token always stays
        scaled = scaled.clone()
        scaled[sorted_ids[outside]] = -float("inf")
    uniform = torch.rand(scaled.shape, generator=gen, dtype=torch.float64).clamp_(1e-300, 1.0 - 1e-16)
    gumbel = -torch.log(-torch.log(uniform))  # (V,)
    return int(torch.argmax(scaled + gumbel))


class RowBudget(LogitsProcessor):
    """Force ``stop_token_id`` once a row has generated its own ``max_new_tokens``.

    Lets requests with different budgets share one ``generate`` call (run to the largest budget);
    the forced stop token is not counted as generated (see the backend), so such rows end "length".

    Args:
        prompt_length: padded prompt width.
        budgets: ``max_new_tokens`` per row, >= 1.
        stop_token_id: token forced when a row is out of budget (the end-of-turn token).
    """

    def __init__(self, prompt_length: int, budgets: Sequence[int], stop_token_id: int) -> None:
        self.prompt_length = prompt_length
        self.budgets = torch.tensor(list(budgets), dtype=torch.long)  # (B,)
        self.stop_token_id = stop_token_id

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        used = input_ids.shape[1] - self.prompt_length
        done = (self.budgets <= used).to(scores.device)  # (B,)
        if not bool(done.any()):
            return scores
        out = scores.clone()
        out[done] = -float("inf")
        out[done, self.stop_token_id] = 0.0
        return out


def build_processors(
    prompt_length: int, params: Sequence[SamplingParams], stop_token_id: int
) -> LogitsProcessorList:
    """The processors that apply ``params`` row by row, in the order penalty → n-gram → sample → budget.

    Args:
        prompt_length: padded prompt width (``input_ids.shape[1]`` passed to ``generate``).
        params: one :class:`SamplingParams` per batch row.
        stop_token_id: end-of-turn token forced when a row runs out of budget.

    Returns:
        A list to pass as ``generate(..., logits_processor=..., do_sample=False)``.
    """
    return LogitsProcessorList(
        [
            GeneratedRepetitionPenalty(prompt_length, [p.repetition_penalty for p in params]),
            GeneratedNgramBlocker(prompt_length, [p.no_repeat_ngram_size for p in params]),
            SeededSampler(
                [p.temperature for p in params], [p.top_p for p in params], [p.seed for p in params]
            ),
            RowBudget(prompt_length, [p.max_new_tokens for p in params], stop_token_id),
        ]
    )
