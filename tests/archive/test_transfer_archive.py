"""The "transfer" event in the archive: shown by ``show`` (table and JSON) and the HTML report, text escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore, open_archive
from evotrainer.archive.cli import main
from evotrainer.archive.report import build_report
from evotrainer.transfer import compare_transfer, to_event

from .test_cli_archive import NASTY, RUN, build_archive

SEED = [0.10, 0.12, 0.08, 0.15, 0.11, 0.09]


def _archive(tmp_path: Path, best_id: str = "c3") -> tuple[Path, object]:
    db = tmp_path / "archive.db"
    build_archive(db)
    ids = {"final_best": best_id, "best_seed": "alpha", "plain_prompt": "plain_prompt"}
    r = compare_transfer(ids, {"final_best": [v + 0.03 for v in SEED], "best_seed": SEED,
                               "plain_prompt": [v - 0.02 for v in SEED]}, [f"q{i}" for i in range(6)], seed=0)
    with ArchiveStore(db) as store:
        store.add_event(RUN, "transfer", to_event(r).to_payload())
    return db, r


def test_show_prints_the_transfer_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, r = _archive(tmp_path)
    assert main(["show", str(db)]) == 0
    out = capsys.readouterr().out
    assert "transfer: 6 items no selection used" in out and "final best − plain prompt" in out
    assert "6/0/0" in out and "transfer: gain transfers" in out
    assert main(["show", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["transfer"]["verdict"] == r.verdict and doc["transfer"]["policy_ids"][0] == "c3"


def test_report_shows_the_transfer_section_escaped(tmp_path: Path) -> None:
    db, r = _archive(tmp_path, best_id=NASTY)
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    section = doc[doc.index('id="transfer"'):doc.index("<h2>Fitness")]
    assert "mean S_val / difference [95% CI]" in section and "plain prompt" in section and "6/0/0" in section
    assert "gain transfers" in section and "class='ok'" in section
    assert "<script>alert(1)" not in doc and "&lt;/script&gt;&lt;script&gt;alert(1)" in section


def test_report_without_the_event_says_so(tmp_path: Path) -> None:
    db = tmp_path / "archive.db"
    build_archive(db)
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    assert "No transfer event: task.transfer_path gives no items" in doc
