"""The harness sensitivity study read from archives: every harness candidate with a race estimate, from every
run below some folders, handed to :func:`evotrainer.stats.sensitivity.sensitivity` (``evotrainer-archive
sensitivity``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evotrainer.archive.locate import find_archives
from evotrainer.archive.store import open_archive
from evotrainer.stats.sensitivity import CandidatePoint, knob_values

__all__ = ["load_points"]


def load_points(paths: Sequence[Path]) -> tuple[list[CandidatePoint], int]:
    """Every archived harness candidate with a race estimate below ``paths``.

    Returns:
        The points (run label: ``<job folder>/<run id>`` in a sweep, else the run id), and how many candidates
        were left out (failed: no race estimate).

    Raises:
        ArchiveError: a path does not exist or holds no archive (:func:`~evotrainer.archive.locate.find_archives`).
    """
    points: list[CandidatePoint] = []
    skipped = 0
    for path in paths:
        for loc in find_archives(path):
            with open_archive(loc.path) as store:
                for run in store.list_runs():
                    label = f"{loc.job}/{run.run_id}" if loc.job else run.run_id
                    for row in store.harness_candidates(run.run_id):
                        score = row.race_estimate  # finite or None: the archive stores nothing else
                        if score is None:
                            skipped += 1
                            continue
                        points.append(CandidatePoint(label, row.harness_id, knob_values(row.values), float(score)))
    return points, skipped
