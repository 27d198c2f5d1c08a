"""Policy search: operators, the DEAP toolbox, the inner generation loop, the fitness cache.

Names are re-exported lazily (PEP 562), so that importing one submodule (e.g. ``fitness_cache`` from the
evaluator side) does not pull in DEAP. The genome (:class:`~evotrainer.genome.Policy`) lives in the neutral
:mod:`evotrainer.genome`, which the archive and the task families import without importing search; its
names are re-exported here too.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Policy": "evotrainer.genome",
    "REQUIRED_SECTIONS": "evotrainer.genome",
    "load_population": "evotrainer.genome",
    "render_system_prompt": "evotrainer.genome",
    "clean_mutator_text": "cleaning",
    "NEUTRAL_STYLES": "mutation_prompts",
    "MutationStyle": "mutation_prompts",
    "MutationPlan": "operators",
    "cx_llm_merge_plan": "operators",
    "cx_sections": "operators",
    "is_valid": "operators",
    "judge_rewrite": "operators",
    "mut_llm_rewrite_plan": "operators",
    "mut_structural": "operators",
    "sel_tournament": "operators",
    "validity_problem": "operators",
    "GenomeHallOfFame": "toolbox",
    "InnerConfig": "inner_config",
    "InnerToolbox": "toolbox",
    "build_toolbox": "toolbox",
    "Operator": "operators_registry",
    "OperatorRegistry": "operators_registry",
    "DEFAULT_REGISTRY": "operators_registry",
    "crossover_probabilities": "operators_registry",
    "mutation_probabilities": "operators_registry",
    "GenerationReport": "inner_report",
    "InnerResult": "inner_report",
    "initial_population": "inner_loop",
    "run_inner_loop": "inner_loop",
    "DEFAULT_DECODING_GENES": "decoding",
    "DecodingGene": "decoding",
    "decoding_genes_for": "decoding",
    "mut_decoding": "decoding",
    "PhraseBank": "phrases",
    "mut_phrase_substitution": "phrases",
    "negation_flipped": "phrases",
    "LeakGuard": "leakage",
    "Leaks": "leakage",
    "differing_sentences": "diversity",
    "enforce_min_diversity": "diversity",
    "is_near_duplicate": "diversity",
    "population_diversity": "diversity",
    "OperatorStats": "operator_stats",
    "adapted_probabilities": "operator_stats",
    "format_operator_stats": "operator_stats",
    "Feedback": "reflection",
    "TaskFeedback": "reflection",
    "mut_reflective_plan": "reflection",
    "CacheKey": "fitness_cache",
    "FitnessCache": "fitness_cache",
    "settings_key": "fitness_cache",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evotrainer.search' has no attribute {name!r}")
    return getattr(importlib.import_module(module if "." in module else f"evotrainer.search.{module}"), name)


def __dir__() -> list[str]:
    return __all__
