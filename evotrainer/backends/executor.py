"""Where policy rollouts run: in this process (``executor=local``: the backend itself) or on Ray actors
(``executor=ray``: :class:`RayExecutor`; user guide: docs/scaling_out.md, "Ray executor").

Both are an :class:`~evotrainer.backends.base.LLM`, so the evaluator, the loops and the archive do not know which
one they got. ``executor.ray.workers`` actors each build their own backend once, with the builder the caller hands
in and the run's ``model.*`` settings; each ``generate`` call is split into one part per worker
(:func:`split_requests`: the transformers backend's prefix grouping on characters, cut into contiguous parts of
equal size, so an input's requests go to one worker but at most one group per cut; deterministic), and the
results come back in request order. Only the driver scores, selects and writes the archive. Greedy text does not
depend on how rows share a batch, so fitness values equal ``executor=local``'s
(``tests/backends/test_executor.py``).

A worker that dies is restarted once (``max_restarts=1``, ``max_task_retries=1``: docs.ray.io "Actor fault
tolerance") and its part re-run; a second death ends the run with one :class:`~evotrainer.errors.ServerError`
line. Without ``executor.ray.address`` each run starts and ends its own local Ray instance; several at once on one
machine can collide on a port (ray#53906), so a parallel sweep with a local instance is refused
(:func:`refuse_parallel_local_ray`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from evotrainer import progress
from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.backends.prefix import plan_prefixes
from evotrainer.errors import ConfigError, ModelError, ServerError

__all__ = ["RayExecutor", "refuse_parallel_local_ray", "split_requests"]

log = logging.getLogger(__name__)
_PIP = "pip install 'evotrainer[ray]'"
_MIN_SHARED_CHARS = 128  # about the backend's 32-token prefix_min_tokens at ~4 characters per token
_OBJECT_STORE_BYTES = 256 * 2**20  # a local instance moves chat text only; Ray's default reserves 30 % of RAM
_RESTARTS = 1  # a dead worker is started again once and its part re-run (module docstring)


def split_requests(requests: Sequence[GenerationRequest], parts: int) -> list[list[int]]:
    """Request indices per worker: prefix groups kept together, ``parts`` contiguous pieces of equal size.

    Args:
        requests: the call's requests.
        parts: workers, >= 1.

    Returns:
        ``parts`` lists of indices into ``requests`` (sizes differ by at most 1; empty ones when there are
        fewer requests than parts) that together hold every index once.
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    texts = ["\x00".join(f"{m.get('role', '')}\x01{m.get('content', '')}" for m in r.messages) for r in requests]
    groups = plan_prefixes(texts, [r.adapter for r in requests], _MIN_SHARED_CHARS)  # str: a sequence of chars
    order = [i for g in groups for i in g.rows]
    size, extra = divmod(len(order), parts)
    out, start = [], 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        out.append(order[start:end])
        start = end
    return out


def refuse_parallel_local_ray(executor: Any, jobs: int) -> None:
    """Refuse ``executor=ray`` with a local instance (no ``executor.ray.address``) when ``jobs`` sweep jobs
    run at once on this machine: each would start its own local Ray instance (module docstring, ray#53906).

    Args:
        executor: ``executor.*`` (an :class:`~evotrainer.config.ExecutorConfig`).
        jobs: jobs of the running multirun that run at once (:func:`evotrainer.backends.threads.parallel_jobs`), >= 1.

    Raises:
        ConfigError: one line naming ``executor``, ``executor.ray.address`` and ``hydra.launcher.n_jobs``.
    """
    if executor.kind == "ray" and executor.ray.address is None and jobs > 1:
        raise ConfigError(
            f"config keys 'executor' and 'hydra.launcher.n_jobs': executor=ray would start a local Ray instance in "
            f"each of the {jobs} jobs running at once, and several local instances on one machine can collide on "
            "a port (ray#53906); use hydra.launcher.n_jobs=1, or executor=local, or start one instance with "
            "`ray start --head` and pass executor.ray.address=auto")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"config key 'executor': 'ray' needs the ray package: {_PIP}") from None
    return ray


class _Worker:
    """A Ray actor's state: one backend, built once from ``model.*`` (the policy model's settings) by ``build``
    (a module-level function, so Ray sends it by reference: each node imports it from the installed package)."""

    def __init__(self, model: Any, build: Callable[[Any], Any]) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a cluster node may not have the driver's environment
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        self.llm = build(model)

    def name(self) -> str:
        return self.llm.name

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return self.llm.generate(requests)


class RayExecutor:
    """An :class:`~evotrainer.backends.base.LLM` whose requests run on Ray actors (module docstring).

    Args:
        model: the policy model's settings (a :class:`~evotrainer.config.ModelConfig`); each worker builds
            its backend from it with ``threads`` replaced by the per-worker count.
        cfg: ``executor.ray.*`` (a :class:`~evotrainer.config.RayConfig`): ``address`` (None: start a local
            instance with ``workers * threads`` CPUs), ``workers`` >= 1, ``threads`` per worker (None: the
            free cores of this machine divided by ``workers`` on a local instance, 1 on a cluster), ``gpus``
            per worker.
        build: builds one worker's backend from ``model`` (:func:`evotrainer.run.runtime.build_llm`, which
            passes itself); a module-level function, sent to the workers by reference.

    Attributes:
        name: the workers' backend name (so fitness-cache keys equal the local executor's).
        workers: the actor handles. threads: torch threads per worker.

    Raises:
        ConfigError: the ray package is missing (the message has the pip command), or the cluster address
            cannot be reached.
        ModelError: a worker could not build its backend (the first worker's error).
    """

    def __init__(self, model: Any, cfg: Any, build: Callable[[Any], Any]) -> None:
        ray = _import_ray()
        self._ray = ray
        self.threads = cfg.threads or self._default_threads(cfg)
        self._owns_ray = False
        if not ray.is_initialized():
            self._init(cfg)
        actor = ray.remote(num_cpus=self.threads, num_gpus=cfg.gpus, max_restarts=_RESTARTS,
                           max_task_retries=_RESTARTS)(_Worker)
        spec = replace(model, threads=self.threads)
        self.workers = [actor.remote(spec, build) for _ in range(cfg.workers)]
        try:
            names = ray.get([w.name.remote() for w in self.workers])  # waits until every model is loaded
        except Exception as exc:
            self.close()
            cause = getattr(exc, "cause", None) or exc
            raise ModelError(f"executor=ray: a worker could not load the model: {type(cause).__name__}: "
                             f"{str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}") from exc
        self.name = names[0]
        log.info("ray executor: %d workers x %d threads, model %s", cfg.workers, self.threads, self.name)

    @staticmethod
    def _default_threads(cfg: Any) -> int:
        if cfg.address is not None:
            return 1
        from evotrainer.backends.threads import choose_threads, read_machine

        return max(choose_threads(read_machine()) // cfg.workers, 1)

    def _init(self, cfg: Any) -> None:
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
        if cfg.address is None:  # "local": a new instance even when one is already running on this machine
            options |= {"address": "local", "num_cpus": cfg.workers * self.threads,
                        "object_store_memory": _OBJECT_STORE_BYTES}
            if cfg.gpus:
                options["num_gpus"] = int(-(-cfg.workers * cfg.gpus // 1))
        else:
            options["address"] = cfg.address
        try:
            self._ray.init(**options)
        except ConnectionError as exc:
            raise ConfigError(f"config key 'executor.ray.address': cannot join {cfg.address!r}: {exc}") from None
        self._owns_ray = True

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Run ``requests`` on the workers (one part each); the i-th result answers the i-th request.

        Raises whatever a worker raised (``ray.get`` re-raises the worker's exception as an instance of
        its type). A worker that died is restarted once by Ray and its part re-run (module docstring).

        Raises:
            ServerError: a worker died again after its restart (one line: which worker, Ray's reason).
        """
        requests = list(requests)
        parts = [p for p in split_requests(requests, len(self.workers)) if p]
        pending = {w.generate.remote([requests[i] for i in part]): part
                   for w, part in zip(self.workers, parts, strict=False)}
        results: list[Generation | None] = [None] * len(requests)
        waiting = list(pending)
        while waiting:
            done, waiting = self._ray.wait(waiting, num_returns=1)
            for ref in done:
                part = pending[ref]
                try:
                    answers = self._ray.get(ref)
                except self._ray.exceptions.RayActorError as exc:
                    raise ServerError(self._died_line(ref, pending, exc)) from None
                for i, generation in zip(part, answers, strict=True):
                    results[i] = generation
                progress.advance(len(part))  # the driver's progress line (workers have none open)
        return [g for g in results if g is not None]

    def _died_line(self, ref: Any, pending: dict[Any, list[int]], exc: BaseException) -> str:
        """One line for a worker that died after its restart: which worker, and the last line of Ray's reason."""
        k = list(pending).index(ref)
        reason = " ".join(next((ln for ln in reversed(str(exc).splitlines()) if ln.strip()), "").split())
        reason = reason if len(reason) <= 300 else reason[:297] + "..."
        return (f"executor=ray: worker {k + 1} of {len(self.workers)} died again after its restart ({reason}); the "
                "run stops. A worker killed by Ray's memory monitor needs more memory per worker: lower "
                "executor.ray.workers or model.batch_size")

    def close(self) -> None:
        """End the workers and the Ray connection this executor opened (a local instance it started ends
        with it; a cluster it joined goes on)."""
        for w in getattr(self, "workers", []):
            self._ray.kill(w)
        self.workers = []
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False

