"""Structured configs (Hydra ConfigStore) and their validation.

One dataclass per component; ``evotrainer/conf/config.yaml`` chooses defaults and ``conf/experiment/*.yaml``
bundles overrides. Core code receives these typed objects (via :func:`to_config`), never a
DictConfig. :func:`validate` fails early with a :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from evotrainer.errors import ConfigError
from evotrainer.lora_settings import LoraSettings
from evotrainer.search.inner_config import InnerConfig  # the inner loop's own config is the `inner:` schema

__all__ = [
    "ArchiveConfig",
    "Config",
    "DecodingConfig",
    "EvaluateConfig",
    "EvaluationConfig",
    "ExecutorConfig",
    "InnerConfig",
    "ModelConfig",
    "OpenAIConfig",
    "BudgetConfig",
    "HackCheckConfig",
    "KnobSpec",
    "OuterConfig",
    "RaceConfig",
    "RayConfig",
    "RollbackConfig",
    "CurriculumConfig",
    "LoraSettings",
    "SelfEvolveConfig",
    "TaskConfig",
    "TrackingConfig",
    "PACKAGE_DATA",
    "PROJECT_ROOT",
    "find_data_path",
    "register_configs",
    "resolve_path",
    "to_config",
    "validate",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout's root in an editable install (tests and benchmarks run there); meaningless in a wheel."""
PACKAGE_DATA = Path(__file__).resolve().parent
"""Where the shipped data lie, in a checkout and in a wheel alike: ``conf/`` (Hydra's config dir),
``populations/`` (seed policies) and ``validation_set/`` (the meta-validation set, its ``SHA256SUMS`` and
``README.md``) are folders of the ``evotrainer`` package, installed as package data."""
MODES = ("evaluate", "evolve", "selfevolve")
BACKENDS = ("hf", "vllm", "openai")
OPENAI_SERVERS = ("auto", "vllm", "llamacpp", "ollama", "transformers", "openai", "generic")
OPENAI_PREFILL = ("auto", "continue", "completions", "none")
EXECUTORS = ("local", "ray")


@dataclass
class OpenAIConfig:
    """The OpenAI-compatible server a role's model runs on (``<role>.backend=openai``; issue 28,
    ``evotrainer/backends/openai_compat.py``). The API key itself is never in the config or the archive:
    only the name of the environment variable that holds it."""

    base_url: str | None = None  # e.g. http://127.0.0.1:8000/v1 (vLLM), :8080/v1 (llama.cpp), :11434/v1 (Ollama)
    model: str | None = None  # the served model's name (the requests' `model` field)
    api_key_env: str | None = None  # name of the environment variable holding the key; null = no key (local)
    # which request fields and answer-prefill path the server has: auto (from its /models list) | vllm |
    # llamacpp | ollama | transformers (`transformers serve`) | openai (the hosted API) | generic
    server: str = "auto"
    # answer prefill: auto (the server's own way, else refused) | continue (the server continues a final
    # assistant message) | completions (/completions with the chat template applied here) | none (refused)
    prefill: str = "auto"
    # tokenizer (local folder or cached hub id) for prefill=completions and prompt fitting (model.max_context);
    # null = the served model's name when that is a local folder
    tokenizer: str | None = None
    # decoding fields sent as the server's own variant, the difference archived (repetition_penalty: the
    # server's penalty also counts prompt tokens); any other setting the server lacks is refused up front
    approximate: list[str] = field(default_factory=list)
    concurrency: int = 8  # requests in flight at once
    timeout_s: float = 120.0  # seconds per request attempt
    max_retries: int = 4  # retries of 429 / 5xx / connection failures, exponential backoff (the openai client's)
    price_prompt: float | None = None  # USD per million prompt tokens (the cost line, outer.budget.usd); null = none
    price_completion: float | None = None  # USD per million completion tokens; null = none


@dataclass
class ModelConfig:
    """Which model plays a role (policy or mutator) and how it runs."""

    path: str | None = None  # HF folder or hub id; None = the embedded SmolLM2-135M-Instruct GGUF
    gguf_file: str | None = None  # GGUF file name inside `path`, when `path` holds GGUFs
    # "hf" (transformers, CPU or GPU), "vllm" (GPU extra) or "openai" (a server: the `openai` keys below)
    backend: str = "hf"
    dtype: str = "float32"  # fp32 on the CPU path
    batch_size: int = 32  # requests per forward batch (8 policies x 3 meetings fit one batch)
    max_context: int | None = 4096  # tokens; None = the model config's max_position_embeddings
    # torch CPU threads (an override); None = auto: the cores other processes leave free (1-minute load
    # average and a 0.5 s CPU sample) and this job's share of a parallel Hydra sweep, >= 1 (evotrainer.threads)
    threads: int | None = None
    device: str = "cpu"  # torch device of the hf backend: "cpu", "cuda", "cuda:1", ...
    # hf backend: compute a prompt prefix shared by several requests once and reuse its KV states
    prefix_sharing: bool = True
    prefix_min_tokens: int = 32  # shortest shared prefix worth reusing, tokens
    # MiB of prefix KV states kept for the whole run (served entries kept longest; docs/outer_loop_budget.md); 0 = none
    prefix_cache_mb: int = 512
    kv_cache: str = "static"  # hf backend: static (preallocated, written in place) | dynamic (grows each step)
    # cap on rows x (prompt + new tokens) per forward batch, bounds the KV cache's memory; null = rows only
    max_batch_tokens: int | None = 32768
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)  # backend=openai only


@dataclass
class DecodingConfig:
    """Default generation settings of a rollout (a policy's decoding genes override them)."""

    max_new_tokens: int = 160  # tokens, >= 1
    temperature: float = 0.0  # 0 = greedy: deterministic fitness whatever the batch
    top_p: float = 1.0
    repetition_penalty: float = 1.0  # over generated tokens only; >= 1
    no_repeat_ngram_size: int = 4  # block repeated n-grams of the generated text only; 0 = off


@dataclass
class TaskConfig:
    """The task family and its data (``task.*``). The family's own defaults (difficulty, reward weights,
    harness space) come from the ``task`` config group (``conf/task/<name>.yaml``, picked by
    ``task=<name>``); a key missing there takes the family's default (``TaskFamily.default_*``)."""

    # a registered family (meeting_minutes, tool_agent) or a class path "my_pkg.my_family.MyFamily"
    # (evotrainer.tasks.get_task_family; docs/adding_a_task_family.md)
    name: str = "meeting_minutes"
    options: dict[str, Any] = field(default_factory=dict)  # family constructor options (tool_agent: max_steps, ...)
    validation_path: str = "validation_set/meeting_minutes.jsonl"  # meta-validation set (JSONL)
    # more meta-validation JSONL files, appended (e.g. validation_set/qmsum_meetings.jsonl: real meetings); the
    # held-out split, the screening subset and the race order are stratified by each item's `source`
    validation_extra: list[str] = field(default_factory=list)
    validation_limit: int | None = None  # first N items only (of each file)
    # text file of item ids (one a line, '#' comments): only these items of task.validation_path are used, in
    # file order (validation_extra files are whole); null = all (e.g. validation_set/meeting_minutes_core.txt:
    # 40 of the 100 hand-written meetings, stratified by style and length)
    validation_subset: str | None = None
    # real meetings no selection uses, for the run's transfer report (e.g. validation_set/qmsum_transfer.jsonl);
    # loaded by runtime.load_transfer, which refuses an item sharing a meeting or transcript with the
    # meta-validation set; null = none
    transfer_path: str | None = None
    transfer_limit: int | None = None  # first N items of task.transfer_path only; null = all
    field_map: dict[str, str] = field(default_factory=dict)  # our field name -> name in the file
    action_band: list[int] = field(default_factory=lambda: [2, 5])  # good action-item count range
    # generator knobs (natural units) the harness starts from; unset knobs: the family's default_difficulty
    difficulty: dict[str, float] = field(default_factory=dict)
    # reward weights by component (on the simplex after normalising); unset: the family's default_reward_weights
    reward_weights: dict[str, float] = field(default_factory=dict)
    tasks_per_generation: int = 4  # generated tasks per inner generation batch (common random numbers)
    # where the policy's text goes: transcript_first (after the transcript, so every policy reading one
    # transcript shares its KV cache) | system_first (as the system prompt, before the transcript)
    prompt_layout: str = "transcript_first"
    # the family's plain instruction, the whole system prompt of the "plain prompt" policy the run's transfer
    # report compares the final best and the best seed with (transfer.py); domain text, so it comes from the
    # task group (conf/task/meeting_minutes.yaml: "Summarize the meeting."); null = no plain-prompt policy
    plain_prompt: str | None = None


@dataclass
class EvaluationConfig:
    population_path: str = "populations/meeting_minutes.yaml"
    policies: list[str] = field(default_factory=list)  # subset of policy ids; empty = all
    show_best_output: bool = True  # print the best policy's output on the first item


@dataclass
class EvaluateConfig:
    """``mode=evaluate`` on any dataset and any policies (evotrainer/evaluate.py; README "Evaluate on your own
    meetings"). Null / empty keys fall back to ``task.validation_*`` and ``evaluation.policies``."""

    dataset: str | None = None  # .jsonl file or folder of <name>.txt + <name>.md; null = task.validation_path
    format: str = "auto"  # auto (folder -> folder, .jsonl -> jsonl) | jsonl | folder
    field_map: dict[str, str] = field(default_factory=dict)  # jsonl: our field -> the file's; empty = task.field_map
    limit: int | None = None  # first N items; null = task.validation_limit
    policies: list[str] = field(default_factory=list)  # seed name | archive:<id prefix>|archive:best | export folder
    archive: str | None = None  # archive.db or run folder that archive:<id> refs are looked up in
    compare: str | None = None  # "best_seed_vs:<policy ref>": side-by-side table with paired bootstrap CI
    bootstrap: int = 2000  # bootstrap resamples over items (percentile intervals)
    level: float = 0.95  # interval coverage
    results: str = "evaluate"  # results file stem in the run dir: <stem>.json, <stem>_items.csv, <stem>_groups.csv


@dataclass
class KnobSpec:
    """Bounds and scaling of one harness parameter (a difficulty knob or an extra knob), natural units."""

    low: float = 0.0
    high: float = 1.0
    log: bool = False  # CMA-ES steps in log space between low and high (needs low > 0)
    integer: bool = False  # applied value rounded half-up (the search itself stays continuous)
    init: float | None = None  # extra knobs only (required there); difficulty knobs start at task.difficulty


@dataclass
class RollbackConfig:
    """When the outer loop restores the best archived (harness, population) pair (harness/rollback.py)."""

    enabled: bool = True
    top_k: int = 3  # best (harness, population) pairs kept, by whole-selection-set S_val
    tolerance: float = 0.03  # S_val units: "regressed" = current screen S_val < best's - tolerance
    generations: int = 2  # ... for this many outer generations in a row
    oscillation_threshold: float = 0.02  # S_val deltas smaller than this are not counted as swings
    oscillations: int = 2  # sign changes of the S_val delta (within `window`) that trigger a rollback
    window: int = 4  # S_val deltas looked at for oscillation
    sigma_shrink: float = 0.5  # CMA-ES sigma multiplied by this on rollback (then floored)


@dataclass
class RaceConfig:
    """How a harness candidate's policies race the incumbent on selection items (harness/racing.py).

    Stage 1 is the screening subset (``outer.screen_size`` items); then the cumulative item counts in
    ``sizes``; then the whole selection set. A promotion needs the paired lower bound above 0.
    """

    sizes: list[int] = field(default_factory=lambda: [24])  # cumulative item counts between screen and all
    level: float = 0.95  # one-sided confidence of "better than the incumbent" (paired t lower bound > 0)
    # one-sided confidence of "worse than the incumbent" (dropped from the race); lower than `level` because a
    # wrong drop only loses one candidate while every item evaluated costs a rollout
    drop_level: float = 0.8
    survivors: int = 1  # policies per harness candidate that go on after each stage
    # before the last stage, stop a policy whose paired mean difference is <= this (S_val units; null = never):
    # it points the wrong way, and going on to every selection item would cost a rollout per item
    futility: float | None = 0.0


@dataclass
class BudgetConfig:
    """Hard limits of an evolve run; null = unlimited. Checked before each harness candidate."""

    seconds: float | None = None  # wall-clock seconds since the run started (model load included)
    tokens: int | None = None  # generated tokens (policy rollouts + mutator calls)
    evaluations: int | None = None  # harness-candidate evaluations (one inner run + screening each)
    # policy rollouts counted from the archive: uncached fitness, meta_screen and meta_val rows, one per task
    # or selection item (archive.schema.BUDGET_KINDS; the held-out and transfer reports are not counted)
    rollouts: int | None = None
    usd: float | None = None  # cost of the model calls, from the model.openai / mutator.openai prices


@dataclass
class HackCheckConfig:
    """Reward-hacking flag: inner fitness rose while the screening S_val fell (harness/hacking.py)."""

    enabled: bool = True
    fitness_rise: float = 0.01  # inner best fitness gain over the run under the candidate, reward units
    s_val_drop: float = 0.01  # screening S_val fall vs the population it started from, S_val units
    penalty: float = 0.05  # subtracted from a flagged candidate's score told to CMA-ES


@dataclass
class OuterConfig:
    """Outer CMA-ES loop over the harness."""

    generations: int = 2
    popsize: int = 3  # CMA-ES lambda (candidates per outer generation)
    # where candidates come from (harness/candidates.py): coevolve (CMA-ES) | frozen_harness (always the start
    # harness) | random_harness (uniform in the harness bounds, no update): the arms of +study=ablation
    candidate_source: str = "coevolve"
    sigma0: float = 0.25  # initial step size in the normalised [0, 1] search space
    sigma_floor: float | None = 0.02  # CMA-ES sigma >= this (applied step: damping x sigma); null = none
    screen_size: int = 8  # selection-set items used to screen candidates (fixed stratified subset)
    seed_screen: bool = True  # generation 0 screens every seed; the best one is the first incumbent
    screen_top_k: int = 3  # per candidate, screen its fittest policy and its k-1 fittest new genomes
    heldout_share: float = 0.25  # share of the meta-validation set held out for the final report only
    knobs: list[str] = field(default_factory=list)  # difficulty knobs in the harness; empty = all of `space`
    # bounds/scaling per difficulty knob (conf/task/<name>.yaml); unset knobs: the family's default_space
    space: dict[str, KnobSpec] = field(default_factory=dict)
    extras: dict[str, KnobSpec] = field(default_factory=dict)  # extra knobs (need init), e.g. pass_threshold
    evolve_reward_weights: bool = True  # false: reward weights fixed at task.reward_weights (normalised)
    reward_weight_bounds: list[float] = field(default_factory=lambda: [-2.0, 2.0])  # logit bounds
    damping: float = 0.5  # applied harness = a + damping * (CMA proposal - a); 1 = undamped
    patience: int = 3  # early stop: outer generations without an incumbent S_val gain >= min_gain
    min_gain: float = 0.005  # S_val units
    rollback: RollbackConfig = field(default_factory=RollbackConfig)
    race: RaceConfig = field(default_factory=RaceConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    hack_check: HackCheckConfig = field(default_factory=HackCheckConfig)


@dataclass
class CurriculumConfig:
    """How a self-evolution run moves the generator's difficulty with the judge pass rate."""

    raise_above: float = 0.9  # pass rate above this for `raise_rounds` rounds in a row: harder tasks
    lower_below: float = 0.5  # pass rate below this for `lower_rounds` rounds in a row: easier tasks
    raise_rounds: int = 2
    lower_rounds: int = 1
    step: float = 0.15  # each moved knob changes by this share of its (low, high) range
    knobs: list[str] = field(default_factory=list)  # knobs moved; empty = every difficulty knob


@dataclass
class SelfEvolveConfig:
    """LoRA self-evolution (expert iteration): pool -> rollout -> judge -> filter -> train -> evaluate.

    See ``evotrainer/selfevolve/round.py`` for one round, top to bottom.
    """

    rounds: int = 2
    policy: str = ""  # policy id from evaluation.population_path; "" = the first one (after evaluation.policies)
    seed_tasks: int = 4  # generated once at the start; their references are round 1's replay data
    new_tasks_per_round: int = 4  # generated each round at the current difficulty
    pool_cap: int = 16  # most tasks in the pool (seed tasks stay; the oldest generated ones leave first)
    dedup_cosine: float = 0.85  # a new task this close (MiniLM cosine of transcripts) to a pool task is dropped
    samples_per_task: int = 4  # rollouts per pool task and round
    temperature: float = 0.7  # rollout sampling temperature (> 0)
    judge_repeats: int = 3  # model-judge grades per sample, averaged
    judge_temperature: float = 0.7  # sampling temperature of the model judge's repeats (0 = greedy: 1 repeat is enough)
    judge_max_new_tokens: int = 6  # the grade is one number
    model_judge_weight: float = 0.3  # judge = (1 - w) * rule reward + w * grade / 10 (w renormalised to 0 when unparsed)
    judge: ModelConfig | None = None  # the model judge; null = the policy's base model (never its adapter)
    pass_threshold: float = 0.7  # samples with judge score >= this are trained on, in [0, 1]
    replay_cap: int = 64  # most examples in the replay buffer (seed references + earlier kept samples)
    dev_size: int = 8  # fixed dev-set tasks (generated once per run, never in the pool)
    dev_seed_offset: int = 1000  # the dev set's generator stream uses seed + this
    val_limit: int | None = 16  # meta-validation items scored per round (first N); null = all
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    lora: LoraSettings = field(default_factory=LoraSettings)


@dataclass
class ArchiveConfig:
    path: str = "archive.db"  # relative paths are under the Hydra run dir
    # mode=evolve: rewrite report.html beside the archive after generation 0, each outer generation and at the
    # end, so a long run can be watched in a browser (evotrainer/archive/live_report.py)
    live_report: bool = True


@dataclass
class TrackingConfig:
    """Per-generation metrics to TensorBoard and/or MLflow, local files only (evotrainer/tracking.py)."""

    tensorboard: bool = False  # event files under <run dir>/tensorboard (pip install 'evotrainer[track]')
    mlflow: bool = False  # params + metrics to MLflow (pip install 'evotrainer[track]')
    mlflow_uri: str | None = None  # null = sqlite:///<run dir>/mlflow.db (a local file, no server)
    experiment: str = "evotrainer"  # MLflow experiment name


@dataclass
class RayConfig:
    """The Ray executor's workers (evotrainer/executor.py)."""

    address: str | None = None  # null = start a local Ray instance; "auto" or "host:port" = join a cluster
    workers: int = 2  # Ray actors, each loading its own copy of the policy model
    threads: int | None = None  # torch threads per worker; null = free cores // workers (local), 1 (cluster)
    gpus: float = 0.0  # GPUs per worker (for model.device=cuda or model.backend=vllm on a cluster)


@dataclass
class ExecutorConfig:
    """Where policy rollouts run: ``local`` (this process) or ``ray`` (Ray actors; ``executor=ray``)."""

    kind: str = "local"  # local | ray
    ray: RayConfig = field(default_factory=RayConfig)


@dataclass
class Config:
    mode: str = "evolve"  # "evaluate" | "evolve" | "selfevolve"
    seed: int = 0  # the root seed; every RNG derives from it
    debug: bool = False  # show full tracebacks
    resume: str | None = None  # mode=evolve: a run folder to continue, or true = the newest of this config
    resume_force: bool = False  # resume even when the config differs from the run's (keys are listed)
    model: ModelConfig = field(default_factory=ModelConfig)
    mutator: ModelConfig = field(default_factory=ModelConfig)  # equal to `model` = reuse the policy model
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    inner: InnerConfig = field(default_factory=InnerConfig)
    outer: OuterConfig = field(default_factory=OuterConfig)
    selfevolve: SelfEvolveConfig = field(default_factory=SelfEvolveConfig)
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)


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
    return out


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
        _check(m.dtype in ("float32", "bfloat16", "float16"), f"{role}.dtype",
               "float32, bfloat16 or float16", m.dtype)
        _validate_openai(role, m)
    d = cfg.decoding
    _check(d.max_new_tokens >= 1, "decoding.max_new_tokens", ">= 1", d.max_new_tokens)
    _check(d.temperature >= 0, "decoding.temperature", ">= 0", d.temperature)
    _check(0 < d.top_p <= 1, "decoding.top_p", "in (0, 1]", d.top_p)
    _check(d.repetition_penalty >= 1, "decoding.repetition_penalty", ">= 1.0", d.repetition_penalty)
    _check(d.no_repeat_ngram_size >= 0, "decoding.no_repeat_ngram_size", ">= 0", d.no_repeat_ngram_size)
    t = cfg.task
    _check(t.validation_limit is None or t.validation_limit >= 1, "task.validation_limit", ">= 1 or null",
           t.validation_limit)
    _check(t.transfer_limit is None or t.transfer_limit >= 1, "task.transfer_limit", ">= 1 or null",
           t.transfer_limit)
    for key in ("validation_subset", "transfer_path"):
        value = getattr(t, key)
        _check(value is None or (isinstance(value, str) and value.strip() != ""), f"task.{key}",
               "a file path or null", value)
    _check(len(t.action_band) == 2 and 0 <= t.action_band[0] <= t.action_band[1], "task.action_band",
           "[low, high] with 0 <= low <= high", t.action_band)
    _check(t.tasks_per_generation >= 1, "task.tasks_per_generation", ">= 1", t.tasks_per_generation)
    _check(t.plain_prompt is None or (isinstance(t.plain_prompt, str) and t.plain_prompt.strip() != ""),
           "task.plain_prompt", "an instruction or null", t.plain_prompt)
    for k, w in t.reward_weights.items():
        _check(w >= 0, f"task.reward_weights.{k}", ">= 0", w)
    _check(not t.reward_weights or sum(t.reward_weights.values()) > 0, "task.reward_weights",
           "at least one weight > 0", t.reward_weights)
    cfg.inner.validate()  # every inner.* key (evotrainer/search/inner_config.py)
    o = cfg.outer
    _check(o.generations >= 1, "outer.generations", ">= 1", o.generations)
    _check(o.popsize >= 2, "outer.popsize", ">= 2 (pycma needs at least two candidates)", o.popsize)
    _check(0 < o.sigma0 <= 1, "outer.sigma0", "in (0, 1] (normalised search space)", o.sigma0)
    _check(o.screen_size >= 1, "outer.screen_size", ">= 1", o.screen_size)
    _check(o.screen_top_k >= 1, "outer.screen_top_k", ">= 1", o.screen_top_k)
    _check(0.5 < o.race.level < 1, "outer.race.level", "in (0.5, 1)", o.race.level)
    _check(0.5 < o.race.drop_level < 1, "outer.race.drop_level", "in (0.5, 1)", o.race.drop_level)
    _check(o.race.survivors >= 1, "outer.race.survivors", ">= 1", o.race.survivors)
    _check(all(isinstance(k, int) and k > o.screen_size for k in o.race.sizes)
           and all(a < b for a, b in zip(o.race.sizes, o.race.sizes[1:], strict=False)), "outer.race.sizes",
           f"increasing item counts above outer.screen_size ({o.screen_size})", list(o.race.sizes))
    _check(o.race.futility is None or -1 <= o.race.futility <= 1, "outer.race.futility",
           "null or an S_val difference in [-1, 1]", o.race.futility)
    lo_hi = o.reward_weight_bounds
    _check(len(lo_hi) == 2 and lo_hi[0] < lo_hi[1], "outer.reward_weight_bounds", "[low, high] with low < high",
           lo_hi)
    _validate_outer_extra(o, cfg.task)
    _validate_run_services(cfg)
    _validate_selfevolve(cfg.selfevolve)
    _validate_evaluate(cfg.evaluate)


def _validate_openai(role: str, m: ModelConfig) -> None:
    """``<role>.openai.*`` when ``<role>.backend=openai`` (issue 28); nothing is checked for other backends."""
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
    """``tracking.*`` and ``executor.*`` (issue 16)."""
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
        _check(cfg.inner.adapter_mutation_share == 0, "executor",
               "local with inner.adapter_mutation_share > 0 (adapter mutations train the model here)", x.kind)


def _validate_evaluate(e: EvaluateConfig) -> None:
    """``evaluate.*`` (issue 8): dataset shape, limit, bootstrap settings, comparison spec."""
    _check(e.format in ("auto", "jsonl", "folder"), "evaluate.format", "auto, jsonl or folder", e.format)
    _check(e.limit is None or e.limit >= 1, "evaluate.limit", ">= 1 or null", e.limit)
    _check(e.bootstrap >= 100, "evaluate.bootstrap", ">= 100 resamples", e.bootstrap)
    _check(0 < e.level < 1, "evaluate.level", "in (0, 1)", e.level)
    _check(e.compare is None or (e.compare.startswith("best_seed_vs:") and len(e.compare) > len("best_seed_vs:")),
           "evaluate.compare", "null or 'best_seed_vs:<policy ref>'", e.compare)
    _check(bool(e.results.strip()) and "/" not in e.results and "\\" not in e.results, "evaluate.results",
           "a file name stem (no folder)", e.results)


def _validate_outer_extra(o: OuterConfig, task: TaskConfig) -> None:
    """Outer-loop settings of issue 5 (space, damping, rollback, budget, reward-hacking check)."""
    _check(o.sigma_floor is None or 0 < o.sigma_floor <= 1, "outer.sigma_floor", "in (0, 1] or null",
           o.sigma_floor)
    _check(0 <= o.heldout_share < 1, "outer.heldout_share", "in [0, 1)", o.heldout_share)
    _check(0 < o.damping <= 1, "outer.damping", "in (0, 1] (1 = undamped)", o.damping)
    _check(o.patience >= 1, "outer.patience", ">= 1", o.patience)
    _check(o.min_gain >= 0, "outer.min_gain", ">= 0", o.min_gain)
    for group, specs in (("space", o.space), ("extras", o.extras)):
        for name, k in specs.items():
            key = f"outer.{group}.{name}"
            _check(k.low < k.high, f"{key}.low", f"< high={k.high}", k.low)
            _check(not k.log or k.low > 0, f"{key}.low", "> 0 with log: true", k.low)
            if group == "extras":
                _check(k.init is not None and k.low <= k.init <= k.high, f"{key}.init",
                       f"a value in [{k.low}, {k.high}]", k.init)
    if o.knobs:  # against the harness space: outer.space over the task family's default_space
        from evotrainer.tasks import get_task_family

        names = set(o.space) | set(getattr(get_task_family(task.name, task), "default_space", {}))
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
    from evotrainer.harness.candidates import CANDIDATE_SOURCES

    _check(o.candidate_source in CANDIDATE_SOURCES, "outer.candidate_source", f"one of {CANDIDATE_SOURCES}",
           o.candidate_source)
    h = o.hack_check
    for key in ("fitness_rise", "s_val_drop", "penalty"):
        _check(getattr(h, key) >= 0, f"outer.hack_check.{key}", ">= 0", getattr(h, key))


def _validate_selfevolve(s: SelfEvolveConfig) -> None:
    """Self-evolution settings (issue 6); every key is named ``selfevolve.<key>``."""
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
    for key in ("model_judge_weight", "pass_threshold"):
        _check(0 <= getattr(s, key) <= 1, f"selfevolve.{key}", "in [0, 1]", getattr(s, key))
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
    lo = s.lora
    for key in ("rank", "steps", "batch_size"):
        _check(getattr(lo, key) >= 1, f"selfevolve.lora.{key}", ">= 1", getattr(lo, key))
    _check(lo.max_length >= 16, "selfevolve.lora.max_length", ">= 16 tokens", lo.max_length)
    _check(lo.alpha > 0, "selfevolve.lora.alpha", "> 0", lo.alpha)
    _check(0 <= lo.dropout < 1, "selfevolve.lora.dropout", "in [0, 1)", lo.dropout)
    _check(lo.lr > 0, "selfevolve.lora.lr", "> 0 (absolute, not log10)", lo.lr)
    _check(0 <= lo.replay_ratio < 1, "selfevolve.lora.replay_ratio", "in [0, 1)", lo.replay_ratio)
    _check(lo.grad_clip >= 0, "selfevolve.lora.grad_clip", ">= 0 (0 = off)", lo.grad_clip)
    _check(lo.weight_decay >= 0, "selfevolve.lora.weight_decay", ">= 0", lo.weight_decay)
    _check(bool(lo.target_modules) and all(isinstance(m, str) and m for m in lo.target_modules),
           "selfevolve.lora.target_modules", "a non-empty list of module names", lo.target_modules)


def find_data_path(path: str) -> Path | None:
    """Find a configured file or folder: absolute as given; relative, in the current folder first, then
    in the package's shipped data (:data:`PACKAGE_DATA`).

    So ``validation_set/meeting_minutes.jsonl`` means the user's own file when the current folder has one,
    and the shipped copy otherwise, in a checkout and in a wheel installed anywhere (Hydra keeps the
    launch folder as the current folder: ``hydra.job.chdir: false``).

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
