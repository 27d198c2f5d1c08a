"""The generic rooms name no domain: every module outside ``evotrainer/tasks/`` (and ``tasks/``'s own generic modules)
asks the task family for every domain text (``FamilySpec.texts``) and reads items through ``Task`` (its ``group``,
``text``, ``size``) instead of spelling a domain out."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evotrainer"
ROOMS = (*sorted(p for p in PACKAGE.rglob("*.py") if "tasks" not in p.relative_to(PACKAGE).parts[:1]),
         *sorted(p for p in (PACKAGE / "tasks").glob("*.py") if p.name != "__init__.py"))  # the registry names families
DOMAIN_WORDS = re.compile(r"(?<!in )(?<!\d )\bminutes\b|meeting|transcript|action[ _-]?items?|agenda|\btopics\b",
                          re.IGNORECASE)
"""Words of the meeting-minutes domain. ``minutes`` as a time unit (``in minutes``, ``5 minutes``, ``1-minute``) and
``decisions`` (a stop or promotion decision) are ordinary words in a generic room."""

# (file, text on the line) that may still name a domain, each with why:
ALLOWED = (
    # schema 2's pool columns, which the migration to version 3 renames and a read-only open still reads
    *(("archive/schema.py", t) for t in ("transcript TEXT NOT NULL", "reference_minutes TEXT NOT NULL",
                                         '(("selfevolve_pool", "transcript", "task_input"), ("selfevolve_pool", '
                                         '"reference_minutes", "reference"))', "column ``transcript`` before",
                                         "(column ``reference_minutes`` before 3)")),
    # the converted-model fingerprint's fixed text: another text would invalidate every cached conversion
    ("backends/converted.py", '_PROBE = "Minutes of the budget meeting'),
    # probe names archived before the probes were named by role, read under the role names
    ("browse/yardstick_view.py", 'OLD_PROBE_NAMES = {"lead_lines": "baseline", "wrong_meeting": "wrong_item"}'),
    # the default family and its files: the config's defaults choose the domain a plain run uses
    ("config_schema.py", 'name: str = "meeting_minutes"'),
    ("config_schema.py", 'validation_path: str = "validation_set/meeting_minutes.jsonl"'),
    ("config_schema.py", 'population_path: str = "populations/meeting_minutes.yaml"'),
)


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _hits() -> list[str]:
    out = []
    for path in ROOMS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if DOMAIN_WORDS.search(line) and not any(_rel(path) == f and text in line for f, text in ALLOWED):
                out.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    return out


def test_generic_rooms_name_no_domain() -> None:
    hits = _hits()
    assert not hits, "domain words in generic code (move the text to the family's FamilyTexts):\n" + "\n".join(hits)


def test_every_allowed_line_is_still_there() -> None:
    """An allow-list entry whose line is gone is stale and must be dropped."""
    text = {_rel(p): p.read_text(encoding="utf-8") for p in ROOMS}
    assert [(f, t) for f, t in ALLOWED if t not in text.get(f, "")] == []
