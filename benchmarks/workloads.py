"""The suite's shared workload: one model load, the real seed population and validation transcripts, and
requests built the way rollouts build them (:mod:`evotrainer.rollout`: one request per policy x task,
policy-major, ``family.build_messages`` + the policy's decoding genes + its adapter).

Features still being built (issue 14) are probed, never assumed: :func:`family_for` returns None when the
family has no ``prompt_layout`` and :func:`has_prefix_sharing` is False when the backend cannot share
prefixes, so the suite prints "not available in this commit" instead of failing.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from typing import Any

import evotrainer  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP, where supported)
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.config import PACKAGE_DATA, DecodingConfig, ModelConfig
from evotrainer.genome import Policy, load_population
from evotrainer.rollout import sampling_for
from evotrainer.tasks.meeting_minutes import MeetingMinutes
from evotrainer.tasks.meeting_minutes.task import MeetingTask

__all__ = [
    "LAYOUTS",
    "POPULATION_PATH",
    "VALIDATION_PATH",
    "Bench",
    "Run",
    "batch_size",
    "build_requests",
    "cold",
    "decoding",
    "default_layout",
    "family_for",
    "has_prefix_sharing",
    "mean_words",
    "prefix_sharing",
    "stats_delta",
    "timed_generate",
]

POPULATION_PATH = PACKAGE_DATA / "populations" / "meeting_minutes.yaml"
VALIDATION_PATH = PACKAGE_DATA / "validation_set" / "meeting_minutes.jsonl"
LAYOUTS = ("system_first", "transcript_first")
"""The meeting-minutes chat layouts: the policy as system prompt before the transcript (the layout before
issue 14), or the transcript first and the policy's text after it (a prefix shared by every policy)."""


def decoding(max_new_tokens: int) -> SamplingParams:
    """The default rollout decoding (``DecodingConfig``: greedy, n-gram 4) with ``max_new_tokens``."""
    d = DecodingConfig()
    return SamplingParams(temperature=d.temperature, top_p=d.top_p, max_new_tokens=max_new_tokens,
                          repetition_penalty=d.repetition_penalty, no_repeat_ngram_size=d.no_repeat_ngram_size)


def family_for(layout: str | None = None) -> MeetingMinutes | None:
    """The meeting-minutes family with chat ``layout`` (None: its default); None when this commit's family
    has no ``prompt_layout`` and a layout was asked for."""
    if layout is None:
        return MeetingMinutes()
    if "prompt_layout" not in inspect.signature(MeetingMinutes).parameters:
        return None
    return MeetingMinutes(prompt_layout=layout)


def default_layout() -> str:
    """The family's default chat layout ("system_first" in a commit without ``prompt_layout``)."""
    return str(getattr(MeetingMinutes(), "prompt_layout", "system_first"))


def build_requests(family: Any, policies: Sequence[Policy], tasks: Sequence[MeetingTask],
                   params: SamplingParams) -> list[GenerationRequest]:
    """One request per (policy, task), policy-major, exactly as ``RolloutEvaluator`` builds them."""
    return [GenerationRequest(tuple(family.build_messages(p.sections, t)), sampling_for(p, params), p.adapter)
            for p in policies for t in tasks]


def mean_words(tasks: Sequence[MeetingTask]) -> float:
    """Mean transcript length of ``tasks`` in whitespace-separated words."""
    return sum(len(t.transcript.split()) for t in tasks) / max(len(tasks), 1)


def has_prefix_sharing(backend: Any) -> bool:
    """True when ``backend`` can reuse a shared prompt prefix (its ``prefix_sharing`` switch exists)."""
    return hasattr(backend, "prefix_sharing")


def cold(backend: Any) -> None:
    """Forget prefix states kept across calls, so the next timing starts cold (no-op without a store)."""
    store = getattr(backend, "prefix_store", None)
    if store is not None:
        store.clear()


@contextlib.contextmanager
def prefix_sharing(backend: Any, on: bool) -> Iterator[None]:
    """Switch the backend's shared-prefix reuse on or off for the block (the prefix store starts empty)."""
    old = backend.prefix_sharing
    backend.prefix_sharing = on
    cold(backend)
    try:
        yield
    finally:
        backend.prefix_sharing = old
        cold(backend)


@contextlib.contextmanager
def batch_size(backend: Any, n: int) -> Iterator[None]:
    """Run the block with ``n`` requests per ``generate`` chunk (the backend's ``cfg.batch_size``)."""
    old = backend.cfg
    backend.cfg = replace(old, batch_size=n)
    try:
        yield
    finally:
        backend.cfg = old


def _stats(backend: Any) -> dict[str, float] | None:
    s = getattr(backend, "stats", None)
    if s is None:
        return None
    raw = asdict(s) if is_dataclass(s) and not isinstance(s, type) else dict(s) if isinstance(s, dict) else vars(s)
    return {k: v for k, v in raw.items() if isinstance(v, (int, float))}


def stats_delta(after: dict[str, float] | None, before: dict[str, float] | None) -> dict[str, float] | None:
    """Counter-wise ``after - before`` of two ``backend.stats`` snapshots (None when there are none)."""
    if after is None or before is None:
        return None
    return {k: v - before.get(k, 0) for k, v in after.items()}


@dataclass(frozen=True)
class Run:
    """One timed generation.

    Attributes:
        seconds: wall seconds.
        generated_tokens: tokens generated (end-of-turn included), all requests.
        prompt_tokens: prompt tokens, all requests.
        stats: the change of ``backend.stats`` over the run (None when the backend has no counters).
        texts: the generated texts, in request order.
    """

    seconds: float
    generated_tokens: int
    prompt_tokens: int
    stats: dict[str, float] | None = None
    texts: tuple[str, ...] = ()

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.seconds if self.seconds > 0 else float("nan")

    def record(self) -> dict[str, Any]:
        """The run for the JSON file (texts left out)."""
        return {"seconds": self.seconds, "generated_tokens": self.generated_tokens,
                "prompt_tokens": self.prompt_tokens, "stats": self.stats}


def timed_generate(backend: Any, requests: Sequence[GenerationRequest], *, one_at_a_time: bool = False) -> Run:
    """Generate ``requests`` from a cold prefix store, as one call or one call per request, and time it."""
    cold(backend)
    before = _stats(backend)
    t0 = time.perf_counter()
    if one_at_a_time:
        outs = [g for r in requests for g in backend.generate([r])]
    else:
        outs = backend.generate(list(requests))
    seconds = time.perf_counter() - t0
    return Run(seconds, sum(g.generated_tokens for g in outs), sum(g.prompt_tokens for g in outs),
               stats_delta(_stats(backend), before), tuple(g.text for g in outs))


@dataclass
class Bench:
    """What the figures share: settings, the model (loaded once, on first use) and the data.

    Args:
        repeats: runs per timing (the median is reported), >= 1.
        quick: smaller workloads (a first look, not figures to compare).
        log: progress lines go here (stderr by default in :mod:`benchmarks.run`).

    Attributes:
        memo: results one figure leaves for another (e.g. quiet timings for the busy figure).
        load_seconds: the model's load time (None until loaded).
        threads: torch's compute threads: the ``threads`` argument before the load, the count set after it.
    """

    repeats: int = 3
    quick: bool = False
    log: Callable[[str], None] = print
    threads: int | None = None
    memo: dict[str, Any] = field(default_factory=dict)
    load_seconds: float | None = None
    _backend: Any = None
    _load_error: Exception | None = None

    @property
    def backend(self) -> Any:
        """The policy model as a run builds it (``runtime.build_llm`` of the default ``ModelConfig`` with
        ``model.threads`` = :attr:`threads`; None keeps the run's own choice), loaded on first use."""
        if self._load_error is not None:  # failed once: the later figures fail at once, not after another try
            raise RuntimeError(f"the model did not load: {self._load_error}")
        if self._backend is None:
            import torch

            from evotrainer.run.runtime import build_llm

            self.log("loading the model ...")
            t0 = time.perf_counter()
            try:
                self._backend = build_llm(ModelConfig(threads=self.threads))
            except Exception as exc:
                self._load_error = exc
                raise
            self.load_seconds = time.perf_counter() - t0
            self.threads = torch.get_num_threads()
            self.log(f"model loaded in {self.load_seconds:.1f} s ({self.threads} torch threads)")
        return self._backend

    def population(self, n: int) -> list[Policy]:
        """The first ``n`` seed policies of ``populations/meeting_minutes.yaml``."""
        return load_population(POPULATION_PATH)[:n]

    def transcripts(self, n: int) -> list[MeetingTask]:
        """The first ``n`` items of ``validation_set/meeting_minutes.jsonl`` (real transcripts)."""
        return MeetingMinutes().load_validation(VALIDATION_PATH, limit=n)

    def meetings(self, n: int, length: int) -> list[MeetingTask]:
        """``n`` meetings from the family's generator (what inner-loop rollouts read) at its default
        difficulty but with the ``length`` knob (target words; short meetings come out longer), seed 0."""
        import numpy as np

        family = MeetingMinutes()
        return family.generate(np.random.default_rng(0), {**family.spec.difficulty, "length": length}, n)

    def timings(self, fn: Callable[[], Run]) -> list[Run]:
        """``fn`` run :attr:`repeats` times (one warm-up call first is the caller's business)."""
        return [fn() for _ in range(self.repeats)]
