"""One frozen record class per co-evolution event kind, the kind registry and :func:`from_payload`.

A run records events (``RunRecorder.emit``); the archive stores each as its ``kind`` and the JSON payload
:meth:`~evotrainer.events.base.Event.to_payload` writes (keys in field order, a class's merged mapping
``fields`` or ``where`` last, tuples as lists); readers rebuild the typed event with :func:`from_payload`.
Every field has a default (None, an empty tuple or mapping), so a payload missing a key still reads.
S_val, fitness and their differences are in S_val units ([0, 1] for scores, [-1, 1] for differences),
higher is better; generations count from 0 (0 = the seeds); harness ids are ``h0`` or ``g<outer>c<index>``.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evotrainer.errors import DataError
from evotrainer.events.base import OMIT_NONE, Event, Subscriber, decode
from evotrainer.events.evaluation import InputHandlingEvent, TrajectoriesEvent
from evotrainer.events.selfevolve import SelfEvolveSetupEvent, SelfEvolveSummaryEvent, SelfEvolveTransferEvent
from evotrainer.events.transfer import TransferEvent

__all__ = [
    "EVENT_TYPES", "MODE_TYPES", "CandidateFailedEvent", "Event", "GeneralisationEvent", "IncumbentEvent",
    "IncumbentReferenceEvent", "InnerGenerationEvent", "InputHandlingEvent", "LeadEvent",
    "OperatorStatsEvent", "OuterGenerationEvent", "OuterSkippedEvent", "PhaseEvent", "PromotionEvent",
    "RaceEvent", "RewardHackingEvent", "RollbackEvent", "SelfEvolveSetupEvent", "SelfEvolveSummaryEvent",
    "SelfEvolveTransferEvent",
    "SetupEvent", "StopEvent", "StyleLibraryEvent", "Subscriber", "SummaryEvent", "TaskBatchEvent",
    "TrajectoriesEvent", "TransferEvent", "YardstickEvent", "from_payload"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupEvent(Event):
    """A co-evolution run's items and seeds, written once after the run row."""

    kind: ClassVar[str] = "setup"
    validation_items: int | None = None
    """Meta-validation items in all (selection + held out), >= 0."""
    selection_items: tuple[str, ...] = ()
    """Task ids of the selection items, in race order."""
    heldout_items: tuple[str, ...] = ()
    """Task ids of the held-out items (never used to select)."""
    screen_items: tuple[str, ...] = ()
    """Task ids of the screening items (the first selection items raced)."""
    harness_names: tuple[str, ...] = ()
    """Names of the harness parameters, in vector order."""
    population: tuple[str, ...] = ()
    """Policy ids of the seed population."""
    probes: Mapping[str, Any] | None = None
    """The yardstick's model-free probes on the whole meta-validation set
    (``harness.yardstick.YardstickReport.as_dict``: ``means``, ``items``, ``failures``); None: not run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskBatchEvent(Event):
    """A generated task batch drawn for one harness candidate (or generation 0)."""

    kind: ClassVar[str] = "task_batch"
    outer_generation: int | None = None
    """Outer generation, >= 0."""
    harness_id: str | None = None
    """The candidate the batch was drawn for."""
    batch_id: str | None = None
    """Content id of the batch (None in archives written before batch ids)."""
    task_ids: tuple[str, ...] = ()
    """Task ids, in batch order."""
    content_hashes: tuple[str, ...] = ()
    """Content hash of each task, same order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IncumbentReferenceEvent(Event):
    """The policy later races compare against (set at the start and on every promotion)."""

    kind: ClassVar[str] = "incumbent_reference"
    outer_generation: int | None = None
    """Outer generation it became the reference in, >= 0."""
    harness_id: str | None = None
    """The candidate that produced it."""
    policy_id: str | None = None
    """The reference policy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeadEvent(Event):
    """The parent drawn from the per-item Pareto front for a candidate's lead mutants."""

    kind: ClassVar[str] = "lead"
    outer_generation: int | None = None
    """Outer generation, >= 0."""
    harness_id: str | None = None
    """The candidate whose inner loop mutates the lead."""
    policy_id: str | None = None
    """The lead policy."""
    front: Mapping[str, int] = field(default_factory=dict)
    """Policy id -> screening items it is best on, for the front's non-dominated members (the draw's weights;
    policies best on none, dominated or sharing an earlier member's genome left out)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseEvent(Event):
    """Wall-clock timings of a named phase, its keys varying by phase (hence ``fields``); the deterministic
    dump and resume compare only ``name``."""

    kind: ClassVar[str] = "phase"
    merged: ClassVar[str | None] = "fields"
    name: str
    """Which phase: ``inner_generation``, ``outer_generation``, ``totals``, ``report``, ``resume``, ..."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """The phase's other keys (seconds are wall-clock, >= 0), merged after ``name`` in this order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerGenerationEvent(Event):
    """One inner (DEAP) generation of a harness candidate, its initial evaluation included."""

    kind: ClassVar[str] = "inner_generation"
    harness_id: str | None = None
    """The candidate."""
    outer_generation: int | None = None
    """Outer generation, >= 0."""
    generation: int | None = None
    """Inner generation number, counted over the whole run."""
    record: Mapping[str, Any] = field(default_factory=dict)
    """The logbook record (``max``, ``mean``, ``min`` fitness in [0, 1], ``nevals``, ...), timings left out."""
    children: tuple[str, ...] = ()
    """Ids of the children made and evaluated."""
    rejected: int | None = None
    """Answers rejected and invalid or duplicate children replaced, >= 0."""
    skipped: bool | None = None
    """True when every evaluation failed and the population was kept."""
    mutator_error: str | None = None
    """The error of the batched mutator call, None when it answered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorStatsEvent(Event):
    """Operator statistics: of one candidate, or of the whole run (``harness_id`` None)."""

    kind: ClassVar[str] = "operator_stats"
    harness_id: str | None = None
    """The candidate, None for the run's totals."""
    outer_generation: int | None = None
    """Outer generation, None for the run's totals."""
    stats: Mapping[str, Any] = field(default_factory=dict)
    """``OperatorStats.to_dict()``: per operator, children tried and children that beat their parents."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StyleLibraryEvent(Event):
    """A hyper-mutation of the style library. Two shapes: the mutator failed (``error`` set, the rest None and
    left out of the payload) or it answered (``error`` None and left out)."""

    kind: ClassVar[str] = "style_library"
    harness_id: str | None = None
    """The candidate after which the library evolved."""
    outer_generation: int | None = None
    """Outer generation, >= 1."""
    accepted: bool | None = None
    """True when the rewritten style replaced the retired one."""
    error: str | None = field(default=None, metadata=OMIT_NONE)
    """``repr`` of the mutator's exception."""
    retired: str | None = field(default=None, metadata=OMIT_NONE)
    """Name of the style retired."""
    rewritten: str | None = field(default=None, metadata=OMIT_NONE)
    """Name of the style whose instruction was rewritten."""
    new_name: str | None = field(default=None, metadata=OMIT_NONE)
    """Name of the new style."""
    answer: str | None = field(default=None, metadata=OMIT_NONE)
    """The mutator's answer (untrusted model text)."""
    library: tuple[tuple[str, str], ...] | None = field(default=None, metadata=OMIT_NONE)
    """The library afterwards: ``(name, instruction)`` pairs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RaceEvent(Event):
    """A candidate's fittest policies raced against the incumbent on the selection items."""

    kind: ClassVar[str] = "race"
    outer_generation: int | None = None
    """Outer generation, >= 0."""
    harness_id: str | None = None
    """The candidate."""
    reference: str | None = None
    """Policy id of the incumbent raced against."""
    stages: tuple[int, ...] = ()
    """Item counts after which the race tested, increasing."""
    evaluations: int | None = None
    """Policy-item evaluations spent, >= 0."""
    leader: str | None = None
    """Policy id of the race's leader, None when none."""
    level: float | None = None
    """Confidence of the promotion bound, in (0, 1)."""
    drop_level: float | None = None
    """Confidence of the drop bound, in (0, 1)."""
    entries: tuple[Mapping[str, Any], ...] = ()
    """One per policy raced: ``policy_id``, ``items``, ``status`` (worse / futile / cut / better / undecided),
    and the paired bound ``mean``, ``low``, ``high`` (None when infinite), ``n``, ``wins``, ``losses``,
    ``ties`` (policy - incumbent)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IncumbentEvent(Event):
    """The incumbent: the best seed (generation 0) or a promoted candidate's best policy."""

    kind: ClassVar[str] = "incumbent"
    outer_generation: int | None = None
    """Outer generation it became the incumbent in, >= 0."""
    policy_id: str | None = None
    """The incumbent policy."""
    s_val: float | None = None
    """Its whole-selection-set S_val, in [0, 1]."""
    harness_id: str | None = None
    """The candidate that produced it (``h0`` for the seeds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RewardHackingEvent(Event):
    """A candidate whose inner fitness rose while its race estimate fell (it is penalised;
    :mod:`evotrainer.harness.scoring`)."""

    kind: ClassVar[str] = "reward_hacking"
    outer_generation: int | None = None
    """Outer generation, >= 1."""
    harness_id: str | None = None
    """The candidate."""
    inner_gain: float | None = None
    """Best fitness minus the initial best, fitness units."""
    s_val_delta: float | None = None
    """Race estimate minus the current S_val."""
    penalty: float | None = None
    """Subtracted from the score told to CMA-ES, >= 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OuterSkippedEvent(Event):
    """An outer generation in which no candidate was scored."""

    kind: ClassVar[str] = "outer_skipped"
    outer_generation: int | None = None
    """Outer generation, >= 1."""
    reason: str | None = None
    """Why (free text)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromotionEvent(Event):
    """A whole-selection-set decision: does a candidate replace the incumbent as of its turn (decided after
    each candidate whose estimate beats the incumbent, in candidate order; several per generation possible)."""

    kind: ClassVar[str] = "promotion"
    outer_generation: int | None = None
    """Outer generation, >= 1."""
    harness_id: str | None = None
    """The candidate."""
    policy_id: str | None = None
    """Its best policy."""
    incumbent_policy_id: str | None = None
    """The incumbent it was compared with."""
    promoted: bool | None = None
    """True when it replaced the incumbent."""
    s_val: float | None = None
    """Its whole-set S_val, in [0, 1]."""
    incumbent_s_val: float | None = None
    """The incumbent's, in [0, 1]."""
    level: float | None = None
    """Confidence of the paired bound, in (0, 1)."""
    paired: Mapping[str, Any] | None = None
    """Paired bound of policy - incumbent (``mean``, ``low``, ``high``, ``n``, ``wins``, ``losses``,
    ``ties``); None when no paired vectors were known."""
    refused_stratum: Mapping[str, Any] | None = field(default=None, metadata=OMIT_NONE)
    """The item source on which the policy was confidently worse, when that refused a promotion the pooled bound
    allowed (``outer.race.stratum_level``): ``stratum`` and its paired bound (keys as ``paired``); absent
    otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackEvent(Event):
    """The run returned to the best archived (harness, population) pair."""

    kind: ClassVar[str] = "rollback"
    merged: ClassVar[str | None] = "fields"
    outer_generation: int | None = None
    """Outer generation it happened in, >= 1."""
    cause: str | None = None
    """``regression`` or ``oscillation``."""
    detail: str | None = None
    """The rule's reason (free text)."""
    restored_harness_id: str | None = None
    """The pair restored."""
    restored_policy_id: str | None = None
    """Its best policy."""
    s_val: float | None = None
    """Its whole-set S_val, in [0, 1]."""
    sigma: float | None = None
    """CMA-ES step size after the shrink, > 0."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """Other keys (archives written by older code), merged last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OuterGenerationEvent(Event):
    """The end of an outer generation."""

    kind: ClassVar[str] = "outer_generation"
    merged: ClassVar[str | None] = "fields"
    outer_generation: int | None = None
    """Outer generation, >= 1."""
    current_s_val: float | None = None
    """The current S_val: the race estimate of the candidate whose population the run continues from."""
    current_full_s_val: float | None = None
    """Its whole-set S_val when it was scored, else None."""
    incumbent_s_val: float | None = None
    """The incumbent's whole-set S_val."""
    incumbent_policy_id: str | None = None
    """The incumbent policy."""
    best_harness_id: str | None = None
    """The generation's best candidate."""
    rolled_back: bool | None = None
    """True when a rollback happened in this generation."""
    sigma: float | None = None
    """CMA-ES step size, > 0."""
    told: tuple[float | None, ...] = ()
    """Score told to CMA-ES per candidate (None: not finite)."""
    archive: tuple[tuple[str, float], ...] = ()
    """The archived pairs, best first: ``(harness_id, s_val)``."""
    cma_termination: Mapping[str, str] = field(default_factory=dict)
    """pycma's termination conditions met (name -> value as text)."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """Other keys (older archives' ``incumbent_screen_s_val``: ``incumbent_s_val`` again), merged last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateFailedEvent(Event):
    """A harness candidate that crashed or returned a non-finite race estimate."""

    kind: ClassVar[str] = "candidate_failed"
    outer_generation: int | None = None
    """Outer generation, >= 1."""
    harness_id: str | None = None
    """The candidate."""
    error: str | None = None
    """``<ExceptionType>: <message>`` or the non-finite score."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StopEvent(Event):
    """The run stopped at a boundary (budget, STOP file, or the stored decision of a resumed run)."""

    kind: ClassVar[str] = "stop"
    merged: ClassVar[str | None] = "where"
    key: str | None = None
    """Stop reason key (``outer.budget.seconds``, ``stop_file``, ...)."""
    detail: str | None = None
    """Human-readable detail."""
    where: Mapping[str, Any] = field(default_factory=dict)
    """The boundary: ``outer_generation``, ``harness_id`` and, inside a candidate, ``inner_generation``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryEvent(Event):
    """A co-evolution run's result, written at its end."""

    kind: ClassVar[str] = "summary"
    initial_best: str | None = None
    """The best seed (the first incumbent)."""
    initial_s_val: float | None = None
    """Its whole-set S_val, in [0, 1]."""
    best: str | None = None
    """The final incumbent."""
    best_s_val: float | None = None
    """Its whole-set S_val, in [0, 1]."""
    best_harness_id: str | None = None
    """The candidate that produced it."""
    heldout_s_val: float | None = None
    """Its S_val on the held-out items, None when none."""
    selection_items: int | None = None
    """Selection items, >= 0."""
    heldout_items: int | None = None
    """Held-out items, >= 0."""
    rollouts: int | None = None
    """Model calls for policies."""
    s_val_curve: tuple[float, ...] = ()
    """Incumbent S_val per outer generation (index 0 = the seeds)."""
    current_curve: tuple[float, ...] = ()
    """Current S_val per outer generation: the incumbent's whole-set S_val, then each generation's best race
    estimate."""
    rollbacks: int | None = None
    """Rollbacks, >= 0."""
    stop_reason: str | None = None
    """Stop reason key."""
    stop_detail: str | None = None
    """Its detail."""
    candidates: int | None = None
    """Harness candidates run."""
    generated_tokens: int | None = None
    """Tokens generated in all."""
    archive: tuple[tuple[str, float], ...] = ()
    """The archived pairs, best first: ``(harness_id, s_val)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GeneralisationEvent(Event):
    """The final best vs the best seed on the selection and held-out items
    (``evotrainer.stats.generalisation.to_payload`` / ``from_payload`` convert to and from ``Generalisation``)."""

    kind: ClassVar[str] = "generalisation"
    version: int | None = None
    """Payload version (``generalisation.PAYLOAD_VERSION``)."""
    baseline_id: str | None = None
    """The best seed."""
    best_id: str | None = None
    """The final best."""
    level: float | None = None
    """Interval coverage, in (0, 1)."""
    held: bool | None = None
    """True: the gain held on the held-out items; False: it did not; None: undecided or no held-out items."""
    verdict: str | None = None
    """The verdict sentence."""
    selection: Mapping[str, Any] | None = None
    """Selection split: ``split``, ``n``, ``baseline_mean``, ``best_mean``, ``diff`` (``mean``, ``low``,
    ``high``, ``share_b_better``, ``n``), ``wins``, ``losses``, ``ties``, per-item ``baseline`` / ``best``
    scores in [0, 1], ``item_ids``; None when not measured."""
    heldout: Mapping[str, Any] | None = None
    """Held-out split, same keys; None without held-out items."""


@dataclass(frozen=True, slots=True, kw_only=True)
class YardstickEvent(Event):
    """The S_val probes checked against a real policy (the best seed on the selection items, after
    generation 0; ``harness/yardstick.py``)."""

    kind: ClassVar[str] = "yardstick"
    means: Mapping[str, float] | None = None
    """Probe name -> mean S_val on the selection items, in [0, 1]."""
    items: int | None = None
    """Items the means are over."""
    policy: float | None = None
    """The policy's mean S_val on the same items."""
    policy_id: str | None = None
    """Whose outputs ``policy`` scores."""
    failures: tuple[str, ...] = ()
    """Broken probe rules, one line each; empty: the yardstick passed."""
    misses: tuple[str, ...] = ()
    """Missed targets (skeleton and wrong item as shares of the policy's S_val), reported only."""


EVENT_TYPES: Mapping[str, type[Event]] = types.MappingProxyType({cls.kind: cls for cls in (
    SetupEvent, TaskBatchEvent, IncumbentReferenceEvent, LeadEvent, PhaseEvent, InnerGenerationEvent,
    OperatorStatsEvent, StyleLibraryEvent, RaceEvent, IncumbentEvent, RewardHackingEvent, OuterSkippedEvent,
    PromotionEvent, RollbackEvent, OuterGenerationEvent, CandidateFailedEvent, StopEvent, SummaryEvent,
    GeneralisationEvent, TrajectoriesEvent, YardstickEvent, TransferEvent, InputHandlingEvent,
    SelfEvolveTransferEvent)})
"""Event kind -> its class (the co-evolution class where a mode has its own, see :data:`MODE_TYPES`)."""

MODE_TYPES: Mapping[tuple[str, str], type[Event]] = types.MappingProxyType({
    ("setup", "selfevolve"): SelfEvolveSetupEvent, ("summary", "selfevolve"): SelfEvolveSummaryEvent})
"""``(kind, payload["mode"])`` -> the class of that mode's variant of the kind."""


def from_payload(kind: str, payload: Mapping[str, Any]) -> Event:
    """The typed event of an archived ``(kind, payload)``; ``to_payload()`` of the result gives the payload
    back, key order included, when every key was present.

    Args:
        kind: the event kind (a key of :data:`EVENT_TYPES`).
        payload: the JSON payload (a mapping of str keys). A missing key reads as the field's default; keys a
            kind with a merged mapping does not declare go into that mapping, in their order.

    Raises:
        DataError: an unknown kind, a payload that is not a mapping, an unknown key, a value of the wrong type,
            or a missing required key (each message names the kind and the key).
    """
    if not isinstance(payload, Mapping):
        raise DataError(f"event {kind!r}: payload is a {type(payload).__name__}, expected an object")
    mode = payload.get("mode")
    cls = MODE_TYPES.get((kind, mode)) if isinstance(mode, str) else None
    cls = cls or EVENT_TYPES.get(kind)
    if cls is None:
        raise DataError(f"unknown event kind {kind!r} (known: {', '.join(sorted(EVENT_TYPES))})")
    return decode(cls, kind, payload)
