"""The mutation-style library evolves slowly: hyper-mutation of the mutation prompts.

PromptBreeder (Fernando et al. 2023, arXiv:2309.16797, "hyper-mutation") mutates the mutation prompts
themselves. Here, every ``inner.style_evolution_every`` generations the style whose rewrites beat their
parents least often (operator statistics, enough trials) is replaced by a mutator rewrite of the style
that does best. Two phases like the other LLM operators: :func:`plan_style_mutation` builds the request,
:func:`apply_style_mutation` validates the answer into a new library (or returns None). Pure functions:
the library is a tuple of :class:`MutationStyle`, never changed in place.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.search.cleaning import clean_mutator_text, on_topic_fraction
from evotrainer.search.mutation_prompts import MutationStyle
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.operators import seeded
from evotrainer.tasks.base import NEUTRAL_TEXTS

__all__ = ["StylePlan", "apply_style_mutation", "plan_style_mutation", "style_rates"]

_PREFIX = "mut_llm_rewrite/"


@dataclass(frozen=True)
class StylePlan:
    """A pending library change: replace style ``worst`` by a rewrite of style ``best``.

    Attributes:
        worst: name of the style to retire.
        best: name of the style whose instruction is rewritten.
        new_name: name the new style will carry (``<best>~<generation>``).
        request: the mutator chat.
    """

    worst: str
    best: str
    new_name: str
    request: GenerationRequest


def style_rates(stats: OperatorStats, styles: tuple[MutationStyle, ...], *, min_trials: int = 2) -> dict[str, float]:
    """Style name -> share of its rewrites that beat their parent, for styles with >= ``min_trials`` children."""
    out: dict[str, float] = {}
    for style in styles:
        tried, improved = stats.detail.get(_PREFIX + style.name, (0, 0))
        if tried >= min_trials:
            out[style.name] = improved / tried
    return out


def plan_style_mutation(
    styles: tuple[MutationStyle, ...], stats: OperatorStats, rng: random.Random, generation: int, *,
    params: SamplingParams, min_trials: int = 2, task_hint: str = NEUTRAL_TEXTS.task_hint,
) -> StylePlan | None:
    """Plan the retirement of the least successful style and its replacement.

    Needs at least two styles with ``min_trials`` rewrites each and a strict gap between the best and
    worst success rates; otherwise None (no evidence yet). Ties are broken by ``rng``.

    Args:
        styles: the current library.
        stats: operator statistics accumulated so far (``detail`` keys ``mut_llm_rewrite/<style>``).
        rng: random source (tie-breaking and the sampling seed).
        generation: inner generation number, used in the new style's name.
        params: mutator decoding settings (seed drawn from ``rng`` when sampling).
        min_trials: rewrites a style needs before its rate counts.
        task_hint: what the policies do ("an AI that ...").

    Returns:
        The plan, or None.
    """
    rates = style_rates(stats, styles, min_trials=min_trials)
    if len(rates) < 2:
        return None
    lo, hi = min(rates.values()), max(rates.values())
    if hi <= lo:
        return None
    worst = rng.choice(sorted(n for n, r in rates.items() if r == lo))
    best = rng.choice(sorted(n for n, r in rates.items() if r == hi))
    instruction = next(s.instruction for s in styles if s.name == best)
    user = (f"Instruction: {instruction}\n\nThis instruction tells an editor how to improve a prompt for an AI "
            f"that {task_hint}. Write one new, different instruction of the same kind.\n"
            "Output only the new instruction, one sentence, nothing else.")
    messages = ({"role": "system", "content": "You write short editing instructions. Output only the instruction."},
                {"role": "user", "content": user})
    base = best.split("~")[0]
    return StylePlan(worst, best, f"{base}~{generation}", GenerationRequest(messages=messages, params=seeded(params, rng)))


def apply_style_mutation(
    styles: tuple[MutationStyle, ...], plan: StylePlan, text: str | None, *, min_on_topic: float = 0.5,
    max_words: int = 30, vocabulary: frozenset[str] = frozenset(),
) -> tuple[MutationStyle, ...] | None:
    """The library with ``plan.worst`` replaced by the new style, or None when the answer is unusable.

    The answer is cleaned (:func:`~evotrainer.search.cleaning.clean_mutator_text`), must be 4..``max_words``
    words, mostly on topic (``min_on_topic`` of its content words in the old instruction or ``vocabulary``,
    the family's domain words, ``InnerConfig.vocabulary()``), and differ from every instruction in the library. The new
    style keeps the section restriction of the style it was rewritten from.
    """
    by_name = {s.name: s for s in styles}
    if plan.worst not in by_name or plan.best not in by_name:
        return None
    source = by_name[plan.best]
    cleaned = clean_mutator_text(text, min_words=4, max_words=max_words, echo_of=(source.instruction,))
    if cleaned is None or "\n" in cleaned:
        return None
    if on_topic_fraction(source.instruction, cleaned, vocabulary) < min_on_topic:
        return None
    if any(cleaned.strip().lower() == s.instruction.strip().lower() for s in styles):
        return None
    new = MutationStyle(plan.new_name, cleaned, source.sections)
    return tuple(new if s.name == plan.worst else s for s in styles)
