"""Did the run's gain generalise? The final best vs the best seed, paired, on selection and held-out items.

A run selects its final best on the *selection* part of the meta-validation set, so the gain it
shows there is biased upward (the best of many noisy scores; the winner's curse). The *held-out*
part was never used to select, so the paired difference there is the honest estimate. This module
compares the two policies item by item on each split (paired percentile bootstrap, Efron &
Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 13 and 16, via
:mod:`evotrainer.stats.bootstrap`), counts wins, losses and ties, and says in words whether the gain
held. :func:`pool` combines the held-out differences of several runs (a sweep over seeds) with a
cluster bootstrap over items.

Pure: no model, no archive. The run stores :func:`to_payload` as its ``"generalisation"`` event;
:func:`from_payload` reads it back. Scores are higher-is-better throughout; a difference is
``final best - best seed`` in score units (S_val, in [-1, 1]).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from rich.markup import escape
from rich.table import Table

from evotrainer.stats.bootstrap import (
    PairedDifference,
    cluster_difference,
    item_values,
    paired_difference,
    rng_for,
    tally,
)

__all__ = ["PAYLOAD_VERSION", "Generalisation", "SPLIT_LABELS", "PooledDifference", "SplitComparison",
           "by_source", "columns", "compare", "format_diff", "from_payload", "pool", "render_table",
           "source_of", "split_cells", "table_rows", "to_payload", "with_item_ids"]

PAYLOAD_VERSION = 1
"""``version`` key of :func:`to_payload`; :func:`from_payload` refuses newer ones."""

Pair = tuple[Sequence[float | None], Sequence[float | None]]


@dataclass(frozen=True)
class SplitComparison:
    """Best seed vs final best on one split of the meta-validation set, item by item.

    Attributes:
        split: "selection" or "heldout".
        n: items paired.
        baseline_mean: the best seed's mean score on these items, in [0, 1].
        best_mean: the final best's mean score, in [0, 1].
        diff: paired bootstrap of ``best - baseline`` (positive: the final best scores higher).
        wins: items where the final best scores higher.
        losses: items where it scores lower.
        ties: items where both score the same (within 1e-12).
        baseline: per-item scores of the best seed, shape (n,) (failed items as 0.0).
        best: per-item scores of the final best, shape (n,), same item order.
        item_ids: task ids of the items in that order, or () when unknown (:func:`pool` then keys
            items by position).
    """

    split: str
    n: int
    baseline_mean: float
    best_mean: float
    diff: PairedDifference
    wins: int
    losses: int
    ties: int
    baseline: tuple[float, ...] = ()
    best: tuple[float, ...] = ()
    item_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Generalisation:
    """The final best vs the best seed (the generation-0 best, the first incumbent) of one run.

    Attributes:
        baseline_id: policy id of the best seed.
        best_id: policy id of the final best.
        selection: the comparison on the selection items, or None when not measured.
        heldout: the comparison on the held-out items, or None when the run held none out.
        verdict: one sentence, e.g. "the gain held on held-out items: ..." (see :func:`compare`).
        held: True (held-out interval above 0), False (no gain on selection, or held-out mean <= 0),
            None (undecided, or nothing held out).
        level: coverage of the intervals, in (0, 1).
    """

    baseline_id: str
    best_id: str
    selection: SplitComparison | None
    heldout: SplitComparison | None
    verdict: str
    held: bool | None
    level: float = 0.95


@dataclass(frozen=True)
class PooledDifference(PairedDifference):
    """The held-out (or selection) difference pooled over runs: a :class:`PairedDifference` whose ``mean`` is
    over items of each item's difference averaged over the runs that scored it, ``low``/``high`` the
    cluster-bootstrap interval and ``n`` the distinct items (the resampled clusters).

    Attributes:
        runs: runs pooled.
        pairs: (run, item) differences pooled.
        by_item: True when every run named its items (clusters are task ids); False when some were
            keyed by position.
        held: as :attr:`Generalisation.held`, for the pooled numbers.
        verdict: one sentence about the pooled numbers.
    """

    runs: int
    pairs: int
    by_item: bool
    held: bool | None
    verdict: str


# --- one run ------------------------------------------------------------------------------------------


def _split(name: str, pair: Pair, ids: Sequence[str] | None, *, seed: int, labels: tuple[str, str],
           level: float, n_resamples: int) -> SplitComparison:
    a, b = item_values(pair[0]), item_values(pair[1])
    ids_t = tuple(str(i) for i in ids) if ids else ()
    if ids_t and len(ids_t) != len(a):
        raise ValueError(f"compare: {len(ids_t)} {name} item ids for {len(a)} items")
    diff = paired_difference(a, b, rng=rng_for(seed, "generalisation", *labels, name), n_resamples=n_resamples,
                             level=level)  # raises ValueError when the lengths differ
    return SplitComparison(name, len(a), float(np.mean(a)) if a else 0.0, float(np.mean(b)) if b else 0.0, diff,
                           *tally(np.asarray(b) - np.asarray(a)), a, b, ids_t)


def source_of(item_id: str) -> str:
    """An item's source: its task id up to the first ``-`` (``"elitr-en_test_004"`` -> ``"elitr"``), or
    the whole id when it has none. Validation files give their items a common id prefix, so a mixed
    meta-validation set splits by file."""
    return item_id.split("-", 1)[0]


def by_source(c: SplitComparison, *, level: float = 0.95, n_resamples: int = 2000) -> tuple[SplitComparison, ...]:
    """``c`` restricted to each item source's items (:func:`source_of`), sources in sorted order.

    A gain on a mixed set can hide a loss on one of its sources (the long items of a mix that is mostly
    short ones). Each part is a paired bootstrap of its own items with the generator
    ``rng_for(0, "generalisation", "source", source, split)``.

    Returns:
        One :class:`SplitComparison` per source (same ``split`` name, its items in ``c``'s order); empty when ``c``
        has no item ids or its items come from one source.
    """
    if not c.item_ids:
        return ()
    groups: dict[str, list[int]] = {}
    for i, item_id in enumerate(c.item_ids):
        groups.setdefault(source_of(item_id), []).append(i)
    if len(groups) < 2:
        return ()
    return tuple(_split(c.split, ([c.baseline[i] for i in idx], [c.best[i] for i in idx]),
                        [c.item_ids[i] for i in idx], seed=0, labels=("source", src), level=level,
                        n_resamples=n_resamples) for src, idx in sorted(groups.items()))


def format_diff(d: Any, digits: int = 4) -> str:
    """``"+0.0136 [-0.001, +0.028]"``: a difference's mean and interval (anything with mean/low/high).

    A difference over one item (``d.n == 1``, where ``d`` has ``n``) has no interval, whatever its bootstrap bounds
    say: ``"+0.0480 (one item: no interval)"``.
    """
    if getattr(d, "n", 2) == 1:
        return f"{d.mean:+.{digits}f} (one item: no interval)"
    return f"{d.mean:+.{digits}f} [{d.low:+.{digits - 1}f}, {d.high:+.{digits - 1}f}]"


def _verdict(selection: Any | None, heldout: Any | None, *, same: bool = False,
             where: str = "held-out items") -> tuple[bool | None, str]:
    """(held, sentence) from a selection and a held-out difference (either may be None)."""
    if same:
        return False, "no gain on selection: the final best is the best seed itself"
    if selection is not None and selection.mean <= 0:
        return False, f"no gain on selection ({format_diff(selection)}): there was no gain to hold"
    if heldout is None or heldout.n == 0:
        return None, "not measured: no held-out items"
    if heldout.n == 1:  # the bootstrap of one item has low == high == mean: not evidence of anything
        return None, f"undecided: one held-out item, held-out difference {format_diff(heldout)}"
    if heldout.low > 0:
        return True, f"the gain held on {where}: held-out difference {format_diff(heldout)}"
    if heldout.mean <= 0:
        return False, f"the gain did not hold: held-out difference {format_diff(heldout)}"
    return None, f"undecided: held-out difference {format_diff(heldout)} is positive but its interval touches 0"


def compare(
    baseline_id: str,
    best_id: str,
    selection: Pair | None,
    heldout: Pair | None,
    *,
    seed: int,
    level: float = 0.95,
    n_resamples: int = 2000,
    selection_ids: Sequence[str] | None = None,
    heldout_ids: Sequence[str] | None = None,
) -> Generalisation:
    """Compare the final best with the best seed on the selection and held-out items.

    Verdict: no gain on selection (selection mean difference <= 0, or the final best is the best
    seed) -> ``held=False`` "no gain on selection ...: there was no gain to hold"; held-out interval
    low end > 0 -> ``held=True`` "the gain held on held-out items: ..."; held-out mean <= 0 ->
    ``held=False`` "the gain did not hold: ..."; otherwise ``held=None`` "undecided: ... positive but
    its interval touches 0". No held-out items, or only one (no interval) -> ``held=None``. The selection difference is biased
    upward (the final best was chosen on those items); only the held-out one is honest.

    Args:
        baseline_id: the best seed's policy id (the generation-0 best, the first incumbent).
        best_id: the final best's policy id.
        selection: (best seed's per-item scores, final best's per-item scores) on the selection items,
            each shape (n,), in [0, 1], higher is better, same item order; None or NaN counts 0.0
            (a failed item). None: not measured.
        heldout: the same on the held-out items; None: the run held none out.
        seed: the run's root seed; each split's bootstrap generator is
            ``rng_for(seed, "generalisation", baseline_id, best_id, split)``.
        level: interval coverage in (0, 1).
        n_resamples: bootstrap resamples, >= 1.
        selection_ids: task ids of the selection items in that order (optional; :func:`pool` uses them).
        heldout_ids: task ids of the held-out items in that order (optional).

    Raises:
        ValueError: the two vectors of a split differ in length, or ids do not match the items.
    """
    labels = (str(baseline_id), str(best_id))
    kw = {"seed": seed, "labels": labels, "level": level, "n_resamples": n_resamples}
    sel = None if selection is None else _split("selection", selection, selection_ids, **kw)
    held_out = None if heldout is None else _split("heldout", heldout, heldout_ids, **kw)
    return _assemble(labels[0], labels[1], sel, held_out, level)


def _assemble(baseline_id: str, best_id: str, sel: SplitComparison | None, held_out: SplitComparison | None,
              level: float) -> Generalisation:
    held, verdict = _verdict(None if sel is None else sel.diff, None if held_out is None else held_out.diff,
                             same=baseline_id == best_id)
    return Generalisation(baseline_id, best_id, sel, held_out, verdict, held, float(level))


# --- archive payload ------------------------------------------------------------------------------


def _split_payload(c: SplitComparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    d = c.diff
    return {"split": c.split, "n": c.n, "baseline_mean": c.baseline_mean, "best_mean": c.best_mean,
            "diff": {"mean": d.mean, "low": d.low, "high": d.high, "share_b_better": d.share_b_better, "n": d.n},
            "wins": c.wins, "losses": c.losses, "ties": c.ties, "baseline": list(c.baseline), "best": list(c.best),
            "item_ids": list(c.item_ids)}


def to_payload(g: Generalisation) -> dict[str, Any]:
    """JSON-safe dict of ``g`` for the archive's ``"generalisation"`` event (``rec.event(kind, **payload)``).

    Holds every number shown plus the per-item scores and item ids of both splits, so a sweep can
    pool them. No key is named ``kind`` (that is the event's own argument).
    """
    return {"version": PAYLOAD_VERSION, "baseline_id": g.baseline_id, "best_id": g.best_id, "level": g.level,
            "held": g.held, "verdict": g.verdict, "selection": _split_payload(g.selection),
            "heldout": _split_payload(g.heldout)}


def _split_from(d: Any, name: str) -> SplitComparison | None:
    if d is None:
        return None
    if not isinstance(d, Mapping):
        raise ValueError(f"generalisation payload: {name} is not an object")
    try:
        diff = d["diff"]
        base, best = item_values(d.get("baseline", ())), item_values(d.get("best", ()))
        ids = tuple(str(i) for i in d.get("item_ids") or ())
        return SplitComparison(
            str(d.get("split", name)), int(d["n"]), float(d["baseline_mean"]), float(d["best_mean"]),
            PairedDifference(float(diff["mean"]), float(diff["low"]), float(diff["high"]),
                             float(diff["share_b_better"]), int(diff["n"])),
            int(d["wins"]), int(d["losses"]), int(d["ties"]), base, best, ids if len(ids) == len(base) else ())
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"generalisation payload: {name} is malformed ({type(exc).__name__}: {exc})") from None


def from_payload(d: Mapping[str, Any]) -> Generalisation:
    """The :class:`Generalisation` stored by :func:`to_payload` (the verdict is recomputed from the numbers).

    Raises:
        ValueError: not such a payload, a missing or malformed field, or a newer ``version``.
    """
    if not isinstance(d, Mapping) or "baseline_id" not in d or "best_id" not in d:
        raise ValueError("generalisation payload: expected an object with baseline_id and best_id")
    version = d.get("version", PAYLOAD_VERSION)
    if not isinstance(version, int) or version > PAYLOAD_VERSION:
        raise ValueError(f"generalisation payload: version {version!r} is newer than {PAYLOAD_VERSION}")
    level = d.get("level", 0.95)
    level = float(level) if isinstance(level, (int, float)) and 0 < level < 1 else 0.95
    return _assemble(str(d["baseline_id"]), str(d["best_id"]), _split_from(d.get("selection"), "selection"),
                     _split_from(d.get("heldout"), "heldout"), level)


def with_item_ids(g: Generalisation, split: str, ids: Sequence[str]) -> Generalisation:
    """``g`` with ``ids`` as the item ids of ``split`` when it has none and the count matches; else ``g``."""
    c = getattr(g, split)
    if c is None or c.item_ids or len(ids) != len(c.baseline):
        return g
    return replace(g, **{split: replace(c, item_ids=tuple(str(i) for i in ids))})


# --- several runs ---------------------------------------------------------------------------------


def pool(
    runs: Sequence[Generalisation],
    *,
    seed: int,
    split: str = "heldout",
    level: float = 0.95,
    n_resamples: int = 2000,
    keep: Callable[[str], bool] | None = None,
) -> PooledDifference | None:
    """The final-best-minus-best-seed difference pooled over runs (a sweep over seeds), with its interval.

    Runs of one sweep share the held-out items (:func:`~evotrainer.run.validation_split.split_validation`
    depends only on the items, never on the seed), so the runs are pooled by a cluster bootstrap by item
    (:func:`~evotrainer.stats.bootstrap.cluster_difference`). Items are keyed by task id where the run
    recorded ids, else by position in the split (runs of one sweep list them in the same order).

    The verdict of a held-out pool follows :func:`compare`, on the pooled selection and held-out
    differences (no pooled selection gain: nothing to hold). A selection pool gets ``held=None`` and a
    descriptive sentence: that gain is biased upward.

    Args:
        runs: one :class:`Generalisation` per run; runs without ``split`` are left out.
        seed: bootstrap seed; the generator is ``rng_for(seed, "pool", split)``.
        split: "heldout" (default) or "selection".
        level: interval coverage in (0, 1).
        n_resamples: bootstrap resamples, >= 1.
        keep: pool only the items whose task id it accepts (e.g. the long items of a mixed set); items a run
            recorded without ids are then left out. The selection pool behind a held-out verdict uses it too.
            None (default): every item.

    Returns:
        The pooled difference, or None when no run holds items of ``split`` (that ``keep`` accepts).

    Raises:
        ValueError: ``split`` is not "heldout" or "selection".
    """
    if split not in ("heldout", "selection"):
        raise ValueError(f"pool: split must be 'heldout' or 'selection', got {split!r}")
    parts: list[tuple[tuple[str, ...], tuple[float, ...]]] = []
    by_item = True
    for g in runs:
        c = getattr(g, split)
        if c is None or not c.baseline:
            continue
        named = len(c.item_ids) == len(c.baseline)
        keys = c.item_ids if named else tuple(f"#{i}" for i in range(len(c.baseline)))
        kept = [(key, b - a) for key, a, b in zip(keys, c.baseline, c.best, strict=True)
                if keep is None or (named and keep(key))]
        if kept:
            by_item &= named
            parts.append((tuple(k for k, _ in kept), tuple(x for _, x in kept)))
    pooled = cluster_difference(parts, rng=rng_for(seed, "pool", split), level=level, n_resamples=n_resamples)
    if pooled is None:
        return None
    d, used = pooled.diff, pooled.runs
    sel = pool(runs, seed=seed, split="selection", level=level, n_resamples=n_resamples, keep=keep) \
        if split == "heldout" else None
    if split == "heldout":
        held, verdict = _verdict(sel, d, where=f"held-out items over {used} run(s)")
    else:  # the selection gain is biased upward (chosen on these items): described, never judged
        held, verdict = None, f"pooled selection difference {format_diff(d)} (biased upward: selected on these items)"
    return PooledDifference(d.mean, d.low, d.high, d.share_b_better, d.n, used, pooled.pairs, by_item, held, verdict)


# --- display --------------------------------------------------------------------------------------

SPLIT_LABELS = {"selection": "selection", "heldout": "held-out"}
"""How each split is named in tables and sentences."""


def split_cells(c: SplitComparison) -> tuple[str, str, str, str, str, str]:
    """Plain-text cells of one split: (split, items, best seed, final best, difference [CI], W/L/T)."""
    return (SPLIT_LABELS.get(c.split, c.split), str(c.n), f"{c.baseline_mean:.4f}", f"{c.best_mean:.4f}",
            format_diff(c.diff), f"{c.wins}/{c.losses}/{c.ties}")


def columns(level: float = 0.95) -> tuple[str, ...]:
    """Column headers matching :func:`split_cells`."""
    return ("split", "items", "best seed", "final best", f"difference [{round(level * 100)}% CI]",
            "wins/losses/ties")


def render_table(g: Generalisation) -> Table:
    """A rich table of ``g``: one row per split measured, then, for a split whose items come from several
    sources, one row per source (:func:`by_source`); ids markup-escaped; a difference green when its
    interval is above 0, red when below."""
    table = Table(title=f"generalisation: final best {escape(g.best_id)} vs best seed {escape(g.baseline_id)} "
                        "(paired bootstrap over items; higher is better)", title_justify="left")
    for col in columns(g.level):
        table.add_column(escape(col), justify="left" if col == "split" else "right")
    for cells, tone in table_rows(g):
        cells = [escape(x) for x in cells]
        if tone:
            cells[4] = f"[{'green' if tone == 'up' else 'red'}]{cells[4]}[/]"
        table.add_row(*cells)
    return table


def table_rows(g: Generalisation) -> list[tuple[list[str], str]]:
    """The rows of :func:`render_table` and the HTML report, as plain text: (cells as :func:`split_cells`,
    tone), one per split measured, each followed by its :func:`by_source` rows (labelled e.g. "  held-out,
    elitr items"); tone is "up" when the difference's interval is above 0, "down" when below, "" otherwise
    (always "" for one item)."""
    out: list[tuple[list[str], str]] = []
    for c in (g.selection, g.heldout):
        if c is None:
            continue
        for part in (c, *by_source(c, level=g.level)):
            cells = list(split_cells(part))
            if part is not c:
                cells[0] = f"  {cells[0]}, {source_of(part.item_ids[0])} items"
            d = part.diff
            out.append((cells, "" if d.n < 2 else "up" if d.low > 0 else "down" if d.high < 0 else ""))
    return out
