"""Structured configs (Hydra ConfigStore) and their validation.

One dataclass per component; ``conf/config.yaml`` chooses defaults and ``conf/experiment/*.yaml``
bundles overrides. Core code receives these typed objects (via :func:`to_config`), never a
DictConfig. :func:`validate` fails early with a :class:`ConfigError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from evotrainer.errors import ConfigError

__all__ = [
    "ArchiveConfig",
    "Config",
    "DecodingConfig",
    "DifficultyConfig",
    "EvaluationConfig",
    "InnerConfig",
    "ModelConfig",
    "OuterConfig",
    "TaskConfig",
    "PROJECT_ROOT",
    "register_configs",
    "resolve_path",
    "to_config",
    "validate",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MODES = ("evaluate", "evolve")


@dataclass
class ModelConfig:
    """Which model plays a role (policy or mutator) and how it runs."""

    path: str | None = None  # HF folder or hub id; None = the embedded SmolLM2-135M-Instruct GGUF
    gguf_file: str | None = None  # GGUF file name inside `path`, when `path` holds GGUFs
    backend: str = "hf"  # "hf" (transformers, CPU or GPU) or "vllm" (GPU extra)
    dtype: str = "float32"  # fp32 on the CPU path
    batch_size: int = 16  # requests per forward batch; measured 66 tok/s at 16 vs 8-15 tok/s alone
    max_context: int | None = 4096  # tokens; None = the model config's max_position_embeddings
    threads: int | None = None  # torch CPU threads; None = torch default


@dataclass
class DecodingConfig:
    """Default generation settings of a rollout (a policy's decoding genes override them)."""

    max_new_tokens: int = 160  # tokens, >= 1
    temperature: float = 0.0  # 0 = greedy: deterministic fitness whatever the batch
    top_p: float = 1.0
    repetition_penalty: float = 1.0  # over generated tokens only; >= 1
    no_repeat_ngram_size: int = 4  # block repeated n-grams of the generated text only; 0 = off


@dataclass
class DifficultyConfig:
    """Task-generator difficulty knobs (natural units). The harness moves these in `evolve`."""

    length: float = 220.0  # target transcript words
    speakers: float = 3.0
    topics: float = 2.0
    noise: float = 0.1  # share of off-topic / small-talk turns
    action_items: float = 3.0
    implicit_owner: float = 0.2  # share of action items whose owner is only implied


@dataclass
class TaskConfig:
    name: str = "meeting_minutes"
    validation_path: str = "validation_set/meeting_minutes.jsonl"  # meta-validation set (JSONL)
    validation_limit: int | None = None  # first N items only
    field_map: dict[str, str] = field(default_factory=dict)  # our field name -> name in the file
    action_band: list[int] = field(default_factory=lambda: [2, 5])  # good action-item count range
    difficulty: DifficultyConfig = field(default_factory=DifficultyConfig)
    reward_weights: dict[str, float] = field(
        default_factory=lambda: {"completeness": 0.5, "format": 0.2, "action_count": 0.3, "action_f1": 0.0}
    )
    tasks_per_generation: int = 4  # generated tasks per inner generation batch (common random numbers)


@dataclass
class EvaluationConfig:
    population_path: str = "populations/meeting_minutes.yaml"
    policies: list[str] = field(default_factory=list)  # subset of policy ids; empty = all
    show_best_output: bool = True  # print the best policy's output on the first item


@dataclass
class InnerConfig:
    """Inner DEAP loop over policies."""

    population_size: int = 8
    generations: int = 2  # K inner generations per harness candidate
    elites: int = 2
    tournament_size: int = 3
    cx_prob: float = 0.5
    mut_prob: float = 0.8
    llm_mutation_share: float = 0.5  # share of mutations done by the mutator model
    max_prompt_words: int = 160
    hall_of_fame_size: int = 5


@dataclass
class OuterConfig:
    """Outer CMA-ES loop over the harness."""

    generations: int = 2
    popsize: int = 3  # CMA-ES lambda (candidates per outer generation)
    sigma0: float = 0.25  # initial step size in the normalised [0, 1] search space
    screen_size: int = 8  # meta-validation items used to screen candidates (fixed stratified subset)
    knobs: list[str] = field(default_factory=list)  # difficulty knobs in the harness; empty = all
    reward_weight_bounds: list[float] = field(default_factory=lambda: [-2.0, 2.0])  # logit bounds


@dataclass
class ArchiveConfig:
    path: str = "archive.db"  # relative paths are under the Hydra run dir


@dataclass
class Config:
    mode: str = "evolve"  # "evaluate" | "evolve"
    seed: int = 0  # the root seed; every RNG derives from it
    debug: bool = False  # show full tracebacks
    model: ModelConfig = field(default_factory=ModelConfig)
    mutator: ModelConfig | None = None  # None = reuse the policy model
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    inner: InnerConfig = field(default_factory=InnerConfig)
    outer: OuterConfig = field(default_factory=OuterConfig)
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)


def register_configs() -> None:
    """Register the schema so YAML keys are type-checked and unknown keys rejected."""
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)


def to_config(cfg: DictConfig | Config) -> Config:
    """Turn Hydra's composed DictConfig into a typed, validated :class:`Config`."""
    if isinstance(cfg, Config):
        out = cfg
    else:
        obj = OmegaConf.to_object(cfg)
        if not isinstance(obj, Config):  # composed without the schema (tests)
            merged = OmegaConf.merge(OmegaConf.structured(Config), cfg)
            obj = OmegaConf.to_object(merged)
        out = obj  # type: ignore[assignment]
    validate(out)
    return out


def _check(cond: bool, key: str, expected: str, got: Any) -> None:
    if not cond:
        raise ConfigError(f"config key '{key}': expected {expected}, got {got!r}")


def validate(cfg: Config) -> None:
    """Fail early on out-of-range settings. Raises ConfigError naming the key."""
    _check(cfg.mode in MODES, "mode", f"one of {MODES}", cfg.mode)
    for role, m in (("model", cfg.model), ("mutator", cfg.mutator)):
        if m is None:
            continue
        _check(m.backend in ("hf", "vllm"), f"{role}.backend", "'hf' or 'vllm'", m.backend)
        _check(m.batch_size >= 1, f"{role}.batch_size", ">= 1", m.batch_size)
        _check(m.max_context is None or m.max_context >= 256, f"{role}.max_context", ">= 256 or null",
               m.max_context)
        _check(m.dtype in ("float32", "bfloat16", "float16"), f"{role}.dtype",
               "float32, bfloat16 or float16", m.dtype)
    d = cfg.decoding
    _check(d.max_new_tokens >= 1, "decoding.max_new_tokens", ">= 1", d.max_new_tokens)
    _check(d.temperature >= 0, "decoding.temperature", ">= 0", d.temperature)
    _check(0 < d.top_p <= 1, "decoding.top_p", "in (0, 1]", d.top_p)
    _check(d.repetition_penalty >= 1, "decoding.repetition_penalty", ">= 1.0", d.repetition_penalty)
    _check(d.no_repeat_ngram_size >= 0, "decoding.no_repeat_ngram_size", ">= 0", d.no_repeat_ngram_size)
    t = cfg.task
    _check(t.validation_limit is None or t.validation_limit >= 1, "task.validation_limit", ">= 1 or null",
           t.validation_limit)
    _check(len(t.action_band) == 2 and 0 <= t.action_band[0] <= t.action_band[1], "task.action_band",
           "[low, high] with 0 <= low <= high", t.action_band)
    _check(t.tasks_per_generation >= 1, "task.tasks_per_generation", ">= 1", t.tasks_per_generation)
    for k, w in t.reward_weights.items():
        _check(w >= 0, f"task.reward_weights.{k}", ">= 0", w)
    _check(sum(t.reward_weights.values()) > 0, "task.reward_weights", "at least one weight > 0",
           t.reward_weights)
    i = cfg.inner
    _check(i.population_size >= 2, "inner.population_size", ">= 2", i.population_size)
    _check(i.generations >= 1, "inner.generations", ">= 1", i.generations)
    _check(0 <= i.elites < i.population_size, "inner.elites", f"in [0, inner.population_size={i.population_size})",
           i.elites)
    _check(1 <= i.tournament_size <= i.population_size, "inner.tournament_size",
           f"in [1, inner.population_size={i.population_size}]", i.tournament_size)
    for key in ("cx_prob", "mut_prob", "llm_mutation_share"):
        v = getattr(i, key)
        _check(0 <= v <= 1, f"inner.{key}", "in [0, 1]", v)
    o = cfg.outer
    _check(o.generations >= 1, "outer.generations", ">= 1", o.generations)
    _check(o.popsize >= 1, "outer.popsize", ">= 1", o.popsize)
    _check(0 < o.sigma0 <= 1, "outer.sigma0", "in (0, 1] (normalised search space)", o.sigma0)
    _check(o.screen_size >= 1, "outer.screen_size", ">= 1", o.screen_size)
    lo_hi = o.reward_weight_bounds
    _check(len(lo_hi) == 2 and lo_hi[0] < lo_hi[1], "outer.reward_weight_bounds", "[low, high] with low < high",
           lo_hi)


def resolve_path(path: str, key: str) -> Path:
    """Resolve a user path: absolute, else relative to the cwd, else to the project root.

    Raises:
        ConfigError: naming ``key`` when no such file exists.
    """
    p = Path(path).expanduser()
    candidates = [p] if p.is_absolute() else [Path.cwd() / p, PROJECT_ROOT / p]
    for c in candidates:
        if c.exists():
            return c.resolve()
    raise ConfigError(f"config key '{key}': file not found: {path}")
