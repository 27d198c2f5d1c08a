"""The variation operators as records: the DEAP toolbox and the mutation probabilities are built from them.

One :class:`Operator` per operator says what it is (mutation or crossover), which function does it, under
which toolbox alias the loop calls it, which config key holds its share, which pool that share is taken
from and what it needs (a mutator, the phrase bank over an embedder, feedback, exemplars, adapters).
:func:`~evotrainer.search.toolbox.build_toolbox` registers every record whose needs are met and hands the
registry on with the toolbox; the loop draws mutations from :func:`mutation_probabilities` and crossovers
from :func:`crossover_probabilities` and calls each drawn record's alias. A registry is read-only:
:data:`DEFAULT_REGISTRY` holds the built-in records, and ``DEFAULT_REGISTRY.added(record)`` is a new registry
for an experiment, passed as ``build_toolbox(cfg, registry=...)`` (no process-wide state to undo).

Adding an operator is one function plus one record (docs/adding_an_operator.md). Its share comes from the config
field named by ``share_key`` when it has one, else from ``inner.operator_shares.<name>``, else ``default_share``.

How shares become probabilities (the pools, in order):

- ``llm``: ``inner.llm_mutation_share`` of all mutations (0 without a mutator), split between the pool's
  *rest* operator (LLM style rewrite) and its share operators (reflective: ``reflective_share``);
- ``model_free``: the remaining ``1 - llm`` share, split between the structural edit (the rest) and the
  share operators (phrase, decoding, exemplar, prefill: each its share of this pool);
- ``all``: operators taken off the top of all mutations (adapter: ``adapter_mutation_share``); when their
  shares are > 0 the two pools above are scaled by ``1 - their sum``.

An operator whose toolbox alias is missing (its needs unmet) has share 0; the rest operator of a pool takes
``1 - the other shares`` of it. Zero probabilities are dropped; the result is normalised (or adapted to
the operators' success, ``inner.adaptive_operators``). The arithmetic is done in record order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from evotrainer.errors import ConfigError
from evotrainer.search.adapter_ops import AdapterWorkshop, cx_adapter_pair, mut_adapter
from evotrainer.search.decoding import mut_decoding
from evotrainer.search.diversity import section_cosine
from evotrainer.search.exemplars import mut_exemplar_swap
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.mutation_prompts import MutationStyle
from evotrainer.search.operator_stats import OperatorStats, adapted_probabilities
from evotrainer.search.operators import cx_llm_merge_plan, cx_sections, mut_llm_rewrite_plan, mut_structural
from evotrainer.search.phrases import PhraseBank, mut_phrase_substitution
from evotrainer.search.prefill import mut_prefill
from evotrainer.search.reflection import Feedback, mut_reflective_plan

__all__ = ["DEFAULT_OPERATORS", "DEFAULT_REGISTRY", "NEEDS", "POOLS", "Operator", "OperatorRegistry",
           "Resources", "crossover_probabilities", "mutation_probabilities"]

NEEDS = ("mutator", "phrases", "feedback", "exemplars", "adapters")
"""What an operator may need: a mutator model (checked when the loop draws), the run's phrase bank over a
sentence embedder, worst-task feedback, few-shot exemplars, an adapter workshop (checked when the toolbox
is built)."""

POOLS = ("llm", "model_free", "all")
"""Where a mutation's share is taken from (see the module docstring); in this order."""


@dataclass(frozen=True)
class Resources:
    """What the run offers the operators (the arguments of :func:`~evotrainer.search.toolbox.build_toolbox`).

    Attributes:
        styles: mutation style library of LLM rewrites.
        phrase_bank: rule sentences the structural edit may add.
        phrases: the run's phrase bank over an embedder, or None.
        feedback: worst-training-task feedback per policy, or None.
        exemplars: few-shot exemplar texts from generated tasks (may be empty).
        adapters: the adapter workshop, or None.
    """

    styles: tuple[MutationStyle, ...]
    phrase_bank: tuple[str, ...]
    phrases: PhraseBank | None = None
    feedback: Feedback | None = None
    exemplars: tuple[str, ...] = ()
    adapters: AdapterWorkshop | None = None

    def has(self, need: str) -> bool:
        """Whether ``need`` (one of :data:`NEEDS`) is met at toolbox time ("mutator" is checked later)."""
        return {"mutator": True, "phrases": self.phrases is not None, "feedback": self.feedback is not None,
                "exemplars": bool(self.exemplars), "adapters": self.adapters is not None}[need]


def _none(cfg: InnerConfig, res: Resources) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Operator:
    """One variation operator.

    Attributes:
        name: its kind as children's ``operator`` labels start (``"mut_phrase_substitution"``) and as
            operator statistics and mutation probabilities are keyed.
        kind: ``"mutation"`` (``(policy, rng, generation) -> Policy | MutationPlan | None``) or
            ``"crossover"`` (``(p1, p2, rng, generation) -> (Policy, Policy) | MutationPlan | None``).
        alias: the toolbox alias the loop calls (``"mutate_phrase"``).
        function: the operator function; ``bind`` supplies its keyword arguments.
        share_key: the :class:`~evotrainer.search.inner_config.InnerConfig` field holding its share, or None
            (then ``inner.operator_shares[name]``, else ``default_share``); unused for a pool's rest operator.
        default_share: its share when neither the config field nor ``operator_shares`` gives one, in [0, 1].
        pool: mutations only: ``"llm"``, ``"model_free"`` or ``"all"`` (:data:`POOLS`).
        rest: the pool's remainder operator (one per pool of ``llm`` and ``model_free``, and one among the
            crossovers that make children: ``cx_sections``); it has no share of its own.
        needs: entries of :data:`NEEDS`; the record is registered only when the toolbox-time ones are met.
        output: ``"policy"`` (a child; a pair for crossovers) or ``"plan"`` (a ``MutationPlan`` the loop's
            one batched mutator call answers).
        fallback: the operator whose alias is called when this one returns None (reflective -> style
            rewrite when the slot has no feedback; adapter -> structural edit when there is nothing to
            fine-tune or perturb); None: returning None is an ``OperatorError``.
        bind: ``(config, resources) -> keyword arguments`` of ``function``.
        wraps: register ``function`` around the function already registered under ``alias``, passed as the
            keyword argument named ``alias`` (the adapter crossover wraps ``mate``).
    """

    name: str
    kind: str
    alias: str
    function: Callable[..., Any]
    share_key: str | None = None
    default_share: float = 0.0
    pool: str = "model_free"
    rest: bool = False
    needs: tuple[str, ...] = ()
    output: str = "policy"
    fallback: str | None = None
    bind: Callable[[InnerConfig, Resources], dict[str, Any]] = _none
    wraps: bool = False

    def share(self, cfg: InnerConfig) -> float:
        """The configured share of this operator (see ``share_key``)."""
        if self.share_key is not None:
            return float(getattr(cfg, self.share_key))
        return float(cfg.operator_shares.get(self.name, self.default_share))


def _check(op: Operator, ops: Mapping[str, Operator]) -> None:
    """Raise ConfigError when ``op`` cannot join the records ``ops`` (see :class:`OperatorRegistry`)."""
    where = f"operator {op.name!r}"
    if op.name in ops:
        raise ConfigError(f"{where}: already registered")
    if op.kind not in ("mutation", "crossover") or op.output not in ("policy", "plan"):
        raise ConfigError(f"{where}: kind must be mutation|crossover and output policy|plan, got "
                          f"{op.kind!r}, {op.output!r}")
    if op.pool not in POOLS or not set(op.needs) <= set(NEEDS):
        raise ConfigError(f"{where}: pool must be one of {POOLS} and needs from {NEEDS}, got {op.pool!r}, "
                          f"{op.needs}")
    if not 0.0 <= op.default_share <= 1.0:
        raise ConfigError(f"{where}: default_share must be in [0, 1], got {op.default_share}")
    if op.share_key is not None and op.share_key not in InnerConfig.__dataclass_fields__:
        raise ConfigError(f"{where}: share_key {op.share_key!r} is not an inner.* key")
    if op.rest and op.kind == "crossover" and (op.output != "policy" or op.wraps or any(
            o.rest and o.kind == "crossover" for o in ops.values())):
        raise ConfigError(f"{where}: the crossovers have a rest operator already (or it is a plan or a wrapper)")
    if op.rest and op.kind == "mutation" and (op.pool == "all" or any(
            o.rest and o.kind == "mutation" and o.pool == op.pool for o in ops.values())):
        raise ConfigError(f"{where}: the {op.pool!r} pool has a rest operator already (or takes none)")
    if op.fallback is not None and op.fallback not in ops:
        raise ConfigError(f"{where}: fallback {op.fallback!r} is not registered before it")


class OperatorRegistry:
    """Operators by name, in registration order (the order of the toolbox and of the probabilities); read-only.

    A registry is never changed in place: :meth:`added` and :meth:`removed` return a new one, which the
    caller hands to :func:`~evotrainer.search.toolbox.build_toolbox` (the toolbox carries it into the loop),
    so no run sees another run's experiment.

    Args:
        operators: the records, checked in order.

    Raises:
        ConfigError: a malformed record (unknown kind, pool, need or output, a share out of [0, 1], a
            duplicate name, a pool without exactly one rest operator, an unknown fallback).
    """

    def __init__(self, operators: Sequence[Operator] = ()) -> None:
        ops: dict[str, Operator] = {}
        for op in operators:
            _check(op, ops)
            ops[op.name] = op
        self._ops = MappingProxyType(ops)

    def added(self, *ops: Operator) -> OperatorRegistry:
        """A new registry: these records followed by ``ops`` (a new mutation kind or crossover).

        Raises:
            ConfigError: see the class.
        """
        return OperatorRegistry((*self, *ops))

    def removed(self, *names: str) -> OperatorRegistry:
        """A new registry without the operators ``names`` (KeyError when one is absent)."""
        for name in names:
            self._ops[name]  # noqa: B018 - the KeyError names the missing operator
        return OperatorRegistry(tuple(op for op in self if op.name not in names))

    def __getitem__(self, name: str) -> Operator:
        return self._ops[name]

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[Operator]:
        return iter(tuple(self._ops.values()))

    def mutations(self) -> tuple[Operator, ...]:
        """The mutation records, in order."""
        return tuple(op for op in self._ops.values() if op.kind == "mutation")

    def crossovers(self) -> tuple[Operator, ...]:
        """The crossover records, in order."""
        return tuple(op for op in self._ops.values() if op.kind == "crossover")

    def roles(self) -> dict[str, str]:
        """Mutation kind -> the toolbox alias that performs it."""
        return {op.name: op.alias for op in self.mutations()}

    def check_shares(self, cfg: InnerConfig) -> None:
        """Raise ConfigError unless every ``inner.operator_shares`` name is a registered operator without a
        share key of its own, and each pool's shares sum to at most 1."""
        for name in cfg.operator_shares:
            op = self._ops.get(name)
            if op is None or op.share_key is not None or op.rest or op.wraps:
                free = sorted(o.name for o in self if o.share_key is None and not o.rest and not o.wraps)
                raise ConfigError(f"config key 'inner.operator_shares.{name}': expected the name of a registered "
                                  f"operator without its own share key ({free}), got {name!r}")
        for pool in POOLS:
            ops = [op for op in self.mutations() if op.pool == pool and not op.rest]
            total = sum(op.share(cfg) for op in ops)
            if total > 1.0 + 1e-9:
                keys = " + ".join(op.share_key or f"operator_shares.{op.name}" for op in ops)
                raise ConfigError(f"config key 'inner.{ops[-1].share_key or 'operator_shares'}': expected "
                                  f"{keys} <= 1 (the {pool} pool), got {total:g}")
        crossovers = [op for op in self.crossovers() if op.output == "policy" and not op.rest and not op.wraps]
        if (total := sum(op.share(cfg) for op in crossovers)) > 1.0 + 1e-9:
            raise ConfigError(f"config key 'inner.operator_shares': expected the crossover shares "
                              f"{[op.name for op in crossovers]} to sum to <= 1, got {total:g}")


def mutation_probabilities(
    cfg: InnerConfig,
    available: Callable[[Operator], bool],
    has_mutator: bool,
    stats: OperatorStats,
    registry: OperatorRegistry | None = None,
) -> dict[str, float]:
    """Mutation kind -> probability, summing to 1; kinds that cannot run are absent.

    Args:
        cfg: the inner config (shares, ``adaptive_operators``, ``adaptive_mix``).
        available: whether an operator can run (the loop: its toolbox alias is registered); a pool's rest
            operator is always counted.
        has_mutator: False zeroes the operators that need a mutator (the whole ``llm`` pool).
        stats: the operators' success so far (used when ``cfg.adaptive_operators``).
        registry: the records (default :data:`DEFAULT_REGISTRY`; the loop passes its toolbox's).

    Returns:
        The probabilities in record order (pools ``llm``, ``model_free`` with each pool's rest operator
        first, then ``all``); only the ``model_free`` rest operator (1.0) when every share is 0.
    """
    ops = (registry or DEFAULT_REGISTRY).mutations()

    def share(op: Operator) -> float:
        runnable = available(op) and (has_mutator or "mutator" not in op.needs)
        return op.share(cfg) if runnable else 0.0

    llm = cfg.llm_mutation_share if has_mutator else 0.0
    probs: dict[str, float] = {}
    fallback = ""
    for pool, total in (("llm", llm), ("model_free", 1.0 - llm)):
        members = [op for op in ops if op.pool == pool]
        shares = {op.name: share(op) for op in members if not op.rest}
        left = 1.0
        for value in shares.values():
            left -= value
        for op in members:
            if op.rest:
                probs[op.name] = total * left
                fallback = op.name if pool == "model_free" else fallback
        probs.update({name: total * value for name, value in shares.items()})
    top = {op.name: share(op) for op in ops if op.pool == "all"}
    if any(v > 0 for v in top.values()):
        scale = 1.0
        for value in top.values():
            scale -= value
        probs = {k: v * scale for k, v in probs.items()} | top
    probs = {k: v for k, v in probs.items() if v > 0} or {fallback: 1.0}
    if cfg.adaptive_operators:
        return adapted_probabilities(probs, stats, mix=cfg.adaptive_mix)
    total = sum(probs.values())
    return {k: v / total for k, v in probs.items()}


def crossover_probabilities(
    cfg: InnerConfig, available: Callable[[Operator], bool], registry: OperatorRegistry | None = None
) -> dict[str, float]:
    """Crossover kind -> probability of crossing a pair with it (sums to 1), for the crossovers that make
    children (``output="policy"``; a wrapper such as the adapter crossover is part of the alias it wraps).

    The rest crossover (``cx_sections``) takes ``1 - the others' shares``; each other one its share when
    ``available`` (the loop: its alias is registered and its needs are met), else 0; zeros are dropped. With
    the built-in records this is ``{"cx_sections": 1.0}``, so the loop makes no random draw for it; empty when
    no crossover can make children (the loop then crosses nothing); normalised to sum 1 otherwise. The plan
    crossovers (``cx_llm_merge``) are not drawn here: the loop tries each on a crossed pair with its share.
    """
    ops = [op for op in (registry or DEFAULT_REGISTRY).crossovers() if op.output == "policy" and not op.wraps]
    shares = {op.name: op.share(cfg) if available(op) else 0.0 for op in ops if not op.rest}
    left = 1.0
    for value in shares.values():
        left -= value
    probs = {op.name: left if op.rest else shares[op.name] for op in ops}
    total = sum(v for v in probs.values() if v > 0)
    return {k: v / total for k, v in probs.items() if v > 0}


def _mutator_params(cfg: InnerConfig) -> dict[str, Any]:
    return {"params": cfg.mutator_params, "task_hint": cfg.texts().task_hint}


def _reflective(cfg: InnerConfig, res: Resources) -> dict[str, Any]:
    texts = cfg.texts()
    return {**_mutator_params(cfg), "feedback": res.feedback, "hints": dict(texts.reflection_hints),
            "output_name": texts.output_name}


def _mate(cfg: InnerConfig, res: Resources) -> dict[str, Any]:
    if res.phrases is None:
        return {}
    return {"section_similarity": section_cosine(res.phrases.vectors), "min_section_similarity": cfg.section_match_cosine}


DEFAULT_OPERATORS: tuple[Operator, ...] = (
    Operator("mut_llm_rewrite", "mutation", "plan_rewrite", mut_llm_rewrite_plan, pool="llm", rest=True,
             needs=("mutator",), output="plan",
             bind=lambda c, r: {**_mutator_params(c), "styles": r.styles}),
    Operator("mut_reflective", "mutation", "plan_reflect", mut_reflective_plan, share_key="reflective_share",
             pool="llm", needs=("mutator", "feedback"), output="plan", fallback="mut_llm_rewrite",
             bind=_reflective),
    Operator("mut_structural", "mutation", "mutate", mut_structural, rest=True,
             bind=lambda c, r: {"phrase_bank": r.phrase_bank, "max_words": c.max_prompt_words}),
    Operator("mut_phrase_substitution", "mutation", "mutate_phrase", mut_phrase_substitution,
             share_key="phrase_mutation_share", needs=("phrases",),
             bind=lambda c, r: {"bank": r.phrases, "max_words": c.max_prompt_words, "band": tuple(c.phrase_band)}),
    Operator("mut_decoding", "mutation", "mutate_decoding", mut_decoding, share_key="decoding_mutation_share",
             bind=lambda c, r: {"genes": c.genes}),
    Operator("mut_exemplar", "mutation", "mutate_exemplar", mut_exemplar_swap, share_key="exemplar_mutation_share",
             needs=("exemplars",), bind=lambda c, r: {"exemplars": r.exemplars, "max_words": c.max_prompt_words}),
    Operator("mut_prefill", "mutation", "mutate_prefill", mut_prefill, share_key="prefill_mutation_share",
             bind=lambda c, r: {"fallbacks": c.texts().prefills}),
    Operator("mut_adapter", "mutation", "mutate_adapter", mut_adapter, share_key="adapter_mutation_share",
             pool="all", needs=("adapters",), fallback="mut_structural",
             bind=lambda c, r: {"workshop": r.adapters, "noise_share": c.adapter_noise_share}),
    Operator("cx_sections", "crossover", "mate", cx_sections, rest=True, bind=_mate),
    Operator("cx_llm_merge", "crossover", "plan_merge", cx_llm_merge_plan, share_key="llm_merge_share",
             needs=("mutator",), output="plan", bind=lambda c, r: _mutator_params(c)),
    Operator("cx_adapter", "crossover", "mate", cx_adapter_pair, needs=("adapters",), wraps=True,
             bind=lambda c, r: {"workshop": r.adapters}),
)
"""The built-in operators (see each function for what it does)."""

DEFAULT_REGISTRY = OperatorRegistry(DEFAULT_OPERATORS)
"""The built-in operators as a (read-only) registry: :func:`~evotrainer.search.toolbox.build_toolbox`'s default."""

