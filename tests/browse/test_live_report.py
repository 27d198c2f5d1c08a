"""The run's report is rewritten while it runs (after generation 0, each outer generation, the end), and a
report that cannot be written never ends the run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.browse.live_report import REPORT_NAME, LiveReport
from evotrainer.config import Config
from evotrainer.evolve.coevolution import run_evolve


def _report_events(store: ArchiveStore, run_id: str) -> list[dict]:
    return [e.payload for e in store.events(run_id, kind="phase") if e.payload.get("name") == "report"]


def test_a_run_rewrites_its_report_at_each_outer_generation(tiny_run_config: Callable[[], Config], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tiny_run_config()
    cfg.seed = 3
    cfg.inner.generations = 1
    cfg.inner.llm_mutation_share = 0.0  # model-free operators only: keeps the test fast
    cfg.outer.generations = 2
    cfg.outer.patience = 10  # no plateau stop before the 2nd generation
    run_evolve(cfg, run_dir=tmp_path)
    report = tmp_path / REPORT_NAME
    assert f"report (rewritten after each outer generation): {report}" in capsys.readouterr().out
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        run_id = store.list_runs()[0].run_id
        events = _report_events(store, run_id)
        order = [(e.kind, e.payload.get("name"), e.payload.get("outer_generation")) for e in store.events(run_id)]
    assert report.is_file() and run_id in report.read_text(encoding="utf-8")
    assert [e["outer_generation"] for e in events] == [0, 1, 2, None]
    assert all(e["error"] is None and e["path"] == str(report) for e in events)
    # written during the run: each refresh follows its generation and precedes the next one and the summary
    assert (order.index(("outer_generation", None, 1)) < order.index(("phase", "report", 1))
            < order.index(("outer_generation", None, 2)) < order.index(("phase", "report", 2))
            < order.index(("summary", None, None)) < order.index(("phase", "report", None)))
    assert not list(tmp_path.glob(f".{REPORT_NAME}.*"))  # no temporary file left


def test_a_report_that_cannot_be_written_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the report's folder should be")
    with ArchiveStore(tmp_path / "archive.db") as store:
        rec = RunRecorder(store, "run-x")
        rec.start(0, {"seed": 0})
        live = LiveReport(rec, blocker / REPORT_NAME)
        with caplog.at_level(logging.WARNING, logger="evotrainer.browse.live_report"):
            assert live.refresh(1) is None
        assert live.failures == 1 and live.writes == 0
        assert any("could not refresh the report" in r.getMessage() for r in caplog.records)
        (event,) = _report_events(store, "run-x")
        assert event["outer_generation"] == 1 and "cannot write the report" in event["error"]
        assert LiveReport(rec, tmp_path / REPORT_NAME).refresh(2) == tmp_path / REPORT_NAME
        assert LiveReport(rec, tmp_path / "off.html", enabled=False).refresh(3) is None
        assert not (tmp_path / "off.html").exists() and len(_report_events(store, "run-x")) == 2
