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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evotrainer.backends.base import LLM, Generation, Message, SamplingParams
from evotrainer.errors import AdapterLoadError, DataError, ServerError
from evotrainer.genome import Policy
from evotrainer.input_handling import InputHandling
from evotrainer.search.decoding import sampling_for
from evotrainer.search.fitness_cache import CacheKey, FitnessCache, settings_key
from evotrainer.search.reflection import TaskFeedback
from evotrainer.stats.bootstrap import mean_stderr
from evotrainer.tasks.base import EmbeddingMeta, RolloutRequest, SelfEvolving, Task, TaskFamily

__all__ = ["FeedbackRecorder", "MetaEvaluation", "PassingSampleRecorder", "PolicyEvaluation",
           "RolloutEvaluator", "batch_id_for", "sampling_for"]


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
        policy_id, genome_hash: the policy's id and genome hash.
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
        s_val: mean of the items' ``MetaScore.value`` in [0, 1], higher is better; a failed item
            counts 0.0; None when every item failed.
        stderr: standard error of that mean over items (:func:`~evotrainer.stats.bootstrap.mean_stderr`); None for < 2
            items.
        parts: mean of each metric part over the items scored.
        per_item: value per item in order; None where it failed.
        policy_id, genome_hash, batch_id, outputs, generated_tokens, seconds, cached, error, handling: as in
            :class:`PolicyEvaluation`, per validation item.
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
    """One distinct genome within one call."""

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

    def __init__(self, llm: LLM, family: TaskFamily, *, sampling: SamplingParams = _GREEDY,
                 cache: FitnessCache | None = None, adapter_version: str = "base") -> None:
        self.llm, self.family, self.sampling, self.adapter_version = llm, family, sampling, adapter_version
        self.cache: FitnessCache = cache if cache is not None else FitnessCache()
        self.rollouts = 0

    def evaluate(self, policies: Sequence[Policy], tasks: Sequence[Task], weights: Mapping[str, float],
                 batch_id: str | None = None) -> list[PolicyEvaluation]:
        """Harness fitness of each policy on ``tasks`` (>= 1; one batch for all: common random numbers) under reward
        ``weights`` (by component name, on the simplex; passed to ``family.reward``). Duplicate policies and
        repeated genomes cost nothing; ``batch_id`` is computed with :func:`batch_id_for` when None.

        Returns:
            One :class:`PolicyEvaluation` per policy, in order. Never raises for a failing policy.
        """
        batch_id, n = batch_id or batch_id_for(tasks), len(tasks)
        out: list[PolicyEvaluation] = []
        for policy, job, scores, seconds, tokens, cached in self._score("reward", policies, tasks, batch_id, weights):
            if scores is None or job.rollout is None:
                out.append(PolicyEvaluation(policy.id, policy.genome_hash, batch_id, None, {}, (None,) * n, ("",) * n,
                                            (None,) * n, tokens, seconds, cached, job.error))
                continue
            value, _, parts, error = _aggregate(scores)
            out.append(PolicyEvaluation(
                policy.id, policy.genome_hash, batch_id, value, parts, scores.values, job.rollout.outputs,
                scores.degenerate, tokens, seconds, cached, error, scores.parts, job.rollout.handling))
        return out

    def meta_evaluate(self, policies: Sequence[Policy], tasks: Sequence[Task],
                      batch_id: str | None = None) -> list[MetaEvaluation]:
        """Meta-validation score S_val of each policy on fixed validation ``tasks``.

        Scores with ``family.meta_score`` (fixed; no harness parameter touches it). Deduplicates by
        genome hash and caches by (genome, batch, settings) like :meth:`evaluate`.
        """
        batch_id, n = batch_id or batch_id_for(tasks), len(tasks)
        out: list[MetaEvaluation] = []
        for policy, job, scores, seconds, tokens, cached in self._score("meta", policies, tasks, batch_id, None):
            if scores is None or job.rollout is None:
                out.append(MetaEvaluation(policy.id, policy.genome_hash, batch_id, None, None, {}, (None,) * n,
                                          ("",) * n, tokens, seconds, cached, job.error))
                continue
            value, stderr, parts, error = _aggregate(scores)
            out.append(MetaEvaluation(policy.id, policy.genome_hash, batch_id, value, stderr, parts, scores.values,
                                      job.rollout.outputs, tokens, seconds, cached, error, job.rollout.handling))
        return out

    def fitness_function(self, tasks: Sequence[Task], weights: Mapping[str, float], *,
                         on_evaluations: Callable[[list[PolicyEvaluation]], None] | None = None,
                         feedback: FeedbackRecorder | None = None) -> Callable[[Sequence[Policy]], list[float | None]]:
        """An ``evaluate`` callable for the inner loop, bound to ``tasks`` (one batch for the whole call) and reward
        ``weights``. ``on_evaluations`` receives the full records of each call (e.g. to archive per-task results);
        ``feedback`` records each evaluation's worst task for reflective mutation (pass the same recorder to
        ``build_toolbox(feedback=...)``) and must be built on ``tasks``.

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

    def _settings(self, kind: str, **extra: object) -> str:
        """Settings key of a cache kind: generation settings, plus scorer settings for scores."""
        parts: dict[str, object] = {"model": getattr(self.llm, "name", type(self.llm).__name__),
                                    "sampling": self.sampling, "adapter_version": self.adapter_version}
        if kind != "rollout":
            parts.update(kind=kind, scorer_version=self.family.spec.scorer_version, **extra)
        return settings_key(**parts)

    def _score(self, kind: str, policies: Sequence[Policy], tasks: Sequence[Task], batch_id: str,
               weights: Mapping[str, float] | None) -> Iterator[tuple[Policy, _Job, _Scores | None, float, int, bool]]:
        """Per policy ``(policy, job, scores, seconds, generated tokens, cached)``: each distinct genome rolled out
        and scored once (``kind``: "reward" or "meta"), its cost charged to its first policy only."""
        jobs = self._roll_out(policies, tasks, batch_id)
        skey = self._settings(kind, weights=dict(weights)) if weights is not None else self._settings(kind)
        scored: dict[str, tuple[_Scores | None, float]] = {}
        for gh, job in jobs.items():
            t0 = time.perf_counter()
            key = CacheKey(kind, gh, batch_id, skey)
            scores = None if job.rollout is None else self._scores(kind, key, job.rollout, tasks, weights)
            scored[gh] = (scores, time.perf_counter() - t0)
        charged: set[str] = set()
        for policy in policies:
            gh = policy.genome_hash
            job, (scores, seconds) = jobs[gh], scored[gh]
            first = gh not in charged
            charged.add(gh)
            fresh = job.fresh and first
            tokens = sum(job.rollout.tokens) if fresh and job.rollout else 0
            yield policy, job, scores, (job.seconds + seconds) if first else 0.0, tokens, not fresh

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
            cached = self.cache.get(CacheKey("rollout", gh, batch_id, gkey))
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
            self.cache.put(CacheKey("rollout", gh, batch_id, gkey), rollout)
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

    def _scores(self, kind: str, key: CacheKey, rollout: _Rollout, tasks: Sequence[Task],
                weights: Mapping[str, float] | None) -> _Scores:
        """Per-task rewards (``kind="reward"``) or meta scores (``"meta"``) of ``rollout``, cached under ``key``."""
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        if kind == "meta" and isinstance(self.family, EmbeddingMeta):  # e.g. embed every sentence of the batch at once
            self.family.prepare_meta(rollout.outputs, tasks)
        rows: list[tuple[float | None, Mapping[str, float], str | None, str | None]] = []
        for output, task in zip(rollout.outputs, tasks, strict=True):
            try:
                if kind == "meta":
                    score = self.family.meta_score(output, task)
                    row = (float(score.value), dict(score.parts), None, None)
                else:
                    reward = self.family.reward(output, task, weights or {})
                    row = (float(reward.total), dict(reward.components), reward.degenerate, None)
                if not math.isfinite(row[0]):
                    raise ValueError(f"non-finite score {row[0]}")
            except Exception as exc:  # a failing example gets None, never raises
                row = (None, {}, None, f"{task.task_id}: {type(exc).__name__}: {exc}")
            rows.append(row)
        scores = _Scores(*(tuple(column) for column in zip(*rows, strict=True)))
        if not any(scores.errors):
            self.cache.put(key, scores)
        return scores


class _BatchRecorder:
    """What each evaluated genome left on one training batch; refuses a batch holding an input whose content
    hash is in ``forbidden`` (the meta-validation set), so no meta-validation item reaches the mutator or the
    training data. Subclasses say what is kept (:meth:`_keep`)."""

    def __init__(self, tasks: Sequence[Task], forbidden: frozenset[str] | set[str], what: str) -> None:
        leaked = [t.task_id for t in tasks if t.content_hash in forbidden]
        if leaked:
            raise DataError(f"{what}: tasks {leaked} are meta-validation inputs")
        self.tasks = tuple(tasks)
        self.batch_id = batch_id_for(tasks)
        self._by_genome: dict[str, Any] = {}

    def record(self, evaluations: Sequence[PolicyEvaluation]) -> None:
        """Remember each evaluation made on this batch (others are ignored; a genome's first one counts)."""
        for e in evaluations:
            if e.batch_id == self.batch_id and e.genome_hash not in self._by_genome and len(e.per_task) == len(self.tasks):
                kept = self._keep(e)  # type: ignore[attr-defined]
                if kept is not None:
                    self._by_genome[e.genome_hash] = kept


class FeedbackRecorder(_BatchRecorder):
    """Keeps each evaluated genome's worst task on one training batch as reflective-mutation feedback: the
    reflective seam. Call it with a policy to get its :class:`~evotrainer.search.reflection.TaskFeedback` (None
    when its genome was not evaluated on this batch or no task was scored).

    The worst task has the lowest total reward among those scored (ties: the first); its low components are
    those below 0.5 (lowest first, at most 3), or the single lowest one when none is below.

    Args:
        tasks: the training batch.
        forbidden: content hashes of the meta-validation items.
        reference_of: the task's reference answer (``TaskFamily.reference_answer``), shown for contrast.

    Raises:
        DataError: a task of ``tasks`` is a meta-validation input.
    """

    def __init__(self, tasks: Sequence[Task], *, forbidden: frozenset[str] | set[str] = frozenset(),
                 reference_of: Callable[[Task], str | None] | None = None) -> None:
        super().__init__(tasks, forbidden, "feedback recorder")
        self.reference_of = reference_of

    def _keep(self, e: PolicyEvaluation) -> TaskFeedback | None:
        scored = [(v, i) for i, v in enumerate(e.per_task) if v is not None]
        if not scored:
            return None
        value, i = min(scored)
        parts = e.per_task_components[i] if i < len(e.per_task_components) else {}
        ranked = [(k, float(v)) for k, v in sorted(parts.items(), key=lambda kv: (kv[1], kv[0]))]
        low = [kv for kv in ranked if kv[1] < 0.5][:3] or ranked[:1]
        t = self.tasks[i]
        ref = (self.reference_of(t) or "") if self.reference_of is not None else ""
        return TaskFeedback(t.task_id, t.content_hash, float(value), e.outputs[i], tuple(low), ref)

    def __call__(self, policy: Policy) -> TaskFeedback | None:
        return self._by_genome.get(policy.genome_hash)

    def __len__(self) -> int:
        return len(self._by_genome)


class PassingSampleRecorder(_BatchRecorder):
    """Keeps each evaluated genome's passing outputs on one training batch: the Lamarckian adapter data.

    Call it with a policy to get its passing samples as chats, in batch order: the family's
    ``training_chats(policy.sections, task, output)`` of each passing output; empty when its genome was not
    evaluated on this batch or nothing passed. An output passes when its task's total reward is >= ``threshold``,
    the degenerate-output guard did not fire and it is not blank.

    Args:
        tasks: the training batch.
        family: the task family (builds the chats of a policy on a task: ``SelfEvolving.training_chats``).
        threshold: pass threshold on the task's total reward, in [0, 1], higher is stricter.
        forbidden: content hashes of the meta-validation items.

    Raises:
        DataError: a task of ``tasks`` is a meta-validation input.
    """

    def __init__(self, tasks: Sequence[Task], family: SelfEvolving, *, threshold: float,
                 forbidden: frozenset[str] | set[str] = frozenset()) -> None:
        super().__init__(tasks, forbidden, "passing-sample recorder")
        self.family = family
        self.threshold = threshold

    def _keep(self, e: PolicyEvaluation) -> tuple[tuple[int, str], ...]:
        degenerate = e.degenerate if len(e.degenerate) == len(e.per_task) else (None,) * len(e.per_task)
        return tuple((i, out) for i, (value, out, degen) in enumerate(zip(e.per_task, e.outputs, degenerate, strict=True))
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

