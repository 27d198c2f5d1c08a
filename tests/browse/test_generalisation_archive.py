"""The "generalisation" event in the archive: read back, in ``show`` and the HTML report, pooled by ``sweep``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore, open_archive
from evotrainer.archive.recorder import RunRecorder
from evotrainer.browse.cli import main
from evotrainer.browse.report import build_report
from evotrainer.browse.views import run_generalisation
from evotrainer.stats.generalisation import compare, format_diff, pool, to_payload

from .test_cli_archive import NASTY, RUN, build_archive

HELD_IDS = [f"m{i:02d}" for i in range(6)]
SEL_IDS = [f"s{i:02d}" for i in range(5)]
HELD_BASE = [0.20, 0.10, 0.30, 0.25, 0.15, 0.35]
SEL_BASE = [0.10, 0.20, 0.30, 0.40, 0.25]


def _gen(seed: int, held_diffs: list[float], best: str = "best"):
    return compare("strict_short", f"{best}{seed}", (SEL_BASE, [v + 0.05 for v in SEL_BASE]),
                   (HELD_BASE, [b + d for b, d in zip(HELD_BASE, held_diffs, strict=True)]), seed=seed)


def _job(sweep: Path, name: str, seed: int, held_diffs: list[float] | None, dtype: str | None = None) -> Path:
    """One Hydra job folder with an archive: a start row, a setup event and (optionally) the event."""
    folder = sweep / name
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n- +experiment=meeting_minutes\n")
    with ArchiveStore(folder / "archive.db") as store:
        rec = RunRecorder(store, f"run-s{seed}")
        rec.start(seed, {"seed": seed} if dtype is None else {"seed": seed, "model": {"dtype": dtype}})
        rec.event("setup", selection_items=SEL_IDS, heldout_items=HELD_IDS)
        if held_diffs is not None:
            rec.event("generalisation", **to_payload(_gen(seed, held_diffs)))
    return folder


@pytest.fixture()
def sweep_dir(tmp_path: Path) -> Path:
    sweep = tmp_path / "multirun" / "2026-01-01" / "12-00-00"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    _job(sweep, "0_seed0", 0, [0.04, -0.02, 0.05, 0.01, -0.03, 0.02])
    _job(sweep, "1_seed1", 1, [0.02, -0.04, 0.03, 0.03, -0.01, 0.04])
    _job(sweep, "2_seed2", 2, None)  # crashed before the end: no event
    return tmp_path / "multirun"


def _cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_event_round_trip_takes_item_ids_from_the_setup_event(sweep_dir: Path) -> None:
    db = next(sweep_dir.rglob("0_seed0/archive.db"))
    with open_archive(db) as store:
        g = run_generalisation(store, "run-s0")
    assert g is not None and g.heldout.item_ids == tuple(HELD_IDS) and g.selection.item_ids == tuple(SEL_IDS)
    assert g.heldout.diff == _gen(0, [0.04, -0.02, 0.05, 0.01, -0.03, 0.02]).heldout.diff
    with open_archive(next(sweep_dir.rglob("2_seed2/archive.db"))) as store:
        assert run_generalisation(store, "run-s2") is None


def test_sweep_json_lists_runs_skips_and_pools_by_item(sweep_dir: Path, capsys) -> None:
    code, out, err = _cli(capsys, "sweep", sweep_dir, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [(r["job"], r["seed"], r["best_id"]) for r in doc["runs"]] == [("0_seed0", 0, "best0"), ("1_seed1", 1, "best1")]
    assert all(r["baseline_id"] == "strict_short" for r in doc["runs"])
    assert doc["runs"][0]["heldout"]["n"] == 6 and doc["runs"][0]["selection"]["wins"] == 5
    assert len(doc["skipped"]) == 1 and "no summary yet" in doc["skipped"][0]["reason"]
    p = doc["pooled"]["heldout"]
    assert (p["runs"], p["n"], p["pairs"], p["by_item"]) == (2, 6, 12, True)  # the same items: 6 clusters
    expected = pool([_gen(0, [0.04, -0.02, 0.05, 0.01, -0.03, 0.02], "x"),
                     _gen(1, [0.02, -0.04, 0.03, 0.03, -0.01, 0.04], "x")], seed=0)
    assert p["mean"] == pytest.approx(expected.mean)
    assert p["held"] is None and p["verdict"].startswith("undecided")
    assert doc["pooled"]["selection"]["mean"] == pytest.approx(0.05)


def test_sweep_table_shows_rows_skips_and_pooled_verdict(sweep_dir: Path, capsys) -> None:
    code, out, err = _cli(capsys, "sweep", sweep_dir)
    assert code == 0, err
    assert "0_seed0" in out and "1_seed1" in out and "strict_short" in out and "undecided" in out
    assert format_diff(_gen(1, [0.02, -0.04, 0.03, 0.03, -0.01, 0.04]).heldout.diff).split(" [")[0] in out
    assert "skipped" in out and "2_seed2" in out
    assert "pooled held-out difference over 2 run(s), 6 items" in out
    assert "sweep: undecided: held-out difference" in out


def test_sweep_names_runs_of_different_number_formats(tmp_path: Path, capsys) -> None:
    """Greedy outputs part between float32 and bfloat16: such runs are not repeats, and the table says so."""
    _job(tmp_path, "0_seed0", 0, [0.04, -0.02, 0.05, 0.01, -0.03, 0.02], dtype="bfloat16")
    _job(tmp_path, "1_seed0_fp32", 1, [0.02, -0.04, 0.03, 0.03, -0.01, 0.04], dtype="float32")
    code, out, _ = _cli(capsys, "sweep", tmp_path, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["dtypes"] == {"bfloat16": 1, "float32": 1}
    assert [r["dtype"] for r in doc["runs"]] == ["bfloat16", "float32"]
    code, out, _ = _cli(capsys, "sweep", tmp_path)
    assert code == 0 and "more than one number format (bfloat16: 1 run, float32: 1 run" in " ".join(out.split())


def test_sweep_of_one_format_says_nothing_about_formats(sweep_dir: Path, capsys) -> None:
    code, out, _ = _cli(capsys, "sweep", sweep_dir)
    assert code == 0 and "number format" not in out


def test_sweep_without_any_event_exits_2(tmp_path: Path, capsys) -> None:
    _job(tmp_path, "only", 0, None)
    code, out, err = _cli(capsys, "sweep", tmp_path)
    assert code == 2 and "no run holds a generalisation event" in err and "skipped" in out


def test_show_prints_the_comparison(sweep_dir: Path, capsys) -> None:
    code, out, err = _cli(capsys, "show", next(sweep_dir.rglob("0_seed0/archive.db")))
    assert code == 0, err
    assert "final best best0 vs best seed strict_short" in out and "wins/losses/ties" in out
    assert "generalisation: undecided" in out


def test_report_shows_the_table_and_escapes_text(tmp_path: Path) -> None:
    db = tmp_path / "archive.db"
    build_archive(db)
    g = compare(NASTY, "c3", (SEL_BASE, [v + 0.05 for v in SEL_BASE]),
                (HELD_BASE, [v + 0.04 for v in HELD_BASE]), seed=0)
    with ArchiveStore(db) as store:
        store.add_event(RUN, "generalisation", to_payload(g))
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    section = doc[doc.index('id="generalisation"'):doc.index("<h2>Fitness")]
    assert "difference [95% CI]" in section and "wins/losses/ties" in section and "held-out" in section
    assert format_diff(g.heldout.diff) in section and "6/0/0" in section
    assert "the gain held on held-out items" in section and "class='ok'" in section
    assert "<script>alert(1)" not in doc and "&lt;/script&gt;&lt;script&gt;alert(1)" in section


def test_report_without_the_event_says_so(tmp_path: Path) -> None:
    db = tmp_path / "archive.db"
    build_archive(db)
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    assert "No generalisation event" in doc


def test_sweep_has_help(capsys) -> None:
    code, out, _ = _cli(capsys, "sweep", "--help")
    assert code == 0 and "Usage" in out and "--level" in out
