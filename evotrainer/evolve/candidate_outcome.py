"""One harness candidate's outcome in an outer generation: run it safely, decide its promotion, archive its row.

:func:`run_candidate` calls the objective and turns a crash or a non-finite score into a failed candidate;
:func:`decide` scores a candidate whose race estimate beat the incumbent on the whole selection set and
promotes it only on a confidently positive paired difference (``coevolution`` module docstring, "Scores and
promotions"); :func:`record_candidates` writes one ``harness_candidates`` row per candidate of a generation.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evotrainer.archive import HarnessCandidateRow
from evotrainer.archive.recorder import RunRecorder
from evotrainer.config import OuterConfig
from evotrainer.errors import EvoTrainerError
from evotrainer.events.kinds import CandidateFailedEvent, IncumbentEvent, PromotionEvent
from evotrainer.harness import Harness
from evotrainer.harness.objective import CandidateResult, FullScore, Objective
from evotrainer.harness.promotion import PromotionRule
from evotrainer.harness.rollback import ArchivedPair, archive_pair
from evotrainer.run.control import StopRequested

__all__ = ["Outcome", "decide", "record_candidates", "run_candidate", "safe_full", "tell_incumbent"]

log = logging.getLogger("evotrainer.evolve.coevolution")


@dataclass
class Outcome:
    """One evaluated candidate of an outer generation (``full`` and ``promoted`` set by :func:`decide`)."""

    proposal: np.ndarray
    harness: Harness
    harness_id: str
    result: CandidateResult
    flagged: bool
    told: float
    full: FullScore | None = None  # its whole-selection-set score, when its estimate beat the incumbent
    promoted: bool = False


def decide(objective: Objective, o: Outcome, incumbent: ArchivedPair, pairs: tuple[ArchivedPair, ...], g: int,
            cfg: OuterConfig, rec: RunRecorder) -> tuple[ArchivedPair, tuple[ArchivedPair, ...]]:
    """Score candidate ``o`` on the whole selection set and decide whether it replaces ``incumbent``.

    Sets ``o.full`` and ``o.promoted``. Promoted by :class:`~evotrainer.harness.promotion.PromotionRule` at
    ``outer.race.level`` against the incumbent as of now (a paired lower bound above 0; a higher whole-set mean
    for objectives without per-item values);
    archived as a ``promotion`` event, and on promotion an ``incumbent`` event, both in candidate order, and
    the objective is told the new incumbent (later races compare with it). Returns the incumbent and the
    top-k archive after the decision.
    """
    o.full = full = safe_full(o.result)
    if full.s_val is None:
        return incumbent, pairs
    pair = ArchivedPair(full.s_val, full.screen_s_val or 0.0, o.harness, tuple(o.result.population), o.result.best,
                        g, o.harness_id, full.per_item)
    decision = PromotionRule(cfg.race.level).decide(incumbent.s_val, pair.s_val, incumbent.per_item, pair.per_item)
    o.promoted = promote = decision.promoted
    evidence = decision.evidence
    rec.emit(PromotionEvent(outer_generation=g, harness_id=o.harness_id, policy_id=pair.best.id,
                            incumbent_policy_id=incumbent.best.id, promoted=promote, s_val=pair.s_val,
                            incumbent_s_val=incumbent.s_val, level=cfg.race.level,
                            paired=None if evidence is None else evidence.as_dict()))
    if promote or pair.s_val <= incumbent.s_val:  # an unpromoted pair never outranks the incumbent
        pairs = archive_pair(pairs, pair, cfg.rollback.top_k)
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
    """The objective's result; a crash or a non-finite screen score becomes a failed candidate."""
    try:
        res = objective(harness, population, hid, g)
    except (EvoTrainerError, StopRequested):
        raise  # systemic (bad config, missing model, leaked validation item): stop the run
    except Exception as exc:  # a failing candidate never raises (it gets the worst penalty)
        log.exception("harness candidate %s failed", hid)
        rec.emit(CandidateFailedEvent(outer_generation=g, harness_id=hid, error=f"{type(exc).__name__}: {exc}"))
        return CandidateResult(best=None, population=tuple(population), screen_s_val=None)
    s = res.screen_s_val
    if s is not None and not (isinstance(s, (int, float)) and math.isfinite(s)):
        rec.emit(CandidateFailedEvent(outer_generation=g, harness_id=hid, error=f"non-finite screen S_val {s!r}"))
        return CandidateResult(best=res.best, population=tuple(population), screen_s_val=None,
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
        return FullScore(None, None)
    ok = full.s_val is not None and math.isfinite(full.s_val)
    return full if ok else FullScore(None, None, full.generated_tokens)


def record_candidates(rec: RunRecorder, g: int, outcomes: Sequence[Outcome], best: Outcome | None) -> None:
    """One candidate row per outcome: ``s_val`` is its whole-set score when it got one, ``values.promoted``
    whether it replaced the incumbent (several may in one generation, in candidate order)."""
    for j, o in enumerate(outcomes):
        is_best = o is best
        status = ("failed" if o.result.screen_s_val is None else "best" if is_best
                  else "flagged_reward_hacking" if o.flagged else "evaluated")
        rec.candidate(HarnessCandidateRow(
            harness_id=o.harness_id, outer_generation=g, index=j, vector=tuple(float(v) for v in o.harness.vector),
            values={**o.harness.as_dict(), "proposal": [float(v) for v in o.proposal],
                    "told": o.told if math.isfinite(o.told) else None, "flagged_reward_hacking": o.flagged,
                    "promoted": o.promoted},
            s_val=o.full.s_val if o.full is not None else None, screen_s_val=o.result.screen_s_val,
            best_policy_id=getattr(o.result.best, "id", None), status=status,
        ))
