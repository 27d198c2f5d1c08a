"""Resuming a killed ``mode=evolve`` or ``mode=selfevolve`` run: which run, whether its config matches, how much
time it used.

``resume=<run dir>`` continues the run whose archive is in that folder; ``resume=true`` picks the newest
resumable run of the same config under ``archive/runs``. The run is re-run from its start by deterministic
replay: LLM calls from the call log (:mod:`evotrainer.backends.call_log`), archive rows verified and skipped
(:mod:`evotrainer.archive.replay_store`), stop decisions as stored (:mod:`evotrainer.run.control`), and in
self-evolution each round's training loaded from its adapter folder (:mod:`evotrainer.selfevolve.trained`); what a
user sees and the limits (``mode=evolve`` and ``mode=selfevolve``, no adapter genes, no multirun): docs/runs.md.

Config check: the stored config (``runs.config_json``) is compared with the new one key by key (dotted keys),
leaving out ``resume``, ``resume_force``, ``debug``, ``model.threads`` / ``mutator.threads`` (checked on their
own: :func:`resume_threads`), the ``openai`` keys ``concurrency``, ``timeout_s`` and ``max_retries`` (speed, not
text) and ``tracking.*``; ``archive.live_report`` counts (it archives a ``report`` phase event per refresh).
A difference is refused with one line naming the keys unless ``resume_force=true``. A run whose process still
holds ``.<run id>.lock`` (:mod:`evotrainer.archive.run_lock`) is neither resumed nor picked. The thread count a
run used (its ``compute`` phase event) is reused under ``model.threads=null``, since results may depend on it
(pytorch#88718). Past the replay, a backend whose text depends on what runs beside a request (vLLM, llama.cpp,
Ollama, a hosted API: vllm#23138, llama.cpp#7052) may answer differently: one warning per such role, read from
the run's ``backend`` phase event and config (:func:`resume_warnings`).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from evotrainer.archive.replay_store import RESUME_MARKER, ReplayingStore
from evotrainer.archive.run_lock import lock_path, probe, take
from evotrainer.archive.store import DEFAULT_ARCHIVE_NAME, ArchiveStore, archive_path
from evotrainer.archive.values import now
from evotrainer.backends.call_log import CALL_LOG_NAME, CallLog, LoggedLLM, ReportsServedModel, model_identity
from evotrainer.backends.openai_fields import PROFILES
from evotrainer.backends.threads import COMPUTE_PHASE
from evotrainer.backends.urls import redact_config
from evotrainer.errors import ArchiveError, ConfigError
from evotrainer.flat_keys import flatten, migrate_config
from evotrainer.harness.stopping import BudgetLimits
from evotrainer.run.control import STOP_FILE, RunControl

__all__ = ["IGNORED_KEYS", "IGNORED_PREFIXES", "RESUMABLE_MODES", "RESUMABLE_TEXT", "RESUME_KEYS", "ResumePlan", "RunFiles", "config_diff", "find_resumable", "lock_path",
           "plan_resume", "resume_threads", "resume_warnings", "run_config", "wants_resume"]

RESUMABLE_MODES = ("evolve", "selfevolve")
"""The run modes a killed run of can be resumed (``evaluate`` and ``distill`` runs are rerun)."""

RESUMABLE_TEXT = " and ".join(f"mode={m}" for m in RESUMABLE_MODES)
"""The resumable modes as the error messages name them: ``mode=evolve and mode=selfevolve``."""

RESUME_KEYS = ("resume", "resume_force")
"""Top-level keys that say how to start, not what to run: never stored in a run's config or its id."""

IGNORED_KEYS = frozenset({*RESUME_KEYS, "debug", "model.threads", "mutator.threads",
                          *(f"{role}.openai.{key}" for role in ("model", "mutator")
                            for key in ("concurrency", "timeout_s", "max_retries"))})
"""Dotted keys :func:`config_diff` leaves out (thread counts, a server's concurrency, timeouts and retries
change speed, not text)."""

IGNORED_PREFIXES = ("tracking.",)
"""Key prefixes :func:`config_diff` leaves out (tracking watches the run, it does not steer it)."""

RUNS_ROOT = Path("archive/runs")
"""Where ``resume=true`` looks (Hydra's ``hydra.run.dir`` parent, relative to the launch folder)."""


@dataclass(frozen=True)
class ResumePlan:
    """A run to resume.

    Attributes:
        run_dir: the run folder (archive, call log, STOP file).
        archive: its archive file.
        run_id: the stored run's id (reused even when a forced config changes the id the config hashes to).
        elapsed_s: wall-clock seconds the earlier process(es) spent, >= 0 (budget seconds continue from it).
        changed: dotted keys whose values differ from the stored config (empty unless forced).
        threads: the thread counts the run recorded (:func:`evotrainer.backends.threads.threads_in_use`: ``threads``,
            and ``worker_threads`` with Ray workers); empty for a run written before they were recorded.
        backends: per role ("model", "mutator"), what the run recorded of its backend: a server's
            ``describe()`` from the run's first ``backend`` phase event, ``{"backend": "vllm"}`` for an
            in-process vLLM engine; roles on the in-process transformers backend are absent.
    """

    run_dir: Path
    archive: Path
    run_id: str
    elapsed_s: float
    changed: tuple[str, ...] = field(default_factory=tuple)
    threads: Mapping[str, int] = field(default_factory=dict)
    backends: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def wants_resume(value: Any) -> bool:
    """Whether a ``resume`` value asks to resume (null, ``false`` and ``""`` do not)."""
    return value is not None and str(value).strip().lower() not in ("", "false", "none", "null")


def run_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without :data:`RESUME_KEYS` and with the credentials of its URLs masked (what a run stores and
    hashes into its id; :func:`~evotrainer.backends.urls.redact_config`)."""
    return redact_config({k: v for k, v in config.items() if k not in RESUME_KEYS})


def _flat_json(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` through JSON (a tuple becomes a list), as dotted keys (:func:`~evotrainer.flat_keys.flatten`)."""
    data = json.loads(json.dumps(config, default=str))
    return flatten(data) if isinstance(data, Mapping) else {"": data}


def config_diff(stored: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ (or that only one side has), sorted; :data:`IGNORED_KEYS` and keys
    under :data:`IGNORED_PREFIXES` left out.

    Values are compared as JSON (a tuple equals a list, 1 equals 1.0) with the credentials of URLs masked on both
    sides (the archive stores them masked); a stored config written before a key moved is read with it in its
    new place (:func:`~evotrainer.flat_keys.migrate_config`).
    """
    a, b = _flat_json(redact_config(migrate_config(stored))), _flat_json(redact_config(new))
    return sorted(k for k in set(a) | set(b) if k not in IGNORED_KEYS and not k.startswith(IGNORED_PREFIXES)
                  and (k not in a or k not in b or a[k] != b[k]))


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _run_state(store: ArchiveStore, run_id: str) -> dict[str, Any]:
    """Config, start time, finished flag and elapsed seconds of one archived run."""
    conn = store._conn
    created, config_json = conn.execute(
        "SELECT created_at, config_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    finished = conn.execute("SELECT 1 FROM events WHERE run_id = ? AND kind = 'summary' LIMIT 1",
                            (run_id,)).fetchone() is not None
    last = max((r[0] for r in (
        conn.execute(f"SELECT max(created_at) FROM {t} WHERE run_id = ?", (run_id,)).fetchone()
        for t in ("policies", "evaluations", "harness_candidates", "events")) if r[0] is not None), default=created)
    elapsed = (_parse(last) - _parse(created)).total_seconds()
    threads: dict[str, int] = {}
    config = json.loads(config_json)
    backends: dict[str, Mapping[str, Any]] = {
        role: {"backend": "vllm"} for role in ("model", "mutator")
        if isinstance(config.get(role), Mapping) and config[role].get("backend") == "vllm"}
    seen_backend = False
    for (body,) in conn.execute("SELECT payload_json FROM events WHERE run_id = ? AND kind = 'phase' ORDER BY id",
                                (run_id,)):
        payload = json.loads(body)
        if payload.get("name") == COMPUTE_PHASE and not threads:  # the first process's counts
            threads = {k: v for k, v in payload.items() if k in ("threads", "worker_threads") and isinstance(v, int)}
        if payload.get("name") == "backend" and not seen_backend:  # what each server was found to be, at the start
            seen_backend = True
            backends.update({k: v for k, v in payload.items() if isinstance(v, Mapping) and v.get("backend") == "openai"})
        if payload.get("name") == RESUME_MARKER and "process_started_at" in payload:
            # the latest resumed process: its carried-over time plus its own, not the pause before it
            elapsed = float(payload.get("elapsed_before_s", 0.0)) + (
                _parse(last) - _parse(payload["process_started_at"])).total_seconds()
    return {"config": config, "created_at": created, "finished": finished,
            "elapsed_s": max(elapsed, 0.0), "threads": threads, "backends": backends}


def _running(archive: Path, run_id: str) -> bool:
    """Whether a live process holds ``run_id``'s lock (a killed one's lock is released by the kernel; on a
    filesystem without ``flock`` this cannot be known, and the run counts as not running)."""
    return probe(lock_path(archive, run_id)) is True


def _archive_of(run_dir: Path, archive_name: str) -> Path:
    path = Path(archive_name).expanduser()
    return path if path.is_absolute() else run_dir / path


def plan_resume(value: Any, config: Mapping[str, Any], *, force: bool = False,
                runs_root: Path = RUNS_ROOT, archive_name: str = DEFAULT_ARCHIVE_NAME) -> ResumePlan:
    """The run to resume for ``resume=<value>`` (module docstring), its config checked.

    Args:
        value: a run folder (or its ``archive.db``), or true for the newest resumable run of the same config
            under ``runs_root``.
        config: the new run config (:func:`run_config` applied).
        force: ``resume_force``: accept a differing config (the differing keys are returned in ``changed``).
        runs_root: where ``resume=true`` looks.
        archive_name: ``archive.path`` (relative to the run folder unless absolute).

    Raises:
        ConfigError: ``resume``: no such folder or archive; the archive holds no run, several, or a
            finished one (its summary is archived); the config differs (the message names the keys) and not
            ``force``; ``resume=true`` found no resumable run of this config.
    """
    if str(value).strip().lower() == "true":
        found = find_resumable(config, runs_root, archive_name)
        if found is None:
            raise ConfigError(f"resume=true: no resumable run of this config under {runs_root} (an evolve or "
                              "selfevolve run with the same config and no summary); give the run folder as "
                              "resume=<dir>")
        value = found
    path = Path(str(value)).expanduser()
    run_dir = path.parent if path.is_file() else path
    archive = path if path.is_file() else _archive_of(run_dir, archive_name)
    if not archive.is_file():
        raise ConfigError(f"resume: no archive at {archive} (expected a run folder written by "
                          f"{' or '.join(f'mode={m}' for m in RESUMABLE_MODES)})")
    try:
        with ArchiveStore(archive, read_only=True) as store:
            runs = store.list_runs()
            if len(runs) != 1:
                raise ConfigError(f"resume: {archive} holds {len(runs)} runs; resume needs exactly one")
            run_id = runs[0].run_id
            state = _run_state(store, run_id)
    except ArchiveError as exc:
        raise ConfigError(f"resume: {exc}") from None
    if state["config"].get("mode", "evolve") not in RESUMABLE_MODES:
        raise ConfigError(f"resume: run {run_id} in {run_dir} is mode={state['config'].get('mode')}; only "
                          f"{RESUMABLE_TEXT} runs can be resumed")
    if state["finished"]:
        raise ConfigError(f"resume: run {run_id} in {run_dir} already finished (its summary is archived)")
    if _running(archive, run_id):
        raise ConfigError(f"resume: run {run_id} in {run_dir} is still running in another process; let it end "
                          "or kill it first")
    changed = config_diff(state["config"], config)
    if changed and not force:
        shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
        raise ConfigError(f"resume: the config differs from run {run_id}'s in {shown}; use the same overrides, "
                          "or resume_force=true to resume anyway")
    return ResumePlan(run_dir=run_dir, archive=archive, run_id=run_id, elapsed_s=state["elapsed_s"],
                      changed=tuple(changed), threads=state["threads"], backends=state["backends"])


def resume_threads(cfg: Any, plan: ResumePlan) -> list[str]:
    """Give the resumed process the thread counts the run recorded, where the config leaves them automatic.

    ``model.threads`` null becomes the recorded ``threads`` (the mutator's too when it is the policy model's
    config); ``executor.ray.threads`` null becomes the recorded ``worker_threads``. ``cfg`` (a
    :class:`~evotrainer.config.Config`) is changed in place.

    Returns:
        Warning lines, one per count given explicitly that differs from the recorded one, naming the key and
        value to pass to continue exactly as the run would have; empty when none differs.
    """
    out: list[str] = []
    recorded, workers = plan.threads.get("threads"), plan.threads.get("worker_threads")
    why = ("results may depend on the thread count (pytorch#88718; bit-identical at 1-8 threads where measured, "
           "evotrainer/backends/threads.py)")
    if recorded is not None:
        if cfg.model.threads is None:
            same = cfg.mutator == cfg.model
            cfg.model = replace(cfg.model, threads=recorded)
            if same:
                cfg.mutator = replace(cfg.mutator, threads=recorded)
        elif cfg.model.threads != recorded:
            out.append(f"resume: run {plan.run_id} ran with {recorded} compute threads, this process with "
                       f"model.threads={cfg.model.threads}; {why}: pass model.threads={recorded} to continue "
                       "exactly as the run would have")
    if workers is not None and cfg.executor.kind == "ray":
        if cfg.executor.ray.threads is None:
            cfg.executor = replace(cfg.executor, ray=replace(cfg.executor.ray, threads=workers))
        elif cfg.executor.ray.threads != workers:
            out.append(f"resume: run {plan.run_id}'s Ray workers ran with {workers} threads each, this process's "
                       f"with executor.ray.threads={cfg.executor.ray.threads}; {why}: pass "
                       f"executor.ray.threads={workers} to continue exactly as the run would have")
    return out


_VLLM_ENGINE = ("continuous batching: a request's text, greedy included, can change with the requests running "
                "beside it (vllm#23138) unless vLLM runs with VLLM_BATCH_INVARIANT=1")


def resume_warnings(plan: ResumePlan) -> list[str]:
    """One warning line per role whose backend does not promise a request's text whatever runs beside it
    (module docstring): a vLLM engine, or a server whose kind the run recorded as not batch-invariant
    (:attr:`~evotrainer.backends.openai_fields.ServerProfile.batch_invariant`; a kind recorded without the flag
    is looked up in :data:`~evotrainer.backends.openai_fields.PROFILES`). Empty for the transformers backend."""
    out: list[str] = []
    for role, d in plan.backends.items():
        profile = PROFILES.get(str(d.get("server")))
        invariant = d.get("batch_invariant", profile.batch_invariant if profile else False)
        if d.get("backend") == "openai" and invariant:
            continue
        what = (f"a {d.get('server', 'generic')} server ({d.get('base_url')})" if d.get("backend") == "openai"
                else "the vLLM engine")
        why = d.get("invariance") or (profile.invariance if profile else _VLLM_ENGINE)
        out.append(f"resume: run {plan.run_id}'s {role} ran on {what}, which does not promise the same text "
                   f"whatever runs beside a request ({why}): the requests the killed process left unanswered are "
                   "sent again beside others and may be answered differently, so the run may go on otherwise than "
                   "an uninterrupted one (answers in the call log replay as they were)")
    return out


def find_resumable(config: Mapping[str, Any], runs_root: Path = RUNS_ROOT,
                   archive_name: str = DEFAULT_ARCHIVE_NAME) -> Path | None:
    """The run folder under ``runs_root`` (one level down) holding the newest (by start time) unfinished
    evolve or selfevolve run whose config equals ``config`` (:func:`config_diff` empty) and that no live process is
    writing, or None."""
    best: tuple[str, Path] | None = None
    for run_dir in sorted(p for p in Path(runs_root).glob("*") if p.is_dir()):
        archive = _archive_of(run_dir, archive_name)
        if not archive.is_file():
            continue
        try:
            with ArchiveStore(archive, read_only=True) as store:
                runs = store.list_runs()
                if len(runs) != 1:
                    continue
                state = _run_state(store, runs[0].run_id)
        except ArchiveError:
            continue
        if (state["finished"] or state["config"].get("mode", "evolve") not in RESUMABLE_MODES
                or _running(archive, runs[0].run_id)):
            continue
        if config_diff(state["config"], config):
            continue
        if best is None or state["created_at"] > best[0]:
            best = (state["created_at"], run_dir)
    return None if best is None else best[1]


class RunFiles:
    """What an evolve or selfevolve run keeps beside its rows for resume and STOP: the LLM call log, the archive
    (replaying when resuming) and the run's stop control.

    Args:
        run_dir: the run folder (the ``STOP`` file is looked for there).
        resume: the run being resumed, or None for a fresh run.
        calls: the call log, or None (nothing logged).
        log_adapters: whether requests naming an adapter are logged (False with adapter genes, whose adapters are
            trained in the run: :class:`~evotrainer.backends.call_log.LoggedLLM`).
    """

    def __init__(self, run_dir: str | Path, resume: ResumePlan | None, calls: CallLog | None, *,
                 log_adapters: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.resume = resume
        self.calls = calls
        self.log_adapters = log_adapters
        self.started_at = now()
        self.replay: ReplayingStore | None = None
        self._lock: int | None = None

    @classmethod
    def open(cls, cfg: Any, run_dir: str | Path, resume: ResumePlan | None) -> RunFiles:
        """Open the call log: ``cfg.archive.call_log``, or ``llm_calls.db`` beside ``cfg.archive.path`` (relative
        paths under ``run_dir``). With adapter genes on, only calls that name no adapter are logged (generation 0's
        seeds, the mutator's calls, adapter-free policies), so runs sharing a log serve each other those.

        Raises:
            ConfigError: ``resume`` of an evolve run with adapter genes on (``inner.adapter_mutation_share > 0``).
        """
        adapters = getattr(cfg, "mode", "evolve") == "evolve" and cfg.inner.adapter_mutation_share > 0
        if resume is not None and adapters:
            raise ConfigError("resume: runs with adapter genes (inner.adapter_mutation_share > 0) cannot be "
                              "resumed (adapter training is not logged)")
        shared = cfg.archive.call_log
        log_path = (archive_path(shared, run_dir) if shared else
                    archive_path(cfg.archive.path, run_dir).parent / CALL_LOG_NAME)
        return cls(run_dir, resume, CallLog(log_path), log_adapters=not adapters)

    def logged(self, llm: Any, model_cfg: Any) -> Any:
        """``llm`` answering through the call log (as is without one), keyed by ``model_cfg``'s identity and, for
        a server, the weights it reports serving (:func:`~evotrainer.backends.call_log.model_identity`)."""
        if self.calls is None:
            return llm
        served = llm.served_model() if isinstance(llm, ReportsServedModel) else None
        return LoggedLLM(llm, self.calls, model_identity(model_cfg, served), log_adapters=self.log_adapters)

    def archive(self, path: str | Path, run_id: str) -> ArchiveStore:
        """The archive for writing (a :class:`ReplayingStore` when resuming), after taking the run's lock
        (:func:`~evotrainer.archive.run_lock.lock_path`, an ``flock`` held until :meth:`close` or the process ends;
        on a filesystem without ``flock`` the run goes on unlocked with a warning naming the filesystem,
        :mod:`evotrainer.archive.run_lock`).

        Raises:
            ConfigError: another live process holds the run's lock (it is writing the same run).
            OSError: the lock file cannot be created or locked for another reason (the message names it).
        """
        lock = lock_path(Path(path), run_id)
        self._lock = take(lock)
        if self._lock is None:
            raise ConfigError(f"run {run_id} in {lock.parent} is being written by another process ({lock})")
        if self.resume is None:
            return ArchiveStore(path)
        self.replay = ReplayingStore(path, run_id, marker={
            "elapsed_before_s": self.resume.elapsed_s, "process_started_at": self.started_at,
            "forced_keys": list(self.resume.changed)})
        return self.replay

    def control(self, rec: Any, outer: Any, cost: Any = None, prompt_tokens: Any = None) -> RunControl:
        """Stop decisions for ``outer.budget.*``, the STOP file and the replay; ``cost()``: the run's model-call
        cost so far in US dollars (``outer.budget.usd``), None without prices; ``prompt_tokens()``: the prompt
        tokens read so far (``outer.budget.prompt_tokens``)."""
        b = outer.budget
        return RunControl(rec, BudgetLimits(b.seconds, b.tokens, b.evaluations, rollouts=b.rollouts, usd=b.usd,
                                            prompt_tokens=b.prompt_tokens, train_tokens=b.train_tokens),
                          stop_file=self.run_dir / STOP_FILE,
                          elapsed_before_s=self.resume.elapsed_s if self.resume is not None else 0.0,
                          replay=self.replay, cost=cost, prompt_tokens=prompt_tokens)

    def close(self) -> None:
        """Close the call log and release the run's lock (idempotent)."""
        if self.calls is not None:
            self.calls.close()
            self.calls = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
