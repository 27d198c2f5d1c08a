"""Compute threads chosen from the cores actually free (user guide: docs/scaling_out.md, "Speed on a CPU").

A parallel region ends only when its slowest thread does: a torch thread whose core is taken by another process
waits for a time slice, and its siblings wait for it. :func:`choose_threads` counts the cores left free by other
processes (and this run's share of a parallel Hydra sweep); :func:`apply_threads` sets ``torch.set_num_threads``
to that (``model.threads`` overrides it). Other processes' load is the smaller of the 1-minute load average (which
still counts a job that ended a minute ago) and, on Linux, a half-second sample of ``/proc/stat`` (which never
sees a finished job). ``OMP_WAIT_POLICY`` is left to the user.

A BLAS library may split a sum differently over another number of threads (pytorch#88718), so an evolve run
records the count it used (a ``phase`` event named :data:`COMPUTE_PHASE`, :func:`threads_in_use`) and a resume
reuses it when ``model.threads`` is null (``evotrainer/run/resume.py``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from evotrainer.errors import ConfigError

__all__ = ["COMPUTE_PHASE", "Machine", "apply_threads", "choose_threads", "own_load", "parallel_jobs",
           "read_machine", "sample_busy_cores", "sweep_batch", "sweep_jobs", "threads_in_use"]

log = logging.getLogger(__name__)
_LOAD_WINDOW_S = 60.0  # the 1-minute load average is an exponential average over this many seconds
_chosen: int | None = None  # the count this process computes with, once set (torch's pool is process-wide)
COMPUTE_PHASE = "compute"
"""``name`` of the ``phase`` event in which an evolve run records its thread counts (:func:`threads_in_use`)."""


@dataclass(frozen=True)
class Machine:
    """What the thread choice reads from the machine.

    Attributes:
        cores: CPUs this process may run on (``os.sched_getaffinity``), >= 1.
        load: 1-minute load average (runnable threads, all processes), >= 0.
        own: this process's share of ``load`` (see :func:`own_load`), >= 0.
        jobs: parallel jobs of the Hydra sweep this run belongs to, >= 1 (1 outside a sweep).
        busy: cores busy with other processes in a short sample just now (:func:`sample_busy_cores`),
            >= 0; None when not measured.
    """

    cores: int
    load: float
    own: float = 0.0
    jobs: int = 1
    busy: float | None = None

    @property
    def others(self) -> int:
        """Cores kept busy by other processes, rounded half up (0.5 -> 1), >= 0: their share of the load
        average, or the sampled count when that is smaller."""
        other = self.load - self.own if self.busy is None else min(self.load - self.own, self.busy)
        return max(math.floor(other + 0.5), 0)


def choose_threads(machine: Machine) -> int:
    """Compute threads for this process: the free cores, at most this job's share of a sweep, >= 1.

    ``free = cores - others`` (the load of other processes, rounded); ``share = cores // jobs``; the
    result is ``max(min(free, share), 1)``. Taking the minimum instead of ``free // jobs`` avoids counting
    the sweep twice: the sibling jobs already running are part of ``load``.

    Examples: 2 cores, quiet -> 2; 2 cores, one busy -> 1; 16 cores, 4 jobs, quiet -> 4; 16 cores, 4 jobs,
    three siblings at 4 threads each (load 12) -> 4.
    """
    free = machine.cores - machine.others
    share = machine.cores // max(machine.jobs, 1)
    return max(min(free, share), 1)


def own_load(cpu_s: float, wall_s: float) -> float:
    """This process's contribution to the 1-minute load average, estimated from its CPU time.

    A process that ran on average ``cpu_s / wall_s`` threads for ``wall_s`` seconds adds about
    ``cpu_s / wall_s * (1 - exp(-wall_s / 60))`` to the load (the kernel's exponential average over a
    minute). At startup (a few seconds of imports) this is below 0.1.

    Args:
        cpu_s: user + system CPU seconds of this process so far, >= 0.
        wall_s: seconds since this process started, > 0 (0 gives 0).
    """
    if wall_s <= 0 or cpu_s <= 0:
        return 0.0
    return cpu_s / wall_s * (1.0 - math.exp(-wall_s / _LOAD_WINDOW_S))


def sweep_jobs(cores: int) -> int:
    """Jobs of the running Hydra multirun that share this machine's cores, in [1, cores]:
    :func:`parallel_jobs` capped by ``cores``. 1 when not parallel."""
    return min(parallel_jobs(cores), max(cores, 1))


def parallel_jobs(cores: int) -> int:
    """Jobs of the running Hydra multirun that run at once, as its launcher starts them; 1 when not parallel.

    The joblib launcher (``hydra/launcher=joblib``) runs ``hydra.launcher.n_jobs`` jobs at a time, each in
    its own worker process; joblib's negative values count from the core count (-1 = all cores). It never
    runs more jobs at once than the sweeper hands it in one batch, so the count is capped by the batch
    size (:func:`sweep_batch`): a 2-job sweep with ``n_jobs=-1`` on 16 cores runs 2 jobs, 8 threads each.
    The result is >= 1 (it may exceed ``cores``: joblib starts ``n_jobs`` processes whatever the cores).
    Outside a Hydra app, outside a multirun, or with a launcher that has no ``n_jobs`` (the basic launcher
    runs one job after another): 1.
    """
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        if hc.mode != RunMode.MULTIRUN:
            return 1
        n = hc.launcher.get("n_jobs")
    except Exception:  # not under Hydra, or no launcher settings
        return 1
    if not isinstance(n, int) or isinstance(n, bool) or n == 0:
        return 1
    n = cores + 1 + n if n < 0 else n
    batch = sweep_batch(str(hc.sweep.dir))
    if batch is not None:
        n = min(n, batch)
    return max(n, 1)


def sweep_batch(sweep_dir: str) -> int | None:
    """Jobs per batch of the sweep whose folder is ``sweep_dir``, or None when unknown.

    Read from the ``multirun.yaml`` that Hydra's basic sweeper saves in the sweep folder before it launches
    a job, and counted as that sweeper splits the overrides
    (:func:`evotrainer.sweep_index.planned_jobs`). None for another sweeper or an unreadable file.
    """
    from omegaconf import OmegaConf

    from evotrainer.sweep_index import planned_jobs

    try:
        saved = OmegaConf.load(os.path.join(sweep_dir, "multirun.yaml"))
        if not str(OmegaConf.select(saved, "hydra.sweeper._target_") or "").endswith("BasicSweeper"):
            return None
        params = OmegaConf.select(saved, "hydra.sweeper.params")
        counted = planned_jobs(
            [str(o) for o in OmegaConf.to_container(saved.hydra.overrides.task) or []],
            OmegaConf.to_container(params) if params is not None else None,
            OmegaConf.select(saved, "hydra.sweeper.max_batch_size"),
        )
    except Exception:  # no file, not YAML, unexpected layout: the batch size is unknown
        return None
    return counted[1] if counted and counted[1] > 0 else None


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot (``/proc/stat``), or None where unavailable."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total


def sample_busy_cores(window_s: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> float | None:
    """Cores busy with other processes over the next ``window_s`` seconds (Linux), or None.

    Busy share of all CPUs' ticks in ``/proc/stat`` times the CPU count, minus this process's own CPU
    seconds over the window (it sleeps meanwhile, so that is near 0), >= 0.
    """
    cpus = os.cpu_count() or 1
    before, t0 = _cpu_jiffies(), os.times()
    if before is None:
        return None
    sleep(window_s)
    after, t1 = _cpu_jiffies(), os.times()
    if after is None or after[1] <= before[1]:
        return None
    busy = (after[0] - before[0]) / (after[1] - before[1]) * cpus
    own = max(t1.user + t1.system - t0.user - t0.system, 0.0) / window_s  # float rounding can dip below 0
    return max(busy - own, 0.0)


def _wall_since_start() -> float | None:
    """Seconds since this process started (Linux ``/proc``), or None where that is not available."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def read_machine() -> Machine:
    """The real inputs of :func:`choose_threads`: affinity cores, load average, own load, sweep jobs, and
    a half-second sample of the busy cores (this call takes about 0.5 s on Linux)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average (Windows)
        load = 0.0
    t = os.times()
    cpu = t.user + t.system
    wall = _wall_since_start()
    own = own_load(cpu, wall if wall is not None else cpu)  # unknown start: assume one busy thread
    return Machine(cores=max(cores, 1), load=max(load, 0.0), own=own, jobs=sweep_jobs(cores),
                   busy=sample_busy_cores())


def apply_threads(override: int | None = None, machine: Machine | None = None) -> int:
    """Set torch's CPU thread count and return it (one log line says why).

    Args:
        override: ``model.threads`` (or the role's own ``threads``); None = the count this process already
            computes with, or automatic (:func:`choose_threads` on ``machine``) on the first call. Torch's pool
            is process-wide, so a count once set, explicit or chosen, is what a later automatic call keeps:
            with ``model.threads=1`` and ``mutator.threads=null`` both roles compute at 1 thread.
        machine: the inputs of the automatic choice (read from this machine when None).

    Returns:
        The thread count set, >= 1.

    Raises:
        ConfigError: ``override`` is below 1.
    """
    global _chosen
    import torch

    if override is not None:
        if override < 1:
            raise ConfigError(f"model.threads must be >= 1 or null, got {override}")
        n = _chosen = int(override)
        log.info("compute threads: %d (model.threads)", n)
    elif _chosen is not None:
        n = _chosen
    else:
        m = machine or read_machine()
        n = _chosen = choose_threads(m)
        busy = "" if m.busy is None else f", busy now {m.busy:.2f}"
        log.info("compute threads: %d (of %d cores, load %.2f%s, %d parallel job%s; set model.threads to override)",
                 n, m.cores, m.load, busy, m.jobs, "" if m.jobs == 1 else "s")
    torch.set_num_threads(n)
    with contextlib.suppress(RuntimeError):  # unused by generation; settable once, before any inter-op work
        torch.set_num_interop_threads(1)
    return n


def threads_in_use(llm: object = None) -> dict[str, int]:
    """The thread counts this process computes with, as an evolve run records them.

    Returns:
        ``{"threads": torch's intra-op threads in this process}``, plus ``"worker_threads"`` (torch threads
        of each Ray worker) when ``llm`` is a :class:`~evotrainer.backends.executor.RayExecutor`.
    """
    import torch

    out = {"threads": int(torch.get_num_threads())}
    worker = getattr(llm, "threads", None)  # RayExecutor: threads per worker; a backend has no such attribute
    if isinstance(worker, int) and not isinstance(worker, bool):
        out["worker_threads"] = worker
    return out
