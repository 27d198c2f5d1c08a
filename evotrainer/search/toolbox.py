"""DEAP glue: the toolbox the caller builds for the inner loop, and a hall of fame keyed on genome hash.

The toolbox is a subclass of DEAP's ``base.Toolbox``, so DEAP's ``register``/``unregister`` stay the way to plug
another operator in under an alias; what the loop reads besides the aliases (the operator registry, the mutator
model, the phrase bank) are typed attributes set when it is built, so the registry travels with the toolbox
instead of living in a global.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deap import base

from evotrainer.backends.base import LLM
from evotrainer.genome import Policy
from evotrainer.search.adapter_ops import AdapterWorkshop
from evotrainer.search.diversity import is_near_duplicate
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.leakage import LeakGuard
from evotrainer.search.mutation_prompts import MutationStyle
from evotrainer.search.operators import is_valid, judge_rewrite, sel_tournament
from evotrainer.search.operators_registry import DEFAULT_REGISTRY, OperatorRegistry, Resources
from evotrainer.search.phrases import PhraseBank
from evotrainer.search.reflection import Feedback

__all__ = ["GenomeHallOfFame", "InnerToolbox", "build_toolbox"]


class InnerToolbox(base.Toolbox):
    """A DEAP ``Toolbox`` (operators by alias) that also carries what the inner loop reads besides them.

    Args:
        registry: the operator records the loop draws mutations and crossovers from (each drawn record's
            ``alias`` is called on this toolbox).
        mutator: the model answering LLM rewrites and merges in one batched call per generation; None runs
            the model-free operators only.
        phrases: the run's phrase bank over a sentence embedder (the loop banks new children's sentences
            in it and keeps ``inner.min_diversity`` with it), or None.
    """

    def __init__(self, registry: OperatorRegistry = DEFAULT_REGISTRY, mutator: LLM | None = None,
                 phrases: PhraseBank | None = None) -> None:
        super().__init__()
        self.registry = registry
        self.mutator = mutator
        self.phrases = phrases


def build_toolbox(
    cfg: InnerConfig,
    *,
    registry: OperatorRegistry = DEFAULT_REGISTRY,
    mutator: LLM | None = None,
    styles: tuple[MutationStyle, ...] | None = None,
    phrase_bank: Sequence[str] | None = None,
    similarity: Callable[[str, str], float] | None = None,
    phrases: PhraseBank | None = None,
    feedback: Feedback | None = None,
    exemplars: Sequence[str] = (),
    adapters: AdapterWorkshop | None = None,
    training_texts: Sequence[str] | None = None,
    seed_prompts: Sequence[Policy] = (),
) -> InnerToolbox:
    """The inner loop's toolbox: its operators registered by role, carrying ``registry``, ``mutator`` and ``phrases``.

    Every record of ``registry`` whose needs are met is registered under its alias with its ``bind`` keyword
    arguments (:data:`~evotrainer.search.operators_registry.DEFAULT_OPERATORS`: ``mate``, ``mutate``,
    ``plan_rewrite``, ``plan_merge``, ``mutate_decoding``, ``mutate_prefill``, and with their resources
    ``mutate_phrase``, ``mutate_exemplar``, ``plan_reflect``, ``mutate_adapter``); the loop calls a mutation as
    ``alias(policy, rng, gen)`` and a crossover as ``alias(p1, p2, rng, gen)``. Registered here:

    - ``select(population, fitness, k, rng) -> list[Policy]`` (tournament, ``cfg.tournament_size``)
    - ``apply_plan(plan, text) -> Policy | str`` (:func:`~evotrainer.search.operators.judge_rewrite`: the
      child, or why the answer was rejected; a plugged-in one may return None instead of a reason), with a
      :class:`~evotrainer.search.leakage.LeakGuard` over ``training_texts`` whose allowed texts are
      ``seed_prompts``, the task hint, the style instructions, ``phrase_bank``, the reward hints and the domain
      vocabulary (``cfg.texts()``) (each answer's parents and instruction are allowed too)
    - ``is_valid(policy) -> bool`` (:func:`~evotrainer.search.operators.is_valid`, the config's sections and budget)
    - with ``phrases`` only: ``near_duplicate(a, b) -> bool`` (:func:`is_near_duplicate`,
      ``cfg.near_duplicate_cosine``)

    Re-register an alias (``toolbox.register("mutate", my_op)``) to plug in another operator; the
    loop checks the shape of whatever it returns and raises ``OperatorError`` naming the alias.

    Args:
        cfg: a validated config.
        registry: the operator records (default the built-in ones; ``DEFAULT_REGISTRY.added(record)`` adds one).
        mutator: the model for LLM rewrites and merges; None leaves the LLM operators undrawn.
        styles: mutation style library for LLM rewrites (default ``cfg.styles()``).
        phrase_bank: rule sentences structural mutation may add (default ``cfg.rules()``).
        similarity: optional ``(old, new) -> float`` check for LLM children (band from ``cfg``).
        phrases: the run's phrase bank, e.g. ``PhraseBank(MiniLMEmbedder())``, one per run so it grows across
            calls (enables phrase substitution, near-duplicate rejection and the diversity floor).
        feedback: worst-training-task feedback per policy (enables reflective mutation).
        exemplars: few-shot exemplar texts from generated tasks (enables exemplar swaps).
        adapters: the adapter workshop (enables adapter genes: ``mutate_adapter`` and adapter crossover).
        training_texts: the training batch's task inputs (``Task.text``) that LLM answers may not copy; None:
            the inputs of ``feedback.tasks`` when the feedback source carries its batch (as
            :class:`evotrainer.rollout.FeedbackRecorder` does), else none.
        seed_prompts: prompts whose words are never leaks: the loop's initial population
            (:func:`~evotrainer.search.inner_loop.initial_population`).

    Raises:
        ConfigError: ``inner.operator_shares`` names an unknown operator, or a pool's shares sum above 1.
    """
    registry.check_shares(cfg)
    if training_texts is None:
        inputs = (getattr(task, "text", None) for task in getattr(feedback, "tasks", ()))
        training_texts = [t for t in inputs if isinstance(t, str)]
    texts = cfg.texts()
    styles = cfg.styles() if styles is None else tuple(styles)
    phrase_bank = texts.rule_phrases if phrase_bank is None else tuple(phrase_bank)
    sections = tuple(cfg.required_sections)
    res = Resources(styles=tuple(styles), phrase_bank=tuple(phrase_bank), phrases=phrases, feedback=feedback,
                    exemplars=tuple(exemplars), adapters=adapters)
    tb = InnerToolbox(registry, mutator, phrases)
    tb.register("select", sel_tournament, tournsize=cfg.tournament_size)
    for op in registry:  # every operator whose needs are met, in registration order
        if all(res.has(need) for need in op.needs):
            wrapped = {op.alias: getattr(tb, op.alias)} if op.wraps else {}
            tb.register(op.alias, op.function, **wrapped, **op.bind(cfg, res))
    allowed = [t for p in seed_prompts for _, t in p.sections] + [texts.task_hint, *phrase_bank]
    allowed += [s.instruction for s in styles] + list(texts.reflection_hints.values())
    vocabulary = cfg.vocabulary()
    guard = LeakGuard(training_texts, allowed, vocabulary=vocabulary)
    tb.register("apply_plan", judge_rewrite, required_sections=sections, max_words=cfg.max_prompt_words,
                vocabulary=vocabulary,
                similarity=similarity, similarity_band=(cfg.similarity_low, cfg.similarity_high),
                min_on_topic=cfg.min_on_topic, max_growth=cfg.max_section_growth, leak_guard=guard)
    tb.register("is_valid", is_valid, required_sections=sections, max_words=cfg.max_prompt_words)
    if phrases is not None:
        tb.register("near_duplicate", is_near_duplicate, vectors=phrases.vectors,
                    threshold=cfg.near_duplicate_cosine)
    return tb


class GenomeHallOfFame:
    """The best distinct genomes seen so far (like DEAP's ``HallOfFame``, keyed on genome hash).

    A genome enters once (the first policy carrying it); entries are ordered by fitness, higher first,
    ties by order of entry.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: list[tuple[float, int, Policy]] = []
        self._counter = 0

    def update(self, policies: Sequence[Policy], fitness: dict[str, float]) -> None:
        """Offer ``policies`` (those with an entry in ``fitness``, id -> finite float)."""
        held = {p.genome_hash for _, _, p in self._entries}
        for policy in policies:
            if policy.id not in fitness or policy.genome_hash in held:
                continue
            held.add(policy.genome_hash)
            self._entries.append((fitness[policy.id], self._counter, policy))
            self._counter += 1
        self._entries.sort(key=lambda e: (-e[0], e[1]))
        del self._entries[self.maxsize:]

    @property
    def items(self) -> tuple[Policy, ...]:
        """Policies, best first."""
        return tuple(p for _, _, p in self._entries)

    @property
    def fitness(self) -> tuple[float, ...]:
        """Their fitnesses, same order."""
        return tuple(f for f, _, _ in self._entries)

    def __len__(self) -> int:
        return len(self._entries)
