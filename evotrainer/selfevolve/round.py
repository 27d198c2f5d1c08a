"""One self-evolution round (expert iteration with LoRA), top to bottom.

    grow the pool -> roll out the policy -> judge -> keep passing samples -> LoRA SFT (+ replay)
    -> dev set (keep or revert) -> meta-validation -> archive -> curriculum

:func:`run_round` is the function the ``selfevolve`` mode calls in a loop and the co-evolution calls
for one policy: it takes the policy (system prompt sections + optional adapter folder, as a
:class:`~evotrainer.genome.Policy`), the models, the task family, the settings, an RNG and
the archive recorder, and returns the new state. It never mutates its inputs.

Method: expert iteration / rejection-sampling fine-tuning (Anthony et al. 2017; STaR, Zelikman et al.
2022; ReST, Gulcehre et al. 2023): sample several answers per task, keep those a fixed judge passes,
fine-tune on them with replay of earlier data, and accept the new weights only if a held-apart dev
set does not get worse (:class:`~evotrainer.harness.promotion.PromotionRule`, ties kept).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from evotrainer.adapters.batches import capped_steps
from evotrainer.adapters.train import TrainResult
from evotrainer.archive.schema import PoolTaskRow, RoundRow, SampleRow
from evotrainer.backends.base import LLM, Embedder, SamplingParams
from evotrainer.config import SelfEvolveConfig
from evotrainer.errors import DataError, ModelError
from evotrainer.events.kinds import PhaseEvent
from evotrainer.genome import Policy
from evotrainer.harness.promotion import PromotionRule
from evotrainer.rollout import MetaEvaluation, RolloutEvaluator, sampling_for
from evotrainer.selfevolve.curriculum import curriculum_step
from evotrainer.selfevolve.display import PhaseTimer
from evotrainer.selfevolve.examples import TrainItem, check_items, extend_replay, reference_items, to_sft
from evotrainer.selfevolve.judge import JudgeSettings, Verdict, grade_counts, judge_samples
from evotrainer.selfevolve.pool import PoolTask, add_to_pool, draw_real, real_count
from evotrainer.selfevolve.trained import fingerprint, load_trained, save_trained
from evotrainer.tasks.base import RolloutRequest, SelfEvolving, Task, TaskFamily

__all__ = ["RoundModels", "RoundOutcome", "RoundSetup", "Sample", "SelfEvolveState", "TrainFn", "pool_row",
           "run_round", "score_policy", "train_facts"]

TrainFn = Callable[..., TrainResult]
"""``train_lora(backend, examples, replay, cfg, out_dir, *, rng, parent_adapter=None) -> TrainResult``."""


@dataclass(frozen=True)
class RoundModels:
    """The models a round uses.

    Attributes:
        llm: the policy model (rollouts, dev and meta-validation; requests carry the policy's adapter).
        judge: the fixed model judge (asked without adapter: the base model, or a separate judge model).
        embedder: sentence embeddings for pool de-duplication.
        trainer: the backend ``train`` fine-tunes (the policy model's HF backend).
        evaluator: greedy scorer for dev and meta-validation (its cache is keyed by genome, adapter included).
    """

    llm: LLM
    judge: LLM
    embedder: Embedder
    trainer: Any
    evaluator: RolloutEvaluator


@dataclass(frozen=True)
class RoundSetup:
    """What stays fixed over a run's rounds.

    Attributes:
        dev: the dev set (generated once from a separate seed, or real items of groups held out of the pool, or the
            meta-validation items themselves; never in the pool or training data).
        val: the meta-validation items scored each round (never in the pool or training data).
        forbidden: content hash -> "dev set" / "meta-validation set", for the leak guard.
        reward_weights: rule reward weights of the judge (on the simplex).
        decoding: base decoding of rollouts (length, n-gram blocking); temperature comes from the config.
        bounds: each difficulty knob's (low, high).
        run_dir: the run's output folder; archived adapter paths are relative to it.
        adapter_root: where round adapters are written (inside ``run_dir``).
        reuse_trained: a resumed run: a round whose adapter folder holds a kept training of the same examples
            (:mod:`evotrainer.selfevolve.trained`) loads it instead of training again.
    """

    dev: tuple[Task, ...]
    val: tuple[Task, ...]
    forbidden: Mapping[str, str]
    reward_weights: Mapping[str, float]
    decoding: SamplingParams
    bounds: Mapping[str, tuple[float, float]]
    run_dir: Path
    adapter_root: Path
    reuse_trained: bool = False


@dataclass(frozen=True)
class SelfEvolveState:
    """Everything that carries from one round to the next.

    Attributes:
        round: rounds done so far (the next round is ``round + 1``).
        policy: the current policy (its ``adapter`` is the latest kept adapter folder, or None).
        pool: the task pool.
        replay: the replay buffer (seed references, then kept samples of kept rounds).
        difficulty: generator knobs for the next round's new tasks.
        dev_score: the current policy's dev-set score in [0, 1] (higher is better).
        val_score: its meta-validation score on the round's items, or None when not measured.
        history: pass rates since the last curriculum change.
        real: the real training items not drawn into the pool yet (``task.train_path``; each is drawn once).
    """

    round: int
    policy: Policy
    pool: tuple[PoolTask, ...]
    replay: tuple[TrainItem, ...]
    difficulty: Mapping[str, float]
    dev_score: float
    val_score: float | None = None
    history: tuple[float, ...] = ()
    real: tuple[Task, ...] = ()


@dataclass(frozen=True)
class Sample:
    """One judged rollout: the task, the sample number, the text and the verdict."""

    task: Task
    index: int
    text: str
    verdict: Verdict


@dataclass(frozen=True)
class RoundOutcome:
    """The result of :func:`run_round`.

    Attributes:
        state: the state after the round.
        row: the archived round record.
        samples: every judged sample.
        candidate: the trained policy (kept or not), or None when nothing trained.
        train: the training result, or None.
    """

    state: SelfEvolveState
    row: RoundRow
    samples: tuple[Sample, ...]
    candidate: Policy | None = None
    train: TrainResult | None = None


def score_policy(evaluator: RolloutEvaluator, policy: Policy, tasks: Sequence[Task]) -> MetaEvaluation:
    """The family's fixed metric (greedy decoding) of ``policy`` on ``tasks``: dev score or S_val."""
    return evaluator.meta_evaluate([policy], list(tasks))[0]


def run_round(
    state: SelfEvolveState,
    models: RoundModels,
    family: TaskFamily,
    cfg: SelfEvolveConfig,
    setup: RoundSetup,
    rng: np.random.Generator,
    recorder: Any,
    *,
    train: TrainFn,
    timer: PhaseTimer | None = None,
) -> RoundOutcome:
    """Run one self-evolution round.

    Args:
        state: where the run stands (policy, pool, replay buffer, difficulty, dev score).
        models: policy model, fixed judge, embedder, trainer backend, evaluator.
        family: the task family (generator, messages, rule rewards, guard, metric).
        cfg: ``selfevolve`` settings.
        setup: the fixed dev/meta-validation items and run paths.
        rng: this round's randomness (task generation, rollout and judge seeds, training).
        recorder: a :class:`~evotrainer.archive.recorder.RunRecorder` (``se_pool``, ``se_samples``,
            ``se_round``, ``policies``, ``meta``, ``event``).
        train: the LoRA trainer (``evotrainer.adapters.train.train_lora``; tests inject a fake).
        timer: phase timer / progress display (a silent one when None).

    Returns:
        The :class:`RoundOutcome`; its ``state.policy`` is the candidate when the round was kept, else
        the input policy.

    Raises:
        DataError: a dev-set or meta-validation item reached the pool or the training data.
    """
    k = state.round + 1
    timer = timer or PhaseTimer()
    gen_rng, roll_rng, judge_rng, train_rng, real_rng = rng.spawn(5)  # the first four as rng.spawn(4) gives
    policy = state.policy

    # ---- 1. pool: new tasks (real ones drawn, the rest generated at the current difficulty), near-duplicates
    #         dropped, cap ------------------------------------------------------------------------------------
    with timer.phase("pool", f"+{cfg.new_tasks_per_round} tasks"):
        real, real_left = draw_real(state.real, real_count(cfg.new_tasks_per_round, cfg.real_share, len(state.real)),
                                    real_rng)
        n_new = cfg.new_tasks_per_round - len(real)
        new = family.generate(gen_rng, state.difficulty, n_new) if n_new else []
        candidates = ([PoolTask(t, k, "generated", dict(state.difficulty)) for t in new]
                      + [PoolTask(t, k, "real") for t in real])
        update = add_to_pool(state.pool, candidates, embed=models.embedder.encode, cosine=cfg.dedup_cosine,
                             cap=cfg.pool_cap, forbidden=setup.forbidden)
        recorder.se_pool([pool_row(p, family) for p in update.added])
    tasks = [p.task for p in update.pool]
    # a real task's written reference joins the replay buffer as it enters the pool, as the set-up tasks' did
    replay = (*state.replay, *reference_items((p.task for p in update.added if p.source == "real"), family))

    # ---- 2. rollout: the current policy (prompt + adapter) samples answers --------------------------
    with timer.phase("rollout", f"{len(tasks)} tasks x {cfg.samples_per_task}", len(tasks) * cfg.samples_per_task):
        texts = _sample(models.llm, family, policy, tasks, cfg.samples_per_task,
                        replace(setup.decoding, temperature=cfg.temperature), roll_rng)

    # ---- 3. judge: rules + fixed model judge, repeats averaged; degenerate = 0 ----------------------
    judge_requests = len(texts) * cfg.judge_repeats if cfg.model_judge_weight > 0 else 0  # degenerate: none
    with timer.phase("judge", f"{len(texts)} samples x {cfg.judge_repeats}", judge_requests):
        settings = JudgeSettings(setup.reward_weights, cfg.judge_repeats, cfg.judge_temperature,
                                 cfg.judge_max_new_tokens, cfg.model_judge_weight)
        verdicts = judge_samples(models.judge, family, [(t, x) for t, _, x in texts], settings, judge_rng)
        grades_requested, grades_parsed = grade_counts(verdicts)
        samples = tuple(Sample(t, i, x, v) for (t, i, x), v in zip(texts, verdicts, strict=True))
        recorder.se_samples([_sample_row(k, s, cfg.pass_threshold) for s in samples])

    # ---- 4. filter: keep samples at or above the pass threshold -------------------------------------
    passed = [s for s in samples if s.verdict.score >= cfg.pass_threshold]
    pass_rate = len(passed) / len(samples) if samples else 0.0
    mean_score = float(np.mean([s.verdict.score for s in samples])) if samples else 0.0
    items = tuple(TrainItem(s.task, s.text, "sample", k, s.verdict.score) for s in passed)

    # ---- 5. train: LoRA SFT on the passing samples + replay, from the current adapter ---------------
    result: TrainResult | None = None
    candidate: Policy | None = None
    status, note = "no_pass", None
    if not items:
        note = f"no sample reached the pass threshold {cfg.pass_threshold}: nothing trained"
    else:
        check_items(items, setup.forbidden, "training data")
        check_items(replay, setup.forbidden, "replay data")
        out_dir = setup.adapter_root / f"round_{k:03d}"
        steps = capped_steps(len(items), len(replay), cfg.lora)
        with timer.phase("train", f"{len(items)} samples + {len(replay)} replay", steps, "steps"):
            try:
                pool_sft, replay_sft = to_sft(family, policy, items, "pool"), to_sft(family, policy, replay, "replay")
                digest = fingerprint(pool_sft, replay_sft, cfg.lora, policy.adapter)
                result = load_trained(out_dir, digest) if setup.reuse_trained else None
                if result is None:
                    result = train(models.trainer, pool_sft, replay_sft, cfg.lora, out_dir, rng=train_rng,
                                   parent_adapter=policy.adapter)
                    _place_adapter(Path(result.adapter_dir), out_dir)
                    save_trained(out_dir, result, digest)
                candidate = _candidate(policy, out_dir.resolve(), k, setup.run_dir)
            except (DataError, ModelError) as exc:  # a failed round, not a failed run
                status, note = "failed", f"training failed: {exc}"

    # ---- 6. evaluate: dev set decides keep/revert; meta-validation is reported --------------------
    dev_score, val_score = state.dev_score, state.val_score
    if candidate is not None:
        with timer.phase("dev", f"{len(setup.dev)} tasks", len(setup.dev)):
            dev = score_policy(models.evaluator, candidate, setup.dev)
            dev_score = float(dev.s_val or 0.0)
        if setup.val and setup.val == setup.dev:  # selfevolve.dev_source=validation: one scoring serves both
            val = dev
        else:
            with timer.phase("meta-val", f"{len(setup.val)} items", len(setup.val)):
                val = score_policy(models.evaluator, candidate, setup.val) if setup.val else None
        val_score = float(val.s_val or 0.0) if val is not None else None
        kept_new = PromotionRule(ties=True).decide(state.dev_score, dev_score)  # the dev score did not fall
        status = "kept" if kept_new.promoted else "reverted"
        if status == "reverted":
            note = f"dev score fell {state.dev_score:.4f} -> {dev_score:.4f}: adapter reverted"
        recorder.policies([replace(candidate, adapter=_rel(Path(candidate.adapter or ""), setup.run_dir))])
        if val is not None:
            recorder.meta(replace(val, policy_id=candidate.id), kind="meta_val")

    # ---- 7. curriculum, next state, archive ---------------------------------------------------------
    decision = curriculum_step(state.difficulty, setup.bounds, (*state.history, pass_rate), cfg.curriculum)
    kept = status == "kept"
    row = RoundRow(
        round=k, policy_id=policy.id, status=status, difficulty=dict(state.difficulty),
        next_difficulty=dict(decision.difficulty), curriculum=decision.action, config=_plain(cfg),
        pool_size=len(tasks), n_added=len(update.added), n_duplicates=len(update.duplicates),
        n_samples=len(samples), n_kept=len(passed), pass_rate=pass_rate, mean_score=mean_score,
        losses=tuple(result.losses) if result else (), candidate_id=candidate.id if candidate else None,
        adapter_path=_rel(Path(candidate.adapter), setup.run_dir) if candidate and candidate.adapter else None,
        train=train_facts(result, len(items), len(replay)),
        dev_score=dev_score, prev_dev_score=state.dev_score, val_score=val_score, timings=dict(timer.seconds),
        note=note, grades_requested=grades_requested, grades_parsed=grades_parsed,
    )
    recorder.se_round(row)
    recorder.emit(PhaseEvent(name=f"selfevolve round {k}", fields={
        "seconds": sum(timer.seconds.values()), **{n.replace("-", "_"): s for n, s in timer.seconds.items()}}))
    new_state = SelfEvolveState(
        round=k,
        policy=candidate if kept and candidate is not None else policy,
        pool=update.pool,
        replay=extend_replay(replay, items, cfg.replay_cap) if kept else replay,
        difficulty=dict(decision.difficulty),
        dev_score=dev_score if kept else state.dev_score,
        val_score=val_score if kept else state.val_score,
        history=decision.history,
        real=real_left,
    )
    return RoundOutcome(new_state, row, samples, candidate, result)


# --- steps ---------------------------------------------------------------------------------------------


def _sample(llm: LLM, family: TaskFamily, policy: Policy, tasks: Sequence[Task], n: int,
            params: SamplingParams, rng: np.random.Generator) -> list[tuple[Task, int, str]]:
    """``n`` sampled answers per task from ``policy`` (its adapter and decoding genes), one batched call.

    Each request has its own seed, so a sample does not depend on what shares the batch.
    """
    base = replace(sampling_for(policy, params), temperature=params.temperature)
    seeds = rng.integers(0, 2**31 - 1, size=(len(tasks), n))  # (n_tasks, n)
    keys = [(task, i) for task in tasks for i in range(n)]
    sections = tuple(policy.sections)
    requests = [
        RolloutRequest(tuple(family.build_messages(sections, task)), replace(base, seed=int(seeds[j // n, i])),
                       policy.adapter, sections, task, policy.id, policy.decoding)
        for j, (task, i) in enumerate(keys)
    ]
    generations = family.roll_out(llm, requests)  # single turn: one batched generate; else whole episodes
    if len(generations) != len(requests):
        raise ModelError(f"backend returned {len(generations)} generations for {len(requests)} requests")
    return [(task, i, str(g.text)) for (task, i), g in zip(keys, generations, strict=True)]


def _candidate(policy: Policy, adapter: Path, k: int, run_dir: Path) -> Policy:
    """The trained policy: same prompt, the new adapter, the input policy as parent; its id hashes the adapter's
    path relative to the run folder, so the same run in another folder gets the same ids."""
    where = _rel(adapter, run_dir)
    parent = replace(policy, adapter=_rel(Path(policy.adapter), run_dir) if policy.adapter else None)  # as archived
    digest = hashlib.sha256(f"{parent.genome_hash}|{policy.id}|selfevolve|{k}|{where}".encode()).hexdigest()
    return replace(policy, id=f"se{k}-{digest[:10]}", parent_ids=(policy.id,), operator="selfevolve_lora",
                   generation=k, root_id=policy.root_id or policy.id, adapter=str(adapter))


def _place_adapter(trained: Path, out_dir: Path) -> None:
    """Copy the adapter into the run's folder unless the trainer already wrote it there."""
    if trained.resolve() != out_dir.resolve():
        shutil.copytree(trained, out_dir, dirs_exist_ok=True)


def _rel(path: Path, root: Path) -> str:
    """``path`` relative to the run dir (as archived), or as given when outside it."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def train_facts(result: TrainResult | None, n_items: int, n_replay: int) -> dict[str, Any]:
    """The archived training facts of a round (``RoundRow.train``): ``examples`` (passing samples) and ``replay``
    (replay items); when it trained, also steps, seconds (the whole call), seconds_per_step, input_tokens (read by
    the model, padding left out), padded_tokens (positions computed), answer_tokens (supervised),
    tokens_per_second (``input_tokens / (steps * seconds_per_step)``, None when no step time was measured),
    trainable_params, replay_share, skipped_examples (:class:`~evotrainer.adapters.train.TrainResult`)."""
    if result is None:
        return {"examples": n_items, "replay": n_replay}
    step_seconds = result.steps * result.seconds_per_step
    return {"examples": n_items, "replay": n_replay, "steps": result.steps, "seconds": result.seconds,
            "seconds_per_step": result.seconds_per_step, "input_tokens": result.input_tokens,
            "padded_tokens": result.padded_tokens, "answer_tokens": result.answer_tokens,
            "tokens_per_second": result.input_tokens / step_seconds if step_seconds > 0 else None,
            "trainable_params": result.trainable_params, "replay_share": result.replay_share,
            "skipped_examples": result.skipped_examples}


def _plain(cfg: SelfEvolveConfig) -> dict[str, Any]:
    return asdict(cfg)


def pool_row(p: PoolTask, family: SelfEvolving) -> PoolTaskRow:
    """The archive row of a pool task: its input, reference answer (``family.reference_answer``, "" when
    none), ground truth (``family.ground_truth``) and difficulty."""
    t = p.task
    return PoolTaskRow(p.round, t.task_id, t.content_hash, p.source, dict(p.difficulty), t.text,
                       family.reference_answer(t) or "", dict(family.ground_truth(t)))


def _sample_row(k: int, s: Sample, threshold: float) -> SampleRow:
    v = s.verdict
    return SampleRow(round=k, task_id=s.task.task_id, index=s.index, output=s.text, score=v.score, rule=v.rule,
                     components=dict(v.components), grades=v.grades, model=v.model, degenerate=v.degenerate,
                     passed=v.score >= threshold, error=v.error)
