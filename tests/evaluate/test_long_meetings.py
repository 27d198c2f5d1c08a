"""Whole meetings end to end (issue 29) on the tiny random model: ``mode=evaluate`` says per item how it was
read (evaluate.json, the items CSV, the tables) and warns for each cut item by name; the archive records it;
the long-meeting smoke experiment runs; the real long meetings in ../shared/data are read in windows."""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from rich.console import Console

from evotrainer.archive import ArchiveStore
from evotrainer.archive.recorder import RunRecorder
from evotrainer.config import PACKAGE_DATA, PROJECT_ROOT, Config, register_configs, to_config, validate
from evotrainer.evaluate.run import run_evaluate
from evotrainer.input_handling import InputHandling
from evotrainer.rollout import MetaEvaluation

LONG = PACKAGE_DATA / "validation_set" / "long_generated.jsonl"
SHORT = PACKAGE_DATA / "validation_set" / "meeting_minutes.jsonl"
ELITR = PROJECT_ROOT.parent / "shared" / "data" / "elitr_long.jsonl"


def _dataset(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.jsonl"
    path.write_text(LONG.read_text().splitlines()[0] + "\n" + SHORT.read_text().splitlines()[0] + "\n")
    return path


def _cfg(tiny_model_dir: Path, dataset: Path, mode: str) -> Config:
    cfg = Config(mode="evaluate")
    cfg.model.path = str(tiny_model_dir)
    cfg.model.dtype = "float32"
    cfg.model.max_context = 768
    cfg.decoding.max_new_tokens = 8
    cfg.task.options = {"long": {"mode": mode, "window_tokens": 256, "reserve_tokens": 160}}
    cfg.evaluate.dataset = str(dataset)
    cfg.evaluate.policies = ["terse"]
    cfg.evaluate.bootstrap = 100
    cfg.evaluation.show_best_output = False
    validate(cfg)
    return cfg


def test_evaluate_records_windowed_and_whole_items(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = _cfg(tiny_model_dir, _dataset(tmp_path), "window")
    console = Console(record=True, width=200)
    out = run_evaluate(cfg, run_dir=tmp_path / "run", console=console)
    text = console.export_text()
    doc = json.loads(out.files[0].read_text())
    long_id, short_id = doc["items"][0]["id"], doc["items"][1]["id"]
    how = InputHandling.parse(doc["items"][0]["handling"]["terse"])
    assert how.how == "windowed" and how.windows >= 8 and not how.lost_words
    assert doc["items"][1]["handling"]["terse"] == "whole"
    assert doc["policies"][0]["handling"] == "1 whole, 1 windowed"
    assert doc["long_input"]["mode"] == "window" and doc["long_input"]["window_tokens"] == 256
    with out.files[1].open() as fh:
        rows = {r["item_id"]: r for r in csv.DictReader(fh)}
    assert rows[long_id]["handling"] == how.code() and rows[long_id]["share_seen"] == "1.000"
    assert rows[short_id]["handling"] == "whole"
    assert "items read" in text and "1 whole, 1 windowed" in text
    assert f"windowed into {how.windows}" in text and "warning" not in text


def test_evaluate_cut_mode_says_how_much_each_cut_item_lost(tiny_model_dir: Path, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    cfg = _cfg(tiny_model_dir, _dataset(tmp_path), "cut")
    console = Console(record=True, width=200)
    with caplog.at_level(logging.WARNING):
        out = run_evaluate(cfg, run_dir=tmp_path / "run", console=console)
    doc = json.loads(out.files[0].read_text())
    long_id = doc["items"][0]["id"]
    how = InputHandling.parse(doc["items"][0]["handling"]["terse"])
    assert how.how == "cut" and how.share_seen is not None and 0.05 < how.share_seen < 0.4
    text = console.export_text()
    assert f"warning: item {long_id}" in text and "% of words seen" in text
    assert any(long_id in r.getMessage() and "% of words seen" in r.getMessage() for r in caplog.records)
    with out.files[1].open() as fh:
        assert [r["handling"].split(":")[0] for r in csv.DictReader(fh)] == ["cut", "whole"]


def _meta(handling: tuple[str, ...], cached: bool = False, pid: str = "p1") -> MetaEvaluation:
    n = len(handling)
    return MetaEvaluation(pid, "g", "b-1", 0.5, None, {}, (0.5,) * n, ("x",) * n, 3, 0.1, cached, None, handling)


def test_archive_records_the_handling_of_fresh_evaluations_that_were_not_whole(tmp_path: Path) -> None:
    with ArchiveStore(tmp_path / "archive.db") as store:
        rec = RunRecorder(store, "run")
        rec.start(0, {"seed": 0})
        rec.meta(_meta(("whole", "windowed:4")), kind="meta_val")
        rec.meta(_meta(("whole", "windowed:4"), cached=True, pid="p2"), kind="meta_val")  # archived when made
        rec.meta(_meta(("whole", "whole"), pid="p3"), kind="meta_val")  # nothing to say
        rec.meta(_meta(("cut:0.250", "whole"), pid="p4"), kind="meta_screen", harness_id="g0c1")
        events = [e.event for e in store.events("run", kind="input_handling")]
    assert [(e.policy_id, e.evaluation_kind, e.handling) for e in events] == [
        ("p1", "meta_val", ("whole", "windowed:4")), ("p4", "meta_screen", ("cut:0.250", "whole"))]
    assert events[1].harness_id == "g0c1"


def _compose(name: str) -> Config:
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        return to_config(compose(config_name="config", overrides=[f"+experiment={name}"]))


@pytest.mark.parametrize(("name", "bounds"), [("meeting_minutes_long", (512, 3072, 1536, 256)),
                                               ("meeting_minutes_long_smoke", (128, 512, 256, 64))])
def test_long_experiments_let_the_inner_loop_evolve_the_window(name: str, bounds: tuple[int, ...]) -> None:
    """The long experiments list the window gene beside the default genes (as the run's decoding centres them),
    starting at the family option's window."""
    from evotrainer.evolve.llm_objective import inner_config
    from evotrainer.run.runtime import sampling_from
    from evotrainer.search.decoding import decoding_genes_for

    cfg = _compose(name)
    validate(cfg)
    genes = {g.name: g for g in inner_config(cfg).genes}
    window = genes.pop("window_tokens")
    assert (window.low, window.high, window.default, window.step, window.integer) == (*bounds, True)
    assert window.default == cfg.task.options["long"]["window_tokens"]
    assert list(genes.values()) == list(decoding_genes_for(sampling_from(cfg.decoding)))
    assert cfg.inner.decoding_mutation_share > 0


def test_long_smoke_experiment_end_to_end(tiny_run_config: Callable[[], Config], tiny_model_dir: Path,
                                          tmp_path: Path) -> None:
    """``+experiment=meeting_minutes_long_smoke`` on the tiny model: every long meeting is read in windows
    by every policy, the archive says so, and the run finishes."""
    from evotrainer.evolve.coevolution import run_evolve

    cfg = _compose("meeting_minutes_long_smoke")
    cfg.model.path = str(tiny_model_dir)
    cfg.model.dtype = "float32"
    cfg.inner.llm_mutation_share = 0.0  # model-free operators only: keeps the test fast
    validate(cfg)
    summary = run_evolve(cfg, run_dir=tmp_path)
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        run_id = store.list_runs()[0].run_id
        events = [e.event for e in store.events(run_id, kind="input_handling")]
        meta_kinds = {e.kind for e in store.evaluations(run_id) if e.kind.startswith("meta")}
    assert events and meta_kinds
    codes = [InputHandling.parse(c) for e in events if e.evaluation_kind != "fitness" for c in e.handling]
    assert codes and all(h.how == "windowed" and h.windows >= 8 for h in codes)
    assert summary.best is not None


@pytest.mark.skipif(not ELITR.is_file(), reason="the ELITR long meetings (CC BY-NC-SA) are not in ../shared/data")
def test_real_long_meetings_are_read_in_windows(tiny_model_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``evaluate.dataset=../shared/data/elitr_long.jsonl`` as the acceptance command writes it, from the checkout."""
    monkeypatch.chdir(PROJECT_ROOT)
    cfg = _cfg(tiny_model_dir, Path("../shared/data/elitr_long.jsonl"), "window")
    cfg.model.max_context = 1024
    cfg.task.options["long"]["window_tokens"] = 1536  # the default; capped at 1024 - 8 - 160 by the context
    cfg.evaluate.limit = 2
    out = run_evaluate(cfg, run_dir=tmp_path / "run", console=Console(record=True, width=200))
    doc = json.loads(out.files[0].read_text())
    for item in doc["items"]:
        how = InputHandling.parse(item["handling"]["terse"])
        assert item["id"].startswith("elitr-") and how.how == "windowed" and not how.lost_words


def test_policies_reading_one_window_share_its_prefix(tiny_model_dir: Path) -> None:
    """Two policies on one long meeting in the transcript_first layout: every window's transcript is a prefix
    both send, so the backend computes it once and reuses it (the windows and the merges in two calls)."""
    from evotrainer.backends.base import SamplingParams
    from evotrainer.backends.hf import HFBackend
    from evotrainer.model_schema import ModelConfig
    from evotrainer.tasks.base import RolloutRequest
    from evotrainer.tasks.meeting_minutes import MeetingMinutes
    from evotrainer.tasks.meeting_minutes.long_input import LongInput

    llm = HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", max_context=768, prefix_cache_mb=0))
    family = MeetingMinutes(long=LongInput(window_tokens=256, overlap_tokens=32, reserve_tokens=160))
    (task,), _ = family.load_dataset(LONG, limit=1)
    params = SamplingParams(max_new_tokens=4)
    policies = [(("role", "You write minutes."), ("format", "## Topics"), ("rules", "Be brief.")),
                (("role", "You are a secretary."), ("format", "## Decisions"), ("rules", "Names exact."))]
    requests = [RolloutRequest(family.build_messages(s, task), params, None, s, task, f"p{i}")
                for i, s in enumerate(policies)]
    gens = family.roll_out(llm, requests)
    n = InputHandling.parse(gens[0].handling).windows
    assert n >= 8 and gens[1].handling == gens[0].handling
    assert llm.stats.requests == 2 * n + 2
    assert llm.stats.prefix_tokens_reused >= n * 200  # each window's ~250 transcript tokens reused once
