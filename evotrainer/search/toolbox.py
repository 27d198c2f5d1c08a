"""DEAP glue: the inner-loop config, the operator Toolbox, and a hall of fame keyed on genome hash."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from deap import base

from evotrainer.backends.base import SamplingParams
from evotrainer.errors import ConfigError
from evotrainer.search.adapter_ops import AdapterWorkshop, cx_adapter_pair, mut_adapter
from evotrainer.search.decoding import (
    DEFAULT_DECODING_GENES,
    DecodingGene,
    check_decoding_genes,
    mut_decoding,
)
from evotrainer.search.diversity import is_near_duplicate, section_cosine
from evotrainer.search.exemplars import mut_exemplar_swap
from evotrainer.search.genome import REQUIRED_SECTIONS, Policy
from evotrainer.search.leakage import LeakGuard
from evotrainer.search.mutation_prompts import (
    DEFAULT_RULE_PHRASES,
    DOMAIN_VOCABULARY,
    MUTATION_STYLES,
    MutationStyle,
)
from evotrainer.search.operators import (
    cx_llm_merge_plan,
    cx_sections,
    is_valid,
    judge_rewrite,
    mut_llm_rewrite_plan,
    mut_structural,
    sel_tournament,
)
from evotrainer.search.phrases import PhraseBank, mut_phrase_substitution
from evotrainer.search.prefill import DEFAULT_PREFILLS, mut_prefill
from evotrainer.search.reflection import DEFAULT_COMPONENT_HINTS, Feedback, mut_reflective_plan

__all__ = ["GenomeHallOfFame", "InnerLoopConfig", "build_toolbox"]


@dataclass(frozen=True)
class InnerLoopConfig:
    """Settings of the inner (policy) generation loop. Keys are reported as ``inner.<field>``.

    Attributes:
        population_size: individuals per generation (elites included), >= 1.
        elites: best distinct genomes copied unchanged into the next generation, 0..population_size.
        tournament_size: aspirants per tournament, 1..population_size (DEAP's ``tournsize``).
        cx_prob: probability that a consecutive pair of selected parents is crossed, in [0, 1].
        mut_prob: probability that each offspring is mutated, in [0, 1].
        llm_mutation_share: share of mutations done by the mutator model (rewrite) instead of the
            structural edit, in [0, 1]; without a mutator every mutation is structural.
        llm_merge_share: share of crossovers whose first child is an LLM merge of one section
            (the section-wise child is its fallback), in [0, 1]; needs a mutator.
        max_prompt_words: word budget of a whole policy prompt (all sections), >= 1.
        hall_of_fame_size: best distinct genomes kept across generations, >= 1.
        mutator_temperature: mutator sampling temperature, >= 0 (0 = greedy: identical requests give
            identical rewrites).
        mutator_top_p: mutator nucleus mass, in (0, 1].
        mutator_max_new_tokens: mutator token budget per answer (tokens), >= 1.
        similarity_low: lowest accepted similarity of a rewrite to its parent section (only used
            when a similarity function is given to :func:`build_toolbox`).
        similarity_high: highest accepted similarity (rejects near-copies).
        min_on_topic: lowest share of a rewrite's content words that must occur in the parent
            section or the domain vocabulary, in [0, 1]; 0 disables. Against off-topic rewrites of a
            small mutator: of 16 recorded SmolLM2-135M answers (tests/search/data), 14 survive
            cleaning but only 2 are about meeting minutes; these filters keep those 2.
        max_section_growth: a rewritten section may have at most ``max(this * old words, 30)`` words.
        required_sections: section names every genome must carry.
        task_hint: what the policy does, completing "an AI that ..." in mutator chats.
        phrase_mutation_share: share of the model-free mutations done by embedding-guided phrase
            substitution, in [0, 1]; needs an embedder (without one these become structural edits).
        decoding_mutation_share: share of the model-free mutations that perturb one decoding gene, in
            [0, 1]; ``phrase_mutation_share + decoding_mutation_share <= 1``, the rest are structural edits.
        phrase_band_low: lowest accepted cosine between a replaced sentence and its substitute, in
            [-1, 1] (below: a different meaning).
        phrase_band_high: highest accepted cosine, in [phrase_band_low, 1] (above: a no-op rewording).
        near_duplicate_cosine: a child whose every differing sentence has at least this cosine to the
            aligned sentence of a population member or an earlier child is rejected as a near-duplicate
            (exact duplicates are always rejected); needs an embedder; > 1 disables.
        min_diversity: lowest mean pairwise cosine distance of the population (policy vector = mean of
            its sentence embeddings), in [0, 2]; below it redundant members are swapped for distinct
            scored policies (never the elites); needs an embedder; 0 disables. Measured with
            all-MiniLM-L6-v2: the 14 meeting-minutes seed policies have 0.285; 0.05 only stops a
            collapse onto near-copies of one genome.
        adaptive_operators: adapt the mutation operators' probabilities to how often their children beat
            their parents (probability matching); off by default.
        adaptive_mix: weight of the configured probabilities when adapting, in [0, 1].
        reflective_share: share of the LLM mutations that are reflective (the mutator sees the parent's
            worst training task and its low reward components; GEPA) instead of style rewrites, in
            [0, 1]; needs a ``feedback`` source, otherwise every LLM mutation is a style rewrite. Same
            number of mutator calls either way (longer chats).
        exemplar_mutation_share: share of the model-free mutations that add, swap or drop a few-shot
            exemplar built from the generated task batch (:func:`~evotrainer.search.exemplars.mut_exemplar_swap`),
            in [0, 1]; needs exemplars (otherwise these become structural edits).
        section_match_cosine: in crossover, two sections with different names correspond when the cosine
            of their mean sentence embeddings is at least this (names match first); needs an embedder.
        prefill_mutation_share: share of the model-free mutations that add, swap or drop the answer
            prefill (:func:`~evotrainer.search.prefill.mut_prefill`), in [0, 1].
        prefill_fallbacks: prefills offered to prompts that name no heading.
        lead_offspring: offspring slots per generation given to mutants of the *lead* policy passed to
            :func:`~evotrainer.search.inner_loop.run_inner_loop` (the best policy known on
            meta-validation), >= 0; 0 or no lead = plain tournament parents. Each such slot is mutated
            (never crossed) by one of the operator kinds tried least often on the lead so far (across
            calls when the caller passes ``lead_tried``), so every kind of move is tried on the lead
            before one repeats. Local search around the
            best-validated candidate follows GEPA (Agrawal et al. 2025, "GEPA: Reflective Prompt
            Evolution Can Outperform Reinforcement Learning", which mutates candidates chosen by their
            validation scores); the lead's children are then compared with it on the same screening
            items (a paired comparison).
        style_evolution_every: every this many harness candidates the least successful mutation style is
            replaced by a mutator rewrite of the most successful one (PromptBreeder hyper-mutation,
            :mod:`evotrainer.search.style_library`); 0 disables; needs a mutator.
        style_min_trials: rewrites a style needs before its success rate counts for that replacement.
        decoding_genes: decoding genes and bounds :func:`~evotrainer.search.decoding.mut_decoding` may
            change (see :mod:`evotrainer.search.decoding` for the defaults and why). The defaults hold
            no token-budget gene; ``decoding_genes_for(run_default_sampling)`` re-centres them on the
            run's decoding and adds ``max_new_tokens`` capped at the run default.
        adapter_mutation_share: share of *all* mutations that mutate the adapter gene (Lamarckian fine-tune
            or noise, :func:`~evotrainer.search.adapter_ops.mut_adapter`), in [0, 1], taken before the LLM
            and model-free shares (which split the rest as described above); needs an adapter workshop
            (without one it counts as 0). 0 keeps the search prompt-only.
        adapter_noise_share: share of the adapter mutations of adapter-carrying parents done by noise
            instead of a fine-tune, in [0, 1].
    """

    population_size: int = 8
    elites: int = 2
    tournament_size: int = 3
    cx_prob: float = 0.5
    mut_prob: float = 0.8
    llm_mutation_share: float = 0.5
    llm_merge_share: float = 0.25
    max_prompt_words: int = 160
    hall_of_fame_size: int = 5
    mutator_temperature: float = 0.8
    mutator_top_p: float = 0.95
    mutator_max_new_tokens: int = 96
    similarity_low: float = 0.0
    similarity_high: float = 1.0
    min_on_topic: float = 0.5
    max_section_growth: float = 3.0
    required_sections: tuple[str, ...] = REQUIRED_SECTIONS
    task_hint: str = "writes meeting minutes"
    phrase_mutation_share: float = 0.4
    decoding_mutation_share: float = 0.15
    phrase_band_low: float = 0.55
    phrase_band_high: float = 0.92
    near_duplicate_cosine: float = 0.95
    min_diversity: float = 0.05
    adaptive_operators: bool = False
    adaptive_mix: float = 0.3
    reflective_share: float = 0.5
    decoding_genes: tuple[DecodingGene, ...] = DEFAULT_DECODING_GENES
    exemplar_mutation_share: float = 0.1
    prefill_mutation_share: float = 0.15
    prefill_fallbacks: tuple[str, ...] = DEFAULT_PREFILLS
    lead_offspring: int = 0
    section_match_cosine: float = 0.5
    style_evolution_every: int = 1
    style_min_trials: int = 2
    adapter_mutation_share: float = 0.0
    adapter_noise_share: float = 0.3

    def validate(self, generations: int | None = None) -> None:
        """Check every field (and the run's ``generations`` when given).

        Raises:
            ConfigError: naming the first bad key (``inner.<field>`` or ``inner.generations``) and the
                expected range.
        """
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int) and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"inner.{f.name}: expected an integer, got {value!r}")
            if f.type in ("float", float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"inner.{f.name}: expected a number, got {value!r}")
            if f.type in ("bool", bool) and not isinstance(value, bool):
                raise ConfigError(f"inner.{f.name}: expected true or false, got {value!r}")

        def need(ok: bool, key: str, expected: str) -> None:
            if not ok:
                raise ConfigError(f"inner.{key}: expected {expected}, got {getattr(self, key, generations)!r}")

        need(self.population_size >= 1, "population_size", "an integer >= 1")
        need(0 <= self.elites <= self.population_size, "elites",
             f"0 <= elites <= population_size ({self.population_size})")
        need(1 <= self.tournament_size <= self.population_size, "tournament_size",
             f"1 <= tournament_size <= population_size ({self.population_size})")
        need(self.lead_offspring >= 0, "lead_offspring", "an integer >= 0")
        for key in ("cx_prob", "mut_prob", "llm_mutation_share", "llm_merge_share", "phrase_mutation_share",
                    "decoding_mutation_share", "adaptive_mix", "reflective_share", "exemplar_mutation_share",
                    "prefill_mutation_share",
                    "adapter_mutation_share", "adapter_noise_share"):
            need(0.0 <= getattr(self, key) <= 1.0, key, "a probability in [0, 1]")
        need(self.phrase_mutation_share + self.decoding_mutation_share <= 1.0, "decoding_mutation_share",
             f"phrase_mutation_share + decoding_mutation_share <= 1 (phrase: {self.phrase_mutation_share})")
        need(self.phrase_mutation_share + self.decoding_mutation_share + self.exemplar_mutation_share <= 1.0,
             "exemplar_mutation_share", "phrase_mutation_share + decoding_mutation_share + exemplar_mutation_share"
             f" <= 1 (phrase: {self.phrase_mutation_share}, decoding: {self.decoding_mutation_share})")
        need(self.phrase_mutation_share + self.decoding_mutation_share + self.exemplar_mutation_share
             + self.prefill_mutation_share <= 1.0, "prefill_mutation_share",
             "phrase + decoding + exemplar + prefill mutation shares <= 1")
        need(bool(self.prefill_fallbacks) and all(isinstance(p, str) and p.strip() for p in self.prefill_fallbacks),
             "prefill_fallbacks", "a non-empty list of non-empty texts")
        need(-1.0 <= self.section_match_cosine <= 1.0, "section_match_cosine", "a cosine in [-1, 1]")
        need(self.style_evolution_every >= 0, "style_evolution_every", "an integer >= 0 (0 disables)")
        need(self.style_min_trials >= 1, "style_min_trials", "an integer >= 1")
        need(-1.0 <= self.phrase_band_low <= self.phrase_band_high <= 1.0, "phrase_band_low",
             f"-1 <= phrase_band_low <= phrase_band_high ({self.phrase_band_high}) <= 1")
        need(self.near_duplicate_cosine >= -1.0, "near_duplicate_cosine", "a cosine >= -1 (> 1 disables)")
        need(0.0 <= self.min_diversity <= 2.0, "min_diversity", "a cosine distance in [0, 2]")
        check_decoding_genes(self.decoding_genes, "inner.decoding_genes")
        need(self.max_prompt_words >= 1, "max_prompt_words", "an integer >= 1")
        need(self.hall_of_fame_size >= 1, "hall_of_fame_size", "an integer >= 1")
        need(self.mutator_temperature >= 0.0, "mutator_temperature", "a temperature >= 0")
        need(0.0 < self.mutator_top_p <= 1.0, "mutator_top_p", "a value in (0, 1]")
        need(self.mutator_max_new_tokens >= 1, "mutator_max_new_tokens", "an integer >= 1")
        need(self.similarity_low <= self.similarity_high, "similarity_low", "similarity_low <= similarity_high")
        need(0.0 <= self.min_on_topic <= 1.0, "min_on_topic", "a share in [0, 1]")
        need(self.max_section_growth >= 1.0, "max_section_growth", "a ratio >= 1")
        need(bool(self.required_sections) and all(isinstance(s, str) and s for s in self.required_sections),
             "required_sections", "a non-empty list of section names")
        if generations is not None and (
            isinstance(generations, bool) or not isinstance(generations, int) or generations < 1
        ):
            raise ConfigError(f"inner.generations: expected an integer >= 1, got {generations!r}")

    @property
    def mutator_params(self) -> SamplingParams:
        """Decoding settings of mutator requests (the seed is drawn per request by the operators)."""
        return SamplingParams(
            temperature=self.mutator_temperature,
            top_p=self.mutator_top_p,
            max_new_tokens=self.mutator_max_new_tokens,
        )


def build_toolbox(
    cfg: InnerLoopConfig,
    *,
    styles: tuple[MutationStyle, ...] = MUTATION_STYLES,
    phrase_bank: Sequence[str] = DEFAULT_RULE_PHRASES,
    similarity: Callable[[str, str], float] | None = None,
    phrases: PhraseBank | None = None,
    feedback: Feedback | None = None,
    exemplars: Sequence[str] = (),
    adapters: AdapterWorkshop | None = None,
    training_texts: Sequence[str] = (),
    seed_prompts: Sequence[Policy] = (),
) -> base.Toolbox:
    """A DEAP Toolbox with the inner loop's operators registered by role.

    Registered aliases and how the loop calls them (``rng``: ``random.Random``; ``gen``: int):

    - ``select(population, fitness, k, rng) -> list[Policy]`` (tournament, ``cfg.tournament_size``)
    - ``mate(p1, p2, rng, gen) -> (Policy, Policy)`` (:func:`cx_sections`; with ``phrases``, sections
      with different names are paired by embedding similarity, ``cfg.section_match_cosine``)
    - ``mutate(policy, rng, gen) -> Policy`` (:func:`mut_structural`; also the fallback of rejected
      LLM children)
    - ``plan_rewrite(policy, rng, gen) -> MutationPlan`` (:func:`mut_llm_rewrite_plan`)
    - ``plan_merge(p1, p2, rng, gen) -> MutationPlan | None`` (:func:`cx_llm_merge_plan`)
    - ``apply_plan(plan, text) -> Policy | str`` (:func:`~evotrainer.search.operators.judge_rewrite`: the
      child, or why the answer was rejected; a plugged-in operator may return None instead of a reason),
      with a :class:`~evotrainer.search.leakage.LeakGuard` over ``training_texts`` whose allowed texts are
      ``seed_prompts``, ``cfg.task_hint``, the style instructions, ``phrase_bank``, the reward hints and
      the domain vocabulary (each answer's parents and instruction are allowed too)
    - ``is_valid(policy) -> bool`` (:func:`is_valid` with the config's sections and word budget)
    - ``mutate_decoding(policy, rng, gen) -> Policy`` (:func:`mut_decoding`, ``cfg.decoding_genes``)
    - ``mutate_prefill(policy, rng, gen) -> Policy`` (:func:`~evotrainer.search.prefill.mut_prefill`)
    - with ``phrases`` only: ``mutate_phrase(policy, rng, gen) -> Policy``
      (:func:`mut_phrase_substitution`, band from ``cfg``) and ``near_duplicate(a, b) -> bool``
      (:func:`is_near_duplicate`, ``cfg.near_duplicate_cosine``)
    - with ``exemplars`` only: ``mutate_exemplar(policy, rng, gen) -> Policy``
      (:func:`~evotrainer.search.exemplars.mut_exemplar_swap`)
    - with ``feedback`` only: ``plan_reflect(policy, rng, gen) -> MutationPlan | None``
      (:func:`~evotrainer.search.reflection.mut_reflective_plan`)
    - with ``adapters`` only: ``mutate_adapter(policy, rng, gen) -> Policy | None``
      (:func:`~evotrainer.search.adapter_ops.mut_adapter`; None: no passing sample and no adapter, the
      loop then makes a structural mutation), and ``mate`` wrapped by
      :func:`~evotrainer.search.adapter_ops.cx_adapter_pair` (children of two adapter-carrying parents
      carry the merged adapter)

    Re-register an alias (``toolbox.register("mutate", my_op)``) to plug in another operator; the
    loop checks the shape of whatever it returns and raises ``OperatorError`` naming the alias.

    Args:
        cfg: a validated config.
        styles: mutation style library for LLM rewrites.
        phrase_bank: rule sentences structural mutation may add.
        similarity: optional ``(old, new) -> float`` check for LLM children (band from ``cfg``).
        phrases: the run's phrase bank (enables phrase substitution and near-duplicate rejection).
        feedback: worst-training-task feedback per policy (enables reflective mutation).
        exemplars: few-shot exemplar texts from generated tasks (enables exemplar swaps).
        adapters: the adapter workshop (enables adapter genes: ``mutate_adapter`` and adapter crossover).
        training_texts: the training meetings' texts (batch transcripts) that LLM answers may not copy.
        seed_prompts: prompts whose words are never leaks (the loop passes its initial population).
    """
    sections = tuple(cfg.required_sections)
    tb = base.Toolbox()
    tb.register("select", sel_tournament, tournsize=cfg.tournament_size)
    if phrases is not None:
        tb.register("mate", cx_sections, section_similarity=section_cosine(phrases.vectors),
                    min_section_similarity=cfg.section_match_cosine)
    else:
        tb.register("mate", cx_sections)
    tb.register("mutate", mut_structural, phrase_bank=tuple(phrase_bank), max_words=cfg.max_prompt_words)
    tb.register("plan_rewrite", mut_llm_rewrite_plan, params=cfg.mutator_params, styles=styles,
                task_hint=cfg.task_hint)
    tb.register("plan_merge", cx_llm_merge_plan, params=cfg.mutator_params, task_hint=cfg.task_hint)
    allowed = [t for p in seed_prompts for _, t in p.sections] + [cfg.task_hint, *phrase_bank]
    allowed += [s.instruction for s in styles] + list(DEFAULT_COMPONENT_HINTS.values())
    guard = LeakGuard(training_texts, allowed, vocabulary=DOMAIN_VOCABULARY)
    tb.register("apply_plan", judge_rewrite, required_sections=sections, max_words=cfg.max_prompt_words,
                similarity=similarity, similarity_band=(cfg.similarity_low, cfg.similarity_high),
                min_on_topic=cfg.min_on_topic, max_growth=cfg.max_section_growth, leak_guard=guard)
    tb.register("is_valid", is_valid, required_sections=sections, max_words=cfg.max_prompt_words)
    tb.register("mutate_decoding", mut_decoding, genes=tuple(cfg.decoding_genes))
    tb.register("mutate_prefill", mut_prefill, fallbacks=tuple(cfg.prefill_fallbacks))
    if phrases is not None:
        tb.register("mutate_phrase", mut_phrase_substitution, bank=phrases, max_words=cfg.max_prompt_words,
                    band=(cfg.phrase_band_low, cfg.phrase_band_high))
        tb.register("near_duplicate", is_near_duplicate, vectors=phrases.vectors,
                    threshold=cfg.near_duplicate_cosine)
    if exemplars:
        tb.register("mutate_exemplar", mut_exemplar_swap, exemplars=tuple(exemplars), max_words=cfg.max_prompt_words)
    if feedback is not None:
        tb.register("plan_reflect", mut_reflective_plan, feedback=feedback, params=cfg.mutator_params,
                    task_hint=cfg.task_hint)
    if adapters is not None:
        tb.register("mutate_adapter", mut_adapter, workshop=adapters, noise_share=cfg.adapter_noise_share)
        tb.register("mate", cx_adapter_pair, mate=tb.mate, workshop=adapters)
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
