"""Builds the real components a run needs from its config (the app boundary).

Core code receives typed objects; this module is the one place that turns config sections into a
backend, a task family, decoding settings and the validation data.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from evotrainer.backends.base import LLM, SamplingParams
from evotrainer.config import Config, DecodingConfig, ExecutorConfig, KnobSpec, ModelConfig, resolve_path
from evotrainer.errors import ConfigError, DataError
from evotrainer.genome import Policy, load_population
from evotrainer.tasks import get_task_family
from evotrainer.tasks.base import Task, TaskFamily

__all__ = [
    "TaskSettings", "build_family", "build_llm", "load_seed_population", "load_validation", "sampling_from",
    "task_settings",
]

log = logging.getLogger(__name__)


def build_llm(cfg: ModelConfig, *, progress: bool = False, role: str = "model",
              executor: ExecutorConfig | None = None) -> LLM:
    """Load the backend of one model role (``model`` = policy model, ``mutator``).

    The transformers backend gets ``model.threads`` torch CPU threads, or when it is None the count
    :func:`evotrainer.threads.apply_threads` chooses from the cores free now. With ``executor.kind ==
    "ray"`` the result is a :class:`~evotrainer.executor.RayExecutor` whose workers each call this function
    with ``cfg`` (an LLM too; ``executor`` None or ``local``: the backend itself).

    Raises:
        ConfigError: ``model.threads`` is below 1; ``executor=ray`` without the ray package.
        ModelError: the model cannot be located or loaded (the message names the path).
    """
    if executor is not None and executor.kind == "ray":
        from evotrainer.executor import RayExecutor

        return RayExecutor(cfg, executor.ray)
    if cfg.backend == "vllm":
        from evotrainer.backends.vllm import VLLMBackend, VLLMBackendConfig

        if not cfg.path:
            raise ConfigError(f"{role}.path: the vllm backend needs a Hugging Face model folder or id")
        return VLLMBackend(VLLMBackendConfig(path=cfg.path, max_context=cfg.max_context))
    from evotrainer.backends.hf import HFBackend, HFBackendConfig
    from evotrainer.threads import apply_threads

    threads = apply_threads(cfg.threads)  # model.threads, or the cores free now (chosen once per process)
    return HFBackend(HFBackendConfig(
        path=cfg.path, gguf_file=cfg.gguf_file, dtype=cfg.dtype, batch_size=cfg.batch_size,
        max_context=cfg.max_context, threads=threads, progress=progress, device=cfg.device,
        prefix_sharing=cfg.prefix_sharing, prefix_min_tokens=cfg.prefix_min_tokens,
        prefix_cache_mb=cfg.prefix_cache_mb, max_batch_tokens=cfg.max_batch_tokens,
        kv_cache=cfg.kv_cache,
    ))


def build_family(cfg: Config) -> TaskFamily:
    """The task family of ``task.name`` (a registered name or a class path), its knobs and reward weights
    checked (ConfigError names the key)."""
    family = get_task_family(cfg.task.name, cfg.task)
    task_settings(cfg, family)
    return family


@dataclass(frozen=True)
class TaskSettings:
    """The family's settings of a run: its defaults with the config's keys on top.

    Attributes:
        difficulty: every generator knob's start value (natural units), checked by the family.
        reward_weights: weight per reward component, each >= 0 (not normalised).
        space: the harness' bounds and scaling per knob (``config.KnobSpec``).
    """

    difficulty: dict[str, float]
    reward_weights: dict[str, float]
    space: dict[str, KnobSpec]


def task_settings(cfg: Config, family: TaskFamily) -> TaskSettings:
    """``task.difficulty``, ``task.reward_weights`` and ``outer.space`` over the family's defaults (its
    ``default_difficulty``, ``default_reward_weights`` and ``default_space``): the ``task`` config group
    (``conf/task/<name>.yaml``) sets them for Hydra runs; a config built in code gets the family's.

    Raises:
        ConfigError: an unknown reward component or difficulty knob, or a bad value (names the key).
    """
    difficulty = {**dict(family.default_difficulty), **dict(cfg.task.difficulty)}
    resolve = getattr(family, "resolve_difficulty", None)
    if resolve is not None:
        resolve(difficulty)
    weights = {**dict(family.default_reward_weights), **dict(cfg.task.reward_weights)}
    unknown = set(weights) - set(family.reward_components)
    if unknown:
        raise ConfigError(
            f"task.reward_weights: unknown component(s) {sorted(unknown)}; "
            f"expected names from {list(family.reward_components)}"
        )
    defaults = {k: KnobSpec(**dict(v)) for k, v in dict(getattr(family, "default_space", {})).items()}
    space = {**defaults, **dict(cfg.outer.space)}
    return TaskSettings(difficulty, weights, space)


def sampling_from(cfg: DecodingConfig, seed: int = 0) -> SamplingParams:
    """Default rollout decoding from config."""
    return SamplingParams(
        temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, seed=seed,
        repetition_penalty=cfg.repetition_penalty, no_repeat_ngram_size=cfg.no_repeat_ngram_size,
    )


def load_validation(cfg: Config, family: TaskFamily) -> list[Task]:
    """The meta-validation items of ``task.validation_path`` then of each ``task.validation_extra`` file
    (first ``task.validation_limit`` of each file).

    Raises:
        DataError: a file is a folder, not UTF-8, or empty; or two files share a task id.
    """
    keys = [("task.validation_path", cfg.task.validation_path)] + [
        (f"task.validation_extra[{i}]", p) for i, p in enumerate(cfg.task.validation_extra)]
    items: list[Task] = []
    seen: dict[str, str] = {}
    for key, value in keys:
        path = resolve_path(value, key)
        if path.is_dir():
            raise DataError(f"{path}: {key} must be a JSONL file, got a folder")
        try:
            got = family.load_validation(path, limit=cfg.task.validation_limit, field_map=dict(cfg.task.field_map))
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        if not got:
            raise DataError(f"{path}: no meta-validation items (the file is empty or blank)")
        for t in got:
            if t.task_id in seen:
                raise DataError(f"{path}: task id {t.task_id!r} ({key}) is already used in {seen[t.task_id]}")
            seen[t.task_id] = str(path)
        items += got
    return items


def load_seed_population(cfg: Config) -> list[Policy]:
    """The seed population, restricted to ``evaluation.policies`` when that list is non-empty."""
    path = resolve_path(cfg.evaluation.population_path, "evaluation.population_path")
    population = load_population(path)
    wanted = list(cfg.evaluation.policies)
    if wanted:
        by_id = {p.id: p for p in population}
        missing = [w for w in wanted if w not in by_id]
        if missing:
            raise ConfigError(f"evaluation.policies: unknown policy id(s) {missing} in {path}; "
                              f"known: {sorted(by_id)}")
        population = [by_id[w] for w in wanted]
    return population
