"""The yardstick's probes (issue 24): S_val must order reference ≫ real minutes > lead lines, skeleton and
another meeting's reference ≈ 0, on the main job's meta-validation set and on recorded real model minutes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from evotrainer.config import PACKAGE_DATA, register_configs, to_config
from evotrainer.harness import yardstick
from evotrainer.run.runtime import build_family, load_validation
from evotrainer.tasks.meeting_minutes.family import MeetingMinutes
from evotrainer.tasks.meeting_minutes.probes import SKELETON, probe_outputs
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask

RECORDED = Path(__file__).resolve().parents[2] / "data" / "recorded_minutes.jsonl"


@pytest.fixture(scope="module")
def main_job_items() -> list:
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        cfg = to_config(compose(config_name="config", overrides=["+experiment=meeting_minutes"]))
    return load_validation(cfg, build_family(cfg))


@pytest.fixture(scope="module")
def recorded() -> tuple[list[MeetingTask], dict[str, dict[str, str]]]:
    """Greedy minutes of the embedded SmolLM2-135M (scripts/record_minutes.py): items and policy -> id -> text."""
    rows = [json.loads(line) for line in RECORDED.read_text(encoding="utf-8").splitlines()]
    tasks: dict[str, MeetingTask] = {}
    outputs: dict[str, dict[str, str]] = {}
    for r in rows:
        tasks.setdefault(r["task_id"], MeetingTask(
            r["task_id"], r["transcript"], r["reference_minutes"], source=r["source"],
            action_items=tuple(ActionItem(**a) for a in r["action_items"]), meta={"meeting": r["meeting"]}))
        outputs.setdefault(r["policy"], {})[r["task_id"]] = r["output"]
    return list(tasks.values()), outputs


def test_probe_texts(main_job_items):
    texts = probe_outputs(main_job_items)
    assert len(texts) == len(main_job_items)
    for task, t in zip(main_job_items, texts, strict=True):
        assert t["reference"] == task.reference_minutes and t["skeleton"] == SKELETON
        assert t["baseline"].count("\n") <= 4 and task.transcript.startswith(t["baseline"].split("\n")[0])
        assert t["wrong_item"] != task.reference_minutes  # same source, another meeting
    assert probe_outputs(list(reversed(main_job_items)))[::-1] == texts  # order-free


def test_probes_are_named_by_role_not_by_domain(main_job_items):
    assert yardstick.PROBES == ("reference", "baseline", "skeleton", "wrong_item")
    assert set(probe_outputs(main_job_items)[0]) == set(yardstick.PROBES)


def test_probes_order_on_the_main_jobs_meta_validation_set(main_job_items):
    values = yardstick.probe_values(MeetingMinutes(), main_job_items)
    report = yardstick.check(values)
    means = report.means
    print("\n".join(report.lines()))
    assert report.ok, report.failures
    assert means["reference"] > 0.8
    assert means["skeleton"] == 0.0 and means["wrong_item"] < 0.02
    assert means["baseline"] == 0.0  # copied transcript lines are degenerate (guard)


def test_probes_order_against_recorded_real_minutes(recorded):
    items, outputs = recorded
    family = MeetingMinutes()
    values = yardstick.probe_values(family, items)
    for policy, texts in sorted(outputs.items()):
        scores = [family.meta_score(texts[t.task_id], t).value for t in items]
        report = yardstick.check(values, scores, policy)
        print("\n".join(report.lines()))
        assert report.ok, (policy, report.failures)  # targets (report.misses) are printed, not asserted
        assert report.means["reference"] > 5 * report.policy > report.means["baseline"]


def test_check_flags_each_broken_rule():
    good = {"reference": [0.9, 0.9], "baseline": [0.0, 0.0], "skeleton": [0.0, 0.0], "wrong_item": [0.0, 0.01]}
    assert yardstick.check(good, [0.2, 0.1], "p").ok
    bad = dict(good, skeleton=[0.05, 0.05], wrong_item=[0.12, 0.12], baseline=[0.3, 0.3])
    report = yardstick.check(bad, [0.2, 0.1], "p")
    text = " ".join(report.failures)
    assert not report.ok and "skeleton" in text and "wrong_item" in text and "baseline" in text
    assert any("skeleton" in m for m in report.misses) and any("wrong_item" in m for m in report.misses)
    assert any("FAILED" in line for line in report.lines())
    keep = yardstick.check(good, [0.2], "p", keep=[True, False])
    assert keep.items == 1 and keep.means["wrong_item"] == 0.0


def test_families_without_probes_skip():
    assert yardstick.probe_values(object(), [1, 2]) == {}
