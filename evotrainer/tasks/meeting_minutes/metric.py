"""The fixed meta-validation metric (S_val) for meeting minutes.

``meta_score`` = mean of ROUGE-L F1 against the reference minutes (Lin 2004, "ROUGE: A Package for
Automatic Evaluation of Summaries"; computed with Google's ``rouge-score`` package,
``RougeScorer(["rougeL"], use_stemmer=True)``) and action-item F1 (the reward's matcher,
:func:`evotrainer.tasks.meeting_minutes.matching.action_f1`). Items without ground-truth action
items (e.g. QMSum) score ROUGE-L alone. A degenerate output (see
:mod:`~evotrainer.tasks.meeting_minutes.guard`) scores 0.

No harness parameter touches this metric. Bump :data:`SCORER_VERSION` whenever a change here, in
the matcher, parser or guard changes scores: it is part of the fitness-cache key.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from rouge_score import rouge_scorer

from evotrainer.tasks.base import MeetingTask, MetaScore
from evotrainer.tasks.meeting_minutes.guard import degenerate_reason
from evotrainer.tasks.meeting_minutes.matching import action_f1
from evotrainer.tasks.meeting_minutes.minutes_format import parse_minutes

__all__ = ["SCORER_VERSION", "meta_score", "rouge_l", "s_val"]

SCORER_VERSION = "mm-2"


@lru_cache(maxsize=1)
def _scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(output: str, reference: str) -> float:
    """ROUGE-L F1 of ``output`` against ``reference``, in [0, 1] (0.0 if either has no tokens)."""
    return float(_scorer().score(reference, output)["rougeL"].fmeasure)


def meta_score(output: str, task: MeetingTask) -> MetaScore:
    """Meta-validation score of ``output`` on ``task``.

    Args:
        output: model minutes (untrusted text).
        task: a validation item with ``reference_minutes`` (and possibly action items).

    Returns:
        ``value`` in [0, 1], higher is better: mean of the parts used, or 0.0 when the output is
        degenerate. ``parts``: ``rouge_l``; ``action_f1`` only when the item has action items;
        ``degenerate`` (1.0 when the guard fired, else 0.0, so its mean over items is the degenerate
        share). Never raises on any output text.
    """
    parts = {"rouge_l": rouge_l(output, task.reference_minutes)}
    if task.action_items:
        parts["action_f1"] = action_f1(parse_minutes(output).action_items, task.action_items)
    value = sum(parts.values()) / len(parts)
    degenerate = degenerate_reason(output, task.transcript) is not None
    parts["degenerate"] = 1.0 if degenerate else 0.0
    if degenerate:
        value = 0.0
    return MetaScore(value=value, parts=parts)


def s_val(outputs: Sequence[str], tasks: Sequence[MeetingTask]) -> tuple[float, list[MetaScore]]:
    """S_val: the mean meta score over a validation set, and each item's score.

    Args:
        outputs: one output per task, same order as ``tasks``.
        tasks: the fixed meta-validation items, non-empty.

    Returns:
        (mean of ``MetaScore.value`` in [0, 1], per-item scores in task order).

    Raises:
        ValueError: lengths differ or there are no tasks.
    """
    if len(outputs) != len(tasks):
        raise ValueError(f"s_val: {len(outputs)} outputs for {len(tasks)} tasks")
    if not tasks:
        raise ValueError("s_val: the validation set is empty")
    scores = [meta_score(o, t) for o, t in zip(outputs, tasks, strict=True)]
    return sum(s.value for s in scores) / len(scores), scores
