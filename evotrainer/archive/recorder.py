"""Writes what a co-evolution run does into its archive (the run-side face of :class:`ArchiveStore`).

Keeps ``evolve/coevolution.py`` readable: one call per thing that happened. Wall-clock timings go into
events of kind ``"phase"`` so the deterministic dump of a run leaves them out.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evotrainer.archive.schema import (
    EvaluationRow,
    HarnessCandidateRow,
    PoolTaskRow,
    RoundRow,
    SampleRow,
    budget_rollouts,
)
from evotrainer.archive.store import ArchiveStore
from evotrainer.backends.urls import redact_config
from evotrainer.events.kinds import Event, InputHandlingEvent, Subscriber, TrajectoriesEvent, from_payload
from evotrainer.genome import Policy

if TYPE_CHECKING:
    from evotrainer.tracking import Tracker

__all__ = ["RunRecorder", "code_version"]


def code_version() -> str:
    """``git describe --always --dirty`` of the package's checkout, else the package version.

    The checkout is the folder above the package when it holds ``.git`` (an editable install); an
    installed wheel (``site-packages/evotrainer``) reports its version, even in a venv inside some other
    git repository.
    """
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists():
        try:
            out = subprocess.run(
                ["git", "-C", str(root), "describe", "--always", "--dirty"],
                capture_output=True, text=True, timeout=5, check=True,
            )
            return out.stdout.strip() or "unknown"
        except (OSError, subprocess.SubprocessError):
            pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("evotrainer")
    except PackageNotFoundError:
        return "unknown"


def _finite_or_zero(x: float | None) -> float:
    return float(x) if x is not None and math.isfinite(x) else 0.0


class RunRecorder:
    """Archive writer bound to one run id.

    Args:
        store: an archive opened for writing.
        run_id: the run's id (created by :meth:`start`).
        tracker: experiment tracking (:mod:`evotrainer.tracking`) that sees the run start, each event and
            each harness-candidate row after the archive stored it; None = none.
        episodes: archive the episodes of multi-step evaluations (``trajectories`` events).
        subscribers: more callables that see each typed event after the archive stored it (after the tracker).

    Attributes:
        subscribers: who sees each event, in call order (the tracker's :meth:`~evotrainer.tracking.Tracker.event`
            first); append to subscribe, e.g. a printer.
        rollouts: the rollouts of the evaluation rows written so far that count toward ``outer.budget.rollouts``
            (:func:`~evotrainer.archive.schema.budget_rollouts`, row by row), so the budget is the count a
            reader of the archive gets.
    """

    def __init__(self, store: ArchiveStore, run_id: str, tracker: Tracker | None = None, *,
                 episodes: bool = False, subscribers: Sequence[Subscriber] = ()) -> None:
        self.store = store
        self.run_id = run_id
        self.tracker = tracker
        self.episodes = episodes
        self.subscribers: list[Subscriber] = [*([tracker.event] if tracker is not None else []), *subscribers]
        self.rollouts = 0

    def _evaluations(self, rows: Sequence[EvaluationRow]) -> None:
        self.store.add_evaluations(self.run_id, list(rows))
        self.rollouts += sum(budget_rollouts(r) for r in rows)

    def _trajectories(self, e: Any, kind: str, harness_id: str | None) -> None:
        """With ``episodes`` (a multi-step family: each output is an episode serialised as JSON), archive the
        freshly generated episodes of one evaluation as a ``trajectories`` event (cached ones were archived
        when first made). An output that is not JSON is kept as text."""
        if not self.episodes or e.cached or not any(e.outputs):
            return
        items = []
        for out in e.outputs:
            try:
                items.append(json.loads(out))
            except (TypeError, ValueError):
                items.append({"text": str(out)})
        self.emit(TrajectoriesEvent(policy_id=e.policy_id, batch_id=e.batch_id, evaluation_kind=kind,
                                    harness_id=harness_id, trajectories=tuple(items)))

    def _handling(self, e: Any, kind: str, harness_id: str | None) -> None:
        """Archive how the items of a fresh evaluation were read (an ``input_handling`` event) when any item was
        not read whole: windowed into parts or cut (cached evaluations were archived when first made)."""
        codes = tuple(getattr(e, "handling", ()) or ())
        if e.cached or all(c in ("", "whole") for c in codes):
            return
        self.emit(InputHandlingEvent(policy_id=e.policy_id, batch_id=e.batch_id, evaluation_kind=kind,
                                     harness_id=harness_id, handling=codes))

    def start(self, seed: int, config: Mapping[str, Any]) -> None:
        """Archive the run's row and open the tracker's run, ``config`` with the credentials of its URLs masked
        (:func:`~evotrainer.backends.urls.redact_config`)."""
        config = redact_config(config)
        self.store.create_run(self.run_id, seed, dict(config), code_version())
        if self.tracker is not None:
            self.tracker.start(self.run_id, seed, config)

    def policies(self, policies: Sequence[Policy]) -> None:
        self.store.add_policies(self.run_id, list(policies))

    def fitness(
        self, evaluations: Sequence[Any], *, harness_id: str | None, outer_generation: int | None,
        inner_generation: int | None,
    ) -> None:
        """Archive :class:`~evotrainer.rollout.PolicyEvaluation` records (kind "fitness")."""
        rows = [
            EvaluationRow(
                policy_id=e.policy_id, kind="fitness", batch_id=e.batch_id,
                total=_finite_or_zero(e.fitness), components=dict(e.components), n_tasks=len(e.per_task),
                generated_tokens=e.generated_tokens, seconds=e.seconds, harness_id=harness_id,
                outer_generation=outer_generation, inner_generation=inner_generation, cached=e.cached,
                error=e.error if e.fitness is not None else (e.error or "evaluation failed"),
            )
            for e in evaluations
        ]
        self._evaluations(rows)
        for e in evaluations:
            self._trajectories(e, "fitness", harness_id)
            self._handling(e, "fitness", harness_id)

    def meta(
        self, evaluation: Any, *, kind: str, harness_id: str | None = None, outer_generation: int | None = None,
    ) -> None:
        """Archive one :class:`~evotrainer.rollout.MetaEvaluation` (kind "meta_val" / "meta_screen")."""
        e = evaluation
        self._evaluations([EvaluationRow(
            policy_id=e.policy_id, kind=kind, batch_id=e.batch_id, total=_finite_or_zero(e.s_val),
            components={k: float(v) for k, v in e.parts.items()}, n_tasks=len(e.per_item),
            generated_tokens=e.generated_tokens, seconds=e.seconds, harness_id=harness_id,
            outer_generation=outer_generation, cached=e.cached,
            error=e.error if e.s_val is not None else (e.error or "evaluation failed"),
        )])
        self._trajectories(e, kind, harness_id)
        self._handling(e, kind, harness_id)

    def candidate(self, row: HarnessCandidateRow) -> None:
        self.store.add_harness_candidate(self.run_id, row)
        if self.tracker is not None:
            self.tracker.candidate(row)

    def emit(self, event: Event) -> None:
        """Archive ``event`` (its ``kind`` and :meth:`~evotrainer.events.kinds.Event.to_payload`), then hand it to
        each subscriber in turn."""
        self.store.add_event(self.run_id, event.kind, event.to_payload())
        for subscriber in self.subscribers:
            subscriber(event)

    def event(self, kind: str, **payload: Any) -> None:
        """The untyped form of :meth:`emit`: ``payload`` becomes the typed event of ``kind``
        (:func:`~evotrainer.events.kinds.from_payload`), whose payload is ``payload`` when every key is given.

        Raises:
            DataError: ``kind`` is unknown, or a key is unknown to it or holds a value of the wrong type.
        """
        self.emit(from_payload(kind, payload))

    # --- self-evolution ----------------------------------------------------------------------------

    def se_pool(self, rows: Sequence[PoolTaskRow]) -> None:
        """Archive tasks added to the self-evolution pool."""
        if rows:
            self.store.add_pool_tasks(self.run_id, list(rows))

    def se_samples(self, rows: Sequence[SampleRow]) -> None:
        """Archive judged rollout samples of a round."""
        if rows:
            self.store.add_samples(self.run_id, list(rows))

    def se_round(self, row: RoundRow) -> None:
        """Archive a finished self-evolution round."""
        self.store.add_round(self.run_id, row)
