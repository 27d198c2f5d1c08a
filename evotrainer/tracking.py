"""Experiment tracking: a run's metrics to TensorBoard and MLflow (off by default; which metrics, and where they
are written: docs/runs.md).

The :class:`Tracker` decides nothing: it *subscribes* to what the run archives
(:class:`~evotrainer.archive.recorder.RunRecorder` hands it each event and harness-candidate row as it writes
them) and turns them into numbers, stepped by inner generations run so far (from 0, each candidate's initial
evaluation included), harness candidates archived so far (from 0), the outer generation (0 = the seeds), or 0
for ``final/*``. S_val and fitness are in [0, 1], higher is better. Libraries load lazily; a missing one with
its key on fails at start with the pip command; a sink that fails during the run, its start included, is logged
and dropped: tracking never stops a run.

Parallel jobs on one SQLite file: MLflow creates its schema with Alembic migrations on a file's first use, and two
processes migrating the same fresh file at once fail, so the first client calls (store and schema creation, the
experiment) run under a :class:`filelock.FileLock` on ``<file>.lock`` beside the SQLite file; where that lock
cannot be taken, they are retried once.
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from evotrainer.errors import ConfigError
from evotrainer.events.kinds import (
    Event,
    GeneralisationEvent,
    IncumbentEvent,
    InnerGenerationEvent,
    OuterGenerationEvent,
    RaceEvent,
    SelfEvolveSummaryEvent,
    SummaryEvent,
)
from evotrainer.flat_keys import flatten

__all__ = ["MLflowSink", "MetricSink", "TensorBoardSink", "Tracker", "flatten_config", "open_tracker"]

log = logging.getLogger(__name__)
_PIP = "pip install 'evotrainer[track]'"
_MLFLOW_PARAM_CHARS = 6000  # MLflow's limit on one param value (MAX_PARAM_VAL_LENGTH)
_MLFLOW_BATCH = 100  # params per log_batch call (MLflow's limit)
_SCHEMA_LOCK_TIMEOUT_S = 300.0  # MLflow's migrations of a fresh file take seconds; a slow machine, more


class MetricSink(Protocol):
    """Where metrics go (one tracking backend)."""

    def start(self, run_name: str, params: Mapping[str, str], config: Mapping[str, Any]) -> None:
        """Open the run: ``params`` is the flattened config (:func:`flatten_config`), ``config`` the nested one."""
        ...

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        """Record finite ``metrics`` (name -> value) at ``step`` (>= 0)."""
        ...

    def note(self, key: str, text: str) -> None:
        """Record a short text (a tag in MLflow, a text summary in TensorBoard)."""
        ...

    def close(self, ok: bool) -> None:
        """Flush and close; ``ok`` False marks the run failed where the backend has a status."""
        ...


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted keys -> string values (``{"outer": {"race": {"level": 0.95}}}`` -> ``{"outer.race.level": "0.95"}``).

    The keys are :func:`evotrainer.flat_keys.flatten`'s; lists, None and an empty mapping become JSON; a
    value longer than MLflow's 6000-character limit is cut with ``...``.
    """
    out: dict[str, str] = {}
    for name, value in flatten(config, prefix).items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out[name] = text if len(text) <= _MLFLOW_PARAM_CHARS else text[: _MLFLOW_PARAM_CHARS - 3] + "..."
    return out


class TensorBoardSink:
    """Scalars to TensorBoard event files with ``torch.utils.tensorboard.SummaryWriter``.

    Args:
        log_dir: the folder event files go to (created).
    """

    def __init__(self, log_dir: str | Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self._writer = SummaryWriter(log_dir=str(self.log_dir))

    def start(self, run_name: str, params: Mapping[str, str], config: Mapping[str, Any]) -> None:
        self._writer.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```", 0)
        self._writer.add_text("run", run_name, 0)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, step)
        self._writer.flush()  # a few calls per generation: a killed run keeps what it logged

    def note(self, key: str, text: str) -> None:
        self._writer.add_text(key, text, 0)
        self._writer.flush()

    def close(self, ok: bool) -> None:
        self._writer.close()


def _sqlite_file(uri: str) -> Path | None:
    """The database file of a ``sqlite:`` tracking URI (relative to the working folder as SQLAlchemy reads
    it), or None for another scheme or an in-memory database."""
    if not uri.startswith("sqlite:"):
        return None
    from sqlalchemy.engine import make_url

    try:
        database = make_url(uri).database
    except Exception:  # SQLAlchemy's ArgumentError and friends: MLflow reports the bad URI itself
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


@contextmanager
def _schema_lock(uri: str) -> Iterator[bool]:
    """Hold a :class:`filelock.FileLock` on ``<file>.lock`` beside a ``sqlite:`` store while MLflow creates it
    (module docstring); yields whether the lock is held (False: not SQLite, or the lock could not be taken:
    e.g. a read-only folder, filelock < 4 on a filesystem without ``flock``, or a 300 s wait)."""
    db = _sqlite_file(uri)
    if db is None:
        yield False
        return
    from filelock import FileLock

    lock = FileLock(f"{db}.lock", timeout=_SCHEMA_LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except (OSError, NotImplementedError) as exc:  # filelock.Timeout is a TimeoutError, an OSError
        log.warning("tracking: cannot lock %s.lock (%s: %s); creating the MLflow store unlocked", db,
                    type(exc).__name__, exc)
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


class MLflowSink:
    """Params, metrics and tags to MLflow through ``MlflowClient`` (no global MLflow state is touched).

    The client is created in :meth:`start`, under the schema lock (module docstring), so parallel jobs can
    share one fresh SQLite file.

    Args:
        uri: tracking URI (``sqlite:///...`` or any other MLflow accepts).
        experiment: experiment name, created when missing.
    """

    def __init__(self, uri: str, experiment: str) -> None:
        self.uri, self.experiment = uri, experiment
        self._client: Any = None
        self.run_id: str | None = None

    def _open(self) -> str:
        """Create the client (MLflow creates or migrates the store here) and find or create the experiment;
        returns its id."""
        from mlflow.tracking import MlflowClient

        c = self._client = MlflowClient(tracking_uri=self.uri)
        found = c.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        try:
            return c.create_experiment(self.experiment)
        except Exception:  # another job of a sweep created it meanwhile
            return c.get_experiment_by_name(self.experiment).experiment_id

    def start(self, run_name: str, params: Mapping[str, str], config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        with _schema_lock(self.uri) as locked:
            try:
                experiment_id = self._open()
            except Exception as exc:
                if locked:
                    raise
                log.warning("tracking: MLflow store %s failed to open (%s: %s); retrying once", self.uri,
                            type(exc).__name__, exc)
                time.sleep(1.0)  # let a concurrent job finish its migration
                experiment_id = self._open()
        c = self._client
        self.run_id = c.create_run(experiment_id, run_name=run_name).info.run_id
        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), _MLFLOW_BATCH):
            c.log_batch(self.run_id, params=items[i : i + _MLFLOW_BATCH])

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def note(self, key: str, text: str) -> None:
        self._client.set_tag(self.run_id, key, text)

    def close(self, ok: bool) -> None:
        if self.run_id is not None:
            self._client.set_terminated(self.run_id, "FINISHED" if ok else "FAILED")


class Tracker:
    """Turns archived events and candidate rows into metrics for ``sinks`` (module docstring table).

    The :class:`~evotrainer.archive.recorder.RunRecorder` calls :meth:`start`, :meth:`event` (it subscribes
    to the typed events) and :meth:`candidate`; the co-evolution ``summary`` event closes the sinks (a run that never gets there is closed as
    failed at interpreter exit).

    Args:
        sinks: the backends (each a :class:`MetricSink`).
        suffix: appended to the run name the sinks open (a resumed run's attempt, see :func:`open_tracker`).
    """

    def __init__(self, sinks: Sequence[MetricSink], suffix: str = "") -> None:
        self.sinks = list(sinks)
        self.suffix = suffix
        self._inner_step = 0
        self._candidate_step = 0
        self._race_evaluations: dict[str, int] = {}
        self._closed = False

    def start(self, run_id: str, seed: int, config: Mapping[str, Any]) -> None:
        """Open each sink's run, named ``run_id`` (plus the resume suffix), with the config as params."""
        params = flatten_config(config)
        self._each("start", run_id + self.suffix, params, dict(config))
        atexit.register(self._abandon)

    def event(self, event: Event) -> None:
        """One archived event (:mod:`evotrainer.events.kinds`; kinds without metrics are ignored)."""
        e = event
        if isinstance(e, InnerGenerationEvent):
            self._log({"inner/best_fitness": e.record.get("max"), "inner/mean_fitness": e.record.get("mean")},
                      self._inner_step)
            self._inner_step += 1
        elif isinstance(e, RaceEvent) and e.harness_id is not None:
            hid = e.harness_id
            self._race_evaluations[hid] = self._race_evaluations.get(hid, 0) + (e.evaluations or 0)
        elif isinstance(e, IncumbentEvent) and e.outer_generation == 0:
            self._log({"outer/incumbent_s_val": e.s_val}, 0)
        elif isinstance(e, OuterGenerationEvent):
            self._log({"outer/incumbent_s_val": e.incumbent_s_val, "outer/current_s_val": e.current_s_val,
                       "outer/cma_sigma": e.sigma}, e.outer_generation or 0)
        elif isinstance(e, GeneralisationEvent):
            metrics: dict[str, Any] = {}
            for split, s in (("selection", e.selection or {}), ("heldout", e.heldout or {})):
                d = s.get("diff") or {}
                metrics |= {f"final/{split}_diff": d.get("mean"), f"final/{split}_diff_low": d.get("low"),
                            f"final/{split}_diff_high": d.get("high"), f"final/{split}_best_mean": s.get("best_mean"),
                            f"final/{split}_baseline_mean": s.get("baseline_mean")}
            self._log(metrics, 0)
            if e.verdict:
                self._each("note", "verdict", e.verdict)
        elif isinstance(e, SummaryEvent):
            self._log({"final/initial_s_val": e.initial_s_val, "final/best_s_val": e.best_s_val,
                       "final/heldout_s_val": e.heldout_s_val, "final/candidates": e.candidates,
                       "final/rollouts": e.rollouts}, 0)
            self._each("note", "stop_reason", e.stop_reason or "")
            self.close(ok=True)
        elif isinstance(e, SelfEvolveSummaryEvent):
            self.close(ok=True)

    def candidate(self, row: Any) -> None:
        """One archived harness candidate (a :class:`~evotrainer.archive.schema.HarnessCandidateRow`)."""
        self._log({"candidate/race_estimate": row.race_estimate, "candidate/s_val": row.s_val,
                   "candidate/race_evaluations": self._race_evaluations.get(row.harness_id)}, self._candidate_step)
        self._candidate_step += 1

    def close(self, ok: bool = True) -> None:
        """Close every sink once (later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._abandon)
        self._each("close", ok)

    # --- internals ---------------------------------------------------------------------------------

    def _abandon(self) -> None:
        self.close(ok=False)

    def _log(self, metrics: Mapping[str, Any], step: int) -> None:
        finite = {k: float(v) for k, v in metrics.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        if finite and not self._closed:
            self._each("log", finite, step)

    def _each(self, method: str, *args: Any) -> None:
        for sink in list(self.sinks):
            try:
                getattr(sink, method)(*args)
            except Exception as exc:  # tracking never stops a run
                log.warning("tracking: %s.%s failed (%s: %s); that sink is off for the rest of the run",
                            type(sink).__name__, method, type(exc).__name__, exc)
                self.sinks.remove(sink)


def _require(module: str, key: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"config key '{key}': needs the '{module}' package: {_PIP}")


def open_tracker(cfg: Any, run_dir: str | Path, *, resumed: bool = False) -> Tracker | None:
    """The run's tracker for ``tracking.*`` (a :class:`~evotrainer.config.TrackingConfig`), or None when off.

    A resumed run (``resume=``) replays the killed run from its start, so its tracker sees every event again:
    it logs the whole run, replayed part included, as a new attempt (TensorBoard: ``tensorboard/resume_<k>``,
    a separate run in TensorBoard's run list; MLflow: a new run named ``<run id> (resume <k>)``), and the
    killed attempt's partial curves stay as they were instead of being doubled.

    Args:
        cfg: the tracking settings.
        run_dir: the run folder (TensorBoard's ``tensorboard/`` and the default ``mlflow.db`` go there).
        resumed: this process resumes a killed run in ``run_dir``.

    Raises:
        ConfigError: a key is on and its package is missing (the message names the key and the pip command).
    """
    if not (cfg.tensorboard or cfg.mlflow):
        return None
    run_dir = Path(run_dir)
    board = run_dir / "tensorboard"
    # this resume's number: TensorBoard's earlier resume folders + 1, or the Hydra config folders a resumed
    # CLI run writes (.hydra/resume_<time>, this one's included) when TensorBoard is off
    attempt = max(1 + sum(1 for _ in board.glob("resume_*")),
                  sum(1 for _ in (run_dir / ".hydra").glob("resume_*"))) if resumed else 0
    sinks: list[MetricSink] = []
    if cfg.tensorboard:
        _require("tensorboard", "tracking.tensorboard")
        sinks.append(TensorBoardSink(board / f"resume_{attempt}" if attempt else board))
    if cfg.mlflow:
        _require("mlflow", "tracking.mlflow")
        uri = cfg.mlflow_uri or f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
        if uri.startswith("sqlite:"):
            for module in ("sqlalchemy", "alembic"):  # MLflow's SQL store (not in mlflow-skinny's own deps)
                _require(module, "tracking.mlflow")
        sinks.append(MLflowSink(uri, cfg.experiment))
    return Tracker(sinks, suffix=f" (resume {attempt})" if attempt else "")
