"""The "transfer" event in the archive: shown by ``show`` (table and JSON) and the HTML report, text escaped;
pooled over runs by ``sweep``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore, open_archive
from evotrainer.browse.cli import main
from evotrainer.browse.report import build_report
from evotrainer.stats.transfer import compare_transfer, to_event
from evotrainer.stats.transfer_pool import pool_transfer

from .test_cli_archive import NASTY, RUN, build_archive
from .test_generalisation_archive import _job

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


def _transfer(seed: int, gain: float) -> object:
    ids = {"final_best": f"best{seed}", "best_seed": "strict_short", "plain_prompt": "plain_prompt"}
    best = [v + gain + 0.004 * ((i + seed) % 3) for i, v in enumerate(SEED)]
    return compare_transfer(ids, {"final_best": best, "best_seed": SEED, "plain_prompt": [v - 0.02 for v in SEED]},
                            [f"q{i}" for i in range(6)], seed=seed)


@pytest.fixture()
def transfer_sweep(tmp_path: Path) -> tuple[Path, list[object]]:
    """Three jobs with a generalisation event; two also with a transfer event, on the same items."""
    reports, sweep = [_transfer(0, 0.03), _transfer(1, 0.02)], tmp_path / "multirun" / "2026-01-01_12-00-00"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    for seed, r in enumerate([*reports, None]):
        folder = _job(sweep, f"{seed}_seed{seed}", seed, [0.01] * 6)
        if r is not None:
            with ArchiveStore(folder / "archive.db") as store:
                store.add_event(f"run-s{seed}", "transfer", to_event(r).to_payload())
    return tmp_path / "multirun", reports


def test_sweep_pools_the_transfer_reports(transfer_sweep, capsys: pytest.CaptureFixture[str]) -> None:
    folder, reports = transfer_sweep
    assert main(["sweep", str(folder), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["transfer"] and r["transfer"]["transfers"] for r in doc["runs"]] == [True, True, None]
    p, expected = doc["pooled_transfer"], pool_transfer(reports, seed=0)
    assert (p["runs"], p["items"], p["transfers"]) == (2, 6, True) and p["verdict"] == expected.verdict
    assert p["verdict"].startswith("gain transfers (pooled over 2 runs): final best − best seed +0.0290 [")
    fb = p["comparisons"][0]
    assert (fb["label"], fb["runs"], fb["n"], fb["wins"]) == ("final best − best seed", 2, 6, 12)
    assert main(["sweep", str(folder), "--level", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "transfer pooled over 2 run(s), 6 items (cluster bootstrap by item, 90%; higher is better)" in out
    assert "final best − plain prompt" in out and "best seed − plain prompt" in out and "12/0/0" in out
    assert "transfer: gain transfers (pooled over 2 runs)" in out
    assert "not pooled (no transfer event, or unreadable): run-s2 (2_seed2)" in out and "n/a" in out


def test_sweep_without_transfer_events_says_na(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _job(tmp_path, "0_seed0", 0, [0.01] * 6)
    assert main(["sweep", str(tmp_path)]) == 0
    assert "transfer: n/a (no run holds a transfer event)" in capsys.readouterr().out
    assert main(["sweep", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pooled_transfer"] is None
