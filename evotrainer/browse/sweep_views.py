"""What ``archive sweep`` and the sweep index show: each run's final best against its best seed, pooled over runs.

Read-only, like :mod:`evotrainer.browse.views` (which re-exports these names): each function takes open
archives and returns plain dicts, so tables, ``--json`` and the study page read the same numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict
from fnmatch import fnmatchcase
from typing import Any

from evotrainer.archive.locate import ArchiveLocation
from evotrainer.archive.store import ArchiveStore, open_archive
from evotrainer.browse.weights_view import adapter_summary, read_adapter_run
from evotrainer.errors import ArchiveError, EvoTrainerError
from evotrainer.events.kinds import SetupEvent
from evotrainer.stats.adapter_pool import AdapterRun
from evotrainer.stats.generalisation import Generalisation, from_payload, pool, source_of, with_item_ids
from evotrainer.stats.transfer import TransferReport
from evotrainer.stats.transfer_pool import pool_transfer, read_run

__all__ = ["pooled_by_source", "run_dtype", "run_generalisation", "sweep_summary"]


def run_generalisation(store: ArchiveStore, run_id: str) -> Generalisation | None:
    """The run's last ``"generalisation"`` event as a :class:`~evotrainer.stats.generalisation.Generalisation`.

    Item ids the payload lacks are taken from the run's ``"setup"`` event (``selection_items`` /
    ``heldout_items``, the task ids in the order the run scored them) when the counts match.

    Returns:
        None when the run has no such event (still going, or archived before it existed).

    Raises:
        ArchiveError: the event is malformed.
    """
    events = store.events(run_id, kind="generalisation")
    if not events:
        return None
    try:
        g = from_payload(events[-1].payload)
    except ValueError as exc:
        raise ArchiveError(f"{store.path}: run {run_id!r}: {exc}") from None
    setups = [ev for ev in (e.event for e in store.events(run_id, kind="setup")) if isinstance(ev, SetupEvent)]
    if setups:
        g = with_item_ids(g, "selection", setups[-1].selection_items)
        g = with_item_ids(g, "heldout", setups[-1].heldout_items)
    return g


def run_dtype(config: Any) -> str | None:
    """The number format a run's policy model computed in, from its archived config (``model.dtype``, resolved
    before the run stored it); None when the config does not say."""
    model = config.get("model") if isinstance(config, dict) else None
    value = model.get("dtype") if isinstance(model, dict) else None
    return value if isinstance(value, str) else None


def _split_row(c: Any) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"n": c.n, "baseline_mean": c.baseline_mean, "best_mean": c.best_mean, "mean": c.diff.mean,
            "low": c.diff.low, "high": c.diff.high, "wins": c.wins, "losses": c.losses, "ties": c.ties}


def sweep_summary(locations: Iterable[ArchiveLocation], *, seed: int = 0, level: float = 0.95,
                  items: str | None = None) -> dict[str, Any]:
    """``sweep``: each run's final best vs best seed, and the held-out difference pooled over runs.

    Args:
        locations: archives found by :func:`~evotrainer.archive.locate.find_archives` (opened read-only).
        seed: seed of the pooled bootstrap.
        level: coverage of the pooled intervals, in (0, 1).
        items: a shell-style pattern of task ids (:func:`fnmatch.fnmatchcase`, e.g. ``"elitr-*"``): the pooled
            differences are also computed on the matching items alone, under ``pooled_items``. None: not computed.

    Returns:
        dict with runs (archive, job, overrides, run_id, seed, baseline_id, best_id, selection and heldout: n,
        both means, mean/low/high of the difference, wins/losses/ties, or None; held, verdict; transfer, see
        :func:`~evotrainer.stats.transfer_pool.read_run`), skipped (archive, run_id, reason: no summary yet, no
        generalisation event, a repeated run id, unreadable archive), dtypes ({model.dtype: runs} over the rows,
        from each run's archived config: runs computed in different number formats are not repeats of one
        another, greedy outputs part at near-ties), pooled ({"heldout": ..., "selection": ...},
        each a :class:`~evotrainer.stats.generalisation.PooledDifference` as a dict, or None), pooled_transfer (the
        runs' transfer reports, :func:`~evotrainer.stats.transfer_pool.pool_transfer` as a dict, or None), level,
        pooled_items ({"pattern", "heldout", "selection"} as ``pooled`` on the matching items; None without
        ``items``), and pooled_by_source ({source: {"heldout", "selection"}} as ``pooled`` on each source's items,
        sources by :func:`source_of`; empty unless the runs' items come from two sources or more: a gain pooled
        over a mixed set can hide a loss on one source), and adapters (weight-training runs, ``mode=selfevolve`` or
        ``distill``: each run's adapter − its prompt alone on the transfer items and that difference pooled over
        them, :func:`~evotrainer.browse.weights_view.adapter_summary`; None without such runs).
    """
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    gens: list[Generalisation] = []
    reports: list[TransferReport] = []  # the runs' transfer reports, pooled like the held-out difference
    seen: dict[str, str] = {}  # run id -> archive: a repeated run (same seed + config) is not a new sample
    adapters: list[AdapterRun] = []  # weight-training runs (mode=selfevolve / distill): adapter vs its prompt alone
    adapter_where: list[dict[str, Any]] = []
    for loc in locations:
        base = {"archive": str(loc.path), "job": loc.job, "overrides": list(loc.overrides)}
        try:
            with open_archive(loc.path) as store:
                runs = store.list_runs()
                if not runs:
                    skipped.append({**base, "run_id": None, "reason": "the archive holds no run"})
                for run in runs:
                    try:
                        g = run_generalisation(store, run.run_id)
                    except ArchiveError as exc:
                        skipped.append({**base, "run_id": run.run_id, "reason": str(exc)})
                        continue
                    if g is None and run.run_id not in seen:
                        adapter, why = read_adapter_run(store, run)
                        if adapter is not None:
                            seen[run.run_id] = str(loc.path)
                            adapters.append(adapter)
                            adapter_where.append(base)
                            continue
                        if why is not None:
                            skipped.append({**base, "run_id": run.run_id, "reason": why})
                            continue
                    if g is None:
                        done = bool(store.events(run.run_id, kind="summary"))
                        reason = ("finished without a generalisation event (made by older code)" if done
                                  else "no summary yet (still running, or crashed)")
                        skipped.append({**base, "run_id": run.run_id, "reason": reason})
                        continue
                    if run.run_id in seen:
                        skipped.append({**base, "run_id": run.run_id,
                                        "reason": f"same run id as {seen[run.run_id]} (same seed and config): "
                                                  "counted once"})
                        continue
                    seen[run.run_id] = str(loc.path)
                    gens.append(g)
                    tr, cell = read_run(store.events(run.run_id, kind="transfer"))
                    reports += [] if tr is None else [tr]
                    rows.append({**base, "run_id": run.run_id, "seed": run.seed, "dtype": run_dtype(run.config),
                                 "baseline_id": g.baseline_id,
                                 "best_id": g.best_id, "selection": _split_row(g.selection),
                                 "heldout": _split_row(g.heldout), "held": g.held, "verdict": g.verdict,
                                 "transfer": cell})
        except EvoTrainerError as exc:
            skipped.append({**base, "run_id": None, "reason": str(exc)})
    pooled = _pooled_splits(gens, seed=seed, level=level)
    pooled_items = None if items is None else {
        "pattern": items, **_pooled_splits(gens, seed=seed, level=level,
                                           keep=lambda item_id: fnmatchcase(item_id, items))}
    pt = pool_transfer(reports, seed=seed, level=level)
    return {"runs": rows, "skipped": skipped, "pooled": pooled, "level": level,
            "dtypes": dict(Counter(r["dtype"] for r in rows if r["dtype"] is not None)),
            "pooled_transfer": None if pt is None else asdict(pt), "pooled_items": pooled_items,
            "pooled_by_source": pooled_by_source(gens, seed=seed, level=level),
            "adapters": adapter_summary(adapters, adapter_where, seed=seed, level=level)}


def _pooled_splits(gens: list[Generalisation], *, seed: int, level: float,
                   keep: Callable[[str], bool] | None = None) -> dict[str, Any]:
    return {split: (None if (p := pool(gens, seed=seed, split=split, level=level, keep=keep)) is None
                    else asdict(p)) for split in ("heldout", "selection")}


def pooled_by_source(gens: list[Generalisation], *, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """The held-out and selection differences pooled over ``gens`` on each item source's items alone.

    Args:
        gens: the runs' comparisons (item ids recorded; items without ids are left out).
        seed: seed of the pooled bootstraps.
        level: coverage of the intervals, in (0, 1).

    Returns:
        {source: {"heldout": ..., "selection": ...}} (each a :class:`~evotrainer.stats.generalisation.PooledDifference`
        as a dict, or None), sources by :func:`source_of` in sorted order; empty when the items come from fewer
        than two sources (the plain pool says it all).
    """
    sources = sorted({source_of(i) for g in gens for c in (g.selection, g.heldout) if c is not None
                      for i in c.item_ids})
    if len(sources) < 2:
        return {}
    return {src: _pooled_splits(gens, seed=seed, level=level, keep=lambda item_id, src=src: source_of(item_id) == src)
            for src in sources}

