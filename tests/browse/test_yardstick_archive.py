"""The S_val yardstick in the archive: ``show`` (table, verdict, JSON) and the HTML report's section, from the
``yardstick`` event or, before it, the setup event's probes; older archives say it was not recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore, open_archive
from evotrainer.browse.cli import main
from evotrainer.browse.report import build_report
from evotrainer.browse.yardstick_view import read_yardstick
from evotrainer.events.kinds import SetupEvent, YardstickEvent
from evotrainer.harness import yardstick

from .test_cli_archive import RUN, build_archive

PROBES = {"reference": [0.40, 0.36, 0.44, 0.40], "baseline": [0.05, 0.07, 0.06, 0.06],
          "skeleton": [0.01, 0.00, 0.02, 0.01], "wrong_item": [0.02, 0.01, 0.00, 0.01]}
KEEP = [True, True, True, False]  # the selection items


def _archive(tmp_path: Path, *, policy: list[float] | None = None, policy_id: str = "alpha",
             gen0: bool = True) -> Path:
    """The test run with a setup event carrying the model-free probes and (``gen0``) a yardstick event."""
    db = tmp_path / "archive.db"
    build_archive(db)
    setup = yardstick.check(PROBES)
    with ArchiveStore(db) as store:
        store.add_event(RUN, "setup", SetupEvent(population=("alpha", "beta"), probes=setup.as_dict()).to_payload())
        if gen0:
            report = yardstick.check(PROBES, policy or [0.12, 0.10, 0.14], policy_id, keep=KEEP)
            store.add_event(RUN, "yardstick", YardstickEvent(**report.as_dict()).to_payload())
    return db


def test_show_prints_the_yardstick_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _archive(tmp_path)
    assert main(["show", str(db)]) == 0
    out = capsys.readouterr().out
    assert "yardstick: S_val probes vs the best seed alpha on 3 selection items" in out
    assert "share of the policy's" in out
    lines = {ln.split("│")[1].strip(): ln for ln in out.splitlines() if ln.count("│") >= 3}
    assert "0.4000" in lines["reference"] and "3.3x" in lines["reference"]
    assert "0.1200" in lines["policy alpha"] and "50.0%" in lines["baseline"]
    assert "yardstick ok" in out and "targets missed" not in out
    assert main(["show", str(db), "--json"]) == 0
    y = json.loads(capsys.readouterr().out)["yardstick"]
    assert (y["source"], y["ok"], y["note"], y["items"], y["policy_id"]) == ("yardstick", True, None, 3, "alpha")
    assert y["means"]["reference"] == pytest.approx(0.40) and y["policy"] == pytest.approx(0.12)
    assert y["failures"] == [] and y["misses"] == []


def test_show_prints_a_failed_yardstick_and_missed_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _archive(tmp_path, policy=[0.04, 0.05, 0.06])  # below lead lines; skeleton 25 % of the policy
    assert main(["show", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "yardstick FAILED: policy 0.0500 is not above baseline 0.0600" in out
    assert "targets missed: skeleton 0.0100 > 10% of the policy's 0.0500" in out
    assert main(["show", str(db), "--json"]) == 0
    y = json.loads(capsys.readouterr().out)["yardstick"]
    assert y["ok"] is False and len(y["failures"]) == 1 and len(y["misses"]) == 1


def test_show_falls_back_to_the_setup_probes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _archive(tmp_path, gen0=False)
    assert main(["show", str(db)]) == 0
    out = capsys.readouterr().out
    assert "yardstick: model-free S_val probes on 4 meta-validation items" in out
    assert "share of the reference's" in out and "15.0%" in out and "yardstick ok" in out  # lead lines 0.06 / 0.40
    assert main(["show", str(db), "--json"]) == 0
    y = json.loads(capsys.readouterr().out)["yardstick"]
    assert (y["source"], y["ok"], y["items"], y["policy"]) == ("setup", True, 4, None)


def test_older_archives_say_not_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "archive.db"
    build_archive(db)  # its setup event predates the probes
    assert main(["show", str(db)]) == 0
    assert "yardstick: not recorded (made by older code)" in capsys.readouterr().out
    assert main(["show", str(db), "--json"]) == 0
    y = json.loads(capsys.readouterr().out)["yardstick"]
    assert (y["source"], y["ok"], y["note"], y["means"]) == (None, None, "yardstick: not recorded (made by older code)",
                                                             None)
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    assert "yardstick: not recorded (made by older code)" in doc and 'id="yardstick-plot"' not in doc


def test_unreadable_or_absent_probes_give_a_note(tmp_path: Path) -> None:
    db = tmp_path / "archive.db"
    build_archive(db)
    with ArchiveStore(db) as store:
        store.add_event(RUN, "setup", {"population": ["alpha"], "probes": None})
    with open_archive(db) as store:
        assert read_yardstick(store, RUN).note == "yardstick: not run (the task family supplies no probes)"
    with ArchiveStore(db) as store:
        store.add_event(RUN, "yardstick", {"means": {"reference": "high"}})
    with open_archive(db) as store:
        y = read_yardstick(store, RUN)
    assert y.report is None and y.note.startswith("yardstick: unreadable (event 'yardstick': key 'means'")


def test_report_shows_the_yardstick_section_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    db = _archive(tmp_path, policy=[0.04, 0.05, 0.06], policy_id=evil)
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    section = doc[doc.index('id="yardstick"'):doc.index("<h2>Fitness")]
    assert "<th>probe</th><th>mean S_val</th><th>share of the policy&#x27;s</th>" in section
    assert 'id="yardstick-plot"' in section and "0.4000" in section and "8.0x" in section
    assert "policy &lt;script&gt;alert(1)&lt;/script&gt;" in section and evil not in doc
    assert "<p class='bad'>yardstick FAILED: policy 0.0500 is not above baseline 0.0600</p>" in section
    assert "<p class='bad'>The yardstick failed:" in section
    assert "<p class='warn'>targets missed: skeleton 0.0100 &gt; 10% of the policy&#x27;s 0.0500" in section


def test_report_of_a_passing_yardstick(tmp_path: Path) -> None:
    db = _archive(tmp_path)
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    section = doc[doc.index('id="yardstick"'):doc.index("<h2>Fitness")]
    assert "<p class='ok'>yardstick ok</p>" in section and "The yardstick failed" not in section


def test_an_archive_with_the_old_probe_names_reads_them_by_role(tmp_path: Path) -> None:
    """Runs archived before the probes had role names (``lead_lines``, ``wrong_meeting``) read under the new ones."""
    db = tmp_path / "archive.db"
    build_archive(db)
    old = {"means": {"reference": 0.4, "baseline": 0.06, "skeleton": 0.01, "wrong_item": 0.01}, "items": 3,
           "policy": 0.12, "policy_id": "alpha", "failures": [], "misses": []}
    with ArchiveStore(db) as store:
        store.add_event(RUN, "yardstick", old)
    with open_archive(db) as store:
        y = read_yardstick(store, RUN)
    assert [name for name, _, _ in y.rows()] == ["reference", "policy alpha", "baseline", "skeleton", "wrong_item"]
