"""Dataset loaders: meeting transcripts with reference minutes, in the common shapes.

- :func:`load_dataset` — any shape, auto-detected (``.jsonl`` file or folder).
- :func:`load_jsonl` — our JSONL schema, other field names through a ``field_map``.
- :func:`load_folder` — ``<name>.txt`` transcripts with ``<name>.md`` minutes beside them.
- :func:`parse_speaker_lines` — ``Speaker: text`` / ``[hh:mm:ss] Speaker: text`` lines into turns.
- :func:`strata_of` / :func:`length_bucket` — groups for per-source and per-length results.
- :func:`read_action_item` / :func:`owner_source_counts` — action items as ``Owner: task`` or free-text
  sentences, and how many owners were explicit, read off a sentence, or absent.

Every malformed input raises :class:`~evotrainer.errors.DataError` naming ``file:LINE`` and what was
expected.
"""

# Import order matters: ``jsonl`` must be loaded before ``folder``, whose minutes parser imports
# evotrainer.tasks.meeting_minutes, whose ``data`` module imports ``evotrainer.tasks.meeting_minutes.datasets.jsonl``.
from evotrainer.tasks.meeting_minutes.datasets.jsonl import FIELDS, load_jsonl  # isort: skip
from evotrainer.tasks.meeting_minutes.datasets.action_items import (  # isort: skip
    OWNER_SOURCES,
    owner_source_counts,
    owner_sources,
    read_action_item,
)
from evotrainer.tasks.meeting_minutes.datasets.speaker_lines import Turn, parse_speaker_lines, parse_timestamp, render_turns  # isort: skip
from evotrainer.tasks.meeting_minutes.datasets.strata import LENGTH_BUCKETS, length_bucket, strata_of, word_count  # isort: skip
from evotrainer.tasks.meeting_minutes.datasets.minutes_md import ReferenceMinutes, parse_reference_minutes  # isort: skip
from evotrainer.tasks.meeting_minutes.datasets.folder import load_folder  # isort: skip
from evotrainer.tasks.meeting_minutes.datasets.load import FORMATS, detect_format, load_dataset  # isort: skip

__all__ = ["FIELDS", "FORMATS", "LENGTH_BUCKETS", "OWNER_SOURCES", "ReferenceMinutes", "Turn",
           "detect_format", "length_bucket", "load_dataset", "load_folder", "load_jsonl",
           "owner_source_counts", "owner_sources", "parse_reference_minutes", "parse_speaker_lines",
           "parse_timestamp", "read_action_item", "render_turns", "strata_of", "word_count"]
