"""Golden archive rows (issue 27's golden check): the smallest meeting-minutes evolve run on the tiny random model
writes the same archive rows as the code before issue 27 did, apart from renamed columns and the run id.

``scripts/golden_rows.py`` runs ``python -m evotrainer +experiment=smoke`` (seed 0, one thread, the tiny model of
``tests/conftest.py`` as policy model and mutator) in a subprocess and dumps every archive table as canonical
JSON: volatile values (run id, code version, timestamps, host, wall-clock seconds, autoincrement ids, temporary
paths) replaced, the column renames of schemas 3 and 4 applied, rows sorted. ``tests/data/golden/smoke_tiny.json`` holds the
expected dump: its tables were made at f44bae6 (the last commit before issue 27's work, schema 2) and are
identical at 6c426da and 5f51779; its config section (``runs.config_json``, flattened) is 5f51779's, which
differs from f44bae6's only by added keys (``task.long.*``, ``outer.budget.prompt_tokens``,
``inner.output_name``, ``inner.reflection_hints``) and two meeting-minutes defaults moved into the family
(``inner.task_hint``, ``inner.prefill_fallbacks``, now null in the config). Issue 43 (schema 4) edited the file
for one rename and one dropped duplicate, nothing else: ``harness_candidates.screen_s_val`` is ``race_estimate``,
and ``outer_generation`` events no longer write ``incumbent_screen_s_val`` (the incumbent's whole-set S_val,
already ``incumbent_s_val``).

The evolve run leaves the self-evolution pool (the table whose columns schema 3 renamed) empty; ``--mode
selfevolve`` of the script fills it, and was compared by hand at both commits (equal apart from the config
section), but is not part of this test, which must stay well under a minute.

Only the command line and the archive file are used, not the package's modules, so the check holds while
modules move, and a refactoring that changes what a run writes fails it.

Regenerate the golden file only when a change is meant to change the rows (say so in the commit message)::

    HF_HUB_OFFLINE=1 python scripts/golden_rows.py --write-golden
    python scripts/golden_rows.py --compare OLD.json tests/data/golden/smoke_tiny.json   # review what changed

(``git show HEAD:tests/data/golden/smoke_tiny.json > OLD.json`` first.) A config-only change (a key renamed,
added or moved, no row changed) fails only :func:`test_run_config_matches_the_golden_file`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "data" / "golden" / "smoke_tiny.json"
_SHOWN = 60  # difference lines in a failure message
_REGENERATE = ("if the change is meant to change them, regenerate with `HF_HUB_OFFLINE=1 python scripts/golden_rows.py "
               "--write-golden` (see tests/test_golden_archive.py)")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden_rows", ROOT / "scripts" / "golden_rows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["golden_rows"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def golden() -> ModuleType:
    return _script()


@pytest.fixture(scope="module")
def dumps(golden: ModuleType, tiny_model_dir: Path,
          tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """(expected, actual, where the actual dump was written) for the current code."""
    work = tmp_path_factory.mktemp("golden")
    actual = golden.golden_run(ROOT, workdir=work, model_dir=tiny_model_dir)
    path = work / "actual.json"
    path.write_text(json.dumps(actual, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return json.loads(GOLDEN.read_text(encoding="utf-8")), actual, path


def _message(what: str, diff: list[str], path: Path) -> str:
    shown = "\n  ".join(diff[:_SHOWN])
    more = f"\n  ... and {len(diff) - _SHOWN} more" if len(diff) > _SHOWN else ""
    return (f"{what} differ from {GOLDEN.relative_to(ROOT)} ({len(diff)} differences; the run's dump: {path}):\n  "
            f"{shown}{more}\n{_REGENERATE}")


def test_archive_rows_match_the_golden_file(golden: ModuleType, dumps) -> None:
    """Every table's rows (volatile values normalised, renamed columns mapped) equal the golden file's."""
    expected, actual, path = dumps
    diff = golden.compare(expected, actual, config=False)
    assert not diff, _message("the tiny run's archive rows", diff, path)
    assert actual["tables"]["policies"] and actual["tables"]["evaluations"], "the run archived nothing"


def test_run_config_matches_the_golden_file(golden: ModuleType, dumps) -> None:
    """The run's stored config (``runs.config_json``, flattened, paths made symbolic) equals the golden file's."""
    expected, actual, path = dumps
    diff = [line for line in golden.compare(expected, actual, config=True) if line.startswith("config:")]
    assert not diff, _message("the tiny run's stored config keys", diff, path)


def test_the_dump_maps_renamed_columns_and_hides_volatile_values(golden: ModuleType, tmp_path: Path) -> None:
    """A schema-2 pool row dumps under schema 3's column names; run id, timestamps, host and seconds are hidden,
    absolute paths made symbolic, JSON columns parsed and phase-event floats hidden."""
    import sqlite3

    db = tmp_path / "a.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT, created_at TEXT, seed INTEGER, config_json TEXT, host TEXT)")
        conn.execute("CREATE TABLE selfevolve_pool (run_id TEXT, task_id TEXT, transcript TEXT, "
                     "reference_minutes TEXT, created_at TEXT)")
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, kind TEXT, "
                     "payload_json TEXT, created_at TEXT)")
        conn.execute("INSERT INTO runs VALUES ('run-s0-abc', '2026-01-01', 0, ?, 'box')",
                     (json.dumps({"model": {"path": str(tmp_path / "m")}, "seed": 0}),))
        conn.execute("INSERT INTO selfevolve_pool VALUES ('run-s0-abc', 't1', 'text', 'ref', '2026-01-01')")
        conn.execute("INSERT INTO events (run_id, kind, payload_json, created_at) VALUES ('r', 'phase', ?, 'x')",
                     (json.dumps({"name": "usage", "requests": 3, "vary": 1.5}),))
    dump = golden.dump_archive(db, {str(tmp_path / "m"): "<MODEL>"})
    assert dump["config"] == {"model.path": "<MODEL>", "seed": 0}
    assert dump["tables"]["runs"] == [{"run_id": "<volatile>", "created_at": "<volatile>", "seed": 0,
                                       "host": "<volatile>"}]
    assert dump["tables"]["selfevolve_pool"] == [{"run_id": "<volatile>", "task_id": "t1", "task_input": "text",
                                                  "reference": "ref", "created_at": "<volatile>"}]
    (event,) = dump["tables"]["events"]
    assert event["payload_json"] == {"name": "usage", "requests": 3, "vary": "<volatile>"}
    changed = {**dump, "tables": {**dump["tables"], "selfevolve_pool": [
        {**dump["tables"]["selfevolve_pool"][0], "reference": "other"}]}}
    assert golden.compare(dump, changed) == ["selfevolve_pool: row {task_id='t1'}: reference: \"ref\" -> \"other\""]


def test_floats_compare_within_float32_noise_and_no_further(golden: ModuleType) -> None:
    """A float that moves in its last float32 bits (another CPU's summation order) is no difference; a real
    change of the same value is, and is named by its nested key."""
    row = {"kind": "inner_generation", "payload_json": {"record": {"diversity": 0.12019618600606918, "n": 4}}}

    def dump(diversity: float) -> dict[str, Any]:
        changed = {**row, "payload_json": {"record": {"diversity": diversity, "n": 4}}}
        return {"tables": {"events": [changed]}}

    assert golden.compare(dump(0.12019618600606918), dump(0.12019606679677963), config=False) == []
    diff = golden.compare(dump(0.12019618600606918), dump(0.1205), config=False)
    assert len(diff) == 1 and "payload_json.record.diversity" in diff[0]
