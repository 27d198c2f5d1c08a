"""Decoding genes: generation settings a policy carries, and their bounded mutation.

A policy's ``decoding`` pairs override the run's default :class:`~evotrainer.backends.base.SamplingParams`
field of the same name at rollout time (:func:`sampling_for`); a gene a policy does not carry means "the run
default". A *reading gene* (:data:`~evotrainer.genome.READING_GENES`) is carried the same way but read by the
task family, not the backend: ``window_tokens``, the input tokens per window of a long input read in windows (it
replaces the family's own window option for that policy; the family's docs say more). No default gene is a reading
gene: an experiment lists it in ``inner.decoding_genes`` (the long-input experiment: 512..3072 tokens, step 256).
Why genes: on the real items of the default validation set with SmolLM2-135M, a mild repetition penalty
doubled ROUGE-L by ending loops while a strong one garbled names (DESIGN.md, measured facts), so decoding
moves fitness as much as prompt wording does.

Default bounds (:data:`DEFAULT_DECODING_GENES`, all inclusive):

=========================  ===========  ========  ======  ==========================================
gene                       range        default   step    why
=========================  ===========  ========  ======  ==========================================
``repetition_penalty``     [1.0, 1.3]   1.0       0.05    mild penalties end loops; strong ones garble
``no_repeat_ngram_size``   [2, 8]       4         1       1 would forbid any repeated token
=========================  ===========  ========  ======  ==========================================

The defaults are those of :class:`SamplingParams`. :func:`decoding_genes_for` centres them on a run's
own default decoding and adds ``max_new_tokens`` in [60 %, 100 %] of the run default (step 10 %): never
above it, so no policy costs more generated tokens than the default run. ``max_new_tokens`` is not in
the defaults because the inner loop does not know the run's default (128 in the default experiment, 48
in ``smoke``), and a fixed range could exceed it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from evotrainer.backends.base import SamplingParams
from evotrainer.errors import ConfigError
from evotrainer.genome import READING_GENES, Policy

__all__ = ["DEFAULT_DECODING_GENES", "DecodingGene", "canonical_decoding", "check_decoding_genes",
           "decoding_genes_for", "mut_decoding", "sampling_for"]


@dataclass(frozen=True)
class DecodingGene:
    """Bounds of one decoding gene.

    Attributes:
        name: a :class:`SamplingParams` field (``repetition_penalty``, ``no_repeat_ngram_size``,
            ``max_new_tokens``, ``temperature``, ``top_p``) or a reading gene (``window_tokens``, integer).
        low: smallest value, inclusive (units of the field: tokens for ``max_new_tokens`` and ``window_tokens``).
        high: largest value, inclusive, >= ``low``.
        default: the run default, used as the current value when a policy lacks the gene; in [low, high].
        step: mutation step: integer genes move by ``±step`` (rounded, >= 1); real genes by a normal
            draw with standard deviation ``step``; > 0.
        integer: True for integer fields.
    """

    name: str
    low: float
    high: float
    default: float
    step: float
    integer: bool = False


DEFAULT_DECODING_GENES: tuple[DecodingGene, ...] = (
    DecodingGene("repetition_penalty", 1.0, 1.3, 1.0, 0.05),
    DecodingGene("no_repeat_ngram_size", 2, 8, 4, 1, integer=True),
)
"""Default decoding genes and bounds (SamplingParams defaults as run defaults; no token-budget gene)."""

_SAMPLING_FIELDS = set(SamplingParams.__dataclass_fields__)
_INT_FIELDS = {"max_new_tokens", "seed", "no_repeat_ngram_size"}
_FIELDS = (_SAMPLING_FIELDS - {"seed"}) | set(READING_GENES)


def sampling_for(policy: Policy, default: SamplingParams) -> SamplingParams:
    """``default`` with the policy's decoding genes applied (a gene overrides the field of its name); reading
    genes (:data:`~evotrainer.genome.READING_GENES`) are checked and passed by: the task family reads them.

    Raises:
        ValueError: a gene names neither a :class:`SamplingParams` field nor a reading gene, or is not a finite
            number.
    """
    overrides: dict[str, float | int] = {}
    for name, value in policy.decoding:
        if name not in _SAMPLING_FIELDS and name not in READING_GENES:
            raise ValueError(f"unknown decoding gene {name!r} (expected one of "
                             f"{sorted(_SAMPLING_FIELDS | set(READING_GENES))})")
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"decoding gene {name!r} must be a finite number, got {value!r}")
        if name in _SAMPLING_FIELDS:
            overrides[name] = int(round(value)) if name in _INT_FIELDS else float(value)
    return replace(default, **overrides) if overrides else default


def check_decoding_genes(genes: Sequence[DecodingGene], key: str = "inner.decoding_genes") -> None:
    """Raise ConfigError (naming ``key`` and the gene) unless every gene is well formed.

    Raises:
        ConfigError: unknown name (neither a :class:`SamplingParams` field but ``seed`` nor a reading gene),
            duplicate name, ``low > high``, default outside the bounds, non-finite bound, ``step <= 0``, or a
            reading gene that is not ``integer`` or has ``low < 1``.
    """
    seen: set[str] = set()
    for gene in genes:
        if not isinstance(gene, DecodingGene):
            raise ConfigError(f"{key}: expected DecodingGene records, got {type(gene).__name__}")
        where = f"{key}[{gene.name!r}]"
        if gene.name not in _FIELDS:
            raise ConfigError(f"{where}: expected one of {sorted(_FIELDS)}")
        if gene.name in seen:
            raise ConfigError(f"{where}: duplicate gene")
        seen.add(gene.name)
        values = (gene.low, gene.high, gene.default, gene.step)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            raise ConfigError(f"{where}: bounds, default and step must be finite numbers, got {values}")
        if not gene.low <= gene.default <= gene.high:
            raise ConfigError(f"{where}: expected low <= default <= high, got {gene.low}, {gene.default}, "
                              f"{gene.high}")
        if gene.step <= 0:
            raise ConfigError(f"{where}: expected step > 0, got {gene.step}")
        if gene.name in READING_GENES and not (gene.integer and gene.low >= 1):
            raise ConfigError(f"{where}: a reading gene counts tokens: expected integer: true and low >= 1, got "
                              f"integer: {gene.integer}, low: {gene.low}")


def decoding_genes_for(
    defaults: SamplingParams,
    genes: Sequence[DecodingGene] = DEFAULT_DECODING_GENES,
    *,
    max_new_tokens: bool = True,
) -> tuple[DecodingGene, ...]:
    """``genes`` re-centred on a run's default decoding, plus a token-budget gene.

    Each gene's default becomes the matching field of ``defaults``; bounds widen to include it (a reading gene
    stays as it is). With
    ``max_new_tokens``, a ``max_new_tokens`` gene is added (or replaces one in ``genes``) with range
    [60 %, 100 %] of the run default and step 10 % of it (at least 1): never above the default, so no
    policy costs more generated tokens than the default run.

    Args:
        defaults: the rollout's default decoding (``cfg.decoding``).
        genes: genes to re-centre.
        max_new_tokens: add the token-budget gene.

    Returns:
        New gene records, same order, the token-budget gene last.
    """
    out: list[DecodingGene] = []
    for gene in genes:
        if gene.name == "max_new_tokens":
            continue
        if gene.name in READING_GENES:  # no SamplingParams field to centre on
            out.append(gene)
            continue
        value = float(getattr(defaults, gene.name))
        value = int(round(value)) if gene.integer else value
        out.append(DecodingGene(gene.name, min(gene.low, value), max(gene.high, value), value, gene.step,
                                gene.integer))
    if max_new_tokens:
        top = max(int(defaults.max_new_tokens), 1)
        out.append(DecodingGene("max_new_tokens", max(1, round(0.6 * top)), top, top, max(1, round(0.1 * top)),
                                integer=True))
    return tuple(out)


def canonical_decoding(pairs: Mapping[str, float] | Sequence[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    """Decoding genes sorted by name (so equal settings give equal genome hashes)."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple(sorted((str(k), v) for k, v in items))


def mut_decoding(
    parent: Policy,
    rng: random.Random,
    generation: int,
    *,
    genes: Sequence[DecodingGene] = DEFAULT_DECODING_GENES,
) -> Policy:
    """Perturb one decoding gene by a small bounded step (no model needed).

    The gene is drawn uniformly from ``genes``; its current value is the parent's gene, else the gene's
    default. An integer gene moves by ``±step``; a real gene by ``N(0, step)``, redrawn up to 8 times
    until it moves by at least ``step / 4``. Values are clipped to ``[low, high]``; when clipping
    would leave the value unchanged the step goes the other way. The child's genes are sorted by name.

    Args:
        parent: the policy to mutate (not modified).
        rng: random source.
        generation: generation number stamped on the child.
        genes: the genes and their bounds (see the module table).

    Returns:
        The child, operator ``mut_decoding/<gene name>`` (``mut_decoding/none`` with the parent's genome
        when ``genes`` is empty or a gene has ``low == high``; the loop rejects it as a duplicate).
    """
    genes = [g for g in genes if g.high > g.low]
    if not genes:
        return parent.child(parent.sections, operator="mut_decoding/none", generation=generation)
    gene = rng.choice(genes)
    current = dict(parent.decoding)
    value = float(current.get(gene.name, gene.default))
    value = min(max(value, gene.low), gene.high)
    if gene.integer:
        step = max(1, round(gene.step))
        delta = step if rng.random() < 0.5 else -step
    else:
        delta = 0.0
        for _ in range(8):
            delta = rng.gauss(0.0, gene.step)
            if abs(delta) >= gene.step / 4:
                break
    new = min(max(value + delta, gene.low), gene.high)
    if new == value:
        new = min(max(value - delta, gene.low), gene.high)
    new = int(round(new)) if gene.integer else round(new, 4)
    current[gene.name] = new
    return parent.child(parent.sections, operator=f"mut_decoding/{gene.name}", generation=generation,
                        decoding=canonical_decoding(current))
