"""Structured configs (Hydra ConfigStore) and their validation.

One dataclass per component (defined in :mod:`evotrainer.config_schema`, imported from here);
``conf/config.yaml`` chooses defaults and ``conf/experiment/*.yaml``
bundles overrides. Core code receives these typed objects (via :func:`to_config`), never a
DictConfig. :func:`validate` fails early with a :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from evotrainer.backends import numerics
from evotrainer.backends.numerics import DTYPES, auto_reason, resolve_dtype
from evotrainer.config_schema import (
    ArchiveConfig,
    BudgetConfig,
    Config,
    CurriculumConfig,
    DecodingConfig,
    DistillConfig,
    EvaluateConfig,
    EvaluationConfig,
    ExecutorConfig,
    HackCheckConfig,
    KnobSpec,
    ModelConfig,
    OpenAIConfig,
    OuterConfig,
    RaceConfig,
    RayConfig,
    RollbackConfig,
    SelfEvolveConfig,
    TaskConfig,
    TrackingConfig,
)
from evotrainer.errors import ConfigError
from evotrainer.model_schema import LoraSettings
from evotrainer.search.inner_config import (  # the inner loop's own config is the `inner:` schema
    STRATEGY_KEYS,
    InnerConfig,
)

log = logging.getLogger(__name__)

__all__ = ["ArchiveConfig", "Config", "DecodingConfig", "DistillConfig", "EvaluateConfig", "EvaluationConfig",
           "ExecutorConfig", "InnerConfig", "ModelConfig", "OpenAIConfig", "BudgetConfig", "HackCheckConfig",
           "KnobSpec", "OuterConfig", "RaceConfig", "RayConfig", "RollbackConfig", "CurriculumConfig",
           "LoraSettings", "SelfEvolveConfig", "TaskConfig", "TrackingConfig", "CONF_DIR", "PACKAGE_DATA",
           "PROJECT_ROOT", "find_data_path", "register_configs", "resolve_path", "to_config", "validate"]

_PACKAGE = Path(__file__).resolve().parent  # the evotrainer folder
PROJECT_ROOT = _PACKAGE.parent
"""The checkout's root in an editable install (tests and benchmarks run there); meaningless in a wheel."""
PACKAGE_DATA = _PACKAGE if (_PACKAGE / "conf").is_dir() else PROJECT_ROOT
"""The folder that holds the shipped data: ``conf/`` (Hydra's config dir), ``populations/`` (seed policies)
and ``validation_set/`` (the meta-validation set, its ``SHA256SUMS`` and ``README.md``).

In a checkout (editable install, ``PYTHONPATH``) they are top-level folders of the repository, so this is
:data:`PROJECT_ROOT`; a wheel carries them inside the package (``pyproject.toml`` maps the root folders to
``evotrainer.conf``, ``evotrainer.populations`` and ``evotrainer.validation_set``), so there it is the
installed ``evotrainer`` folder."""
CONF_DIR = PACKAGE_DATA / "conf"
"""Hydra's config dir (``config.yaml``, ``task/``, ``experiment/``, ``study/``), an absolute path."""
MODES = ("evaluate", "evolve", "selfevolve", "distill")
BACKENDS = ("hf", "vllm", "openai")
OPENAI_SERVERS = ("auto", "vllm", "llamacpp", "ollama", "transformers", "openai", "generic")
OPENAI_PREFILL = ("auto", "continue", "completions", "none")
EXECUTORS = ("local", "ray")


def register_configs() -> None:
    """Register the schema so YAML keys are type-checked and unknown keys rejected, and the app's
    resolvers (``${evotrainer_unique:}`` in the run and sweep folder names)."""
    from evotrainer.resolvers import register_resolvers

    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    for kind in EXECUTORS:  # `executor=ray` picks one (config.yaml defaults: `executor: local`)
        cs.store(group="executor", name=kind, node=ExecutorConfig(kind=kind))
    register_resolvers()


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
    return resolve_roles(out)


def resolve_roles(cfg: Config) -> Config:
    """The model roles as they will run, set on ``cfg`` in place and returned: ``dtype=auto`` replaced by the
    dtype the hardware computes natively (:func:`~evotrainer.backends.numerics.resolve_dtype`), and the
    mutator following the policy model where the user left its keys at their defaults
    (:meth:`~evotrainer.model_schema.ModelConfig.following`). Idempotent."""
    if cfg.model.dtype == "auto" and cfg.model.backend != "openai":  # which numbers a run computes in is worth a line
        log.info("model.dtype=auto: %s (%s)", resolve_dtype("auto", cfg.model.device), auto_reason(cfg.model.device))
    if cfg.model.dtype == "bfloat16" and cfg.model.backend == "hf" and cfg.model.device == "cpu" \
            and not numerics.cpu_bf16_flags():
        log.warning("model.dtype=bfloat16 on a CPU that lists neither amx_bf16 nor avx512_bf16: torch emulates it, "
                    "and its matrix products run far slower than float32 (model.dtype=auto picks float32 here)")
    cfg.model = replace(cfg.model, dtype=resolve_dtype(cfg.model.dtype, cfg.model.device))
    mutator = cfg.mutator.following(cfg.model)
    cfg.mutator = replace(mutator, dtype=resolve_dtype(mutator.dtype, mutator.device))
    return cfg


def _check(cond: bool, key: str, expected: str, got: Any) -> None:
    if not cond:
        raise ConfigError(f"config key '{key}': expected {expected}, got {got!r}")


def validate(cfg: Config) -> None:
    """Fail early on out-of-range settings. Raises ConfigError naming the key."""
    _check(cfg.mode in MODES, "mode", f"one of {MODES}", cfg.mode)
    _check(cfg.seed >= 0, "seed", "an integer >= 0", cfg.seed)
    for role, m in (("model", cfg.model), ("mutator", cfg.mutator)):
        if m is None:
            continue
        _check(m.backend in BACKENDS, f"{role}.backend", f"one of {BACKENDS}", m.backend)
        _check(m.batch_size >= 1, f"{role}.batch_size", ">= 1", m.batch_size)
        _check(m.max_context is None or m.max_context >= 256, f"{role}.max_context", ">= 256 or null",
               m.max_context)
        _check(m.dtype in DTYPES, f"{role}.dtype", "auto, float32, bfloat16 or float16", m.dtype)
        _validate_openai(role, m)
    d = cfg.decoding
    _check(d.max_new_tokens >= 1, "decoding.max_new_tokens", ">= 1", d.max_new_tokens)
    _check(d.temperature >= 0, "decoding.temperature", ">= 0", d.temperature)
    _check(0 < d.top_p <= 1, "decoding.top_p", "in (0, 1]", d.top_p)
    _check(d.repetition_penalty >= 1, "decoding.repetition_penalty", ">= 1.0", d.repetition_penalty)
    _check(d.no_repeat_ngram_size >= 0, "decoding.no_repeat_ngram_size", ">= 0", d.no_repeat_ngram_size)
    t = cfg.task
    for key in ("validation_limit", "transfer_limit", "train_limit"):
        value = getattr(t, key)
        _check(value is None or value >= 1, f"task.{key}", ">= 1 or null", value)
    for key in ("validation_subset", "transfer_path", "train_path"):
        value = getattr(t, key)
        _check(value is None or (isinstance(value, str) and value.strip() != ""), f"task.{key}",
               "a file path or null", value)
    _check(t.tasks_per_generation >= 1, "task.tasks_per_generation", ">= 1", t.tasks_per_generation)
    _check(t.plain_prompt is None or (isinstance(t.plain_prompt, str) and t.plain_prompt.strip() != ""),
           "task.plain_prompt", "an instruction or null", t.plain_prompt)
    # task.reward_weights: checked once against the family's components (runtime.task_settings)
    cfg.inner.validate()  # every inner.* key (evotrainer/search/inner_config.py)
    o = cfg.outer
    _check(o.generations >= 1, "outer.generations", ">= 1", o.generations)
    _check(o.popsize >= 2, "outer.popsize", ">= 2 (pycma needs at least two candidates)", o.popsize)
    _check(0 < o.sigma0 <= 1, "outer.sigma0", "in (0, 1] (normalised search space)", o.sigma0)
    _check(o.screen_size >= 1, "outer.screen_size", ">= 1", o.screen_size)
    _check(o.seed_screen_size is None or o.seed_screen_size >= 1, "outer.seed_screen_size", ">= 1 or null",
           o.seed_screen_size)
    _check(o.screen_top_k >= 1, "outer.screen_top_k", ">= 1", o.screen_top_k)
    _check(0.5 < o.race.level < 1, "outer.race.level", "in (0.5, 1)", o.race.level)
    _check(0.5 < o.race.drop_level < 1, "outer.race.drop_level", "in (0.5, 1)", o.race.drop_level)
    _check(o.race.survivors >= 1, "outer.race.survivors", ">= 1", o.race.survivors)
    _check(all(isinstance(k, int) and k > o.screen_size for k in o.race.sizes)
           and all(a < b for a, b in zip(o.race.sizes, o.race.sizes[1:], strict=False)), "outer.race.sizes",
           f"increasing item counts above outer.screen_size ({o.screen_size})", list(o.race.sizes))
    _check(o.race.futility is None or -1 <= o.race.futility <= 1, "outer.race.futility",
           "null or an S_val difference in [-1, 1]", o.race.futility)
    _check(o.race.stratum_level is None or 0.5 < o.race.stratum_level < 1, "outer.race.stratum_level",
           "null or a one-sided confidence in (0.5, 1)", o.race.stratum_level)
    lo_hi = o.reward_weight_bounds
    _check(len(lo_hi) == 2 and lo_hi[0] < lo_hi[1], "outer.reward_weight_bounds", "[low, high] with low < high",
           lo_hi)
    _validate_outer_extra(o, cfg.task)
    _validate_run_services(cfg)
    _validate_selfevolve(cfg.selfevolve, cfg.task)
    _validate_selfevolve_outer(cfg)
    _validate_evaluate(cfg.evaluate)
    _validate_distill(cfg)


def _validate_openai(role: str, m: ModelConfig) -> None:
    """``<role>.openai.*`` when ``<role>.backend=openai``; nothing is checked for other backends."""
    if m.backend != "openai":
        return
    o, key = m.openai, f"{role}.openai"
    _check(isinstance(o.base_url, str) and o.base_url.startswith(("http://", "https://")), f"{key}.base_url",
           "the server's URL, e.g. http://127.0.0.1:8000/v1", o.base_url)
    _check(isinstance(o.model, str) and o.model.strip() != "", f"{key}.model", "the served model's name", o.model)
    _check(o.api_key_env is None or (isinstance(o.api_key_env, str)
                                     and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", o.api_key_env) is not None),
           f"{key}.api_key_env",
           "the NAME of an environment variable (never the key itself) or null", "<hidden>")
    _check(o.server in OPENAI_SERVERS, f"{key}.server", f"one of {OPENAI_SERVERS}", o.server)
    _check(o.prefill in OPENAI_PREFILL, f"{key}.prefill", f"one of {OPENAI_PREFILL}", o.prefill)
    _check(set(o.approximate) <= {"repetition_penalty"}, f"{key}.approximate",
           "a list of [repetition_penalty] (no server has another setting to approximate with)", list(o.approximate))
    _check(o.concurrency >= 1, f"{key}.concurrency", ">= 1", o.concurrency)
    _check(o.timeout_s > 0, f"{key}.timeout_s", "> 0 seconds", o.timeout_s)
    _check(o.max_retries >= 0, f"{key}.max_retries", ">= 0", o.max_retries)
    for name in ("price_prompt", "price_completion"):
        value = getattr(o, name)
        _check(value is None or value >= 0, f"{key}.{name}", "USD per million tokens >= 0, or null", value)


def _priced(m: ModelConfig | None) -> bool:
    return m is not None and m.backend == "openai" and (m.openai.price_prompt is not None
                                                       or m.openai.price_completion is not None)


def _validate_run_services(cfg: Config) -> None:
    """``tracking.*`` and ``executor.*``."""
    _check(bool(cfg.tracking.experiment.strip()), "tracking.experiment", "a non-empty name", cfg.tracking.experiment)
    x = cfg.executor
    _check(x.kind in EXECUTORS, "executor", f"one of {EXECUTORS}", x.kind)
    _check(x.ray.workers >= 1, "executor.ray.workers", ">= 1", x.ray.workers)
    _check(x.ray.threads is None or x.ray.threads >= 1, "executor.ray.threads", ">= 1 or null", x.ray.threads)
    _check(x.ray.gpus >= 0, "executor.ray.gpus", ">= 0", x.ray.gpus)
    if cfg.model.backend == "openai":  # the server runs the policy model; nothing of it is in this process
        _check(x.kind == "local", "executor", "local with model.backend=openai (the server does the work; set "
               "model.openai.concurrency)", x.kind)
        _check(cfg.mode != "selfevolve", "model.backend", "hf or vllm with mode=selfevolve (it trains the policy "
               "model in this process; selfevolve.judge may be openai)", cfg.model.backend)
        _check(cfg.inner.adapter_mutation_share == 0, "inner.adapter_mutation_share",
               "0 with model.backend=openai (adapter genes are trained on the policy model in this process)",
               cfg.inner.adapter_mutation_share)
    usd = cfg.outer.budget.usd
    _check(usd is None or (usd > 0 and (_priced(cfg.model) or _priced(cfg.mutator))), "outer.budget.usd",
           "null, or > 0 with a price (model.openai.price_* or mutator.openai.price_*) on an openai role", usd)
    if x.kind == "ray":  # LoRA training needs the policy model in this process
        _check(cfg.mode != "selfevolve", "executor", "local with mode=selfevolve (it trains the model here)", x.kind)
        _check(cfg.mode != "distill", "executor", "local with mode=distill (it trains the model here)", x.kind)
        _check(cfg.inner.adapter_mutation_share == 0, "executor",
               "local with inner.adapter_mutation_share > 0 (adapter mutations train the model here)", x.kind)


def _validate_evaluate(e: EvaluateConfig) -> None:
    """``evaluate.*``: dataset shape, limit, bootstrap settings, comparison spec."""
    _check(e.format in ("auto", "jsonl", "folder"), "evaluate.format", "auto, jsonl or folder", e.format)
    _check(e.limit is None or e.limit >= 1, "evaluate.limit", ">= 1 or null", e.limit)
    _check(e.bootstrap >= 100, "evaluate.bootstrap", ">= 100 resamples", e.bootstrap)
    _check(0 < e.level < 1, "evaluate.level", "in (0, 1)", e.level)
    _check(e.compare is None or (e.compare.startswith("best_seed_vs:") and len(e.compare) > len("best_seed_vs:")),
           "evaluate.compare", "null or 'best_seed_vs:<policy ref>'", e.compare)
    _check(bool(e.results.strip()) and "/" not in e.results and "\\" not in e.results, "evaluate.results",
           "a file name stem (no folder)", e.results)


def _validate_distill(cfg: Config) -> None:
    """``distill.*``; with ``mode=distill`` also the data it needs (training items, comparison items)."""
    d = cfg.distill
    for key in ("train_limit", "eval_limit"):
        value = getattr(d, key)
        _check(value is None or value >= 1, f"distill.{key}", ">= 1 or null", value)
    _check(d.dataset is None or d.dataset.strip() != "", "distill.dataset", "a JSONL file or null", d.dataset)
    _check(bool(d.results.strip()) and "/" not in d.results and "\\" not in d.results, "distill.results",
           "a file name stem (no folder)", d.results)
    d.lora.check("distill.lora")
    if cfg.mode != "distill":
        return
    _check(cfg.task.train_path is not None, "task.train_path",
           "a JSONL file of training items with mode=distill (the teacher writes the SFT data on them)", None)
    _check(d.dataset is not None or cfg.task.transfer_path is not None, "distill.dataset",
           "a JSONL file of comparison items, or task.transfer_path set (mode=distill compares the arms there)", None)
    _check(cfg.model.backend == "hf", "model.backend", "hf with mode=distill (it trains the policy model in this "
           "process)", cfg.model.backend)
    _check(d.student.strip() != "" or cfg.task.plain_prompt is not None, "distill.student",
           "a seed name or export folder when task.plain_prompt is null (\"\" means the plain prompt)", d.student)


def _validate_outer_extra(o: OuterConfig, task: TaskConfig) -> None:
    """Outer-loop settings (space, damping, rollback, budget, reward-hacking check)."""
    _check(o.sigma_floor is None or 0 < o.sigma_floor <= 1, "outer.sigma_floor", "in (0, 1] or null",
           o.sigma_floor)
    _check(0 <= o.heldout_share < 1, "outer.heldout_share", "in [0, 1)", o.heldout_share)
    _check(0 < o.damping <= 1, "outer.damping", "in (0, 1] (1 = undamped)", o.damping)
    _check(o.patience >= 1, "outer.patience", ">= 1", o.patience)
    _check(o.min_gain >= 0, "outer.min_gain", ">= 0", o.min_gain)
    for group, specs in (("space", o.space), ("extras", o.extras), ("strategy", o.strategy)):
        for name, k in specs.items():
            key = f"outer.{group}.{name}"
            if group == "strategy":  # an inner.* key of the candidate's inner loop (InnerConfig.with_strategy)
                _check(name in STRATEGY_KEYS, key, f"the name of an inner-loop strategy setting "
                       f"{sorted(STRATEGY_KEYS)}", name)
                low, high = STRATEGY_KEYS[name]
                _check(low <= k.low and k.high <= high, key, f"bounds inside [{low}, {high}] (the values "
                       f"inner.{name} accepts)", [k.low, k.high])
                _check(not k.integer, f"{key}.integer", "false (an inner-loop setting is a real number)", k.integer)
            _check(k.low < k.high, f"{key}.low", f"< high={k.high}", k.low)
            _check(not k.log or k.low > 0, f"{key}.low", "> 0 with log: true", k.low)
            if group != "space":
                _check(k.init is not None and k.low <= k.init <= k.high, f"{key}.init",
                       f"a value in [{k.low}, {k.high}]", k.init)
    if "real_share" in o.extras:  # the share of each task batch drawn from task.train_path (LLMObjective.draw_tasks)
        k = o.extras["real_share"]
        _check(k.low >= 0 and k.high <= 1, "outer.extras.real_share", "bounds inside [0, 1]", [k.low, k.high])
        _check(task.train_path is not None, "outer.extras.real_share",
               "task.train_path set (the training items it draws)", task.train_path)
    if o.knobs:  # against the harness space: outer.space over the task family's spec.space
        from evotrainer.tasks import get_task_family

        names = set(o.space) | set(get_task_family(task.name, task).spec.space)
        unknown = [k for k in o.knobs if k not in names]
        _check(not unknown, "outer.knobs", f"names from outer.space {sorted(names)}", o.knobs)
    r = o.rollback
    _check(r.top_k >= 1, "outer.rollback.top_k", ">= 1", r.top_k)
    _check(r.tolerance >= 0, "outer.rollback.tolerance", ">= 0", r.tolerance)
    _check(r.generations >= 1, "outer.rollback.generations", ">= 1", r.generations)
    _check(r.oscillation_threshold >= 0, "outer.rollback.oscillation_threshold", ">= 0", r.oscillation_threshold)
    _check(r.oscillations >= 1, "outer.rollback.oscillations", ">= 1", r.oscillations)
    _check(r.window >= r.oscillations + 1, "outer.rollback.window", f">= oscillations + 1 = {r.oscillations + 1}",
           r.window)
    _check(0 < r.sigma_shrink <= 1, "outer.rollback.sigma_shrink", "in (0, 1]", r.sigma_shrink)
    b = o.budget
    _check(b.seconds is None or b.seconds > 0, "outer.budget.seconds", "> 0 or null", b.seconds)
    _check(b.tokens is None or b.tokens >= 1, "outer.budget.tokens", ">= 1 or null", b.tokens)
    _check(b.evaluations is None or b.evaluations >= 1, "outer.budget.evaluations", ">= 1 or null", b.evaluations)
    _check(b.rollouts is None or b.rollouts >= 1, "outer.budget.rollouts", ">= 1 or null", b.rollouts)
    _check(b.prompt_tokens is None or b.prompt_tokens >= 1, "outer.budget.prompt_tokens", ">= 1 or null",
           b.prompt_tokens)
    from evotrainer.harness.candidates import CANDIDATE_SOURCES

    _check(o.candidate_source in CANDIDATE_SOURCES, "outer.candidate_source", f"one of {CANDIDATE_SOURCES}",
           o.candidate_source)
    h = o.hack_check
    for key in ("fitness_rise", "s_val_drop", "penalty"):
        _check(getattr(h, key) >= 0, f"outer.hack_check.{key}", ">= 0", getattr(h, key))


def _validate_selfevolve(s: SelfEvolveConfig, task: TaskConfig) -> None:
    """Self-evolution settings; every key is named ``selfevolve.<key>``."""
    for key in ("rounds", "seed_tasks", "samples_per_task", "judge_repeats", "judge_max_new_tokens", "pool_cap",
                "dev_size", "replay_cap"):
        _check(getattr(s, key) >= 1, f"selfevolve.{key}", ">= 1", getattr(s, key))
    _check(s.new_tasks_per_round >= 0, "selfevolve.new_tasks_per_round", ">= 0", s.new_tasks_per_round)
    _check(s.pool_cap >= s.seed_tasks, "selfevolve.pool_cap", f">= selfevolve.seed_tasks={s.seed_tasks}",
           s.pool_cap)
    _check(0 < s.dedup_cosine <= 1, "selfevolve.dedup_cosine", "in (0, 1] (1 = exact duplicates only)",
           s.dedup_cosine)
    _check(s.temperature > 0, "selfevolve.temperature", "> 0 (rollouts are sampled)", s.temperature)
    _check(s.judge_temperature >= 0, "selfevolve.judge_temperature", ">= 0", s.judge_temperature)
    for key in ("model_judge_weight", "pass_threshold", "real_share"):
        _check(0 <= getattr(s, key) <= 1, f"selfevolve.{key}", "in [0, 1]", getattr(s, key))
    _check(s.real_share == 0 or task.train_path is not None, "selfevolve.real_share",
           "0 while task.train_path is null (the real training items it draws)", s.real_share)
    _check(s.dev_source in DEV_SOURCES, "selfevolve.dev_source", f"one of {DEV_SOURCES}", s.dev_source)
    _check(s.dev_source != "real" or task.train_path is not None, "selfevolve.dev_source",
           "'generated' while task.train_path is null (the real items a 'real' dev set is drawn from)", s.dev_source)
    _check(s.transfer_limit is None or s.transfer_limit >= 0, "selfevolve.transfer_limit",
           ">= 0 (0 = no transfer comparison) or null (all)", s.transfer_limit)
    _check(s.dev_seed_offset >= 1, "selfevolve.dev_seed_offset", ">= 1 (0 would reuse the run's own streams)",
           s.dev_seed_offset)
    _check(s.val_limit is None or s.val_limit >= 1, "selfevolve.val_limit", ">= 1 or null", s.val_limit)
    j = s.judge
    if j is not None:
        _check(j.backend in BACKENDS, "selfevolve.judge.backend", f"one of {BACKENDS}", j.backend)
        _validate_openai("selfevolve.judge", j)
        _check(j.batch_size >= 1, "selfevolve.judge.batch_size", ">= 1", j.batch_size)
    c = s.curriculum
    _check(0 <= c.lower_below <= c.raise_above <= 1, "selfevolve.curriculum.lower_below",
           f"in [0, selfevolve.curriculum.raise_above={c.raise_above}] (both in [0, 1])", c.lower_below)
    _check(c.raise_rounds >= 1, "selfevolve.curriculum.raise_rounds", ">= 1", c.raise_rounds)
    _check(c.lower_rounds >= 1, "selfevolve.curriculum.lower_rounds", ">= 1", c.lower_rounds)
    _check(0 <= c.step <= 1, "selfevolve.curriculum.step", "in [0, 1] (share of each knob's range)", c.step)
    s.lora.check("selfevolve.lora")


DEV_SOURCES = ("generated", "real", "validation")
"""``selfevolve.dev_source`` values: the family's generator, whole groups of ``task.train_path``, or the
meta-validation items the rounds report (``selfevolve.val_limit`` of them)."""

SELFEVOLVE_EXTRAS = ("real_share", "pass_threshold")
"""The ``outer.extras`` a self-evolution harness candidate applies (``selfevolve/objective.py``)."""


def _validate_selfevolve_outer(cfg: Config) -> None:
    """``selfevolve.outer_loop`` (the outer loop over the training harness) and ``outer.budget.train_tokens``."""
    s, o = cfg.selfevolve, cfg.outer
    searched = cfg.mode == "selfevolve" and s.outer_loop
    _check(not s.outer_loop or cfg.mode == "selfevolve", "selfevolve.outer_loop", "false unless mode=selfevolve",
           s.outer_loop)
    t = o.budget.train_tokens
    _check(t is None or (t >= 1 and searched), "outer.budget.train_tokens",
           "null, or >= 1 with mode=selfevolve selfevolve.outer_loop=true (only there is training counted)", t)
    if not searched:
        return
    unknown = sorted(set(o.extras) - set(SELFEVOLVE_EXTRAS))
    _check(not unknown, "outer.extras", f"names from {list(SELFEVOLVE_EXTRAS)} with selfevolve.outer_loop", unknown)
    if "pass_threshold" in o.extras:
        k = o.extras["pass_threshold"]
        _check(k.low >= 0 and k.high <= 1, "outer.extras.pass_threshold", "bounds inside [0, 1]", [k.low, k.high])
    _check(not o.strategy, "outer.strategy", "empty with selfevolve.outer_loop (no inner loop runs)",
           sorted(o.strategy))


def find_data_path(path: str) -> Path | None:
    """Find a configured file or folder: absolute as given; relative, in the current folder first, then
    in the shipped data (:data:`PACKAGE_DATA`: the checkout's root, or the installed package).

    So ``validation_set/<name>.jsonl`` means the user's own file when the current folder has one,
    and the shipped copy otherwise (the repository's ``validation_set/`` in a checkout, the wheel's copy
    when installed anywhere; Hydra keeps the launch folder as the current folder: ``hydra.job.chdir: false``).

    Args:
        path: a path as written in the config (``~`` is expanded).

    Returns:
        The resolved absolute path, or None when neither place has it.
    """
    p = Path(path).expanduser()
    for c in [p] if p.is_absolute() else [Path.cwd() / p, PACKAGE_DATA / p]:
        if c.exists():
            return c.resolve()
    return None


def resolve_path(path: str, key: str) -> Path:
    """:func:`find_data_path`, or an error naming the config key.

    Raises:
        ConfigError: ``config key '<key>': file not found: <path>`` (with the places looked in) when
            neither the current folder nor the shipped data has it.
    """
    found = find_data_path(path)
    if found is None:
        where = "" if Path(path).expanduser().is_absolute() else f" (looked in {Path.cwd()} and {PACKAGE_DATA})"
        raise ConfigError(f"config key '{key}': file not found: {path}{where}")
    return found
