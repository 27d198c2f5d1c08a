"""The run's printed lines come from the typed events the archive stores (ConsoleView subscribes to them)."""

from __future__ import annotations

import io

from rich.console import Console

from evotrainer.events.kinds import (
    InnerGenerationEvent,
    PhaseEvent,
    RaceEvent,
    StyleLibraryEvent,
    TaskBatchEvent,
)
from evotrainer.evolve.console_view import ConsoleView


def _view() -> tuple[ConsoleView, io.StringIO]:
    out = io.StringIO()
    return ConsoleView(Console(file=out, width=200)), out


def test_inner_generations_print_with_their_step_timings_and_the_initial_one_is_silent() -> None:
    view, out = _view()
    view(PhaseEvent(name="inner_generation", fields={"harness_id": "g1c0", "generation": 0, "evaluate": 2.0}))
    view(InnerGenerationEvent(harness_id="g1c0", outer_generation=1, generation=0, record={"max": 0.5}))
    assert out.getvalue() == ""
    view(PhaseEvent(name="inner_generation", fields={"harness_id": "g1c0", "generation": 1, "select": 0.0,
                                                     "vary": 1.25, "evaluate": 3.0}))
    view(InnerGenerationEvent(harness_id="g1c0", outer_generation=1, generation=1,
                              record={"max": 0.5, "mean": 0.25}, children=("p1", "p2"), rejected=1))
    assert out.getvalue() == ("    gen 1: max 0.5000 mean 0.2500 | 2 children, 1 rejected | "
                              "select 0.0s vary 1.2s evaluate 3.0s\n")


def test_a_race_prints_every_racer_and_the_leader_and_model_text_is_not_markup() -> None:
    view, out = _view()
    view(RaceEvent(harness_id="g1c0", reference="[bold]seed", evaluations=12, leader="pA",
                   entries=({"policy_id": "pA", "status": "better", "items": 8, "mean": 0.125},
                            {"policy_id": "pB", "status": "worse", "items": 4, "mean": None})))
    assert out.getvalue() == ("  race vs [bold]seed (12 evaluations): pA better after 8 (+0.1250), "
                              "pB worse after 4 (n/a) -> pA\n")


def test_style_changes_print_only_when_accepted_and_other_events_are_ignored() -> None:
    view, out = _view()
    view(StyleLibraryEvent(harness_id="g2c0", outer_generation=2, accepted=False, error="boom"))
    view(TaskBatchEvent(harness_id="g2c0", outer_generation=2, task_ids=("t1",)))
    assert out.getvalue() == ""
    view(StyleLibraryEvent(harness_id="g2c0", outer_generation=2, accepted=True, retired="old", rewritten="best",
                           new_name="fresh", answer="x", library=(("best", "Be brief."), ("fresh", "Be exact."))))
    assert out.getvalue() == "    style library: old retired, fresh added ('Be exact.')\n"
