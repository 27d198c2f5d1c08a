"""The inner loop's one config object: the ``inner:`` node of the Hydra schema, passed whole to the loop.

:class:`InnerConfig` is registered in Hydra's ConfigStore through :class:`evotrainer.config.Config` (its
``inner`` field), so every setting below is a YAML key (``inner.<field>``) with one default; the loop
(:func:`~evotrainer.search.inner_loop.run_inner_loop`), the toolbox
(:func:`~evotrainer.search.toolbox.build_toolbox`) and the objective receive this same object, checked by
:meth:`InnerConfig.validate`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from evotrainer.backends.base import SamplingParams
from evotrainer.errors import ConfigError
from evotrainer.genome import REQUIRED_SECTIONS
from evotrainer.model_schema import LoraSettings
from evotrainer.search.decoding import DEFAULT_DECODING_GENES, DecodingGene, check_decoding_genes
from evotrainer.tasks.base import NEUTRAL_TEXTS, FamilyTexts

if TYPE_CHECKING:
    from evotrainer.search.mutation_prompts import MutationStyle

__all__ = ["STRATEGY_KEYS", "InnerConfig"]

_PROBABILITIES = ("cx_prob", "mut_prob", "llm_mutation_share", "llm_merge_share", "reflective_share",
                  "phrase_mutation_share", "decoding_mutation_share", "exemplar_mutation_share",
                  "prefill_mutation_share", "adapter_mutation_share", "adapter_noise_share", "adapter_pass_threshold",
                  "adaptive_mix", "min_on_topic")

_MODEL_FREE_SHARES = ("phrase_mutation_share", "decoding_mutation_share", "exemplar_mutation_share",
                      "prefill_mutation_share")

STRATEGY_KEYS: dict[str, tuple[float, float]] = {
    "mutator_temperature": (0.0, math.inf),
    "cx_prob": (0.0, 1.0),
    "mut_prob": (0.0, 1.0),
    "llm_mutation_share": (0.0, 1.0),
    "reflective_share": (0.0, 1.0),
    "llm_merge_share": (0.0, 1.0),
    **{key: (0.0, 1.0) for key in _MODEL_FREE_SHARES},
}
"""The ``inner.*`` settings a harness candidate may set for its own inner loop (``outer.strategy.<key>``), each
with the closed range of values the key accepts (:meth:`InnerConfig.with_strategy`)."""


def _texts_fields(texts: FamilyTexts) -> dict[str, Any]:
    """``texts`` as the values of the ``inner.*`` keys that override them (lists and dicts, as in YAML)."""
    return {"task_hint": texts.task_hint, "output_name": texts.output_name, "rule_phrases": list(texts.rule_phrases),
            "mutation_styles": list(texts.mutation_styles), "domain_words": texts.domain_words,
            "prefill_fallbacks": list(texts.prefills), "reflection_hints": dict(texts.reflection_hints)}


def _adapter_lora() -> LoraSettings:
    # the short Lamarckian fine-tune, sized for the CPU (README, "Self-evolution"): 4 steps x 1 row x <= 512
    # tokens; lr 1e-3 because there are only 4 steps.
    return LoraSettings(rank=8, alpha=16, lr=1e-3, steps=4, batch_size=1, max_length=512, replay_ratio=0.0)


@dataclass
class InnerConfig:
    """Settings of the inner (policy) generation loop; YAML keys ``inner.<field>``.

    Loop shape:
        population_size: individuals per generation (elites included), >= 2.
        generations: inner generations per harness candidate (K), >= 1.
        elites: best distinct genomes copied unchanged into the next generation, in [0, population_size).
        tournament_size: aspirants per tournament, in [1, population_size] (DEAP's ``tournsize``).
        cx_prob: probability that a consecutive pair of selected parents is crossed, in [0, 1].
        mut_prob: probability that each offspring is mutated, in [0, 1].
        hall_of_fame_size: best distinct genomes kept across generations, >= 1.
        lead_offspring: offspring slots per generation given to mutants of the *lead* policy passed to
            :func:`~evotrainer.search.inner_loop.run_inner_loop` (the best policy known on
            meta-validation), >= 0 (at most ``population_size - elites`` are used); 0 or no lead = plain
            tournament parents. Each such slot is mutated (never crossed) by one of the operator kinds tried
            least often on the lead so far (across calls when the caller passes ``lead_tried``), so every
            kind of move is tried on the lead before one repeats. Local search around the best-validated
            candidate follows GEPA (Agrawal et al. 2025, "GEPA: Reflective Prompt Evolution Can Outperform
            Reinforcement Learning", which mutates candidates chosen by their validation scores); the lead's
            children are then compared with it on the same screening items (a paired comparison).

    Operator shares (how the mutation probabilities follow from them:
    :func:`~evotrainer.search.operators_registry.mutation_probabilities`; a harness candidate may set these,
    ``cx_prob``, ``mut_prob`` and ``mutator_temperature`` for its own inner loop: :data:`STRATEGY_KEYS`,
    :meth:`InnerConfig.with_strategy`):
        llm_mutation_share: share of mutations done by the mutator model, in [0, 1]; without a mutator
            every mutation is model-free.
        reflective_share: share of the LLM mutations that are reflective (the mutator sees the parent's
            worst training task and its low reward components; GEPA) instead of style rewrites, in [0, 1];
            needs a ``feedback`` source, otherwise every LLM mutation is a style rewrite.
        llm_merge_share: share of crossovers whose first child is an LLM merge of one section (the
            section-wise child is its fallback), in [0, 1]; needs a mutator.
        phrase_mutation_share: share of the model-free mutations done by embedding-guided phrase
            substitution, in [0, 1]; needs an embedder (without one these become structural edits).
        decoding_mutation_share: share of the model-free mutations that perturb one decoding gene, in [0, 1].
        exemplar_mutation_share: share of the model-free mutations that add, swap or drop a few-shot
            exemplar built from the generated task batch, in [0, 1]; needs exemplars.
        prefill_mutation_share: share of the model-free mutations that add, swap or drop the answer
            prefill, in [0, 1]. The four model-free shares sum to <= 1; the rest are structural edits.
            Defaults (decoding 0.05, prefill 0.25) follow the operator statistics of the default job's seeds
            0-2: prefill children beat their parents 7 times in 10, decoding 2 in 14 (README, "Seeds").
        adapter_mutation_share: share of *all* mutations that mutate the adapter gene (Lamarckian fine-tune
            or noise), in [0, 1], taken before the LLM and model-free shares (which split the rest); needs
            an adapter workshop (without one it counts as 0). 0 keeps the search prompt-only.
        operator_shares: operator name -> share, for operators added to the registry without a config field
            of their own (:mod:`evotrainer.search.operators_registry`), each in [0, 1].
        adaptive_operators: adapt the mutation probabilities to how often their children beat their
            parents (probability matching); off by default.
        adaptive_mix: weight of the configured probabilities when adapting, in [0, 1].

    Mutator requests and the checks on its answers:
        mutator_temperature: sampling temperature, >= 0 (0 = greedy: identical requests, identical rewrites).
        mutator_top_p: nucleus mass, in (0, 1].
        mutator_max_new_tokens: token budget per answer (tokens), >= 1.
        task_hint: what the policy does, completing "an AI that ..." in mutator chats; None = the family's
            (:class:`~evotrainer.tasks.base.FamilyTexts`, as every domain text below).
        output_name: the output as a reflective chat names it ("these replies"); None = the family's.
        reflection_hints: reward component -> what it asks of the output, for reflective chats; empty = the
            family's.
        similarity_low: lowest accepted similarity of a rewrite to its parent section (only used when a
            similarity function is given to the toolbox), <= similarity_high.
        similarity_high: highest accepted similarity (rejects near-copies).
        min_on_topic: lowest share of a rewrite's content words that must occur in the parent section or the
            domain vocabulary, in [0, 1]; 0 disables. Against off-topic rewrites of a small mutator: of 16
            recorded SmolLM2-135M answers (tests/search/data), 14 survive cleaning but only 2 are about
            the task; this filter keeps those 2.
        max_section_growth: a rewritten section may have at most ``max(this * old words, 30)`` words, >= 1.

    Genome:
        max_prompt_words: word budget of a whole policy prompt (all sections), >= 1.
        required_sections: section names every genome must carry (non-empty).
        prefill_fallbacks: prefills offered to prompts that name no heading (non-empty texts); None = the
            family's.
        rule_phrases: rule sentences the structural edit may add and the phrase bank starts from (non-empty
            texts); None = the family's.
        mutation_styles: the style library the LLM rewrite starts from, one ``"name: instruction"`` or
            ``"name (section, section): instruction"`` per style (the sections it suits; none = every
            section); None = the family's.
        domain_words: words a rewrite may use beyond its parent's and count as on topic (and that the leak
            guard allows), space-separated; None = the family's.

        The family's texts come in through :meth:`InnerConfig.with_texts` (the objective calls it with
        ``family.spec.texts``); a config used without a family falls back to the domain-neutral
        :data:`~evotrainer.tasks.base.NEUTRAL_TEXTS`.
        decoding_genes: decoding genes and bounds the decoding mutation may change; null = the defaults of
            :mod:`evotrainer.search.decoding` re-centred on the run's ``decoding`` with a ``max_new_tokens``
            gene capped at the run default (``decoding_genes_for``, applied by the objective), or the plain
            defaults when the loop runs without a run config. A list replaces the defaults; it may add the
            reading gene ``window_tokens`` (input tokens per window of a long input, integer; read by the
            task family).

    Embedder (phrase substitution, near-duplicates, diversity, section matching):
        use_embedder: load the sentence embedder (MiniLM); off disables the four features below.
        phrase_band: [low, high] accepted cosine between a replaced sentence and its substitute, with
            -1 <= low <= high <= 1 (below: another meaning; above: a no-op rewording).
        near_duplicate_cosine: a child whose every differing sentence has at least this cosine to the aligned
            sentence of a population member or an earlier child is rejected, >= -1; > 1 disables.
        min_diversity: lowest mean pairwise cosine distance of the population, in [0, 2]; below it redundant
            members are swapped for distinct scored policies (never the elites); 0 disables. Measured with
            all-MiniLM-L6-v2: the 14 seed policies of the default population have 0.285; 0.05 only stops a collapse
            onto near-copies of one genome.
        section_match_cosine: in crossover, two differently named sections correspond when the cosine of
            their mean sentence embeddings is at least this (names match first), in [-1, 1].

    Mutation-style library:
        style_evolution_every: every this many harness candidates the least successful mutation style is
            replaced by a mutator rewrite of the most successful one (PromptBreeder hyper-mutation), >= 0;
            0 disables; needs a mutator.
        style_min_trials: rewrites a style needs before its success rate counts, >= 1.

    Adapter genes:
        adapter_noise_share: share of the adapter mutations of adapter-carrying parents done by noise instead
            of a fine-tune, in [0, 1].
        adapter_noise_scale: relative Gaussian noise on the LoRA factors (0.05 = 5 % of the norm), > 0.
        adapter_pass_threshold: training outputs with reward >= this are fine-tuned on, in [0, 1].
        adapter_lora: the short Lamarckian fine-tune (its rank is also the crossover rank).
    """

    population_size: int = 8
    generations: int = 2
    elites: int = 2
    tournament_size: int = 3
    cx_prob: float = 0.5
    mut_prob: float = 0.8
    hall_of_fame_size: int = 5
    lead_offspring: int = 2
    llm_mutation_share: float = 0.5
    reflective_share: float = 0.5
    llm_merge_share: float = 0.25
    phrase_mutation_share: float = 0.4
    decoding_mutation_share: float = 0.05
    exemplar_mutation_share: float = 0.1
    prefill_mutation_share: float = 0.25
    adapter_mutation_share: float = 0.0
    operator_shares: dict[str, float] = field(default_factory=dict)
    adaptive_operators: bool = False
    adaptive_mix: float = 0.3
    mutator_temperature: float = 0.8
    mutator_top_p: float = 0.95
    mutator_max_new_tokens: int = 96
    task_hint: str | None = None
    output_name: str | None = None
    reflection_hints: dict[str, str] = field(default_factory=dict)
    similarity_low: float = 0.0
    similarity_high: float = 1.0
    min_on_topic: float = 0.5
    max_section_growth: float = 3.0
    max_prompt_words: int = 160
    required_sections: list[str] = field(default_factory=lambda: list(REQUIRED_SECTIONS))
    prefill_fallbacks: list[str] | None = None
    rule_phrases: list[str] | None = None
    domain_words: str | None = None
    mutation_styles: list[str] | None = None
    decoding_genes: list[DecodingGene] | None = None
    use_embedder: bool = True
    phrase_band: list[float] = field(default_factory=lambda: [0.55, 0.92])
    near_duplicate_cosine: float = 0.95
    min_diversity: float = 0.05
    section_match_cosine: float = 0.5
    style_evolution_every: int = 1
    style_min_trials: int = 2
    adapter_noise_share: float = 0.3
    adapter_noise_scale: float = 0.05
    adapter_pass_threshold: float = 0.5
    adapter_lora: LoraSettings = field(default_factory=_adapter_lora)

    def with_texts(self, texts: FamilyTexts) -> InnerConfig:
        """A copy whose unset (None) domain texts are ``texts``'s (a family's
        :class:`~evotrainer.tasks.base.FamilyTexts`); keys set in config stay as they are."""
        return replace(self, **{key: value for key, value in _texts_fields(texts).items()
                                if getattr(self, key) is None or getattr(self, key) == {}})

    def with_strategy(self, values: Mapping[str, float]) -> InnerConfig:
        """A copy with one harness candidate's strategy knobs applied (``outer.strategy``; the harness' ``strategy``).

        Args:
            values: :data:`STRATEGY_KEYS` name -> value, each inside that key's range; empty = this config.

        Returns:
            The copy. When the four model-free shares (phrase, decoding, exemplar, prefill) then sum past 1,
            each is divided by their sum, so their ratios stay and no structural edit is left; every other
            setting is the value given.

        Raises:
            ConfigError: a name that is not a strategy setting, or a value outside its range (naming
                ``outer.strategy.<name>``).
        """
        if not values:
            return self
        for name, value in values.items():
            if name not in STRATEGY_KEYS:
                raise ConfigError(f"config key 'outer.strategy.{name}': expected one of the inner-loop strategy "
                                  f"settings {sorted(STRATEGY_KEYS)}, got {name!r}")
            low, high = STRATEGY_KEYS[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise ConfigError(f"config key 'outer.strategy.{name}': expected a value in [{low}, {high}], "
                                  f"got {value!r}")
        out = replace(self, **{name: float(value) for name, value in values.items()})
        shares = [getattr(out, key) for key in _MODEL_FREE_SHARES]
        if sum(shares) <= 1.0:
            return out
        scale = 1.0 / sum(shares)
        while sum(v * scale for v in shares) > 1.0:  # float rounding: the scaled sum must not pass 1 (validate)
            scale = math.nextafter(scale, 0.0)
        return replace(out, **{key: v * scale for key, v in zip(_MODEL_FREE_SHARES, shares, strict=True)})

    def texts(self) -> FamilyTexts:
        """The domain texts this config gives: its set keys, else the neutral ones (no family given)."""
        t = NEUTRAL_TEXTS
        return replace(t, task_hint=self.task_hint if self.task_hint is not None else t.task_hint,
                       output_name=self.output_name if self.output_name is not None else t.output_name,
                       rule_phrases=tuple(self.rule_phrases) if self.rule_phrases is not None else t.rule_phrases,
                       mutation_styles=(tuple(self.mutation_styles) if self.mutation_styles is not None
                                        else t.mutation_styles),
                       domain_words=self.domain_words if self.domain_words is not None else t.domain_words,
                       prefills=tuple(self.prefill_fallbacks) if self.prefill_fallbacks is not None else t.prefills,
                       reflection_hints=dict(self.reflection_hints) or t.reflection_hints)

    def rules(self) -> tuple[str, ...]:
        """The rule phrases (:meth:`texts`)."""
        return self.texts().rule_phrases

    def styles(self) -> tuple[MutationStyle, ...]:
        """The mutation styles (:meth:`texts`) as :class:`~evotrainer.search.mutation_prompts.MutationStyle` records."""
        from evotrainer.search.mutation_prompts import parse_style

        return tuple(parse_style(t) for t in self.texts().mutation_styles)

    def vocabulary(self) -> frozenset[str]:
        """Content words of the domain words (:meth:`texts`)."""
        from evotrainer.search.cleaning import content_words

        return frozenset(content_words(self.texts().domain_words))

    def validate(self, generations: int | None = None) -> None:
        """Check every field (and a run's ``generations`` when given, e.g. the loop's own argument).

        Raises:
            ConfigError: one line naming the first bad key (``config key 'inner.<key>'``), the expected
                range and the value.
        """
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int) and (isinstance(value, bool) or not isinstance(value, int)):
                _fail(f.name, "an integer", value)
            if f.type in ("float", float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
                _fail(f.name, "a number", value)
            if f.type in ("bool", bool) and not isinstance(value, bool):
                _fail(f.name, "true or false", value)
        self._validate_shape()
        for key in _PROBABILITIES:
            _need(0.0 <= getattr(self, key) <= 1.0, key, "a probability in [0, 1]", getattr(self, key))
        for name, share in self.operator_shares.items():
            _need(isinstance(share, (int, float)) and not isinstance(share, bool) and 0.0 <= share <= 1.0,
                  f"operator_shares.{name}", "a share in [0, 1]", share)
        phrase, decoding = self.phrase_mutation_share, self.decoding_mutation_share
        _need(phrase + decoding <= 1.0, "decoding_mutation_share",
              f"phrase_mutation_share + decoding_mutation_share <= 1 (phrase: {phrase})", decoding)
        _need(phrase + decoding + self.exemplar_mutation_share <= 1.0, "exemplar_mutation_share",
              "phrase_mutation_share + decoding_mutation_share + exemplar_mutation_share"
              f" <= 1 (phrase: {phrase}, decoding: {decoding})", self.exemplar_mutation_share)
        _need(phrase + decoding + self.exemplar_mutation_share + self.prefill_mutation_share <= 1.0,
              "prefill_mutation_share", "phrase + decoding + exemplar + prefill mutation shares <= 1",
              self.prefill_mutation_share)
        self._validate_texts()
        self._validate_embedder()
        _need(self.mutator_temperature >= 0.0, "mutator_temperature", "a temperature >= 0", self.mutator_temperature)
        _need(0.0 < self.mutator_top_p <= 1.0, "mutator_top_p", "a value in (0, 1]", self.mutator_top_p)
        _need(self.mutator_max_new_tokens >= 1, "mutator_max_new_tokens", "an integer >= 1",
              self.mutator_max_new_tokens)
        _need(self.similarity_low <= self.similarity_high, "similarity_low",
              f"similarity_low <= similarity_high ({self.similarity_high})", self.similarity_low)
        _need(self.max_section_growth >= 1.0, "max_section_growth", "a ratio >= 1", self.max_section_growth)
        _need(self.style_evolution_every >= 0, "style_evolution_every", "an integer >= 0 (0 disables)",
              self.style_evolution_every)
        _need(self.style_min_trials >= 1, "style_min_trials", "an integer >= 1", self.style_min_trials)
        if self.decoding_genes is not None:
            check_decoding_genes(self.decoding_genes, "inner.decoding_genes")
        self._validate_adapters()
        if generations is not None and (
            isinstance(generations, bool) or not isinstance(generations, int) or generations < 1
        ):
            _fail("generations", "an integer >= 1", generations)

    def _validate_shape(self) -> None:
        _need(self.population_size >= 2, "population_size", "an integer >= 2", self.population_size)
        _need(self.generations >= 1, "generations", "an integer >= 1", self.generations)
        _need(0 <= self.elites < self.population_size, "elites",
              f"an integer in [0, inner.population_size={self.population_size})", self.elites)
        _need(1 <= self.tournament_size <= self.population_size, "tournament_size",
              f"an integer in [1, inner.population_size={self.population_size}]", self.tournament_size)
        _need(self.hall_of_fame_size >= 1, "hall_of_fame_size", "an integer >= 1", self.hall_of_fame_size)
        _need(self.lead_offspring >= 0, "lead_offspring", "an integer >= 0 (at most population_size - elites "
              "are used)", self.lead_offspring)
        _need(self.max_prompt_words >= 1, "max_prompt_words", "an integer >= 1", self.max_prompt_words)

    def _validate_texts(self) -> None:
        _need(self.rule_phrases is None or (bool(self.rule_phrases) and all(
            isinstance(p, str) and p.strip() for p in self.rule_phrases)), "rule_phrases",
            "null or a non-empty list of non-empty texts", self.rule_phrases)
        if self.mutation_styles is not None:
            from evotrainer.search.mutation_prompts import parse_style

            _need(bool(self.mutation_styles) and all(isinstance(t, str) for t in self.mutation_styles),
                  "mutation_styles", "null or a non-empty list of 'name: instruction' texts", self.mutation_styles)
            try:
                names = [parse_style(t).name for t in self.mutation_styles]
            except ValueError as exc:
                raise ConfigError(f"inner.mutation_styles: {exc}") from None
            _need(len(set(names)) == len(names), "mutation_styles", "styles with distinct names", names)
        _need(self.domain_words is None or (isinstance(self.domain_words, str) and bool(self.domain_words.strip())),
              "domain_words", "null or a non-empty text", self.domain_words)
        _need(self.prefill_fallbacks is None or (bool(self.prefill_fallbacks) and all(
            isinstance(p, str) and p.strip() for p in self.prefill_fallbacks)), "prefill_fallbacks",
            "null or a non-empty list of non-empty texts", self.prefill_fallbacks)
        _need(bool(self.required_sections) and all(isinstance(s, str) and s for s in self.required_sections),
              "required_sections", "a non-empty list of section names", self.required_sections)
        for key in ("task_hint", "output_name"):
            value = getattr(self, key)
            _need(value is None or (isinstance(value, str) and bool(value.strip())), key, "null or a non-empty text",
                  value)
        hints = self.reflection_hints
        _need(all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in hints.items()),
              "reflection_hints", "a map of component name -> non-empty text", hints)

    def _validate_embedder(self) -> None:
        band = self.phrase_band
        _need(len(band) == 2 and all(isinstance(v, (int, float)) for v in band) and -1.0 <= band[0] <= band[1] <= 1.0,
              "phrase_band", "[low, high] with -1 <= low <= high <= 1", list(band))
        _need(self.near_duplicate_cosine >= -1.0, "near_duplicate_cosine", "a cosine >= -1 (> 1 disables)",
              self.near_duplicate_cosine)
        _need(0.0 <= self.min_diversity <= 2.0, "min_diversity", "a cosine distance in [0, 2]", self.min_diversity)
        _need(-1.0 <= self.section_match_cosine <= 1.0, "section_match_cosine", "a cosine in [-1, 1]",
              self.section_match_cosine)

    def _validate_adapters(self) -> None:
        _need(self.adapter_noise_scale > 0, "adapter_noise_scale", "a scale > 0", self.adapter_noise_scale)
        self.adapter_lora.check("inner.adapter_lora")

    @property
    def mutator_params(self) -> SamplingParams:
        """Decoding settings of mutator requests (the seed is drawn per request by the operators)."""
        return SamplingParams(temperature=self.mutator_temperature, top_p=self.mutator_top_p,
                              max_new_tokens=self.mutator_max_new_tokens)

    @property
    def genes(self) -> tuple[DecodingGene, ...]:
        """The decoding genes the decoding mutation uses (``decoding_genes``, else the plain defaults)."""
        return tuple(self.decoding_genes) if self.decoding_genes is not None else DEFAULT_DECODING_GENES


def _need(ok: bool, key: str, expected: str, got: Any) -> None:
    if not ok:
        _fail(key, expected, got)


def _fail(key: str, expected: str, got: Any) -> None:
    raise ConfigError(f"config key 'inner.{key}': expected {expected}, got {got!r}")
