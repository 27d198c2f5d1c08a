"""The config schema: one dataclass per component, the types and defaults of every key Hydra composes.

Registered in Hydra's ConfigStore by :func:`evotrainer.config.register_configs` (so YAML keys are type-checked
and unknown keys rejected) and checked by :func:`evotrainer.config.validate`; import these names from
:mod:`evotrainer.config`. The comment beside a field is its help text: ``scripts/gen_config_reference.py``
turns them into ``docs/reference/config.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evotrainer.model_schema import (  # the model roles (the backends read it)
    LoraSettings,
    ModelConfig,
    OpenAIConfig,
)
from evotrainer.search.inner_config import InnerConfig  # the inner loop's own config is the `inner:` schema

__all__ = ["ArchiveConfig", "BudgetConfig", "Config", "CurriculumConfig", "DecodingConfig", "DistillConfig",
           "EvaluateConfig",
           "EvaluationConfig", "ExecutorConfig", "HackCheckConfig", "KnobSpec", "ModelConfig", "OpenAIConfig",
           "OuterConfig", "RaceConfig", "RayConfig", "RollbackConfig", "SelfEvolveConfig", "TaskConfig",
           "TrackingConfig"]


@dataclass
class DecodingConfig:
    """Default generation settings of a rollout (a policy's decoding genes override them)."""

    max_new_tokens: int = 160  # tokens, >= 1
    temperature: float = 0.0  # 0 = greedy: deterministic fitness whatever the batch
    top_p: float = 1.0  # nucleus mass in (0, 1] when sampling (temperature > 0); 1 = no cut
    repetition_penalty: float = 1.0  # over generated tokens only; >= 1
    no_repeat_ngram_size: int = 4  # block repeated n-grams of the generated text only; 0 = off


@dataclass
class TaskConfig:
    """The task family and its data (``task.*``). The family's own defaults (difficulty, reward weights,
    harness space) come from the ``task`` config group (``conf/task/<name>.yaml``, picked by
    ``task=<name>``); a key missing there takes the family's default (``TaskFamily.spec``)."""

    # a registered family (evotrainer.tasks.TASK_FAMILIES) or a class path "my_pkg.my_family.MyFamily"
    # (evotrainer.tasks.get_task_family; docs/adding_a_task_family.md)
    name: str = "meeting_minutes"
    # the family's own options, declared and checked by the family (its from_config; conf/task/<name>.yaml lists
    # them)
    options: dict[str, Any] = field(default_factory=dict)
    validation_path: str = "validation_set/meeting_minutes.jsonl"  # meta-validation set (JSONL)
    # more meta-validation JSONL files, appended (e.g. a file of real items); the
    # held-out split, the screening subset and the race order are stratified by each item's `source`
    validation_extra: list[str] = field(default_factory=list)
    validation_limit: int | None = None  # first N items only (of each file)
    # text file of item ids (one a line, '#' comments): only these items of task.validation_path are used, in
    # file order (validation_extra files are whole); null = all (e.g. a stratified
    # core of the hand-written items)
    validation_subset: str | None = None
    # real items no selection uses, for the run's transfer report; loaded by runtime.load_transfer, which
    # refuses an item sharing a group (Task.group) or an input with the
    # meta-validation set; null = none
    transfer_path: str | None = None
    transfer_limit: int | None = None  # first N items of task.transfer_path only; null = all
    # training items with references (real items that neither selection nor the transfer report uses); the harness knob outer.extras.real_share is the share of each task batch drawn
    # from them, the rest generated. runtime.load_training refuses an item sharing a group or an input with the
    # meta-validation or transfer items; null = generated batches only
    train_path: str | None = None
    train_limit: int | None = None  # first N items of task.train_path only; null = all
    field_map: dict[str, str] = field(default_factory=dict)  # our field name -> name in the file
    # generator knobs (natural units) the harness starts from; unset knobs: the family's spec.difficulty
    difficulty: dict[str, float] = field(default_factory=dict)
    # reward weights by component (on the simplex after normalising); unset: the family's spec.reward_weights
    reward_weights: dict[str, float] = field(default_factory=dict)
    tasks_per_generation: int = 4  # generated tasks per inner generation batch (common random numbers)
    # the family's plain instruction, the whole system prompt of the "plain prompt" policy the run's transfer
    # report compares the final best and the best seed with (stats/transfer.py); domain text, so it comes from the
    # task group (conf/task/<name>.yaml); null = no plain-prompt policy
    plain_prompt: str | None = None


@dataclass
class EvaluationConfig:
    population_path: str = "populations/meeting_minutes.yaml"  # seed policies (YAML `policies:` with id, role, ...)
    policies: list[str] = field(default_factory=list)  # subset of policy ids; empty = all
    show_best_output: bool = True  # print the best policy's output on the first item


@dataclass
class EvaluateConfig:
    """``mode=evaluate`` on any dataset and any policies (evotrainer/evaluate/run.py; docs/evaluate.md). Null / empty
    keys fall back to ``task.validation_*`` and ``evaluation.policies``."""

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
    """Bounds and scaling of one harness parameter (a difficulty, extra or strategy knob), natural units."""

    low: float = 0.0  # lowest value the harness may apply (natural units)
    high: float = 1.0  # highest value; > low
    log: bool = False  # CMA-ES steps in log space between low and high (needs low > 0)
    integer: bool = False  # applied value rounded half-up (the search itself stays continuous)
    init: float | None = None  # extra and strategy knobs (required there); difficulty knobs start at task.difficulty


@dataclass
class RollbackConfig:
    """When the outer loop restores the best archived (harness, population) pair (harness/rollback.py)."""

    enabled: bool = True  # restore the best pair when S_val regresses or oscillates
    top_k: int = 3  # best (harness, population) pairs kept, by whole-selection-set S_val
    tolerance: float = 0.03  # S_val units: "regressed" = current S_val (a race estimate) < best's - tolerance
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
    # refuse a promotion when the candidate is confidently worse on one item source (the task id up to its first
    # '-': qmsum, elitr, ...) of >= 3 selection items: the one-sided paired upper bound at this confidence is below
    # 0 there (null = no check; e.g. 0.8, the drop level): a pooled gain must not hide a loss on one kind of item
    stratum_level: float | None = None


@dataclass
class BudgetConfig:
    """Hard limits of an evolve run; null = unlimited. Checked before each harness candidate."""

    seconds: float | None = None  # wall-clock seconds since the run started (model load included)
    tokens: int | None = None  # generated tokens (policy rollouts + mutator calls)
    # prompt tokens read (policy model + mutator; a long input read in N windows counts every window and the
    # merge): the budget that follows what a rollout costs when one item is 10x longer than another
    prompt_tokens: int | None = None
    evaluations: int | None = None  # harness-candidate evaluations (one inner run + screening each)
    # policy rollouts counted from the archive: uncached fitness, meta_screen and meta_val rows, one per task
    # or selection item (archive.schema.BUDGET_KINDS; the held-out and transfer reports are not counted)
    rollouts: int | None = None
    usd: float | None = None  # cost of the model calls, from the model.openai / mutator.openai prices
    # LoRA training tokens (input tokens read by the trainer, padding left out) of mode=selfevolve with
    # selfevolve.outer_loop: no new harness candidate starts once spent (arms compared at equal training tokens)
    train_tokens: int | None = None


@dataclass
class HackCheckConfig:
    """Reward-hacking flag: inner fitness rose while the screening S_val fell (harness/hacking.py)."""

    enabled: bool = True  # flag and penalise candidates whose fitness rose while their S_val fell
    fitness_rise: float = 0.01  # inner best fitness gain over the run under the candidate, reward units
    s_val_drop: float = 0.01  # screening S_val fall vs the population it started from, S_val units
    penalty: float = 0.05  # subtracted from a flagged candidate's score told to CMA-ES


@dataclass
class OuterConfig:
    """Outer CMA-ES loop over the harness."""

    generations: int = 2  # outer (CMA-ES) generations, >= 1
    popsize: int = 3  # CMA-ES lambda (candidates per outer generation)
    # where candidates come from (harness/candidates.py): coevolve (CMA-ES) | frozen_harness (always the start
    # harness) | random_harness (uniform in the harness bounds, no update): the arms of +study=ablation
    candidate_source: str = "coevolve"
    sigma0: float = 0.25  # initial step size in the normalised [0, 1] search space
    sigma_floor: float | None = 0.02  # CMA-ES sigma >= this (applied step: damping x sigma); null = none
    screen_size: int = 8  # selection-set items used to screen candidates (fixed stratified subset)
    seed_screen: bool = True  # generation 0 screens every seed; the best one is the first incumbent
    # selection items generation 0 screens the seeds on (stratified like the screen); null = outer.screen_size
    seed_screen_size: int | None = None
    screen_top_k: int = 3  # per candidate, screen its fittest policy and its k-1 fittest new genomes
    heldout_share: float = 0.25  # share of the meta-validation set held out for the final report only
    knobs: list[str] = field(default_factory=list)  # difficulty knobs in the harness; empty = all of `space`
    # bounds/scaling per difficulty knob (conf/task/<name>.yaml); unset knobs: the family's spec.space
    space: dict[str, KnobSpec] = field(default_factory=dict)
    extras: dict[str, KnobSpec] = field(default_factory=dict)  # extra knobs (need init), e.g. pass_threshold
    # strategy knobs (need init): inner.* settings each harness candidate sets for its own inner loop, named as the
    # key (mutator_temperature, cx_prob, mut_prob, llm_mutation_share, reflective_share, llm_merge_share and the
    # four model-free mutation shares), bounds inside the key's range; model-free shares summing past 1 are scaled
    # to sum 1 (InnerConfig.with_strategy). The study +study=ablation_strategy turns them on (docs/concepts.md)
    strategy: dict[str, KnobSpec] = field(default_factory=dict)
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
    raise_rounds: int = 2  # rounds in a row above raise_above before the tasks get harder
    lower_rounds: int = 1  # rounds in a row below lower_below before they get easier
    step: float = 0.15  # each moved knob changes by this share of its (low, high) range
    knobs: list[str] = field(default_factory=list)  # knobs moved; empty = every difficulty knob


@dataclass
class SelfEvolveConfig:
    """LoRA self-evolution (expert iteration): pool -> rollout -> judge -> filter -> train -> evaluate.

    See ``evotrainer/selfevolve/round.py`` for one round, top to bottom.
    """

    rounds: int = 2  # self-evolution rounds, >= 1
    policy: str = ""  # policy id from evaluation.population_path; "" = the first one (after evaluation.policies)
    seed_tasks: int = 4  # generated once at the start; their references are round 1's replay data
    new_tasks_per_round: int = 4  # generated each round at the current difficulty
    pool_cap: int = 16  # most tasks in the pool (seed tasks stay; the oldest generated ones leave first)
    dedup_cosine: float = 0.85  # a new task this close (MiniLM cosine of task inputs) to a pool task is dropped
    samples_per_task: int = 4  # rollouts per pool task and round
    temperature: float = 0.7  # rollout sampling temperature (> 0)
    judge_repeats: int = 3  # model-judge grades per sample, averaged
    judge_temperature: float = 0.7  # sampling temperature of the model judge's repeats (0 = greedy: 1 repeat is enough)
    judge_max_new_tokens: int = 6  # the grade is one number
    model_judge_weight: float = 0.3  # judge = (1 - w) * rule reward + w * grade / 10 (w renormalised to 0 when unparsed)
    judge: ModelConfig | None = None  # the model judge; null = the policy's base model (never its adapter)
    pass_threshold: float = 0.7  # samples with judge score >= this are trained on, in [0, 1]
    replay_cap: int = 64  # most examples in the replay buffer (seed references + earlier kept samples)
    dev_size: int = 8  # fixed dev-set tasks (drawn once per run, never in the pool)
    # where the dev set comes from: "generated" (the family's generator, its own seed) | "real" (dev_size items of
    # task.train_path, whole groups held out of the pool, so the keep-or-revert gate reads real items) |
    # "validation" (the meta-validation items each round scores, val_limit of them; dev_size unused; scored once)
    dev_source: str = "generated"
    dev_seed_offset: int = 1000  # the dev set's generator stream uses seed + this
    val_limit: int | None = 16  # meta-validation items scored per round (first N); null = all
    # share of the pool's tasks drawn from task.train_path (real items with references, of other groups than the
    # meta-validation and transfer items), in [0, 1]: round(share * n) of the seed tasks and of each round's new
    # tasks, pool source "real", each item at most once; the rest generated. A real item's reference joins replay
    # as it enters the pool
    real_share: float = 0.0
    # transfer items (task.transfer_path) the base model and the final adapter, both under the run's policy, are
    # scored on at the end (first N); null = all, 0 = no transfer comparison
    transfer_limit: int | None = None
    # true: the outer loop searches the training harness (outer.*: real_share and pass_threshold as outer.extras,
    # the generator's difficulty knobs, the reward weights); each candidate runs `rounds` rounds from the base
    # model with a fresh adapter, scored on the meta-validation items (evotrainer/selfevolve/objective.py)
    outer_loop: bool = False
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    lora: LoraSettings = field(default_factory=LoraSettings)


@dataclass
class DistillConfig:
    """``mode=distill``: an elite prompt's outputs on the training items (``task.train_path``) become SFT data for a
    LoRA adapter used under a short prompt; the base model with the plain prompt, the teacher prompt alone and the
    short prompt with the adapter are then compared on the transfer items (evotrainer/distill/run.py;
    docs/selfevolve.md)."""

    # the teacher: a seed name | archive:<id prefix> | archive:best (looked up in evaluate.archive) | an export
    # folder | "reference" = the training items' own references (no teacher rollouts, no teacher arm);
    # "" = the first seed of evaluation.policies (of the population file when that list is empty)
    teacher: str = ""
    # the student's short prompt: "" = task.plain_prompt as the whole prompt; or a seed name / export folder
    # without an adapter
    student: str = ""
    train_limit: int | None = None  # first N training items (after task.train_limit); null = all
    dataset: str | None = None  # JSONL of comparison items (the family's schema); null = task.transfer_path
    eval_limit: int | None = None  # first N comparison items; null = all
    results: str = "distill"  # result file stem in the run dir: <stem>.json
    # the LoRA fine-tune on the teacher's outputs (no replay: every row is a teacher output)
    lora: LoraSettings = field(default_factory=lambda: LoraSettings(replay_ratio=0.0))


@dataclass
class ArchiveConfig:
    path: str = "archive.db"  # relative paths are under the Hydra run dir
    # the LLM call log (resume replays from it); null = llm_calls.db beside the archive. Runs that name one file
    # share its answers: a study's runs (`../llm_calls.db` = the sweep folder) then pay once for the greedy calls
    # they all make (generation 0's screen, the seeds' held-out and transfer scores). Relative = under the run dir.
    # mode=evaluate logs nothing unless this names a file; then each policy whose answers it holds is served from it
    call_log: str | None = None
    # mode=evolve: rewrite report.html beside the archive after generation 0, each outer generation and at the
    # end, so a long run can be watched in a browser (evotrainer/browse/live_report.py)
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
    """The Ray executor's workers (evotrainer/backends/executor.py)."""

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
    mode: str = "evolve"  # "evaluate" | "evolve" | "selfevolve" | "distill"
    seed: int = 0  # the root seed; every RNG derives from it
    debug: bool = False  # show full tracebacks
    resume: str | None = None  # mode=evolve: a run folder to continue, or true = the newest of this config
    resume_force: bool = False  # resume even when the config differs from the run's (keys are listed)
    model: ModelConfig = field(default_factory=ModelConfig)
    # the mutator's model; every key left at its default follows `model` (ModelConfig.following), so
    # `model.path=X` alone moves both roles and one load serves them
    mutator: ModelConfig = field(default_factory=ModelConfig)
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    inner: InnerConfig = field(default_factory=InnerConfig)
    outer: OuterConfig = field(default_factory=OuterConfig)
    selfevolve: SelfEvolveConfig = field(default_factory=SelfEvolveConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
