"""Builds the real components a run needs from its config (the app boundary).

Core code receives typed objects; this module is the one place that turns config sections into a
backend, a task family, decoding settings and the validation data.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from evotrainer.backends.base import LLM, SamplingParams
from evotrainer.config import Config, DecodingConfig, ExecutorConfig, KnobSpec, ModelConfig, resolve_path
from evotrainer.errors import ConfigError, DataError
from evotrainer.genome import Policy, load_population
from evotrainer.tasks import get_task_family
from evotrainer.tasks.base import Task, TaskFamily
from evotrainer.tasks.reward_weights import check_reward_weights

__all__ = [
    "TaskSettings", "build_family", "build_llm", "check_apart", "load_seed_population", "load_training",
    "load_transfer", "load_validation",
    "sampling_from", "task_settings",
]

log = logging.getLogger(__name__)


def build_llm(cfg: ModelConfig, *, progress: bool = False, role: str = "model",
              executor: ExecutorConfig | None = None) -> LLM:
    """Load the backend of one model role (``model`` = policy model, ``mutator``, ``selfevolve.judge``).

    ``backend=openai`` connects to the server of ``<role>.openai`` instead
    (:class:`~evotrainer.backends.openai_compat.OpenAIBackend`: the server is asked for its models here).

    The transformers backend gets ``model.threads`` torch CPU threads, or when it is None the count
    :func:`evotrainer.backends.threads.apply_threads` chooses from the cores free now. With ``executor.kind ==
    "ray"`` the result is a :class:`~evotrainer.backends.executor.RayExecutor` whose workers each call this function
    with ``cfg`` (an LLM too; ``executor`` None or ``local``: the backend itself).

    Raises:
        ConfigError: ``model.threads`` is below 1; ``executor=ray`` without the ray package.
        ModelError: the model cannot be located or loaded (the message names the path); an openai server
            cannot be reached, refuses the key or does not serve the model (one line).
    """
    if executor is not None and executor.kind == "ray":
        from evotrainer.backends.executor import RayExecutor

        return RayExecutor(cfg, executor.ray, build_llm)
    if cfg.backend == "openai":
        from evotrainer.backends.openai_compat import OpenAIBackend

        return OpenAIBackend(cfg.openai, max_context=cfg.max_context, role=role)
    if cfg.backend == "vllm":
        from evotrainer.backends.vllm import VLLMBackend, VLLMBackendConfig

        if not cfg.path:
            raise ConfigError(f"{role}.path: the vllm backend needs a Hugging Face model folder or id")
        return VLLMBackend(VLLMBackendConfig(path=cfg.path, max_context=cfg.max_context))
    from evotrainer.backends.hf import HFBackend
    from evotrainer.backends.threads import apply_threads

    threads = apply_threads(cfg.threads)  # model.threads, or the cores free now (chosen once per process)
    return HFBackend(replace(cfg, threads=threads), progress=progress)  # the model schema is the backend's settings


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
    """``task.difficulty``, ``task.reward_weights`` and ``outer.space`` over the family's defaults
    (:class:`~evotrainer.tasks.base.FamilySpec`): the ``task`` config group (``conf/task/<name>.yaml``) sets them
    for Hydra runs; a config built in code gets the family's.

    The one check of the difficulty knobs (names and the family's bounds) and of the reward weights
    (:func:`~evotrainer.tasks.reward_weights.check_reward_weights`).

    Raises:
        ConfigError: an unknown reward component or difficulty knob, or a bad value (names the key).
    """
    spec = family.spec
    difficulty = {**dict(spec.difficulty), **dict(cfg.task.difficulty)}
    for key, value in difficulty.items():
        if key not in spec.difficulty_bounds:
            raise ConfigError(f"task.difficulty.{key}: unknown difficulty knob; expected one of "
                              f"{sorted(spec.difficulty_bounds)}")
        lo, hi = spec.difficulty_bounds[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise ConfigError(f"task.difficulty.{key}: expected a number in [{lo:g}, {hi:g}], got {value!r}")
    weights = check_reward_weights({**dict(spec.reward_weights), **dict(cfg.task.reward_weights)},
                                   tuple(spec.reward_weights))
    space = {**{k: KnobSpec(**dict(v)) for k, v in spec.space.items()}, **dict(cfg.outer.space)}
    return TaskSettings(difficulty, weights, space)


def sampling_from(cfg: DecodingConfig, seed: int = 0) -> SamplingParams:
    """Default rollout decoding from config."""
    return SamplingParams(
        temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, seed=seed,
        repetition_penalty=cfg.repetition_penalty, no_repeat_ngram_size=cfg.no_repeat_ngram_size,
    )


def load_validation(cfg: Config, family: TaskFamily) -> list[Task]:
    """The meta-validation items of ``task.validation_path`` (only the ids of ``task.validation_subset`` when
    set) then of each ``task.validation_extra`` file (first ``task.validation_limit`` of each file).

    Raises:
        ConfigError: ``task.validation_subset`` is missing, lists no id, or an id not in the file.
        DataError: a file is a folder, not UTF-8, or empty; or two files share a task id.
    """
    keys = [("task.validation_path", cfg.task.validation_path)] + [
        (f"task.validation_extra[{i}]", p) for i, p in enumerate(cfg.task.validation_extra)]
    subset = _subset_ids(cfg.task.validation_subset)
    items: list[Task] = []
    seen: dict[str, str] = {}
    for key, value in keys:
        path, got = _load_file(cfg, family, key, value, cfg.task.validation_limit,
                               keep=subset if key == "task.validation_path" else None)
        for t in got:
            if t.task_id in seen:
                raise DataError(f"{path}: task id {t.task_id!r} ({key}) is already used in {seen[t.task_id]}")
            seen[t.task_id] = str(path)
        items += got
    return items


def load_transfer(cfg: Config, family: TaskFamily, validation: list[Task] | None = None) -> list[Task]:
    """The transfer items of ``task.transfer_path`` (the first ``task.transfer_limit``, all when null; ``[]`` when
    the path is null): real items no selection uses, for the run's transfer report (DESIGN: a gain counts
    only when it transfers).

    Args:
        validation: the run's meta-validation items (:func:`load_validation`); loaded here when None.

    Raises:
        DataError: the file is a folder, not UTF-8 or empty; or an item shares a group (``Task.group``) or an
            input (content hash) with a meta-validation item: a group must not straddle selection and transfer.
    """
    if cfg.task.transfer_path is None:
        return []
    path, items = _load_file(cfg, family, "task.transfer_path", cfg.task.transfer_path, cfg.task.transfer_limit)
    val = load_validation(cfg, family) if validation is None else validation
    check_apart(path, items, val, "meta-validation", "transfer")
    return items


def load_training(cfg: Config, family: TaskFamily, validation: list[Task], transfer: list[Task]) -> list[Task]:
    """The training items of ``task.train_path`` (the first ``task.train_limit``, all when null; ``[]`` when the
    path is null): tasks with references that task batches may draw (``outer.extras.real_share``).

    Raises:
        DataError: the file is a folder, not UTF-8 or empty; or an item shares a group (``Task.group``) or an
            input (content hash) with a meta-validation or transfer item: what trains never selects or reports.
    """
    if cfg.task.train_path is None:
        return []
    path, items = _load_file(cfg, family, "task.train_path", cfg.task.train_path, cfg.task.train_limit)
    check_apart(path, items, validation, "meta-validation", "training")
    check_apart(path, items, transfer, "transfer", "training")
    return items


def check_apart(path: Path, items: Sequence[Task], others: Sequence[Task], their: str, ours: str) -> None:
    """Raise DataError naming ``path`` when an item of ``items`` shares a group (``Task.group``) or an input (content
    hash) with ``others``; ``their`` and ``ours`` name the two sets in the message (e.g. "training", "transfer")."""
    groups = {t.group: t.task_id for t in others if t.group is not None}
    hashes = {t.content_hash: t.task_id for t in others}
    for t in items:
        if t.group is not None and t.group in groups:
            raise DataError(f"{path}: item {t.task_id!r} is of group {t.group!r}, which the {their} set also "
                            f"holds (item {groups[t.group]!r}); {ours} items must be of other groups")
        if t.content_hash in hashes:
            raise DataError(f"{path}: item {t.task_id!r} has the input of {their} item "
                            f"{hashes[t.content_hash]!r}; {ours} items must be other inputs")


def _subset_ids(value: str | None) -> list[str] | None:
    """The ids listed in the ``task.validation_subset`` file (one a line; blank lines and ``#`` comments
    skipped), or None when the key is null."""
    if value is None:
        return None
    path = resolve_path(value, "task.validation_subset")
    if path.is_dir():
        raise ConfigError(f"config key 'task.validation_subset': expected a text file of item ids, got a folder: "
                          f"{path}")
    ids = [s for line in path.read_text(encoding="utf-8").splitlines() if (s := line.split("#", 1)[0].strip())]
    if not ids:
        raise ConfigError(f"config key 'task.validation_subset': {path} lists no item id")
    return ids


def _load_file(cfg: Config, family: TaskFamily, key: str, value: str, limit: int | None,
               keep: list[str] | None = None) -> tuple[Path, list[Task]]:
    """(path, items) of one JSONL file: the first ``limit`` items (all when None), of the ``keep`` ids only when
    given (in file order, limit applied after)."""
    path = resolve_path(value, key)
    if path.is_dir():
        raise DataError(f"{path}: {key} must be a JSONL file, got a folder")
    try:
        got = family.load_validation(path, limit=limit if keep is None else None, field_map=dict(cfg.task.field_map))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    if not got:
        raise DataError(f"{path}: no items in {key} (the file is empty or blank)")
    if keep is not None:
        known = {t.task_id for t in got}
        missing = [i for i in keep if i not in known]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise ConfigError(f"config key 'task.validation_subset': id(s) {missing[:5]}{more} not in {path}")
        wanted = set(keep)
        got = [t for t in got if t.task_id in wanted][:limit]
    return path, got


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
