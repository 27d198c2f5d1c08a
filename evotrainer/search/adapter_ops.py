"""Adapter genes: LoRA mutation (Lamarckian fine-tune or noise) and adapter crossover, as DEAP operators.

A policy may carry a PEFT LoRA adapter (:attr:`Policy.adapter`, a folder path). The operators here decide
*what* to do with it; the adapter mechanics (training on the policy model, noise, the SVD merge) come in
through an :class:`AdapterWorkshop` of plain callables that the objective builds from
:mod:`evotrainer.adapters` on the policy model. So this module, like all of ``search/``, never imports
torch, a backend or a trainer (problem vs algorithm).

Operators (names as stamped on the child, kind before the slash):

- ``mut_adapter/finetune``: a short supervised fine-tune on the parent's *own passing outputs* on the
  current training batch (Lamarckian: what the policy learnt is written back into its genome), continuing
  from the parent's adapter when it has one, else from a fresh LoRA.
- ``mut_adapter/noise``: relative Gaussian noise on the parent's LoRA factors (a small perturbation).
- ``cx_adapter``: section crossover whose children carry the merge of both parents' adapters (weighted sum
  of the low-rank updates ΔW = B·A, re-factorised by truncated SVD to the configured rank).

Adapter folders made during a run are ``<workshop.root>/<child id>``: the path is built from our own ids,
never from model output. A child's id hashes its genome, parents, operator, generation and the recipe of its
adapter (operator, parent adapter folders, drawn seed), so two adapter children of one parent never share
an id or a folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from evotrainer.errors import ConfigError, EvoTrainerError
from evotrainer.genome import Policy

__all__ = ["AdapterWorkshop", "cx_adapter_pair", "mut_adapter"]

logger = logging.getLogger(__name__)

Finetune = Callable[[str | None, Sequence[Any], Path, np.random.Generator], str]
Perturb = Callable[[str, Path, np.random.Generator], str]
Merge = Callable[[str, str, Path], str]


@dataclass(frozen=True)
class AdapterWorkshop:
    """What the adapter operators need from the problem side (built by the objective, injected).

    Attributes:
        root: folder under which every new adapter goes, as ``root / <child policy id>``.
        samples: ``policy -> examples``: the policy's own passing outputs on the current *training* batch
            as SFT examples (``evotrainer.adapters.SFTExample``); empty when it has none (e.g. a fresh
            crossover child that was never evaluated).
        finetune: ``(parent adapter folder or None, examples, out_dir, rng) -> folder``: a short LoRA SFT
            (``evotrainer.adapters.train_lora``), continuing from the parent adapter when given.
        perturb: ``(parent adapter folder, out_dir, rng) -> folder``: relative noise on the factors
            (``evotrainer.adapters.mut_adapter_noise``).
        merge: ``(a, b, out_dir) -> folder``: the crossover of two adapters at weight 0.5 and the configured
            rank (``evotrainer.adapters.cx_adapters``).

    The callables may raise ``DataError`` or ``ModelError`` for one bad case (no encodable example, an
    untrained adapter, adapters of other base models); the operators then fall back, they never stop the
    loop. A ``ConfigError`` is systemic and propagates.
    """

    root: Path
    samples: Callable[[Policy], Sequence[Any]]
    finetune: Finetune
    perturb: Perturb
    merge: Merge


def mut_adapter(
    parent: Policy, rng: random.Random, generation: int, *, workshop: AdapterWorkshop, noise_share: float = 0.3
) -> Policy | None:
    """Mutate the adapter gene of ``parent``: Lamarckian fine-tune or noise (sections stay as they are).

    Choice: with passing samples, a parent that carries an adapter gets noise with probability
    ``noise_share`` and a fine-tune otherwise (a parent without an adapter is always fine-tuned, from a
    fresh LoRA); without passing samples (or when the fine-tune fails for this case) an adapter-carrying
    parent gets noise and a parent without one gets None (the loop then makes a structural mutation).

    Args:
        parent: the policy (not modified; its adapter folder is only read).
        rng: the only random source (the choice and the numpy seed of the training or noise).
        generation: generation number stamped on the child.
        workshop: the adapter mechanics and the output root.
        noise_share: probability of noise instead of a fine-tune for adapter-carrying parents, in [0, 1].

    Returns:
        A child with operator ``mut_adapter/finetune`` or ``mut_adapter/noise``, ``parent`` as its only
        parent, the parent's sections and decoding genes, a new id and a new adapter folder
        ``workshop.root / <child id>``; or None when nothing could be done.

    Raises:
        ConfigError: ``noise_share`` outside [0, 1], or a systemic failure of the workshop.
    """
    if not 0.0 <= noise_share <= 1.0:
        raise ConfigError(f"inner.adapter_noise_share: expected a probability in [0, 1], got {noise_share!r}")
    examples = list(workshop.samples(parent))
    noise_first = parent.adapter is not None and (not examples or rng.random() < noise_share)
    seed = rng.getrandbits(63)
    if not noise_first and examples:
        child = _build(parent, "mut_adapter/finetune", generation, (), workshop,
                       {"op": "finetune", "from": parent.adapter, "seed": seed, "examples": len(examples)},
                       lambda out: workshop.finetune(parent.adapter, examples, out, np.random.default_rng(seed)))
        if child is not None or parent.adapter is None:
            return child
    if parent.adapter is None:
        return None
    return _build(parent, "mut_adapter/noise", generation, (), workshop,
                  {"op": "noise", "from": parent.adapter, "seed": seed},
                  lambda out: workshop.perturb(parent.adapter, out, np.random.default_rng(seed)))


def cx_adapter_pair(
    p1: Policy, p2: Policy, rng: random.Random, generation: int, *,
    mate: Callable[[Policy, Policy, random.Random, int], tuple[Policy, Policy]], workshop: AdapterWorkshop,
) -> tuple[Policy, Policy]:
    """Section crossover by ``mate``; when both parents carry different adapters, both children get the merge.

    Child 1 gets ``merge(p1.adapter, p2.adapter)`` and child 2 ``merge(p2.adapter, p1.adapter)`` (the same
    update at weight 0.5; the first parent's LoRA config, e.g. alpha, is kept) and the operator
    ``cx_adapter``. When only one parent carries an adapter, or both carry the same folder, the children
    are ``mate``'s unchanged (each keeps its first parent's adapter). A merge that fails for this pair
    (adapters of different base models) leaves that child as ``mate`` made it (logged).

    Args:
        p1: first parent. p2: second parent.
        rng: random source (passed to ``mate``; the merge itself is deterministic).
        generation: generation number stamped on the children.
        mate: the section crossover (e.g. :func:`~evotrainer.search.operators.cx_sections`).
        workshop: the adapter mechanics and the output root.

    Returns:
        ``(child1, child2)``.
    """
    c1, c2 = mate(p1, p2, rng, generation)
    if p1.adapter is None or p2.adapter is None or p1.adapter == p2.adapter:
        return c1, c2
    out: list[Policy] = []
    for child, (a, b) in ((c1, (p1.adapter, p2.adapter)), (c2, (p2.adapter, p1.adapter))):
        merged = _build(child, "cx_adapter", generation, (), workshop, {"op": "merge", "a": a, "b": b},
                        lambda folder, a=a, b=b: workshop.merge(a, b, folder), lineage=child)
        out.append(merged if merged is not None else child)
    return out[0], out[1]


def _build(
    parent: Policy, operator: str, generation: int, co_parents: Sequence[Policy], workshop: AdapterWorkshop,
    recipe: dict[str, Any], make: Callable[[Path], str], *, lineage: Policy | None = None,
) -> Policy | None:
    """The child of ``parent`` (or, with ``lineage``, that already-made child restamped) with a new adapter.

    The id covers the recipe of the adapter, so it differs from the draft's id (which saw the parent's
    adapter) and from any sibling's; the adapter is written to ``workshop.root / <id>``. Returns None when
    ``make`` fails for this case (DataError, ModelError: logged).
    """
    draft = (replace(lineage, operator=operator) if lineage is not None
             else parent.child(parent.sections, operator=operator, generation=generation, parents=co_parents))
    blob = json.dumps([draft.genome_hash, list(draft.parent_ids), operator, generation, recipe],
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    pid = "p" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:11]
    folder = Path(workshop.root) / pid
    try:
        made = make(folder)
    except ConfigError:
        raise
    except EvoTrainerError as exc:  # one bad case (no encodable sample, untrained parent): fall back
        logger.warning("%s of %s failed, falling back: %s", operator, parent.id, exc)
        return None
    return replace(draft, id=pid, adapter=str(made))
