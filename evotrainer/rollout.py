"""Rollouts: run policies on a task batch with the policy model and score the outputs.

The problem side of the inner loop (it never imports DEAP or pycma). :class:`RolloutEvaluator` deduplicates
identical genomes, serves repeated (genome, batch, settings) from a :class:`~evotrainer.search.fitness_cache.FitnessCache`
and sends every remaining policy x task request in one ``llm.generate`` call (the backend batches). A failing
example never raises: it gets fitness None and an error string.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from evotrainer.backends.base import LLM, Generation, Message, SamplingParams
from evotrainer.errors import AdapterLoadError, DataError, ServerError
from evotrainer.genome import Policy
from evotrainer.input_handling import InputHandling
from evotrainer.search.decoding import sampling_for
from evotrainer.search.fitness_cache import FitnessCache, settings_key
from evotrainer.search.reflection import TaskFeedback
from evotrainer.stats.bootstrap import mean_stderr
from evotrainer.tasks.base import EmbeddingMeta, RolloutRequest, SelfEvolving, Task, TaskFamily

__all__ = [
    "FeedbackRecorder",
    "MetaEvaluation",
    "PassingSampleRecorder",
    "PolicyEvaluation",
    "RolloutEvaluator",
    "batch_id_for",
    "sampling_for",
    "worst_task_feedback",
]


def batch_id_for(tasks: Sequence[Task]) -> str:
    """Identity of a task batch: sha256 (16 hex chars) of its tasks' identities (``Task.identity``: content
    and ground truth), in order. Task ids and ``meta`` are not part of it."""
    blob = json.dumps([t.identity() for t in tasks], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


_GREEDY = SamplingParams()


@dataclass(frozen=True)
class PolicyEvaluation:
    """Harness fitness of one policy on one task batch.

    Attributes:
        policy_id: the policy's id.
        genome_hash: its genome hash.
        batch_id: the batch (:func:`batch_id_for`).
        fitness: mean total reward over tasks in [0, 1], higher is better; a task whose reward failed
            counts 0.0; None when the rollout failed or every task's reward failed.
        components: mean of each reward component over the tasks scored (each in [0, 1]).
        per_task: total reward per task, in batch order; None where it failed.
        outputs: generated text per task ("" where the rollout failed).
        degenerate: the degenerate-output guard's reason per task (None where it did not fire).
        generated_tokens: tokens generated for this genome (all tasks; 0 when served from cache).
        seconds: wall seconds spent on it in this call (its share of the batched generation by
            generated tokens, plus scoring).
        cached: True when no request was sent on its behalf (cache hit, or an identical genome earlier
            in the same call).
        error: why it failed, or which tasks failed; None when all went well.
        per_task_components: reward components per task, in batch order (each in [0, 1]; empty
            mapping where the task failed); ``()`` when the rollout failed.
        handling: how each task's input was read, in batch order
            (:class:`~evotrainer.input_handling.InputHandling` codes: ``whole``, ``windowed:N``, ``cut:S``);
            ``()`` when the rollout failed.
    """

    policy_id: str
    genome_hash: str
    batch_id: str
    fitness: float | None
    components: Mapping[str, float]
    per_task: tuple[float | None, ...]
    outputs: tuple[str, ...]
    degenerate: tuple[str | None, ...]
    generated_tokens: int
    seconds: float
    cached: bool
    error: str | None = None
    per_task_components: tuple[Mapping[str, float], ...] = ()
    handling: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetaEvaluation:
    """Meta-validation score (S_val) of one policy on fixed validation items.

    Attributes:
        policy_id: the policy's id.
        genome_hash: its genome hash.
        batch_id: the validation batch (:func:`batch_id_for`).
        s_val: mean of the items' ``MetaScore.value`` in [0, 1], higher is better; a failed item
            counts 0.0; None when every item failed.
        stderr: standard error of that mean over items (:func:`~evotrainer.stats.bootstrap.mean_stderr`); None for < 2
            items.
        parts: mean of each metric part over the items scored.
        per_item: value per item in order; None where it failed.
        outputs: generated text per item.
        generated_tokens: tokens generated in this call for it.
        seconds: wall seconds spent on it in this call.
        cached: True when no request was sent on its behalf.
        error: failure description, or None.
        handling: how each item's input was read, in item order (as in :class:`PolicyEvaluation`).
    """

    policy_id: str
    genome_hash: str
    batch_id: str
    s_val: float | None
    stderr: float | None
    parts: Mapping[str, float]
    per_item: tuple[float | None, ...]
    outputs: tuple[str, ...]
    generated_tokens: int
    seconds: float
    cached: bool
    error: str | None = None
    handling: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Rollout:
    """Outputs of one genome on one batch (cached under kind "rollout")."""

    outputs: tuple[str, ...]
    tokens: tuple[int, ...]
    handling: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Scores:
    """Per-task scores of one rollout (cached under kind "reward" or "meta")."""

    values: tuple[float | None, ...]
    parts: tuple[Mapping[str, float], ...]
    degenerate: tuple[str | None, ...]
    errors: tuple[str | None, ...]


@dataclass
class _Job:
    """Bookkeeping of one distinct genome within one call."""

    policy: Policy
    rollout: _Rollout | None = None
    error: str | None = None
    fresh: bool = False
    seconds: float = 0.0


class RolloutEvaluator:
    """Scores policies by rolling them out on tasks with the policy model.

    Args:
        llm: the policy model backend.
        family: the task family (messages, rewards, meta metric, ``spec.scorer_version``).
        sampling: default decoding (a policy's decoding genes override fields); greedy by default.
        cache: shared fitness cache (a fresh one when None).
        adapter_version: version of the policy model's weights/base adapter (bump it when the
            self-evolution core retrains, so old scores are not reused).

    Attributes:
        rollouts: requests actually sent to ``llm`` so far (cache hits and duplicates cost none).
    """

    def __init__(
        self,
        llm: LLM,
        family: TaskFamily,
        *,
        sampling: SamplingParams = _GREEDY,
        cache: FitnessCache | None = None,
        adapter_version: str = "base",
    ) -> None:
        self.llm = llm
        self.family = family
        self.sampling = sampling
        self.cache: FitnessCache = cache if cache is not None else FitnessCache()
        self.adapter_version = adapter_version
        self.rollouts = 0

    # --- public ------------------------------------------------------------------------------------

    def evaluate(
        self,
        policies: Sequence[Policy],
        tasks: Sequence[Task],
        weights: Mapping[str, float],
        batch_id: str | None = None,
    ) -> list[PolicyEvaluation]:
        """Harness fitness of each policy on ``tasks`` under reward ``weights``.

        Args:
            policies: the policies (duplicates and repeated genomes allowed; they cost nothing).
            tasks: the batch every policy is scored on (common random numbers), >= 1 task.
            weights: reward weights by component name (on the simplex), passed to ``family.reward``.
            batch_id: identity of ``tasks`` (computed with :func:`batch_id_for` when None).

        Returns:
            One :class:`PolicyEvaluation` per policy, in order. Never raises for a failing policy.
        """
        batch_id = batch_id or batch_id_for(tasks)
        jobs = self._roll_out(policies, tasks, batch_id)
        rkey = self._settings("reward", weights=dict(weights))
        scored: dict[str, tuple[_Scores | None, float]] = {}
        for gh, job in jobs.items():
            if job.rollout is None:
                scored[gh] = (None, 0.0)
                continue
            t0 = time.perf_counter()
            scores = self._scores("reward", gh, batch_id, rkey, job.rollout, tasks, weights)
            scored[gh] = (scores, time.perf_counter() - t0)

        out: list[PolicyEvaluation] = []
        first_use: set[str] = set()
        for policy in policies:
            gh = policy.genome_hash
            job, (scores, score_seconds) = jobs[gh], scored[gh]
            charged = gh not in first_use
            first_use.add(gh)
            fresh = job.fresh and charged
            seconds = (job.seconds + score_seconds) if charged else 0.0
            tokens = sum(job.rollout.tokens) if (fresh and job.rollout) else 0
            if scores is None:
                out.append(PolicyEvaluation(
                    policy.id, gh, batch_id, None, {}, (None,) * len(tasks), ("",) * len(tasks),
                    (None,) * len(tasks), tokens, seconds, not fresh, job.error))
                continue
            value, _, parts, error = _aggregate(scores)
            out.append(PolicyEvaluation(
                policy.id, gh, batch_id, value, parts, scores.values, job.rollout.outputs,
                scores.degenerate, tokens, seconds, not fresh, error, tuple(scores.parts), job.rollout.handling))
        return out

    def meta_evaluate(
        self, policies: Sequence[Policy], tasks: Sequence[Task], batch_id: str | None = None
    ) -> list[MetaEvaluation]:
        """Meta-validation score S_val of each policy on fixed validation ``tasks``.

        Scores with ``family.meta_score`` (fixed; no harness parameter touches it). Deduplicates by
        genome hash and caches by (genome, batch, settings) like :meth:`evaluate`.
        """
        batch_id = batch_id or batch_id_for(tasks)
        jobs = self._roll_out(policies, tasks, batch_id)
        mkey = self._settings("meta")
        out: list[MetaEvaluation] = []
        first_use: set[str] = set()
        for policy in policies:
            gh = policy.genome_hash
            job = jobs[gh]
            charged = gh not in first_use
            first_use.add(gh)
            fresh = job.fresh and charged
            tokens = sum(job.rollout.tokens) if (fresh and job.rollout) else 0
            if job.rollout is None:
                out.append(MetaEvaluation(policy.id, gh, batch_id, None, None, {}, (None,) * len(tasks),
                                          ("",) * len(tasks), tokens, job.seconds if charged else 0.0,
                                          not fresh, job.error))
                continue
            t0 = time.perf_counter()
            scores = self._scores("meta", gh, batch_id, mkey, job.rollout, tasks, None)
            seconds = (job.seconds + time.perf_counter() - t0) if charged else 0.0
            value, stderr, parts, error = _aggregate(scores)
            out.append(MetaEvaluation(policy.id, gh, batch_id, value, stderr, parts, scores.values,
                                      job.rollout.outputs, tokens, seconds, not fresh, error, job.rollout.handling))
        return out

    def fitness_function(
        self,
        tasks: Sequence[Task],
        weights: Mapping[str, float],
        *,
        on_evaluations: Callable[[list[PolicyEvaluation]], None] | None = None,
        feedback: FeedbackRecorder | None = None,
    ) -> Callable[[Sequence[Policy]], list[float | None]]:
        """An ``evaluate`` callable for the inner loop, bound to one batch and reward weights.

        Args:
            tasks: the batch (fixed for the whole inner-loop call).
            weights: reward weights.
            on_evaluations: receives the full records of each call (e.g. to archive per-task results).
            feedback: records each evaluation's worst task for reflective mutation (pass the same
                recorder to ``build_toolbox(feedback=...)``); it must be built on ``tasks``.

        Raises:
            DataError: ``feedback`` was built on another batch.
        """
        batch_id = batch_id_for(tasks)
        if feedback is not None and feedback.batch_id != batch_id:
            raise DataError("fitness_function: the feedback recorder was built on another task batch")

        def evaluate(policies: Sequence[Policy]) -> list[float | None]:
            evaluations = self.evaluate(policies, tasks, weights, batch_id)
            if feedback is not None:
                feedback.record(evaluations)
            if on_evaluations is not None:
                on_evaluations(evaluations)
            return [e.fitness for e in evaluations]

        return evaluate

    # --- internals ---------------------------------------------------------------------------------

    def _settings(self, kind: str, **extra: object) -> str:
        """Settings key of a cache kind: generation settings, plus scorer settings for scores."""
        parts: dict[str, object] = {
            "model": getattr(self.llm, "name", type(self.llm).__name__),
            "sampling": self.sampling,
            "adapter_version": self.adapter_version,
        }
        if kind != "rollout":
            parts.update(kind=kind, scorer_version=self.family.spec.scorer_version, **extra)
        return settings_key(**parts)

    def _roll_out(self, policies: Sequence[Policy], tasks: Sequence[Task], batch_id: str) -> dict[str, _Job]:
        """Outputs of each distinct genome on ``tasks``: from the cache, else from one batched call."""
        jobs: dict[str, _Job] = {}
        for policy in policies:
            jobs.setdefault(policy.genome_hash, _Job(policy))
        if not tasks:
            for job in jobs.values():
                job.error = "empty task batch"
            return jobs
        gkey = self._settings("rollout")
        requests: list[RolloutRequest] = []
        owners: list[str] = []
        for gh, job in jobs.items():
            cached = self.cache.get(self.cache.make_key("rollout", gh, batch_id, gkey))
            if cached is not None:
                job.rollout = cached
                continue
            try:
                params = sampling_for(job.policy, self.sampling)
                sections = tuple(job.policy.sections)
                batch = [RolloutRequest(tuple(self.family.build_messages(sections, task)), params, job.policy.adapter,
                                        sections, task, job.policy.id, job.policy.decoding) for task in tasks]
            except Exception as exc:  # a bad genome fails alone
                job.error = f"building requests failed: {type(exc).__name__}: {exc}"
                continue
            requests += batch
            owners += [gh] * len(batch)
        if not requests:
            return jobs

        t0 = time.perf_counter()
        self.rollouts += len(requests)
        try:
            requests, owners, generations = self._generate(requests, owners, jobs)
            if not requests:
                return jobs
            if len(generations) != len(requests):
                raise RuntimeError(f"backend returned {len(generations)} generations for {len(requests)} requests")
        except ServerError:  # a server unusable for the run (errors.ServerError) stops it with its one line
            raise
        except Exception as exc:  # the whole batch failed: every affected evaluation gets None
            error = f"generation failed: {type(exc).__name__}: {exc}"
            for gh in dict.fromkeys(owners):
                jobs[gh].error = error
            return jobs
        elapsed = time.perf_counter() - t0

        per_genome: dict[str, list[Generation]] = {}
        for gh, generation in zip(owners, generations, strict=True):
            per_genome.setdefault(gh, []).append(generation)
        token_total = sum(max(int(g.generated_tokens), 0) for g in generations)
        for gh, gens in per_genome.items():
            rollout = _Rollout(tuple(str(g.text) for g in gens), tuple(int(g.generated_tokens) for g in gens),
                               tuple(_handling_code(g) for g in gens))
            job = jobs[gh]
            job.rollout, job.fresh = rollout, True
            share = sum(rollout.tokens) / token_total if token_total > 0 else len(gens) / len(generations)
            job.seconds = elapsed * share
            self.cache.put(self.cache.make_key("rollout", gh, batch_id, gkey), rollout)
        return jobs

    def _generate(self, requests: list[RolloutRequest], owners: list[str], jobs: dict[str, _Job]
                  ) -> tuple[list[RolloutRequest], list[str], list[Generation]]:
        """The family's rollout of ``requests`` (``owners``: their genome hashes) -> the requests and owners rolled
        out, and their generations. A policy whose adapter would not load (:class:`~evotrainer.errors.AdapterLoadError`,
        raised before anything is sent) fails alone: its job gets the error, the rest run without it."""
        while True:
            try:
                return requests, owners, self.family.roll_out(self.llm, requests)
            except AdapterLoadError as exc:
                failed = {gh for gh, r in zip(owners, requests, strict=True) if r.adapter in exc.adapters}
                if not failed:
                    raise
                for gh in failed:
                    jobs[gh].error = f"generation failed: {type(exc).__name__}: {exc}"
                keep = [k for k, gh in enumerate(owners) if gh not in failed]
                requests, owners = [requests[k] for k in keep], [owners[k] for k in keep]
                if not requests:
                    return [], [], []

    def _scores(
        self,
        kind: str,
        gh: str,
        batch_id: str,
        skey: str,
        rollout: _Rollout,
        tasks: Sequence[Task],
        weights: Mapping[str, float] | None,
    ) -> _Scores:
        """Per-task rewards (``kind="reward"``) or meta scores (``"meta"``) of ``rollout``, cached."""
        key = self.cache.make_key(kind, gh, batch_id, skey)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        values: list[float | None] = []
        parts: list[Mapping[str, float]] = []
        degenerate: list[str | None] = []
        errors: list[str | None] = []
        if kind == "meta" and isinstance(self.family, EmbeddingMeta):  # e.g. embed every sentence of the batch at once
            self.family.prepare_meta(rollout.outputs, tasks)
        for output, task in zip(rollout.outputs, tasks, strict=True):
            try:
                if kind == "meta":
                    score = self.family.meta_score(output, task)
                    value, comp, degen = float(score.value), dict(score.parts), None
                else:
                    reward = self.family.reward(output, task, weights or {})
                    value, comp, degen = float(reward.total), dict(reward.components), reward.degenerate
                if not math.isfinite(value):
                    raise ValueError(f"non-finite score {value}")
                values.append(value)
                parts.append(comp)
                degenerate.append(degen)
                errors.append(None)
            except Exception as exc:  # a failing example gets None, never raises
                values.append(None)
                parts.append({})
                degenerate.append(None)
                errors.append(f"{task.task_id}: {type(exc).__name__}: {exc}")
        scores = _Scores(tuple(values), tuple(parts), tuple(degenerate), tuple(errors))
        if not any(errors):
            self.cache.put(key, scores)
        return scores


def worst_task_feedback(
    evaluation: PolicyEvaluation, tasks: Sequence[Task], *, low_below: float = 0.5, max_components: int = 3,
    reference_of: Callable[[Task], str | None] | None = None,
) -> TaskFeedback | None:
    """The worst-scored task of ``evaluation`` as reflective-mutation feedback.

    The worst task is the one with the lowest total reward among those scored (ties: the first);
    its low components are those below ``low_below`` (lowest first, at most ``max_components``), or the
    single lowest one when none is below.

    Args:
        evaluation: a harness evaluation (not a meta-validation one; this function never sees those).
        tasks: the batch it was made on, in order.
        low_below: component value under which it is reported, in [0, 1].
        max_components: most components reported, >= 1.
        reference_of: the task's reference answer (``TaskFamily.reference_answer``), shown for contrast.

    Returns:
        The feedback, or None when no task was scored.
    """
    scored = [(v, i) for i, v in enumerate(evaluation.per_task) if v is not None]
    if not scored or len(tasks) != len(evaluation.per_task):
        return None
    value, i = min(scored)
    parts = evaluation.per_task_components[i] if i < len(evaluation.per_task_components) else {}
    ranked = sorted(parts.items(), key=lambda kv: (kv[1], kv[0]))
    low = [(k, float(v)) for k, v in ranked if v < low_below][:max_components] or [(k, float(v)) for k, v in ranked[:1]]
    t, ref = tasks[i], (reference_of(tasks[i]) or "") if reference_of is not None else ""
    return TaskFeedback(t.task_id, t.content_hash, float(value), evaluation.outputs[i], tuple(low), ref)


class FeedbackRecorder:
    """Keeps each evaluated genome's worst-task feedback on one training batch (the reflective seam).

    Call it with a policy to get its :class:`~evotrainer.search.reflection.TaskFeedback` (None when its
    genome was not evaluated on this batch). Built on the training batch only; it refuses a batch that
    holds any input whose content hash is in ``forbidden`` (the meta-validation set), so no
    meta-validation item can reach the mutator.

    Args:
        tasks: the training batch.
        forbidden: content hashes of the meta-validation items.
        low_below: see :func:`worst_task_feedback`.

    Raises:
        DataError: a task of ``tasks`` is a meta-validation input.
    """

    def __init__(
        self, tasks: Sequence[Task], *, forbidden: frozenset[str] | set[str] = frozenset(),
        low_below: float = 0.5, reference_of: Callable[[Task], str | None] | None = None,
    ) -> None:
        leaked = [t.task_id for t in tasks if t.content_hash in forbidden]
        if leaked:
            raise DataError(f"feedback recorder: tasks {leaked} are meta-validation inputs")
        self.tasks = tuple(tasks)
        self.batch_id = batch_id_for(tasks)
        self.low_below, self.reference_of = low_below, reference_of
        self._by_genome: dict[str, TaskFeedback] = {}

    def record(self, evaluations: Sequence[PolicyEvaluation]) -> None:
        """Remember the worst task of each evaluation made on this batch (others are ignored)."""
        for evaluation in evaluations:
            if evaluation.batch_id != self.batch_id or evaluation.genome_hash in self._by_genome:
                continue
            info = worst_task_feedback(evaluation, self.tasks, low_below=self.low_below, reference_of=self.reference_of)
            if info is not None:
                self._by_genome[evaluation.genome_hash] = info

    def __call__(self, policy: Policy) -> TaskFeedback | None:
        return self._by_genome.get(policy.genome_hash)

    def __len__(self) -> int:
        return len(self._by_genome)


class PassingSampleRecorder:
    """Keeps each evaluated genome's passing outputs on one training batch: the Lamarckian adapter data.

    Call it with a policy to get its passing samples as chats, in batch order: the family's
    ``training_chats(policy.sections, task, output)`` of each passing output (single turn: the exact prompt it
    was rolled out with, then its answer; an episode: one chat per model reply, earlier turns as context, so
    a fine-tune learns only the model's own tokens); empty when its genome was not evaluated on this batch
    or nothing passed. An output passes when its
    task's total reward is >= ``threshold``, the degenerate-output guard did not fire and it is not blank.
    Like :class:`FeedbackRecorder` it refuses a batch holding a meta-validation input, so no
    meta-validation item can become training data.

    Args:
        tasks: the training batch.
        family: the task family (builds the chats of a policy on a task: ``SelfEvolving.training_chats``).
        threshold: pass threshold on the task's total reward, in [0, 1], higher is stricter.
        forbidden: content hashes of the meta-validation items.

    Raises:
        DataError: a task of ``tasks`` is a meta-validation input.
    """

    def __init__(
        self, tasks: Sequence[Task], family: SelfEvolving, *, threshold: float,
        forbidden: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        leaked = [t.task_id for t in tasks if t.content_hash in forbidden]
        if leaked:
            raise DataError(f"passing-sample recorder: tasks {leaked} are meta-validation inputs")
        self.tasks = tuple(tasks)
        self.family = family
        self.threshold = threshold
        self.batch_id = batch_id_for(tasks)
        self._by_genome: dict[str, tuple[tuple[int, str], ...]] = {}

    def record(self, evaluations: Sequence[PolicyEvaluation]) -> None:
        """Remember the passing outputs of each evaluation made on this batch (others are ignored)."""
        for e in evaluations:
            if e.batch_id != self.batch_id or e.genome_hash in self._by_genome or len(e.per_task) != len(self.tasks):
                continue
            degenerate = e.degenerate if len(e.degenerate) == len(e.per_task) else (None,) * len(e.per_task)
            self._by_genome[e.genome_hash] = tuple(
                (i, out) for i, (value, out, degen) in enumerate(zip(e.per_task, e.outputs, degenerate, strict=True))
                if value is not None and value >= self.threshold and degen is None and out.strip())

    def __call__(self, policy: Policy) -> list[tuple[Message, ...]]:
        return [chat for i, out in self._by_genome.get(policy.genome_hash, ())
                for chat in self.family.training_chats(policy.sections, self.tasks[i], out)]

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_genome.values())


def _handling_code(generation: Generation) -> str:
    """The generation's handling code; a family that does not say gets ``whole``, or ``cut`` of unknown share
    when the backend cut the prompt (the words it dropped are counted on the prompt, not on the item)."""
    code = str(getattr(generation, "handling", "") or "")
    return code or InputHandling.parse("", bool(getattr(generation, "prompt_truncated", False))).code()


def _aggregate(scores: _Scores) -> tuple[float | None, float | None, dict[str, float], str | None]:
    """(mean value with failed tasks as 0.0 or None if all failed, its standard error, mean parts, error summary)."""
    ok = [v for v in scores.values if v is not None]
    error = "; ".join(e for e in scores.errors if e) or None
    if not ok:
        return None, None, {}, error or "no tasks"
    value, stderr = mean_stderr([v if v is not None else 0.0 for v in scores.values])
    names = dict.fromkeys(name for comp in scores.parts for name in comp)  # in order of first appearance
    return value, stderr, {n: sum(vs := [float(c[n]) for c in scores.parts if n in c]) / len(vs) for n in names}, error
