"""The run's mutation-style library and its hyper-mutation.

:class:`StyleLibrary` is one of the named parts of a harness candidate's run (:mod:`evotrainer.evolve.llm_objective`).
It holds the rewrite styles the LLM mutation draws from (``inner.mutation_styles`` at the start; the task
family's, :attr:`~evotrainer.tasks.base.FamilyTexts.mutation_styles`, when unset) and, every
``inner.style_evolution_every`` candidates, asks the mutator to replace the least successful style by a
variant of the most successful one, judged by the run's operator statistics (the hyper-mutation of
PromptBreeder, Fernando et al. 2023, on the mutation prompts themselves). The plan and
the checks on the answer are :mod:`evotrainer.search.style_library`; each attempt is archived as a
``style_library`` event.
"""

from __future__ import annotations

from typing import Any

from evotrainer.archive.recorder import RunRecorder
from evotrainer.errors import ServerError
from evotrainer.events.kinds import StyleLibraryEvent
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.mutation_prompts import MutationStyle
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.style_library import apply_style_mutation, plan_style_mutation
from evotrainer.seeding import Seeds

__all__ = ["StyleLibrary"]


class StyleLibrary:
    """The mutation styles of a run, evolved between candidates.

    Args:
        mutator: the mutator model (``generate``), or None (the library never changes then).
        inner: ``inner.*`` settings; reads ``mutation_styles``, ``style_evolution_every``, ``style_min_trials``, ``mutator_params``,
            the domain texts (``texts()``: task hint, vocabulary) and ``min_on_topic``.
        rec: the run's archive writer (a change is printed by a subscriber to its ``style_library`` event,
            :class:`~evotrainer.evolve.console_view.ConsoleView`).
        seeds: the run's named RNG streams (``styles/<harness id>``).

    Attributes:
        styles: the current library, in order.
        candidates_run: harness candidates finished so far.
    """

    def __init__(self, mutator: Any, inner: InnerConfig, rec: RunRecorder, seeds: Seeds) -> None:
        self.mutator, self.inner, self.rec, self.seeds = mutator, inner, rec, seeds
        self.styles: tuple[MutationStyle, ...] = inner.styles()
        self.candidates_run = 0

    def after_candidate(self, stats: OperatorStats, harness_id: str, outer_generation: int) -> None:
        """Count a finished candidate; evolve the library when ``inner.style_evolution_every`` divides the count
        (never with ``style_evolution_every`` 0 or without a mutator). ``stats``: the run's operator
        statistics so far."""
        self.candidates_run += 1
        every = self.inner.style_evolution_every
        if self.mutator is not None and every > 0 and self.candidates_run % every == 0:
            self.evolve(stats, harness_id, outer_generation)

    def evolve(self, stats: OperatorStats, harness_id: str, outer_generation: int) -> None:
        """One hyper-mutation: retire the worst style for a rewrite of the best (archived as an event). A failing
        mutator or an unusable answer leaves the library as it is."""
        hid, g = harness_id, outer_generation
        plan = plan_style_mutation(
            self.styles, stats, self.seeds.python(f"styles/{hid}"), g,
            params=self.inner.mutator_params, min_trials=self.inner.style_min_trials,
            task_hint=self.inner.texts().task_hint)
        if plan is None:
            return
        try:
            answer = self.mutator.generate([plan.request])[0]
        except ServerError:  # the server is gone: the run stops with its line
            raise
        except Exception as exc:  # a failing mutator never stops the run: the library stays as it is
            self.rec.emit(StyleLibraryEvent(harness_id=hid, outer_generation=g, accepted=False, error=repr(exc)))
            return
        text = answer.text
        cut = getattr(answer, "finish_reason", None) == "length"  # a style cut mid-sentence is no instruction
        new = None if cut else apply_style_mutation(self.styles, plan, text, min_on_topic=self.inner.min_on_topic,
                                                    vocabulary=self.inner.vocabulary())
        self.rec.emit(StyleLibraryEvent(
            harness_id=hid, outer_generation=g, accepted=new is not None, retired=plan.worst, rewritten=plan.best,
            new_name=plan.new_name, answer=text,
            library=tuple((s.name, s.instruction) for s in (new or self.styles))))
        if new is not None:
            self.styles = new
