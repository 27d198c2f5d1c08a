"""Warn before generation 0 spends the seconds budget: an estimate from the first measured batch.

Generation 0 (``coevolution.py``, step 2) runs before the outer loop first checks
``outer.budget.seconds``, in three batched calls: every seed on the first task batch; with
``outer.seed_screen``, every seed that scored on the screening items; then the best seed on the selection
items not yet scored (its whole-set score, the first incumbent). On the main job that is a large share
of the budget (README, "Speed"), so a budget set for a faster machine can be spent before one harness
candidate runs. Right after the first call, :func:`check_gen0_budget` estimates the whole of generation 0 from that
call's measured rate and prints one warning line when generation 0 alone is expected to use more than
:data:`WARN_SHARE` of the budget.

The estimate: the seconds spent so far (model load, set-up, the first call), plus, for each request still
to come, the first call's seconds per model call, scaled by how much longer the inputs to come are
(mean words per call; never scaled down: prefill dominates the cost, see the README's speed section). A
training input too long for the model's context may be read in windows and merged by its family (one request,
several model calls), so the first call is counted in model calls: counting its requests made one windowed input
raise the rate of every selection item (read whole, one call each). It is
rough: a batch whose policies share inputs reuses their prefix, so the per-request rate of the
first call (14 seeds on each input) is lower than that of the selection scoring (one policy per
input), and the estimate runs low on the main job (the README's speed section gives the check
against a measured run); read it as "most of the budget", not as a forecast to the minute.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from evotrainer.archive.recorder import RunRecorder
from evotrainer.events.kinds import PhaseEvent
from evotrainer.genome import Policy
from evotrainer.tasks.base import Task

__all__ = ["WARN_SHARE", "Gen0Estimate", "check_gen0_budget", "estimate_gen0"]

WARN_SHARE = 0.5
"""Warn when generation 0 is expected to use more than this share of ``outer.budget.seconds``."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gen0Estimate:
    """Expected cost of generation 0, in wall-clock seconds from the run's start.

    Attributes:
        seconds: expected seconds from the run's start to the end of generation 0 (>= ``elapsed``).
        elapsed: seconds spent so far: model load, set-up and the measured first call.
        per_request: the first call's seconds per model call (> 0).
        length_factor: mean input words per request to come over the measured call's words per model call,
            at least 1.
        batch_calls: model calls the measured call made (windows and merges each count; >= its requests).
        remaining_requests: generation requests still to come in generation 0 (>= 0).
        budget: ``outer.budget.seconds`` (> 0).
        share: ``seconds / budget`` (1.0 = all of it).
        warn: ``share > WARN_SHARE``.
    """

    seconds: float
    elapsed: float
    per_request: float
    length_factor: float
    remaining_requests: int
    budget: float
    share: float
    warn: bool
    batch_calls: int = 0


def estimate_gen0(*, elapsed: float, batch_seconds: float, batch_requests: int, batch_words: int,
                  remaining_requests: int, remaining_words: int, budget: float,
                  batch_calls: int | None = None) -> Gen0Estimate:
    """The estimate of the module docstring, from counts.

    Args:
        elapsed: seconds since the run started, the measured call included (>= 0).
        batch_seconds: wall-clock seconds of the measured call (> 0).
        batch_requests: generation requests it made (>= 1).
        batch_words: input words over those requests (an input counted once per request).
        remaining_requests: requests generation 0 still makes (>= 0), each taken as one model call.
        remaining_words: input words over those requests.
        budget: ``outer.budget.seconds`` (> 0).
        batch_calls: model calls the measured call made (a windowed input: its windows and the merge);
            None or fewer than ``batch_requests``: one call per request.
    """
    calls = max(batch_calls or 0, batch_requests)
    per_request = batch_seconds / calls
    measured = batch_words / calls if batch_words else 0.0
    coming = remaining_words / remaining_requests if remaining_requests else 0.0
    factor = max(1.0, coming / measured) if measured > 0 else 1.0
    seconds = elapsed + per_request * factor * remaining_requests
    share = seconds / budget
    return Gen0Estimate(seconds, elapsed, per_request, factor, remaining_requests, budget, share, share > WARN_SHARE,
                        calls)


def _requests(policies: Sequence[Policy], items: Sequence[Task]) -> tuple[int, int]:
    """(requests, input words over them) of ``policies`` x ``items``; identical genomes run once."""
    n = len({p.genome_hash for p in policies})
    return n * len(items), n * sum(t.size for t in items)


def check_gen0_budget(rec: RunRecorder, budget_seconds: float | None, *, elapsed: float,
                      batch_seconds: float, seeds: Sequence[Policy], tasks: Sequence[Task],
                      screened: Sequence[Policy], screen_items: Sequence[Task],
                      selection: Sequence[Task], batch_calls: int | None = None) -> Gen0Estimate | None:
    """Estimate generation 0 after its first call; warn (one logged line, on the console and in the run's
    log) when it would use most of the budget.

    Archived as a ``phase`` event named ``gen0_estimate`` (its payload is :class:`Gen0Estimate`), written
    whenever a seconds budget is set, warned or not (``phase`` events hold timings: the deterministic dump
    leaves them out).

    Args:
        rec: the run's archive writer.
        budget_seconds: ``outer.budget.seconds``; None = no seconds budget: nothing to check.
        elapsed: seconds since the run started, the first call included.
        batch_seconds: wall-clock seconds of the first call (``seeds`` x ``tasks``).
        seeds: the seed policies scored in the first call.
        tasks: its task batch.
        screened: the seeds generation 0 screens next (empty without ``outer.seed_screen``).
        screen_items: the screening items.
        selection: the selection items; the best seed is scored on those not screened.
        batch_calls: model calls the first call made (windows and merges each count); None: one per request.

    Returns:
        The estimate, or None without a seconds budget or a measured request.
    """
    batch_requests, batch_words = _requests(seeds, tasks)
    if budget_seconds is None or batch_requests == 0 or batch_seconds <= 0:
        return None
    screen_requests, screen_words = _requests(screened, screen_items)
    screened_ids = {t.task_id for t in screen_items} if screened else set()
    rest = [t for t in selection if t.task_id not in screened_ids]
    rest_words = sum(t.size for t in rest)
    est = estimate_gen0(elapsed=elapsed, batch_seconds=batch_seconds, batch_requests=batch_requests,
                        batch_words=batch_words, remaining_requests=screen_requests + len(rest),
                        remaining_words=screen_words + rest_words, budget=float(budget_seconds),
                        batch_calls=batch_calls)
    rec.emit(PhaseEvent(name="gen0_estimate", fields=asdict(est)))
    if est.warn:
        line = (f"budget: generation 0 alone is expected to take about {est.seconds:,.0f} s of the "
                f"{est.budget:,.0f} s budget ({est.share:.0%}, outer.budget.seconds): {batch_requests} requests "
                f"({est.batch_calls} model calls) measured at {est.per_request:.2f} s a call, "
                f"{est.remaining_requests} more to come; few or no "
                "harness candidates will run")
        log.warning(line)
    return est
