"""The fixed meta-validation metric (S_val) for meeting minutes.

``meta_score`` = mean of ROUGE-Lsum F1 against the reference minutes and action-item F1 (the reward's
matcher, :func:`evotrainer.tasks.meeting_minutes.matching.action_f1`). Items without ground-truth
action items (e.g. QMSum) score ROUGE-Lsum alone; a ground-truth item without an owner (a free-text
item whose sentence names no one) is matched on its task text alone. A degenerate output (see
:mod:`~evotrainer.tasks.meeting_minutes.guard`) scores 0.

ROUGE (Lin 2004, "ROUGE: A Package for Automatic Evaluation of Summaries") is computed with Google's
``rouge-score`` package, with two project choices:

- **Tokenizer**: :class:`~evotrainer.tasks.meeting_minutes.text_units.UnicodeTokenizer` (passed as
  ``RougeScorer(tokenizer=...)``) instead of rouge-score's default, which keeps only ``a-z0-9`` and so
  scores any Chinese, Hindi or Thai text 0 (huggingface/evaluate issues #108, #256). Porter stemming
  of ASCII words as ``use_stemmer=True`` does; on ASCII text the tokens are unchanged.
- **ROUGE-Lsum with sentence splitting**: the summary-level LCS of Lin 2004 section 3.2 (the union
  LCS of each reference sentence against all candidate sentences), which is what ROUGE-1.5.5 reports
  as ROUGE-L on sentence-split input. rouge-score's ``rougeLsum`` takes sentences from ``"\\n"``
  only, so both texts first go through
  :func:`~evotrainer.tasks.meeting_minutes.text_units.sentence_lines` (one sentence or bullet per
  line). Documented behaviour, tested: the same sentences in another order, whether on separate lines
  or in one paragraph, score 1.0 against a reference paragraph, while plain ROUGE-L (one LCS over the
  whole text) penalises the reordering. Minutes list topics, decisions and items in no set order, so
  the order of whole sentences or bullets should not matter, while word order inside each still does.

``parts`` also reports plain ROUGE-L (``rouge_l``, one LCS over all tokens) for comparison with
earlier runs; it does not enter ``value``.

Action-item matching (owner aliases, paraphrases) is described in
:mod:`~evotrainer.tasks.meeting_minutes.matching`. Owner aliases come from ``aliases=`` or else from
``task.meta["owner_aliases"]`` (ground-truth owner -> list of other names); an embedder switches task
matching from word overlap to embedding cosine.

No harness parameter touches this metric. Bump :data:`SCORER_VERSION` whenever a change here, in
the matcher, tokenizer, parser or guard changes scores: it is part of the fitness-cache key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from rouge_score import rouge_scorer

from evotrainer.backends.base import Embedder
from evotrainer.errors import DataError
from evotrainer.tasks.base import MeetingTask, MetaScore
from evotrainer.tasks.meeting_minutes.guard import degenerate_reason
from evotrainer.tasks.meeting_minutes.matching import OwnerAliases, action_f1
from evotrainer.tasks.meeting_minutes.minutes_format import parse_minutes
from evotrainer.tasks.meeting_minutes.text_units import UnicodeTokenizer, sentence_lines

__all__ = ["SCORER_VERSION", "meta_score", "rouge_l", "rouge_lsum", "s_val"]

SCORER_VERSION = "mm-4"
"""mm-4: the guard's speaker-continuation check; ground-truth items without an owner match on task text.

mm-3: Unicode tokenizer, ROUGE-Lsum on sentence-split text, owner aliases, Hungarian matching."""


@lru_cache(maxsize=2)
def _scorer(rouge_type: str) -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer([rouge_type], tokenizer=UnicodeTokenizer(use_stemmer=True))


def rouge_l(output: str, reference: str) -> float:
    """Plain ROUGE-L F1 (one LCS over all tokens) of ``output`` against ``reference``.

    Returns:
        F1 in [0, 1], higher is better; 0.0 when either text has no tokens. Never raises.
    """
    return float(_scorer("rougeL").score(reference, output)["rougeL"].fmeasure)


def rouge_lsum(output: str, reference: str) -> float:
    """ROUGE-Lsum F1 of ``output`` against ``reference``, both split into sentences first.

    Returns:
        F1 in [0, 1], higher is better; 0.0 when either text has no tokens. Never raises.
    """
    ref, out = sentence_lines(reference), sentence_lines(output)
    return float(_scorer("rougeLsum").score(ref, out)["rougeLsum"].fmeasure)


def _task_aliases(task: MeetingTask) -> OwnerAliases | None:
    raw = task.meta.get("owner_aliases") if isinstance(task.meta, Mapping) else None
    if raw is None:
        return None
    ok = isinstance(raw, Mapping) and all(
        isinstance(k, str) and not isinstance(v, str | bytes) and isinstance(v, Sequence)
        and all(isinstance(x, str) for x in v)
        for k, v in raw.items()
    )
    if not ok:
        raise DataError(
            f"task {task.task_id!r}: meta['owner_aliases'] must map an owner name to a list of names, "
            f"got {type(raw).__name__}"
        )
    return raw


def meta_score(
    output: str,
    task: MeetingTask,
    *,
    embedder: Embedder | None = None,
    aliases: OwnerAliases | None = None,
) -> MetaScore:
    """Meta-validation score of ``output`` on ``task``.

    Args:
        output: model minutes (untrusted text).
        task: a validation item with ``reference_minutes`` (and possibly action items).
        embedder: when given, action-item tasks match by embedding cosine (paraphrases count); None
            keeps the lexical matcher.
        aliases: ground-truth owner -> other names (e.g. ``{"Maria Lopez": ["PM"]}``); None reads
            ``task.meta["owner_aliases"]`` when present.

    Returns:
        ``value`` in [0, 1], higher is better: mean of ``rouge_lsum`` and (when the item has action
        items) ``action_f1``, or 0.0 when the output is degenerate. ``parts``: ``rouge_lsum``,
        ``rouge_l`` (plain ROUGE-L, reported only), ``action_f1`` only when the item has action
        items, ``degenerate`` (1.0 when the guard fired, else 0.0, so its mean over items is the
        degenerate share). Never raises on any output text.

    Raises:
        DataError: ``task.meta["owner_aliases"]`` is not a mapping of names to lists of names.
    """
    lsum = rouge_lsum(output, task.reference_minutes)
    used = [lsum]
    parts = {"rouge_lsum": lsum, "rouge_l": rouge_l(output, task.reference_minutes)}
    if task.action_items:
        owner_aliases = aliases if aliases is not None else _task_aliases(task)
        f1 = action_f1(
            parse_minutes(output).action_items, task.action_items, aliases=owner_aliases, embedder=embedder
        )
        parts["action_f1"] = f1
        used.append(f1)
    value = sum(used) / len(used)
    degenerate = degenerate_reason(output, task.transcript) is not None
    parts["degenerate"] = 1.0 if degenerate else 0.0
    if degenerate:
        value = 0.0
    return MetaScore(value=value, parts=parts)


def s_val(
    outputs: Sequence[str], tasks: Sequence[MeetingTask], *, embedder: Embedder | None = None
) -> tuple[float, list[MetaScore]]:
    """S_val: the mean meta score over a validation set, and each item's score.

    Args:
        outputs: one output per task, same order as ``tasks``.
        tasks: the fixed meta-validation items, non-empty.
        embedder: passed to :func:`meta_score` (None: lexical action-item matching).

    Returns:
        (mean of ``MetaScore.value`` in [0, 1], per-item scores in task order).

    Raises:
        ValueError: lengths differ or there are no tasks.
    """
    if len(outputs) != len(tasks):
        raise ValueError(f"s_val: {len(outputs)} outputs for {len(tasks)} tasks")
    if not tasks:
        raise ValueError("s_val: the validation set is empty")
    scores = [meta_score(o, t, embedder=embedder) for o, t in zip(outputs, tasks, strict=True)]
    return sum(s.value for s in scores) / len(scores), scores
