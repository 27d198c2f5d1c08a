"""Reflective mutation: show the mutator what went wrong on the parent's worst task, ask for a fix.

GEPA's idea (Agrawal et al. 2025, "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning", arXiv:2507.19457): a mutation reads a concrete failure (the output and which parts of the
score were low) instead of rewriting blindly. The feedback comes through a seam, a callable
``feedback(policy) -> TaskFeedback | None``, filled by the evaluator side from *training* rollouts only
(:class:`evotrainer.rollout.FeedbackRecorder` refuses meta-validation inputs by content hash), so no
meta-validation data can reach the mutator. What the chat says about the domain (the plain-words meaning
of each reward component, the name of the output) is the task family's
(:class:`~evotrainer.tasks.base.FamilyTexts`), as GEPA's adapter owns what its proposer shows the model.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from evotrainer.backends.base import GenerationRequest, Message, SamplingParams
from evotrainer.genome import Policy, instruction_sections
from evotrainer.search.mutation_prompts import build_rewrite_messages
from evotrainer.search.operators import MUTATOR_PARAMS, MutationPlan, seeded
from evotrainer.tasks.base import NEUTRAL_TEXTS

__all__ = ["Feedback", "TaskFeedback", "build_reflection_messages", "mut_reflective_plan"]


@dataclass(frozen=True)
class TaskFeedback:
    """What went wrong on one training task (the parent's worst-scored one).

    Attributes:
        task_id: the generated task's id.
        content_hash: its input's content hash (lets tests and callers prove it is no
            meta-validation item).
        score: its total reward in [0, 1], higher is better.
        output: the policy's output on it, possibly shortened (untrusted model text).
        low_components: ``(component, value)`` pairs that were low, lowest first, each value in [0, 1].
        reference: a reference answer of that task (data, not model text), possibly shortened; ``""`` when the
            family gives none.
    """

    task_id: str
    content_hash: str
    score: float
    output: str
    low_components: tuple[tuple[str, float], ...]
    reference: str = ""


Feedback = Callable[[Policy], "TaskFeedback | None"]
"""The seam: feedback on a policy's worst training task, or None when there is none (not evaluated)."""

_MAX_OUTPUT_CHARS = 500  # the output and the reference shown are each cut to this (prompt cost on CPU)


def _level(value: float) -> str:
    """A component's value in words: numbers shown to the mutator were copied into instructions as "score 0.99"."""
    return "very poor" if value < 0.2 else "poor" if value < 0.5 else "fair"


def _shorten(text: str, max_chars: int) -> str:
    text = text.strip()
    return text if len(text) <= max_chars else text[:max_chars].rstrip() + " ..."


def build_reflection_messages(
    section_text: str,
    feedback: TaskFeedback,
    *,
    hints: Mapping[str, str] = NEUTRAL_TEXTS.reflection_hints,
    task_hint: str = NEUTRAL_TEXTS.task_hint,
    output_name: str = NEUTRAL_TEXTS.output_name,
    section: str | None = None,
) -> tuple[Message, ...]:
    """The mutator chat: the current section, the failed output, its weak points in words (never numbers), the
    task's reference answer for contrast when there is one, "rewrite it so the AI avoids them".

    Same layout as a rewrite chat (the instruction between markers, then the material, then the change), so
    the same cleaning applies to the answer; the failed output is shown as evidence, with an explicit "do not
    rewrite it" (a capable mutator otherwise answers with a corrected output instead of an instruction).

    Args:
        section_text: the section to fix (non-empty).
        feedback: the parent's worst task.
        hints: component name -> what it asks for (unknown names are shown with ``_`` as spaces).
        task_hint: what the policy does, completing "an AI that ...".
        output_name: the output after "The AI wrote", determiner included ("this answer").
        section: the section's name (shown as its kind), or None.
    """
    weak = "; ".join(hints.get(name, name.replace("_", " ")) + f" ({_level(value)})"
                     for name, value in feedback.low_components) or "the overall result was poor"
    output = _shorten(feedback.output, _MAX_OUTPUT_CHARS)
    context = (f"Following its whole prompt on a practice input, the AI wrote {output_name} (shown only so you can "
               f"see what went wrong; do not rewrite or continue it):\n---\n{output or '(nothing)'}\n---\n"
               f"Weak points: {weak}.")
    reference = _shorten(feedback.reference, _MAX_OUTPUT_CHARS)
    if reference:
        context += (f"\nFor contrast, what a good answer on the same input contains (do not copy its names, facts "
                    f"or wording; the instruction must work for any input):\n---\n{reference}\n---")
    instruction = "Fix the weak points: rewrite the instruction so that the AI avoids them next time."
    return build_rewrite_messages(section_text, instruction, task_hint=task_hint, section=section, context=context)


def mut_reflective_plan(
    parent: Policy,
    rng: random.Random,
    generation: int,
    *,
    feedback: Feedback,
    params: SamplingParams = MUTATOR_PARAMS,
    hints: Mapping[str, str] = NEUTRAL_TEXTS.reflection_hints,
    task_hint: str = NEUTRAL_TEXTS.task_hint,
    output_name: str = NEUTRAL_TEXTS.output_name,
    sections: tuple[str, ...] = ("rules",),
) -> MutationPlan | None:
    """Plan a reflective rewrite of one section of ``parent`` from its worst training task.

    The section is drawn among ``sections`` the parent carries non-empty (else among all its non-empty
    sections); a sampling seed is drawn from ``rng`` when ``params`` samples. The answer is judged as a rewrite's
    (:func:`~evotrainer.search.operators.judge_rewrite`).

    Args:
        parent: the policy to mutate (not modified).
        rng: random source.
        generation: generation number the child will carry.
        feedback: the seam (see module doc); called once with ``parent``.
        params: mutator decoding settings.
        hints: reward component explanations.
        task_hint: what the policy does.
        output_name: the output as the chat names it.
        sections: sections a fix may target (default the rules: shown a failed output, the 1.5B asked to fix a
            layout answered with a corrected output in 10 of 13 tries, ``benchmarks/mutator_validity.py``).

    Returns:
        The plan (operator ``mut_reflective/<section>``; its ``shown`` holds the failed output and the
        reference, so a fix that copies that training task's names is rejected as a leak), or None when ``feedback``
        has nothing for ``parent`` (the loop then plans a plain rewrite).
    """
    info = feedback(parent)
    if info is None:
        return None
    editable = instruction_sections(parent.sections) or list(parent.sections)
    candidates = [n for n, t in editable if n in sections and t.strip()]
    candidates = candidates or [n for n, t in editable if t.strip()] or [n for n, _ in editable]
    section = rng.choice(candidates)
    messages = build_reflection_messages(parent.section(section), info, hints=hints, task_hint=task_hint,
                                         output_name=output_name, section=section)
    request = GenerationRequest(messages=messages, params=seeded(params, rng))
    return MutationPlan(parent, section, f"mut_reflective/{section}", "Fix the weak points", request,
                        generation, shown=(info.output, info.reference))
