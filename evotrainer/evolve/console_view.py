"""What a co-evolution run prints while a harness candidate runs, as a subscriber to the archive's events.

:class:`ConsoleView` subscribes to the run's :class:`~evotrainer.archive.recorder.RunRecorder`
(``rec.subscribers``) and prints from the typed events the archive stores
(:mod:`evotrainer.events.kinds`), so what a user reads on the terminal is what the archive holds:

- each inner generation (:class:`~evotrainer.events.kinds.InnerGenerationEvent`, with the step timings of the
  ``inner_generation`` :class:`~evotrainer.events.kinds.PhaseEvent` emitted just before it): fitness max and mean,
  children, rejections; the initial evaluation of a candidate (no children) is not printed;
- each race (:class:`~evotrainer.events.kinds.RaceEvent`): every racer's status, items and paired mean difference;
- each accepted change of the style library (:class:`~evotrainer.events.kinds.StyleLibraryEvent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from evotrainer.events.kinds import Event, InnerGenerationEvent, PhaseEvent, RaceEvent, StyleLibraryEvent

__all__ = ["ConsoleView"]


def _fmt(x: Any) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _signed(x: Any) -> str:
    return f"{x:+.4f}" if isinstance(x, int | float) and not isinstance(x, bool) else "n/a"


class ConsoleView:
    """Prints inner generations, races and style-library changes (a :class:`~evotrainer.events.base.Subscriber`).

    Args:
        console: where to print (rich markup off: policy ids and model text are printed as they are).
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._timings: Mapping[str, Any] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, PhaseEvent) and event.name == "inner_generation":
            self._timings = {k: v for k, v in event.fields.items() if k not in ("harness_id", "generation")}
        elif isinstance(event, InnerGenerationEvent):
            self._inner_generation(event)
        elif isinstance(event, RaceEvent):
            self._race(event)
        elif isinstance(event, StyleLibraryEvent) and event.accepted and event.library:
            instruction = next((text for name, text in event.library if name == event.new_name), "")
            self._print(f"    style library: {event.retired} retired, {event.new_name} added ({instruction!r})")

    def _inner_generation(self, event: InnerGenerationEvent) -> None:
        timings, self._timings = self._timings, {}
        if not (event.children or event.rejected or event.skipped):  # the initial evaluation
            return
        r = event.record
        self._print(
            f"    gen {event.generation}: max {_fmt(r.get('max'))} mean {_fmt(r.get('mean'))} "
            f"| {len(event.children)} children, {event.rejected} rejected"
            f"{' | SKIPPED (all evaluations failed)' if event.skipped else ''} | "
            + " ".join(f"{k} {float(v):.1f}s" for k, v in timings.items()))

    def _race(self, event: RaceEvent) -> None:
        racers = ", ".join(f"{e.get('policy_id')} {e.get('status')} after {e.get('items')} ({_signed(e.get('mean'))})"
                           for e in event.entries)
        leader = f" -> {event.leader}" if event.leader is not None else ""
        self._print(f"  race vs {event.reference} ({event.evaluations} evaluations): {racers}{leader}")

    def _print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)
