"""The outer loop: per outer generation, ask the candidate source for harness proposals, run each candidate,
promote at once, tell the source, then roll back or stop. :func:`run_outer_loop` reads top to bottom against
any :class:`~evotrainer.harness.objective.Objective`; the real ones are wired by the modes that run it:
:class:`~evotrainer.evolve.llm_objective.LLMObjective` by :func:`evotrainer.evolve.coevolution.run_evolve`, and
:class:`~evotrainer.selfevolve.objective.SelfEvolveObjective` by :func:`evotrainer.selfevolve.objective.search_harness`
(``selfevolve.outer_loop``).

A candidate's outcome: :func:`run_candidate` calls the objective (a crash or a non-finite race estimate: failed);
the run's :class:`~evotrainer.harness.scoring.ScoringRule` scores it and :func:`decide` promotes it (how: that
module's docstring); :func:`record_candidates` writes one ``harness_candidates`` row per candidate.

**What is damped.** ``a`` is the applied harness vector of the population the run continues from (at
the start the initial harness; after each generation the winner's applied vector; after a rollback
the restored pair's). Each candidate applies ``a + damping * (x_j - a)`` (:func:`ema_toward`), so the
applied harness is an exponential moving average of the winning proposals. CMA-ES is told its own
proposals ``x_j`` (the arrays ``ask`` returned), each with the score obtained under its damped
harness: CMA-ES searches the landscape as seen through the damping map, and its state (mean, sigma,
covariance) is undamped. ``damping=1`` applies the proposals as they are.

**Promotions, in candidate order.** Promotion is decided right after each candidate (a ``promotion`` event
archives the decision and its evidence, an ``incumbent`` event each promotion, in order). A promoted policy is the
reference of every later race at once, also in its own generation: a later candidate must beat it, not the
generation's first incumbent. The run continues from the generation's best candidate by told score, promoted or
not. Promoted pairs enter the top-k archive, whose first pair is always the incumbent: the
run never ends worse than its best archived pair. An objective that gives no per-item values (synthetic test
objectives) is promoted on a higher whole-set mean. Rollback semantics: ``harness/rollback.py``. Stopping: ``harness/stopping.py`` (budget, plateau, ``outer.generations``).
pycma's own termination flags (tolfun, tolflatfitness, ...) are logged but do not stop the run: with a
few race estimates, often tied, they fire after one flat generation; the sigma floor keeps CMA-ES
exploring and the plateau rule decides when more generations are not worth it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape

from evotrainer.archive import HarnessCandidateRow
from evotrainer.archive.recorder import RunRecorder
from evotrainer.config import OuterConfig
from evotrainer.errors import EvoTrainerError
from evotrainer.events.kinds import (
    CandidateFailedEvent,
    IncumbentEvent,
    OuterGenerationEvent,
    OuterSkippedEvent,
    PhaseEvent,
    PromotionEvent,
    RewardHackingEvent,
    RollbackEvent,
)
from evotrainer.harness import Harness, HarnessSpace, ema_toward
from evotrainer.harness.candidates import CandidateSource
from evotrainer.harness.objective import CandidateResult, FullScore, Objective
from evotrainer.harness.rollback import ArchivedPair, RollbackRule, archive_pair, rollback_cause
from evotrainer.harness.scoring import CandidateScore, ScoringRule
from evotrainer.harness.stopping import BudgetLimits, StopReason, Usage, plateau_stop
from evotrainer.run.console_text import fmt, fmt_harness
from evotrainer.run.control import RunControl, StopRequested
from evotrainer.stats.bootstrap import finite

__all__ = ["OuterResult", "Outcome", "decide", "record_candidates", "run_candidate", "run_outer_loop", "safe_full",
           "tell_incumbent"]

log = logging.getLogger(__name__)


@dataclass
class OuterResult:
    """What :func:`run_outer_loop` returns.

    Attributes:
        incumbent: the best archived pair (whole-selection-set S_val, higher is better).
        pairs: the top-k archive, best first (``pairs[0] is incumbent``).
        s_val_curve: incumbent S_val after each outer generation, generation 0 first (non-decreasing).
        current_curve: current S_val per outer generation, generation 0 first: the incumbent's whole-set S_val,
            then each generation's best race estimate.
        rollbacks: one dict per rollback (the ``rollback`` event payloads).
        stop: which limit or criterion stopped the run.
        usage: seconds, generated tokens and candidate evaluations spent (model load and generation 0
            included).
    """

    incumbent: ArchivedPair
    pairs: tuple[ArchivedPair, ...]
    s_val_curve: list[float]
    current_curve: list[float | None]
    rollbacks: list[dict[str, Any]]
    stop: StopReason
    usage: Usage


def run_outer_loop(
    objective: Objective, start: CandidateResult, start_harness: Harness, space: HarnessSpace,
    search: CandidateSource, cfg: OuterConfig, rec: RunRecorder, *, console: Console | None = None,
    clock: Callable[[], float] = time.perf_counter, started_at: float | None = None,
    control: RunControl | None = None, after_generation: Callable[[int], Any] | None = None,
) -> OuterResult:
    """The outer loop (module docstring), against any objective.

    Args:
        objective: scores a harness candidate from a population (``harness.objective.Objective``).
        start: generation 0: the starting population, its best policy, ``full_score`` for the first
            incumbent, and the tokens spent so far.
        start_harness: the harness generation 0 ran under.
        space: the harness space (decodes the applied vectors).
        search: the candidate source over ``space`` (``outer.candidate_source``: CMA-ES, or an ablation arm's
            frozen or random harness, ``harness/candidates.py``; maximising; asked, told, moved and shrunk here).
        cfg: ``outer.*`` settings (generations, damping, rollback, budget, patience; race and hack check via
            :meth:`ScoringRule.from_config <evotrainer.harness.scoring.ScoringRule.from_config>`).
        rec: the run's archive writer (events, candidate rows).
        console: progress output (a quiet one when None).
        clock: seconds, monotonic (injected for tests).
        started_at: ``clock()`` at the run's start (budget seconds count from it); now when None.
        control: stop decisions at each candidate boundary (budget, STOP file, a resumed run's replay;
            ``run/control.py``); budget limits alone when None.
        after_generation: called with the outer generation (0 = generation 0) once it is archived (the
            live report, ``browse/live_report.py``); nothing when None.
    """
    console = console or Console(quiet=True)
    t_start = clock() if started_at is None else started_at
    limits = BudgetLimits(cfg.budget.seconds, cfg.budget.tokens, cfg.budget.evaluations,
                          rollouts=cfg.budget.rollouts, usd=cfg.budget.usd, prompt_tokens=cfg.budget.prompt_tokens,
                          train_tokens=cfg.budget.train_tokens)
    r = cfg.rollback
    rule = RollbackRule(r.tolerance, r.generations, r.oscillation_threshold, r.oscillations, r.window)
    scoring = ScoringRule.from_config(cfg)
    control = control or RunControl(rec, limits)
    tokens, evaluations, train_tokens = start.generated_tokens, 0, start.train_tokens

    def usage() -> Usage:
        return Usage(clock() - t_start, tokens, evaluations, train_tokens=train_tokens)

    # ---- generation 0: the first incumbent -------------------------------------------------------
    full0 = safe_full(start)
    tokens += full0.generated_tokens
    incumbent = ArchivedPair(full0.s_val or 0.0, start_harness, tuple(start.population), start.best, 0, "h0",
                             full0.per_item)
    pairs: tuple[ArchivedPair, ...] = (incumbent,)
    rec.emit(IncumbentEvent(outer_generation=0, policy_id=incumbent.best.id, s_val=incumbent.s_val, harness_id="h0"))
    tell_incumbent(objective, incumbent)
    console.print(f"gen 0: best seed {incumbent.best.id} S_val {incumbent.s_val:.4f} (selection set)")
    if after_generation is not None:
        after_generation(0)
    anchor = np.asarray(start_harness.vector, dtype=float)  # the applied harness `a` we damp from
    population, current = tuple(start.population), incumbent.s_val
    history = [current]  # current S_val since the start or the last rollback
    s_val_curve, current_curve = [incumbent.s_val], [current]
    rollbacks: list[dict[str, Any]] = []
    stop: StopReason | None = None

    # ---- outer generations -----------------------------------------------------------------------
    for g in range(1, cfg.generations + 1):
        if (stop := control.check(usage(), outer_generation=g, harness_id=f"g{g}c0")) is not None:
            break
        t_outer = clock()
        xs = search.ask()
        outcomes: list[Outcome] = []
        for j, x in enumerate(xs):
            hid = f"g{g}c{j}"
            if j and (stop := control.check(usage(), outer_generation=g, harness_id=hid)) is not None:
                break
            harness = space.decode(ema_toward(anchor, x, cfg.damping))
            try:
                res = run_candidate(objective, harness, population, hid, g, rec)
            except StopRequested as req:  # a STOP file seen after an inner generation: this candidate is dropped
                stop = req.reason
                break
            evaluations += 1
            tokens += res.generated_tokens
            train_tokens += res.train_tokens
            outcome = Outcome(x, harness, hid, res, scoring.score(res.race_estimate, res.inner_gain, current))
            outcomes.append(outcome)
            if outcome.score.flagged:
                rec.emit(RewardHackingEvent(outer_generation=g, harness_id=hid, inner_gain=res.inner_gain,
                                            s_val_delta=outcome.score.delta, penalty=scoring.penalty))
            console.print(f"  outer {g} cand {j}: {fmt_harness(harness)} → best {getattr(res.best, 'id', None)} "
                          f"fitness {fmt(res.best_fitness)}, race estimate {fmt(res.race_estimate)}"
                          f"{' [red](reward hacking: penalised)[/]' if outcome.score.flagged else ''}")
            # Promotion at once: the next candidate races the incumbent as of its turn (module docstring).
            if scoring.worth_scoring(outcome.score.estimate, incumbent.s_val):
                incumbent, pairs = decide(objective, outcome, incumbent, pairs, g, scoring, cfg.rollback.top_k, rec)
                tokens += outcome.full.generated_tokens if outcome.full is not None else 0
                if outcome.promoted:
                    console.print(f"  outer {g} cand {j}: {incumbent.best.id} promoted (whole-set S_val "
                                  f"{incumbent.s_val:.4f}); later candidates race it")
                elif outcome.refused_stratum is not None:
                    worse = outcome.refused_stratum
                    console.print(f"  outer {g} cand {j}: better on the whole selection set but worse on its "
                                  f"{escape(str(worse['stratum']))} items ({worse['n']}: {worse['mean']:+.4f}, "
                                  f"bound {worse['high']:+.4f} < 0): not promoted")
        if stop is not None and not outcomes:
            break
        if len(outcomes) == len(xs):
            search.tell(xs, [math.nan if o.score.told is None else o.score.told for o in outcomes])
        scored = [o for o in outcomes if o.score.told is not None]
        if not scored:
            record_candidates(rec, g, outcomes, None)
            rec.emit(OuterSkippedEvent(outer_generation=g, reason="no candidate evaluated successfully"))
            console.print(f"outer {g}: no candidate evaluated successfully; nothing promoted")
            if stop is not None:
                break
            continue

        # The run continues from the generation's best candidate by told score (promoted or not).
        best = max(scored, key=lambda o: o.score.told)  # first on ties
        full = best.full
        record_candidates(rec, g, outcomes, best)
        promoted = [o.harness_id for o in outcomes if o.promoted]
        anchor = np.asarray(best.harness.vector, dtype=float)
        population, current = tuple(best.result.population), best.score.estimate
        history.append(current)

        # Rollback: restore the best archived pair when the current S_val regresses or oscillates.
        trigger = rollback_cause(history, incumbent.s_val, rule) if r.enabled else None
        if trigger is not None:
            restored = pairs[0]
            anchor = np.asarray(restored.harness.vector, dtype=float)
            population, current = restored.population, restored.s_val
            history = [current]
            search.set_mean(anchor)
            search.shrink_sigma(r.sigma_shrink)
            event = RollbackEvent(outer_generation=g, cause=trigger.cause, detail=trigger.detail,
                                  restored_harness_id=restored.harness_id, restored_policy_id=restored.best.id,
                                  s_val=restored.s_val, sigma=search.sigma)
            rollbacks.append(event.to_payload())
            rec.emit(event)
            console.print(f"[yellow]rollback[/] at outer {g} ({trigger.cause}): {trigger.detail}; restored "
                          f"{restored.harness_id}, sigma → {search.sigma:.3f}")
        s_val_curve.append(incumbent.s_val)
        current_curve.append(best.score.estimate)
        rec.emit(OuterGenerationEvent(
            outer_generation=g, current_s_val=best.score.estimate,
            current_full_s_val=None if full is None else full.s_val, incumbent_s_val=incumbent.s_val,
            incumbent_policy_id=incumbent.best.id,
            best_harness_id=best.harness_id, rolled_back=trigger is not None, sigma=search.sigma,
            told=tuple(o.score.told for o in outcomes),
            archive=tuple((p.harness_id, p.s_val) for p in pairs),
            cma_termination={k: str(v) for k, v in search.stop_reasons.items()}))
        rec.emit(PhaseEvent(name="outer_generation", fields={"outer_generation": g, "seconds": clock() - t_outer}))
        if after_generation is not None:
            after_generation(g)
        verdict = (f"whole-set S_val {fmt(full.s_val)}" if full is not None
                   else f"race estimate {fmt(best.score.estimate)}, no whole-set score")
        new = f" [green](new: promoted {', '.join(promoted)})[/]" if promoted else ""
        console.print(f"[bold]outer {g}/{cfg.generations}[/]: best candidate {best.harness_id}: {verdict}; incumbent "
                      f"{incumbent.best.id} S_val {incumbent.s_val:.4f}{new}; CMA sigma {search.sigma:.3f}")
        stop = stop or plateau_stop(s_val_curve, cfg.min_gain, cfg.patience)
        if stop is not None:
            break
    stop = stop or StopReason("outer.generations", f"{cfg.generations} outer generation(s) run")
    if pairs[0] is not incumbent:  # the invariant the rollback design rests on
        raise EvoTrainerError("outer loop: the incumbent is not the best archived pair")
    return OuterResult(incumbent, pairs, s_val_curve, current_curve, rollbacks, stop, usage())


@dataclass
class Outcome:
    """One evaluated candidate of an outer generation (``full``, ``promoted`` and ``refused_stratum`` set by
    :func:`decide`)."""

    proposal: np.ndarray
    harness: Harness
    harness_id: str
    result: CandidateResult
    score: CandidateScore
    full: FullScore | None = None  # its whole-selection-set score, when its estimate beat the incumbent
    promoted: bool = False
    refused_stratum: dict | None = None  # the item source that refused a promotion the pooled bound allowed


def decide(objective: Objective, o: Outcome, incumbent: ArchivedPair, pairs: tuple[ArchivedPair, ...], g: int,
           scoring: ScoringRule, top_k: int, rec: RunRecorder) -> tuple[ArchivedPair, tuple[ArchivedPair, ...]]:
    """Score candidate ``o`` on the whole selection set and decide by ``scoring.promotion`` whether it replaces
    ``incumbent`` (sets ``o.full`` and ``o.promoted``); archived as a ``promotion`` event, and on promotion an
    ``incumbent`` event, and the objective is told the new incumbent (later races compare with it). Returns the
    incumbent and the top-``top_k`` archive (``outer.rollback.top_k``) after the decision."""
    o.full = full = safe_full(o.result)
    if full.s_val is None:
        return incumbent, pairs
    pair = ArchivedPair(full.s_val, o.harness, tuple(o.result.population), o.result.best, g, o.harness_id,
                        full.per_item)
    decision = scoring.promotion.decide(incumbent.s_val, pair.s_val, incumbent.per_item, pair.per_item, full.strata)
    o.promoted = promote = decision.promoted
    o.refused_stratum = decision.refused_stratum
    evidence = decision.evidence
    rec.emit(PromotionEvent(outer_generation=g, harness_id=o.harness_id, policy_id=pair.best.id,
                            incumbent_policy_id=incumbent.best.id, promoted=promote, s_val=pair.s_val,
                            incumbent_s_val=incumbent.s_val, level=scoring.level,
                            paired=None if evidence is None else evidence.as_dict(),
                            refused_stratum=decision.refused_stratum))
    if promote or pair.s_val <= incumbent.s_val:  # an unpromoted pair never outranks the incumbent
        pairs = archive_pair(pairs, pair, top_k)
    if not promote:
        return incumbent, pairs
    rec.emit(IncumbentEvent(outer_generation=g, policy_id=pair.best.id, s_val=pair.s_val, harness_id=o.harness_id))
    tell_incumbent(objective, pair)
    return pair, pairs


def tell_incumbent(objective: Objective, pair: ArchivedPair) -> None:
    """Let an objective that races (``set_incumbent``) compare later candidates with ``pair.best``."""
    hook = getattr(objective, "set_incumbent", None)
    if hook is not None:
        hook(pair.best, pair.harness_id, pair.outer_generation)


def run_candidate(objective: Objective, harness: Harness, population: Sequence[Any], hid: str, g: int,
                   rec: RunRecorder) -> CandidateResult:
    """The objective's result; a crash or a non-finite race estimate becomes a failed candidate."""
    try:
        res = objective(harness, population, hid, g)
    except (EvoTrainerError, StopRequested):
        raise  # systemic (bad config, missing model, leaked validation item): stop the run
    except Exception as exc:  # a failing candidate never raises (it gets the worst penalty)
        log.exception("harness candidate %s failed", hid)
        rec.emit(CandidateFailedEvent(outer_generation=g, harness_id=hid, error=f"{type(exc).__name__}: {exc}"))
        return CandidateResult(best=None, population=tuple(population), race_estimate=None)
    s = res.race_estimate
    if s is not None and finite(s) is None:
        rec.emit(CandidateFailedEvent(outer_generation=g, harness_id=hid, error=f"non-finite race estimate {s!r}"))
        return CandidateResult(best=res.best, population=tuple(population), race_estimate=None,
                               generated_tokens=res.generated_tokens)
    return res


def safe_full(result: CandidateResult) -> FullScore:
    """``result.full_score()``; a crash or non-finite score counts as failed (None)."""
    try:
        full = result.full_score()
    except EvoTrainerError:
        raise
    except Exception:
        log.exception("whole-set scoring failed")
        return FullScore(None)
    return full if finite(full.s_val) is not None else FullScore(None, full.generated_tokens)


def record_candidates(rec: RunRecorder, g: int, outcomes: Sequence[Outcome], best: Outcome | None) -> None:
    """One candidate row per outcome: ``s_val`` is its whole-set score when it got one, ``values.promoted``
    whether it replaced the incumbent (several may in one generation, in candidate order)."""
    for j, o in enumerate(outcomes):
        is_best = o is best
        status = ("failed" if o.score.estimate is None else "best" if is_best
                  else "flagged_reward_hacking" if o.score.flagged else "evaluated")
        rec.candidate(HarnessCandidateRow(
            harness_id=o.harness_id, outer_generation=g, index=j, vector=tuple(float(v) for v in o.harness.vector),
            values={**o.harness.as_dict(), "proposal": [float(v) for v in o.proposal],
                    "told": o.score.told, "flagged_reward_hacking": o.score.flagged,
                    "promoted": o.promoted},
            s_val=o.full.s_val if o.full is not None else None, race_estimate=o.score.estimate,
            best_policy_id=getattr(o.result.best, "id", None), status=status,
        ))
