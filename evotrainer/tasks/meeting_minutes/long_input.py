"""Meeting-minutes rollouts of transcripts longer than the model's context: windowed and merged, or cut, and
always said (docs/long_meetings.md).

:func:`long_roll_out` is the family's rollout. For each request it decides, with the model's own tokenizer:

- **whole**: the prompt fits the context minus ``max_new_tokens``: sent as it is;
- **windowed into N**: it does not fit and ``mode == "window"``: the transcript is cut into N windows at
  speaker turns (:mod:`~evotrainer.tasks.meeting_minutes.windows`) of the policy's window size (its
  ``window_tokens`` reading gene, else ``task.options.long.window_tokens``: :func:`window_tokens`; capped by
  the context budget), the policy writes partial minutes of each window (its own prompt, the transcript
  replaced by the window), then one more call, the *merge*, writes one set of minutes from the partial ones
  under the policy's :data:`~evotrainer.genome.MERGE_SECTION` instruction (default
  :data:`DEFAULT_MERGE_INSTRUCTION`);
- **cut**: it does not fit and ``mode == "cut"`` (or windowing is impossible: a backend without a tokenizer
  or context length, a window budget under :data:`MIN_WINDOW_TOKENS`): the backend cuts the middle of the
  prompt; the share of transcript words the model saw is recorded.

All windows of all requests go to the backend in one ``generate`` call (with the requests sent whole), so
batching and the shared-prefix path apply: the policies reading one window send the same leading tokens in
the ``transcript_first`` layout. The merges of all requests follow in a second call. Every returned
:class:`~evotrainer.backends.base.Generation` carries its :class:`~evotrainer.input_handling.InputHandling`
code in ``handling``, and each item the model did not read whole is logged as a warning naming the item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evotrainer import progress
from evotrainer.backends.base import LLM, Generation, GenerationRequest, Message
from evotrainer.errors import ConfigError
from evotrainer.genome import MERGE_SECTION, PREFILL_SECTION, WINDOW_GENE, render_system_prompt
from evotrainer.input_handling import InputHandling
from evotrainer.tasks.base import RolloutRequest
from evotrainer.tasks.meeting_minutes.windows import Window, transcript_windows

__all__ = ["DEFAULT_MERGE_INSTRUCTION", "LONG_MODES", "MIN_WINDOW_TOKENS", "LongInput", "WindowCache", "long_roll_out",
           "merge_messages", "window_tokens"]

log = logging.getLogger(__name__)

LONG_MODES = ("window", "cut")
MIN_WINDOW_TOKENS = 64
"""Smallest window worth windowing for, tokens; below it the prompt is cut instead (and said so)."""

DEFAULT_MERGE_INSTRUCTION = (
    "Merge these partial minutes into one set of minutes of the whole meeting, in the format asked for above. "
    "List each topic once. Keep every decision and every action item with its owner; write an item that "
    "appears in several parts only once."
)
"""The merge call's instruction for a policy without a :data:`~evotrainer.genome.MERGE_SECTION`."""

PART_HEADER = "[Part {k} of {n} of the meeting]"
_HEADER_TOKENS = 32  # more than the part header and the line break after it take
MERGE_TEMPLATE = "Partial minutes of {n} consecutive parts of one meeting:\n\n{parts}\n\nInstructions:\n\n{instructions}"


@dataclass(frozen=True)
class LongInput:
    """The family's long-transcript settings, its option ``task.options.long.*`` (docs/long_meetings.md).

    Attributes:
        mode: ``"window"`` or ``"cut"`` (module docstring).
        window_tokens: transcript tokens per window (model tokenizer), >= :data:`MIN_WINDOW_TOKENS`; a policy's
            ``window_tokens`` reading gene replaces it for that policy (:func:`window_tokens`).
        overlap_tokens: tokens a window repeats from the one before, in ``[0, window_tokens)``.
        reserve_tokens: prompt tokens kept free for the policy's instructions beside a window, >= 0.
        merge_max_new_tokens: new tokens of the merge call, >= 1; None: the policy's ``max_new_tokens``.

    Raises:
        ConfigError: a value out of range (names the ``task.options.long.*`` key).
    """

    mode: str = "window"
    window_tokens: int = 1536
    overlap_tokens: int = 128
    reserve_tokens: int = 512
    merge_max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        checks = (
            (self.mode in LONG_MODES, "mode", f"one of {list(LONG_MODES)}", self.mode),
            (self.window_tokens >= MIN_WINDOW_TOKENS, "window_tokens", f">= {MIN_WINDOW_TOKENS}", self.window_tokens),
            (0 <= self.overlap_tokens < self.window_tokens, "overlap_tokens", "in [0, window_tokens)",
             self.overlap_tokens),
            (self.reserve_tokens >= 0, "reserve_tokens", ">= 0", self.reserve_tokens),
            (self.merge_max_new_tokens is None or self.merge_max_new_tokens >= 1, "merge_max_new_tokens",
             ">= 1 or null", self.merge_max_new_tokens),
        )
        for ok, key, want, got in checks:
            if not ok:
                raise ConfigError(f"task.options.long.{key}: expected {want}, got {got!r}")


@dataclass(frozen=True)
class _Counters:
    """Token counts with the backend's tokenizer: of a text, and of a whole chat prompt."""

    text: Callable[[str], int]
    prompt: Callable[[Sequence[Message]], int]
    context: int


def _counters(llm: LLM) -> _Counters | None:
    """The backend's token counters and context length, or None when it exposes no tokenizer or context."""
    tok = getattr(llm, "tokenizer", None)
    context = getattr(llm, "context_length", None)
    if tok is None or not callable(tok) or not isinstance(context, int):
        return None

    def text(s: str) -> int:
        return len(tok(s, add_special_tokens=False)["input_ids"])

    render = getattr(llm, "render", None)

    def prompt(messages: Sequence[Message]) -> int:
        if callable(render):  # the HF backend: chat template + prefill, as it encodes the request
            return text(render(messages))
        return sum(text(m["content"]) + 8 for m in messages)  # about the template's per-turn tokens

    return _Counters(text, prompt, context)


def merge_messages(sections: Sequence[tuple[str, str]], partials: Sequence[str]) -> tuple[Message, ...]:
    """The merge call's chat: the partial minutes in order, then the policy's instructions (its system prompt
    sections) and its merge instruction (:data:`~evotrainer.genome.MERGE_SECTION`, else
    :data:`DEFAULT_MERGE_INSTRUCTION`); the policy's prefill starts the answer as in its other calls.

    Args:
        sections: the policy's genome sections.
        partials: the partial minutes, one per window, in transcript order (untrusted model text).

    Returns:
        ``(system, user)`` with an empty system message, plus an assistant prefill message when the policy
        has one.
    """
    given = dict(sections)
    merge = given.get(MERGE_SECTION, "").strip() or DEFAULT_MERGE_INSTRUCTION
    rules = render_system_prompt(sections).strip()
    parts = "\n\n".join(f"### Part {k}\n{text.strip() or '(no minutes)'}" for k, text in enumerate(partials, 1))
    user = MERGE_TEMPLATE.format(n=len(partials), parts=parts, instructions=f"{rules}\n\n{merge}" if rules else merge)
    chat: tuple[Message, ...] = ({"role": "system", "content": ""}, {"role": "user", "content": user})
    prefill = given.get(PREFILL_SECTION, "")
    return (*chat, {"role": "assistant", "content": prefill}) if prefill.strip() else chat


def _share(generation: Generation, words: int, predicted: float | None) -> float | None:
    """Share of ``words`` transcript words the model saw in a cut prompt: from the words the backend says it
    dropped, else the prediction from token counts, else None (unknown)."""
    if generation.omitted_words > 0 and words > 0:
        return max(0.0, 1.0 - generation.omitted_words / words)
    return predicted


@dataclass
class _Plan:
    """How one request is sent: whole (``windows`` empty) or as windows."""

    windows: list[Window]
    words: int
    predicted_share: float | None = None


class WindowCache:
    """Windows per (transcript, size, overlap): every policy reading one meeting gets the same windows."""

    def __init__(self, limit: int = 512) -> None:
        self._store: dict[tuple[str, int, int], list[Window]] = {}
        self._counts: dict[tuple[str, int, int], int] = {}
        self._limit = limit

    def tokens(self, task: Any, counters: _Counters) -> int:
        """Tokens of the task's transcript (counted once per transcript)."""
        key = (task.content_hash, -1, -1)
        if key not in self._counts:
            if len(self._counts) >= self._limit:
                self._counts.clear()
            self._counts[key] = counters.text(task.transcript)
        return self._counts[key]

    def get(self, task: Any, counters: _Counters, size: int, overlap: int) -> list[Window]:
        key = (task.content_hash, size, overlap)
        if key not in self._store:
            if len(self._store) >= self._limit:
                self._store.clear()
            self._store[key] = transcript_windows(task.transcript, counters.text, size, overlap)
        return self._store[key]


def window_tokens(r: RolloutRequest, settings: LongInput) -> int:
    """Transcript tokens per window the policy of ``r`` asks for: its :data:`~evotrainer.genome.WINDOW_GENE`
    reading gene (rounded; a value under :data:`MIN_WINDOW_TOKENS` reads as that), else ``settings.window_tokens``.

    The rollout caps it by the context budget (``context - max_new_tokens - max(reserve, instructions)``) as it
    caps the option, so a gene above the budget reads windows of the budget: the same windows as any larger value.
    """
    gene = dict(r.decoding).get(WINDOW_GENE)
    return settings.window_tokens if gene is None else max(MIN_WINDOW_TOKENS, int(round(gene)))


def _plan(r: RolloutRequest, settings: LongInput, counters: _Counters | None, cache: WindowCache) -> _Plan:
    words = len(r.task.transcript.split())
    if counters is None:
        return _Plan([], words)
    budget = counters.context - r.params.max_new_tokens
    need = counters.prompt(r.messages)
    if need <= budget:
        return _Plan([], words)
    transcript_tokens = cache.tokens(r.task, counters)
    overhead = max(need - transcript_tokens, 0)
    predicted = max(0.0, min(1.0, (budget - overhead) / transcript_tokens)) if transcript_tokens else None
    # room for the policy's own text: the reserve, or more when its instructions need more (+ the part header)
    size = min(window_tokens(r, settings), budget - max(settings.reserve_tokens, overhead + _HEADER_TOKENS))
    if settings.mode != "window" or size < MIN_WINDOW_TOKENS:
        return _Plan([], words, predicted)
    # at most half a window repeats: a short window (a small gene, a tight budget) still moves on
    windows = cache.get(r.task, counters, size, min(settings.overlap_tokens, size // 2))
    return _Plan(windows if len(windows) >= 2 else [], words, predicted)


def long_roll_out(llm: LLM, requests: Sequence[RolloutRequest], build_messages: Callable[..., tuple[Message, ...]],
                  settings: LongInput, cache: WindowCache | None = None) -> list[Generation]:
    """One :class:`Generation` per request, in order, each with its handling code (module docstring).

    Args:
        llm: the policy model; windowing needs its ``tokenizer`` and ``context_length`` (the HF and vLLM
            backends have them; without them every request is sent whole and a backend cut is still said).
        requests: the rollout requests (meeting tasks).
        build_messages: ``(sections, task) -> chat``, the family's prompt builder (used for each window).
        settings: the ``task.options.long`` settings.
        cache: windows already planned (a family keeps one across calls); None: a fresh one.

    Returns:
        Per request: whole or cut, the backend's generation; windowed, the merge call's text with prompt and
        generated tokens summed over its windows and the merge.

    Raises:
        Whatever the backend raises (the evaluator fails the batch's evaluations, never the run).
    """
    cache = cache if cache is not None else WindowCache()
    counters = _counters(llm)
    plans = [_plan(r, settings, counters, cache) for r in requests]
    first: list[GenerationRequest] = []
    slots: list[tuple[int, int]] = []  # (first request index, count) per rollout request
    for r, plan in zip(requests, plans, strict=True):
        if not plan.windows:
            slots.append((len(first), 1))
            first.append(GenerationRequest(r.messages, r.params, r.adapter))
            continue
        slots.append((len(first), len(plan.windows)))
        n = len(plan.windows)
        for k, w in enumerate(plan.windows, 1):
            part = replace(r.task, transcript=f"{PART_HEADER.format(k=k, n=n)}\n{w.text}")
            first.append(GenerationRequest(tuple(build_messages(r.sections, part)), r.params, r.adapter))
    n_merges = sum(1 for plan in plans if plan.windows)
    if n_merges:  # the phase counts items; a nested line counts the windows and merges of this call
        with progress.task(f"long inputs: {len(first)} windows and whole prompts, then {n_merges} merges",
                           len(first) + n_merges):
            answers, merged_list = _generate_both(llm, requests, plans, slots, first, settings)
        progress.advance(len(requests))
    else:
        answers, merged_list = _generate_both(llm, requests, plans, slots, first, settings)
    merged = iter(merged_list)

    out: list[Generation] = []
    for plan, (at, n) in zip(plans, slots, strict=True):
        if not plan.windows:
            g = answers[at]
            how = InputHandling("cut", 1, _share(g, plan.words, plan.predicted_share)) if g.prompt_truncated \
                else InputHandling()
            out.append(replace(g, handling=how.code()))
            continue
        parts, m = answers[at:at + n], next(merged)
        lost = sum(g.omitted_words for g in parts)
        cut = any(g.prompt_truncated for g in parts) or m.prompt_truncated
        share = 1.0 if not cut else (max(0.0, 1.0 - lost / plan.words) if lost and plan.words else None)
        how = InputHandling("windowed", n, share)
        out.append(Generation(
            text=m.text, prompt_tokens=sum(g.prompt_tokens for g in parts) + m.prompt_tokens,
            generated_tokens=sum(g.generated_tokens for g in parts) + m.generated_tokens,
            finish_reason=m.finish_reason, prompt_truncated=cut, omitted_words=lost + m.omitted_words,
            handling=how.code()))
    _warn_lost(requests, out)
    return out


def _generate_both(llm: LLM, requests: Sequence[RolloutRequest], plans: Sequence[_Plan],
                   slots: Sequence[tuple[int, int]], first: list[GenerationRequest],
                   settings: LongInput) -> tuple[list[Generation], list[Generation]]:
    """The first call (whole prompts and every window) and the second (one merge per windowed request)."""
    answers = llm.generate(first) if first else []
    merges: list[GenerationRequest] = []
    for r, plan, (at, n) in zip(requests, plans, slots, strict=True):
        if plan.windows:
            params = replace(r.params, max_new_tokens=settings.merge_max_new_tokens or r.params.max_new_tokens)
            merges.append(GenerationRequest(merge_messages(r.sections, [g.text for g in answers[at:at + n]]),
                                            params, r.adapter))
    return answers, (llm.generate(merges) if merges else [])


def _warn_lost(requests: Sequence[RolloutRequest], generations: Sequence[Generation]) -> None:
    """One warning per item whose transcript the model did not read whole (the least share over policies)."""
    worst: dict[str, tuple[InputHandling, int]] = {}
    for r, g in zip(requests, generations, strict=True):
        how = InputHandling.parse(g.handling, g.prompt_truncated)
        if not how.lost_words:
            continue
        seen = -1.0 if how.share_seen is None else how.share_seen
        old = worst.get(r.task.task_id)
        if old is None or seen < (-1.0 if old[0].share_seen is None else old[0].share_seen):
            worst[r.task.task_id] = (how, len(r.task.transcript.split()))
    for task_id, (how, words) in worst.items():
        log.warning("item %s: the model did not read its whole transcript (%d words): %s; set task.options.long.mode=window "
                    "(docs/long_meetings.md) or a larger model.max_context", task_id, words, how.label())
