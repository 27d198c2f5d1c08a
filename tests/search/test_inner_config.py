"""The inner loop's one config object: the Hydra schema's ``inner:`` node, every key reachable from YAML."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from evotrainer.config import PACKAGE_DATA, Config, InnerConfig, register_configs, to_config
from evotrainer.errors import ConfigError
from evotrainer.evolve.llm_objective import inner_config
from evotrainer.search.decoding import DEFAULT_DECODING_GENES, DecodingGene
from evotrainer.search.toolbox import build_toolbox

# one override per inner.* key and the value it must arrive as (none of them the default)
OVERRIDES: dict[str, tuple[str, object]] = {
    "population_size": ("9", 9),
    "generations": ("3", 3),
    "elites": ("1", 1),
    "tournament_size": ("4", 4),
    "cx_prob": ("0.4", 0.4),
    "mut_prob": ("0.7", 0.7),
    "hall_of_fame_size": ("6", 6),
    "lead_offspring": ("1", 1),
    "llm_mutation_share": ("0.3", 0.3),
    "reflective_share": ("0.6", 0.6),
    "llm_merge_share": ("0.2", 0.2),
    "phrase_mutation_share": ("0.3", 0.3),
    "decoding_mutation_share": ("0.2", 0.2),
    "exemplar_mutation_share": ("0.05", 0.05),
    "prefill_mutation_share": ("0.1", 0.1),
    "adapter_mutation_share": ("0.1", 0.1),
    "operator_shares.mut_example": ("0.1", None),  # a new dict key: `+inner.operator_shares.<name>=` (Hydra)
    "adaptive_operators": ("true", True),
    "adaptive_mix": ("0.5", 0.5),
    "mutator_temperature": ("0.6", 0.6),
    "mutator_top_p": ("0.9", 0.9),
    "mutator_max_new_tokens": ("80", 80),
    "task_hint": ("'answers questions with tools'", "answers questions with tools"),
    "output_name": ("'these replies'", "these replies"),
    "reflection_hints.correct": ("'the answer must be right'", None),
    "similarity_low": ("0.1", 0.1),
    "similarity_high": ("0.9", 0.9),
    "min_on_topic": ("0.4", 0.4),
    "max_section_growth": ("2.5", 2.5),
    "max_prompt_words": ("120", 120),
    "required_sections": ("[role,rules]", ["role", "rules"]),
    "prefill_fallbacks": ("['Answer:']", ["Answer:"]),
    "rule_phrases": ("['Call one tool per reply.']", ["Call one tool per reply."]),
    "domain_words": ("'tool lookup answer'", "tool lookup answer"),
    "mutation_styles": ("['finish (rules): Answer as soon as you can.']", ["finish (rules): Answer as soon as you can."]),
    "decoding_genes": ("[{name: top_p, low: 0.8, high: 1.0, default: 1.0, step: 0.05}]",
                       [DecodingGene("top_p", 0.8, 1.0, 1.0, 0.05)]),
    "use_embedder": ("false", False),
    "phrase_band": ("[0.5,0.9]", [0.5, 0.9]),
    "near_duplicate_cosine": ("0.9", 0.9),
    "min_diversity": ("0.1", 0.1),
    "section_match_cosine": ("0.6", 0.6),
    "style_evolution_every": ("2", 2),
    "style_min_trials": ("3", 3),
    "adapter_noise_share": ("0.2", 0.2),
    "adapter_noise_scale": ("0.1", 0.1),
    "adapter_pass_threshold": ("0.6", 0.6),
    "adapter_lora": ("{rank: 4, steps: 2}", None),
}

FORMERLY_UNREACHABLE = ("mutator_temperature", "mutator_top_p", "mutator_max_new_tokens", "similarity_low",
                        "similarity_high", "min_on_topic", "max_section_growth", "required_sections", "task_hint",
                        "adaptive_mix", "prefill_fallbacks", "decoding_genes")


def _compose(*overrides: str) -> Config:
    register_configs()
    with initialize_config_dir(str(PACKAGE_DATA / "conf"), version_base="1.3"):
        return to_config(compose("config", overrides=list(overrides)))


def test_every_inner_key_has_an_override_here() -> None:
    assert {key.split(".")[0] for key in OVERRIDES} == set(InnerConfig.__dataclass_fields__)
    assert set(FORMERLY_UNREACHABLE) <= set(OVERRIDES)


def test_every_inner_key_round_trips_from_a_hydra_override() -> None:
    cfg = _compose(*(f"{'+' if key.startswith(('operator_shares.', 'reflection_hints.')) else ''}inner.{key}={text}"
                     for key, (text, _) in OVERRIDES.items()))
    assert type(cfg.inner) is InnerConfig
    for key, (_, expected) in OVERRIDES.items():
        if expected is not None:
            assert getattr(cfg.inner, key) == expected, key
    assert cfg.inner.operator_shares == {"mut_example": 0.1}
    assert cfg.inner.reflection_hints == {"correct": "the answer must be right"}
    assert (cfg.inner.adapter_lora.rank, cfg.inner.adapter_lora.steps, cfg.inner.adapter_lora.lr) == (4, 2, 1e-3)
    # ... and what the loop receives is that same object (decoding genes set here, so nothing is resolved)
    assert inner_config(cfg) is cfg.inner


def test_one_class_one_default_per_setting() -> None:
    assert Config().inner == InnerConfig()
    assert _compose().inner == InnerConfig()  # the YAML root adds nothing of its own


def test_lead_offspring_default_is_the_product_value() -> None:
    """The Hydra schema said 2 and the loop's own config 0; default runs always used 2 (the YAML path)."""
    assert InnerConfig().lead_offspring == 2 == _compose().inner.lead_offspring


@pytest.mark.parametrize(("population_size", "elites", "ok"), [(4, 3, True), (4, 4, False), (2, 1, True), (1, 0, False)])
def test_elites_and_population_bounds_are_the_product_ones(population_size: int, elites: int, ok: bool) -> None:
    """The schema checked ``elites < population_size`` (and size >= 2), the loop ``<=`` (and >= 1); runs
    always went through the schema's check, so that one is kept, for the loop called directly too."""
    cfg = InnerConfig(population_size=population_size, elites=elites, tournament_size=1)
    if ok:
        cfg.validate()
        return
    key = "inner.population_size" if population_size < 2 else "inner.elites"
    with pytest.raises(ConfigError, match=key):
        cfg.validate()
    with pytest.raises(ConfigError, match=key):
        to_config(Config(inner=cfg))


def test_null_decoding_genes_are_centred_on_the_run_decoding() -> None:
    cfg = Config()
    cfg.decoding.max_new_tokens = 100
    resolved = inner_config(cfg)
    assert resolved is not cfg.inner and cfg.inner.decoding_genes is None
    assert {g.name for g in resolved.genes} == {"repetition_penalty", "no_repeat_ngram_size", "max_new_tokens"}
    assert {g.name: g.high for g in resolved.genes}["max_new_tokens"] == 100
    assert InnerConfig().genes == DEFAULT_DECODING_GENES  # the loop on its own: the plain defaults


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("inner.mutator_top_p=0", "inner.mutator_top_p"),
        ("inner.required_sections=[]", "inner.required_sections"),
        ("inner.phrase_band=[0.9,0.5]", "inner.phrase_band"),
        ("inner.similarity_low=1.5", "inner.similarity_low"),
        ("inner.prefill_fallbacks=['  ']", "inner.prefill_fallbacks"),
        ("inner.decoding_genes=[{name: seed, low: 0, high: 9, default: 0, step: 1}]", "inner.decoding_genes"),
        ("inner.adapter_lora.steps=0", "inner.adapter_lora.steps"),
    ],
)
def test_a_bad_inner_key_is_one_line_naming_it(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as info:
        _compose(override)
    assert "\n" not in str(info.value)


def test_the_toolbox_takes_the_whole_config() -> None:
    cfg = _compose("inner.prefill_fallbacks=['Answer:']", "inner.task_hint='answers questions'")
    toolbox = build_toolbox(cfg.inner)
    assert toolbox.mutate_prefill.keywords["fallbacks"] == ("Answer:",)
    assert toolbox.plan_rewrite.keywords["task_hint"] == "answers questions"


def test_mutation_styles_from_config_text() -> None:
    from evotrainer.search.mutation_prompts import NEUTRAL_STYLES, MutationStyle

    cfg = InnerConfig(mutation_styles=["finish (format, rules): Stress the Final Answer: soon.", "plain: Be plain."])
    assert cfg.styles() == (MutationStyle("finish", "Stress the Final Answer: soon.", ("format", "rules")),
                            MutationStyle("plain", "Be plain."))
    assert InnerConfig().styles() == NEUTRAL_STYLES  # no family: the domain-neutral styles
    for bad in (["no colon here"], [], ["a: x", "a: y"], ["(rules): nameless"]):
        with pytest.raises(ConfigError, match="inner.mutation_styles"):
            InnerConfig(mutation_styles=bad).validate()
