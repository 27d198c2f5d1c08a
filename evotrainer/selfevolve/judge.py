"""The fixed judge of self-evolution: the family's rule rewards plus a model grade, repeats averaged.

How a sample's judge score (in [0, 1], higher is better) is made:

1. **Rules.** ``rule = family.reward(output, task, weights).total`` — the weighted reward components of
   the task family (each in [0, 1], weights on the simplex), so ``rule`` is already on the 0..1 scale of
   the pass threshold.
2. **Degenerate outputs score 0.** When the family's degenerate-output guard fires (e.g. empty, a copy
   of the input, a repetition loop; ``RewardBreakdown.degenerate``), the judge score is 0.0 and the model
   judge is not asked.
3. **Model grade.** The judge model — the *base* model without any adapter (or a separate
   ``selfevolve.judge`` model), so it stays fixed while the adapter trains — is asked ``repeats`` times
   (sampled at ``temperature`` with distinct seeds) for one integer grade 0..10, in the chat the family
   writes (``FamilyTexts.judge_prompt``; a family without one is judged by its rules alone). A reply is parsed
   strictly (:func:`parse_grade`: the whole reply must be the number, optionally "/10" and a final
   period); anything else is *ignored* (not counted as 0). ``model = mean(parsed grades) / 10``.
4. **Combination.** ``score = (1 - w) * rule + w * model`` with ``w = model_judge_weight``; when no
   repeat parsed, ``w`` is renormalised to 0 and ``score = rule``. (A weighted mean, as in the
   rule-plus-model-judge reward mixes of RLAIF setups; the weight is configurable because a 135M
   judge is mostly noise while a stronger GPU judge deserves more weight.)

Samples are judged in one batched ``generate`` call. A judge call that fails leaves every grade
unparsed (rules only) and reports the error; it never raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evotrainer.backends.base import LLM, GenerationRequest, Message, SamplingParams
from evotrainer.errors import ServerError
from evotrainer.tasks.base import Task, TaskFamily

__all__ = ["JudgeSettings", "Verdict", "combine", "grade_counts", "judge_messages", "judge_samples", "parse_grade"]

_GRADE = re.compile(r"(10|[0-9])(?:\s*/\s*10)?\.?")


@dataclass(frozen=True)
class JudgeSettings:
    """Settings of the judge (fixed for a run).

    Attributes:
        reward_weights: rule reward weights by component name (renormalised by the family).
        repeats: model grades per sample, >= 1.
        temperature: sampling temperature of the repeats (0 = greedy: the repeats are identical).
        max_new_tokens: tokens of a grade reply.
        model_weight: weight ``w`` of the model grade in [0, 1].
    """

    reward_weights: Mapping[str, float]
    repeats: int = 3
    temperature: float = 0.7
    max_new_tokens: int = 6
    model_weight: float = 0.3


@dataclass(frozen=True)
class Verdict:
    """The judge's result for one sample.

    Attributes:
        score: combined judge score in [0, 1], higher is better (0.0 for degenerate output).
        rule: the rule reward total in [0, 1] (0.0 when degenerate).
        components: rule reward components, each in [0, 1].
        grades: each repeat's parsed grade in [0, 10], None where the reply did not parse (empty when
            the model judge was not asked: degenerate output or ``model_weight`` 0).
        model: mean parsed grade / 10 in [0, 1], or None when none parsed.
        degenerate: the guard's reason, or None.
        error: why the rules or the model judge failed, or None.
    """

    score: float
    rule: float
    components: Mapping[str, float]
    grades: tuple[float | None, ...]
    model: float | None
    degenerate: str | None = None
    error: str | None = None


def parse_grade(text: str) -> float | None:
    """A strict 0..10 grade: the whole reply must be ``N``, ``N/10``, ``N.`` (whitespace around allowed).

    Returns:
        The grade as a float in [0, 10], or None when the reply is anything else ("7 out of 10",
        "Grade: 7", "11", "7.5", prose); such replies are ignored, never counted as 0.
    """
    match = _GRADE.fullmatch(text.strip())
    return float(match.group(1)) if match else None


def combine(rule: float, model: float | None, weight: float, degenerate: str | None = None) -> float:
    """``(1 - weight) * rule + weight * model`` in [0, 1]; ``rule`` alone when ``model`` is None; 0 if degenerate."""
    if degenerate is not None:
        return 0.0
    if model is None:
        return float(rule)
    return float((1.0 - weight) * rule + weight * model)


def grade_counts(verdicts: Sequence[Verdict]) -> tuple[int, int]:
    """``(requested, parsed)``: model-judge grades asked for over ``verdicts`` (each verdict's ``grades``, one per
    repeat; none for degenerate output or a rules-only judge; a failed judge call counts its grades as asked and
    unparsed) and those that parsed. ``parsed / requested`` is the judge's parse rate."""
    requested = sum(len(v.grades) for v in verdicts)
    parsed = sum(g is not None for v in verdicts for g in v.grades)
    return requested, parsed


def judge_messages(task: Task, output: str, prompt: tuple[str, str]) -> tuple[Message, ...]:
    """The chat asking the model judge for a grade of ``output`` on ``task`` (system, user).

    ``prompt``: the family's ``(system, user)`` (:attr:`~evotrainer.tasks.base.FamilyTexts.judge_prompt`),
    the user text with the fields ``{task_input}`` (``task.text``) and ``{output}``."""
    system, user = prompt
    return ({"role": "system", "content": system},
            {"role": "user", "content": user.format(task_input=task.text.strip(), output=output.strip())})


def judge_samples(
    judge_llm: LLM,
    family: TaskFamily,
    items: Sequence[tuple[Task, str]],
    settings: JudgeSettings,
    rng: np.random.Generator,
) -> list[Verdict]:
    """Judge each ``(task, output)``: rules, degenerate guard, ``repeats`` model grades, combined.

    Args:
        judge_llm: the fixed judge model; requests never carry an adapter.
        family: the task family (rule rewards, the degenerate-output guard and the judge prompt; with no
            judge prompt, ``FamilySpec.texts.judge_prompt``, no model grade is asked).
        items: samples to judge.
        settings: the judge settings.
        rng: source of the repeats' sampling seeds.

    Returns:
        One :class:`Verdict` per item, in order. Never raises for a failing sample or judge call, except a
        :class:`~evotrainer.errors.ServerError` (the judge's server unusable: the run stops with its line).
    """
    rules: list[tuple[float, dict[str, float], str | None, str | None]] = []
    for task, output in items:
        try:
            r = family.reward(output, task, settings.reward_weights)
            total = float(r.total)
            if not np.isfinite(total):
                raise ValueError(f"non-finite rule reward {total}")
            rules.append((total, dict(r.components), r.degenerate, None))
        except Exception as exc:  # a failing sample gets rule 0 and an error string
            rules.append((0.0, {}, None, f"rules: {type(exc).__name__}: {exc}"))
    prompt = family.spec.texts.judge_prompt
    ask = settings.model_weight > 0 and prompt is not None
    requests: list[GenerationRequest] = []
    owners: list[int] = []
    seeds = rng.integers(0, 2**31 - 1, size=(len(items), settings.repeats))
    for i, ((task, output), (_, _, degenerate, _)) in enumerate(zip(items, rules, strict=True)):
        if not ask or degenerate is not None:
            continue
        messages = judge_messages(task, output, prompt)
        for k in range(settings.repeats):
            params = SamplingParams(temperature=settings.temperature, max_new_tokens=settings.max_new_tokens,
                                    seed=int(seeds[i, k]), no_repeat_ngram_size=0)
            requests.append(GenerationRequest(messages, params, adapter=None))
            owners.append(i)
    grades: dict[int, list[float | None]] = {}
    judge_error: str | None = None
    if requests:
        try:
            replies = judge_llm.generate(requests)
            if len(replies) != len(requests):
                raise RuntimeError(f"judge returned {len(replies)} replies for {len(requests)} requests")
            for i, reply in zip(owners, replies, strict=True):
                grades.setdefault(i, []).append(parse_grade(reply.text))
        except ServerError:  # the judge's server is gone: the run stops with its line
            raise
        except Exception as exc:  # the judge failed: rules only, with the reason
            judge_error = f"model judge: {type(exc).__name__}: {exc}"
            grades = {i: [None] * settings.repeats for i in set(owners)}
    out: list[Verdict] = []
    for i, (rule, components, degenerate, error) in enumerate(rules):
        g = tuple(grades.get(i, ()))
        parsed = [x for x in g if x is not None]
        model = float(np.mean(parsed)) / 10.0 if parsed else None
        errors = [e for e in (error, judge_error if i in grades else None) if e]
        out.append(Verdict(
            score=combine(0.0 if degenerate else rule, model, settings.model_weight, degenerate),
            rule=0.0 if degenerate else rule, components=components, grades=g, model=model,
            degenerate=degenerate, error="; ".join(errors) or None,
        ))
    return out
