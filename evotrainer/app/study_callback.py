"""A Hydra callback that ends an ablation study (``+study=ablation``) by printing its one table.

Configured by the study configs (``conf/study/*.yaml``)::

    hydra:
      callbacks:
        study_table:
          _target_: evotrainer.app.study_callback.StudyTableCallback

When the multirun ends it reads every run of the sweep folder (and any peer arm's ``arm_result.json`` already
there), prints the study table (:mod:`evotrainer.stats.ablation`: per arm final best − best seed, arm against arm,
pooled over seeds, rollouts and wall time per arm) and writes it with its figure to
``<sweep dir>/study_report.html``; ``python -m evotrainer.archive sweep <sweep dir>`` prints the same table
later, with a peer arm's results added. Hydra calls ``on_multirun_end`` only when no job failed (its basic
sweeper re-raises the first failure after the batch), so the table is also printed from ``on_job_end`` of the
job that closes a failed sweep (read from the sweep index, :mod:`evotrainer.sweep_index`). A problem here is
logged as a warning and never fails a job or the sweep.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

__all__ = ["StudyTableCallback", "end_of_study"]

log = logging.getLogger(__name__)


def end_of_study(sweep_dir: str | Path, *, seed: int = 0) -> Path | None:
    """Print the study table of ``sweep_dir`` and write its report there; the report's path, or None when the
    folder holds no study (runs of one arm only)."""
    from evotrainer.browse.study_view import STUDY_REPORT_NAME, load_study, print_study, write_study_report
    from evotrainer.progress import stdout_console

    folder = Path(sweep_dir)
    _, study, skipped = load_study([folder], seed=seed)
    if study is None:
        log.warning("study: no runs of more than one arm in %s; no study table", folder)
        return None
    console = stdout_console()
    print_study(console, study, skipped)
    path = write_study_report(study, folder / STUDY_REPORT_NAME, [str(folder)])
    console.print(f"study report: {path}", markup=False, highlight=False)
    return path


class StudyTableCallback(Callback):
    """Prints the study table when the multirun ends (module docstring)."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end(config)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """The last job of a sweep in which a job failed: Hydra will not call ``on_multirun_end``. Hydra calls
        end hooks in reverse order, so this runs before the sweep index records this job's end: "last" means
        every other planned job of the index has ended."""
        from hydra.core.utils import JobStatus

        from evotrainer.sweep_index import find_index, read_index

        try:
            path = find_index(self._sweep_dir(config))
            if path is None:
                return
            doc = read_index(path)
            num = int(config.hydra.job.num)
            others = [j for j in doc["jobs"] if j.get("num") != num]
            planned = doc.get("planned_jobs")
            last = isinstance(planned, int) and len(others) == planned - 1 and all(
                j.get("status") in ("ok", "failed") for j in others)
            failed = job_return.status != JobStatus.COMPLETED or any(j.get("status") == "failed" for j in others)
            if last and failed:
                self._end(config)
        except Exception as exc:  # the table is a convenience: never fail the job
            log.warning("study table not printed: %s", exc)

    @staticmethod
    def _sweep_dir(config: DictConfig) -> Path:
        return Path(str(OmegaConf.select(config, "hydra.sweep.dir"))).absolute()

    def _end(self, config: DictConfig) -> None:
        try:
            end_of_study(self._sweep_dir(config))
        except Exception as exc:  # never fail the sweep for its summary
            log.warning("study table not printed: %s", exc)
