"""Console output of self-evolution: progress per phase (done/total, rate, ETA) and the per-round table."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table

from evotrainer.archive.schema import RoundRow
from evotrainer.browse.selfevolve_view import grades_text
from evotrainer.progress import task

__all__ = ["PhaseTimer", "round_table"]


class PhaseTimer:
    """Times named phases; with a console, shows each one's progress and a closing line.

    Each phase is an :func:`evotrainer.progress.task`: a transient bar on a terminal, a line every 30 s in
    a log, and (both) a final line with the units done, the wall time and the rate.

    Args:
        console: where to draw; None = time silently (tests, co-evolution calls).
        label: prefix of every line, e.g. "round 2".

    Attributes:
        seconds: wall seconds per phase name, in the order the phases ran.
    """

    def __init__(self, console: Console | None = None, label: str = "") -> None:
        self.console = console
        self.label = label
        self.seconds: dict[str, float] = {}

    def __enter__(self) -> PhaseTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @contextmanager
    def phase(self, name: str, detail: str = "", total: int | None = None, unit: str = "requests"
              ) -> Iterator[None]:
        """Time the block as phase ``name`` (seconds add up when a name repeats).

        Args:
            name: the phase (``rollout``, ``judge``, ``train``, ...).
            detail: shown after the name, e.g. "12 tasks x 4".
            total: planned units of ``unit`` the block reports with :func:`evotrainer.progress.advance`
                (generation requests, or ``"steps"`` of training), or None when it reports none.
            unit: what ``total`` counts.
        """
        t0 = time.perf_counter()
        try:
            if self.console is None:
                yield
            else:
                with task(f"{self.label} {name} {detail}".strip(), total, console=self.console, unit=unit,
                          summary=True):
                    yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


def _f(x: float | None, fmt: str = "{:.3f}") -> str:
    return "–" if x is None else fmt.format(x)


def round_table(rows: Sequence[RoundRow], baseline_dev: float | None = None, title: str = "self-evolution rounds",
                baseline_val: float | None = None) -> Table:
    """The per-round summary: round, pool size, pass rate, mean judge score, model-judge grades parsed, loss
    start→end, training tokens/s, dev score, S_val, kept/reverted, the curriculum action, seconds; a round-0 row
    with the start policy's dev score and S_val (in [0, 1], higher is better) when either is given."""
    table = Table(title=title)
    for col in ("round", "pool", "pass rate", "mean judge", "grades parsed", "loss start→end", "train tok/s",
                "dev score", "S_val", "status", "curriculum", "seconds"):
        table.add_column(col, justify="right" if col not in ("status", "curriculum") else "left")
    if baseline_dev is not None or baseline_val is not None:
        table.add_row("0", "–", "–", "–", "–", "–", "–", _f(baseline_dev), _f(baseline_val), "start", "–", "–")
    for r in rows:
        loss = f"{r.losses[0]:.3f}→{r.losses[-1]:.3f}" if r.losses else "–"
        rate = r.train.get("tokens_per_second")
        table.add_row(str(r.round), str(r.pool_size), f"{r.pass_rate:.0%} ({r.n_kept}/{r.n_samples})",
                      f"{r.mean_score:.3f}", grades_text(r.grades_requested, r.grades_parsed), loss,
                      _f(rate, "{:.0f}"), _f(r.dev_score), _f(r.val_score), r.status, r.curriculum,
                      f"{sum(r.timings.values()):.0f}")
    return table
