"""The lineage archive: an append-only, schema-versioned SQLite file per run, and queries over it."""

from evotrainer.archive.schema import (
    APPLICATION_ID,
    EVALUATION_KINDS,
    SCHEMA_VERSION,
    EvaluationRow,
    EventRow,
    HarnessCandidateRow,
    LineageNode,
    PoolTaskRow,
    RoundRow,
    RunInfo,
    SampleRow,
)
from evotrainer.archive.store import (
    DEFAULT_ARCHIVE_NAME,
    ArchiveStore,
    archive_path,
    checkpoint_archive,
    open_archive,
)

__all__ = ["APPLICATION_ID", "DEFAULT_ARCHIVE_NAME", "EVALUATION_KINDS", "SCHEMA_VERSION", "ArchiveStore",
           "EvaluationRow", "EventRow", "HarnessCandidateRow", "LineageNode", "PoolTaskRow", "RoundRow",
           "RunInfo", "SampleRow", "archive_path", "checkpoint_archive", "open_archive"]
