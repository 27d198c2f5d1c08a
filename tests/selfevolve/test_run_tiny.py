"""``mode=selfevolve`` end to end on a tiny random Llama: real backend, real LoRA trainer, real archive."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from rich.console import Console

from evotrainer.adapters.train import train_lora
from evotrainer.archive.store import ArchiveStore
from evotrainer.config import Config, to_config
from evotrainer.errors import DataError
from evotrainer.events.selfevolve import SelfEvolveSetupEvent
from evotrainer.run.runtime import task_settings
from evotrainer.seeding import Seeds
from evotrainer.selfevolve.run import run_selfevolve
from evotrainer.tasks.meeting_minutes import MeetingMinutes


def test_selfevolve_run_on_tiny_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    overrides = [
        f"task.transfer_path={_write_real(tmp_path / 'transfer.jsonl', 2, ['T1', 'T2'])}",
        "selfevolve.transfer_limit=0",  # the transfer items are held apart, not scored
        "mode=selfevolve", f"model.path={tiny_model_dir}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=8",
        "task.validation_limit=2", "selfevolve.rounds=2", "selfevolve.seed_tasks=2",
        "selfevolve.new_tasks_per_round=1", "selfevolve.pool_cap=3", "selfevolve.samples_per_task=1",
        "selfevolve.judge_repeats=2", "selfevolve.dev_size=1", "selfevolve.val_limit=1",
        "selfevolve.pass_threshold=0.0",  # random weights write junk: let everything through to train
        "selfevolve.lora.steps=2", "selfevolve.lora.batch_size=2", "selfevolve.lora.rank=4",
        "selfevolve.lora.max_length=1024", "task.difficulty.length=80",
    ]
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides)))
    console = Console(record=True, width=160)
    summary = run_selfevolve(cfg, run_dir=tmp_path, console=console)
    assert [r.round for r in summary.rounds] == [1, 2]
    for r in summary.rounds:
        assert r.status in ("kept", "reverted") and len(r.losses) == 2 and r.adapter_path
        assert (tmp_path / r.adapter_path / "adapter_config.json").is_file()
        assert set(r.timings) >= {"pool", "rollout", "judge", "train", "dev", "meta-val"}
        assert r.grades_requested is not None and 0 <= r.grades_parsed <= r.grades_requested
        assert r.train["padded_tokens"] >= r.train["input_tokens"] > r.train["answer_tokens"] > 0 and r.train["tokens_per_second"] > 0
        assert r.train["seconds_per_step"] > 0
    text = console.export_text()
    assert "self-evolution rounds" in text and "loss start→end" in text
    assert "grades parsed" in text and "train tok/s" in text
    (start_row,) = [line for line in text.splitlines() if "start" in line and "│" in line]
    assert f"{summary.baseline_dev:.3f}" in start_row and f"{summary.baseline_val:.3f}" in start_row  # round 0
    assert summary.transfer is None and "no transfer comparison: selfevolve.transfer_limit is 0" in text
    with ArchiveStore(summary.archive, read_only=True) as ro:
        assert ro.selfevolve_rounds(summary.run_id) == list(summary.rounds)
        assert len(ro.selfevolve_pool(summary.run_id, round=0)) == 2
        kinds = [e.kind for e in ro.events(summary.run_id)]
        assert "setup" in kinds and "summary" in kinds


def test_selfevolve_trains_on_tool_agent_trajectories(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The same core on multi-step episodes: rollouts are episodes, the rule reward judges them, and the LoRA
    step learns each model reply of a passing episode (observations and prompts masked)."""
    overrides = [
        "mode=selfevolve", f"model.path={tiny_model_dir}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=8",
        "task.name=tool_agent", "task.validation_path=validation_set/tool_agent.jsonl", "task.validation_limit=2",
        "task.options.max_steps=2", "task.options.max_new_tokens=8",
        "evaluation.population_path=populations/tool_agent.yaml", "selfevolve.policy=terse",
        "selfevolve.model_judge_weight=0.0", "selfevolve.rounds=1", "selfevolve.seed_tasks=2",
        "selfevolve.new_tasks_per_round=1", "selfevolve.pool_cap=3", "selfevolve.samples_per_task=1",
        "selfevolve.judge_repeats=1", "selfevolve.dev_size=1", "selfevolve.val_limit=1",
        "selfevolve.pass_threshold=0.0", "selfevolve.lora.steps=2", "selfevolve.lora.batch_size=2",
        "selfevolve.lora.rank=4", "selfevolve.lora.max_length=1024",
    ]
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides)))
    console = Console(record=True, width=160)
    summary = run_selfevolve(cfg, run_dir=tmp_path, console=console)
    assert "no transfer comparison: task.transfer_path is null" in console.export_text()
    (r,) = summary.rounds
    assert r.status in ("kept", "reverted") and len(r.losses) == 2 and r.adapter_path
    assert r.train["examples"] >= 1  # passing episodes (each gives one example per model reply)
    with ArchiveStore(summary.archive, read_only=True) as ro:
        pool = ro.selfevolve_pool(summary.run_id, round=0)
    assert len(pool) == 2 and all("identity" in p.truth for p in pool)


SHORT = {"length": 80.0, "speakers": 2.0, "topics": 1.0, "action_items": 1.0}


def _write_real(path: Path, seed: int, meetings: list[str]) -> Path:
    """Short generated meetings written as real items of ``meetings`` (``meta.meeting``: their groups)."""
    tasks = MeetingMinutes().generate(np.random.default_rng(seed), SHORT, len(meetings))
    rows = [{"id": f"{path.stem}-{i}", "source": "real", "transcript": t.transcript,
             "reference_minutes": t.reference_minutes, "topics": list(t.topics), "meta": {"meeting": m}}
            for i, (t, m) in enumerate(zip(tasks, meetings, strict=True))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _real_overrides(tiny_model_dir: Path, data: Path) -> list[str]:
    return [
        "mode=selfevolve", f"model.path={tiny_model_dir}", "model.dtype=float32", "model.max_context=1024",
        "decoding.max_new_tokens=8", f"task.validation_path={_write_real(data / 'val.jsonl', 1, ['V1', 'V2'])}",
        f"task.transfer_path={_write_real(data / 'transfer.jsonl', 2, ['T1', 'T1', 'T2'])}",
        f"task.train_path={_write_real(data / 'train.jsonl', 3, ['R1', 'R2', 'R2', 'R3'])}",
        "selfevolve.real_share=0.5", "selfevolve.rounds=2", "selfevolve.seed_tasks=2",
        "selfevolve.new_tasks_per_round=2", "selfevolve.pool_cap=4", "selfevolve.samples_per_task=1",
        "selfevolve.judge_repeats=1", "selfevolve.dev_size=2", "selfevolve.val_limit=1",
        "selfevolve.pass_threshold=0.0", "selfevolve.lora.steps=1", "selfevolve.lora.batch_size=2",
        "selfevolve.lora.rank=4", "selfevolve.lora.max_length=1024", "task.difficulty.length=80",
        "selfevolve.dedup_cosine=1.0",  # short meetings of one generator look alike: drop exact copies only
    ]


def test_selfevolve_draws_real_meetings_apart_from_selection_and_transfer_and_reports_transfer(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """The split: no pool, replay, training or dev item shares a meeting (group) or an input (content hash) with a
    meta-validation or transfer item; real items enter the pool at the share asked; the run ends with the base
    model vs the final adapter on the transfer items, archived and printed."""
    data = tmp_path / "data"
    data.mkdir()
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config),
                                    OmegaConf.from_dotlist(_real_overrides(tiny_model_dir, data))))
    trained: list[tuple] = []

    def recording(backend, examples, replay, lora, out_dir, **kw):
        trained.append((list(examples), list(replay)))
        return train_lora(backend, examples, replay, lora, out_dir, **kw)

    console = Console(record=True, width=200)
    summary = run_selfevolve(cfg, run_dir=tmp_path / "run", console=console, train=recording)
    family = MeetingMinutes()
    held = family.load_validation(data / "val.jsonl") + family.load_validation(data / "transfer.jsonl")
    held_groups, held_hashes = {t.group for t in held}, {t.content_hash for t in held}
    train = {t.task_id: t for t in family.load_validation(data / "train.jsonl")}
    with ArchiveStore(summary.archive, read_only=True) as ro:
        pool = ro.selfevolve_pool(summary.run_id)
        (setup,) = [e.event for e in ro.events(summary.run_id) if e.kind == "setup"]
        events = {e.kind: e.event for e in ro.events(summary.run_id)}
        evals = [e.kind for e in ro.evaluations(summary.run_id)]
    # real items at the share asked: 1 of the 2 seed tasks, 1 of each round's 2 new tasks, each drawn once
    real = [p for p in pool if p.source == "real"]
    assert [p.round for p in real] == [0, 1, 2] and len({p.task_id for p in real}) == 3
    assert {p.task_id for p in real} <= set(train) and all(p.reference for p in real)
    # the split, by meeting and by input: pool (real and generated), dev set, every training and replay example
    assert not {p.content_hash for p in pool} & held_hashes
    assert not {train[p.task_id].group for p in real} & held_groups
    assert isinstance(setup, SelfEvolveSetupEvent)
    dev = family.generate(Seeds(cfg.seed + cfg.selfevolve.dev_seed_offset).numpy("selfevolve/dev"),
                          dict(task_settings(cfg, family).difficulty), cfg.selfevolve.dev_size)
    assert tuple(t.task_id for t in dev) == setup.dev_tasks  # the dev set, rebuilt
    assert not {t.content_hash for t in dev} & held_hashes and not {t.group for t in dev} - {None}
    assert trained, "no round trained"
    texts = [m["content"] for examples, replay in trained for e in examples + replay for m in e.messages]
    for t in held:
        assert not any(t.transcript.strip() in x for x in texts), t.task_id
    replay_answers = {e.messages[-1]["content"] for _, replay in trained for e in replay}
    assert any(train[p.task_id].reference_minutes in replay_answers for p in real if p.round == 0)
    # a real task drawn in a later round brings its reference into that round's replay
    assert len(trained) == 2
    for k, (_, replay) in enumerate(trained, start=1):
        answers = {e.messages[-1]["content"] for e in replay}
        assert all(train[p.task_id].reference_minutes in answers for p in real if p.round <= k)
    # the transfer comparison: both policies on the 3 items of 2 meetings, archived and printed
    t = summary.transfer
    assert t is not None and t.item_ids == ("transfer-0", "transfer-1", "transfer-2") and t.diff.n == 2
    assert t.base_id == setup.policy and t.final_id == summary.final_policy.id
    assert events["selfevolve_transfer"].verdict == t.verdict and "meta_transfer" in evals
    assert " ".join(t.verdict.split()) in " ".join(console.export_text().split())


def test_a_training_item_of_a_transfer_meeting_stops_the_run_before_any_model_loads(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    overrides = _real_overrides(tiny_model_dir, data)
    _write_real(data / "train.jsonl", 3, ["R1", "T2", "R2", "R3"])  # one window of a transfer meeting
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides)))
    with pytest.raises(DataError, match=r"item 'train-1' is of group 'T2', which the transfer set also holds"):
        run_selfevolve(cfg, run_dir=tmp_path / "run", console=Console(record=True))
    assert not (tmp_path / "run").exists()


def test_a_real_dev_set_is_held_out_of_the_pool_by_meeting(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``selfevolve.dev_source=real``: the dev set is training items of whole meetings that no pool task, replay or
    training example comes from; the keep-or-revert gate reads them."""
    data = tmp_path / "data"
    data.mkdir()
    overrides = [*_real_overrides(tiny_model_dir, data), "selfevolve.dev_source=real", "selfevolve.dev_size=1",
                 "selfevolve.rounds=1", "selfevolve.transfer_limit=0"]
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides)))
    trained: list[tuple] = []

    def recording(backend, examples, replay, lora, out_dir, **kw):
        trained.append((list(examples), list(replay)))
        return train_lora(backend, examples, replay, lora, out_dir, **kw)

    summary = run_selfevolve(cfg, run_dir=tmp_path / "run", console=Console(record=True, width=200), train=recording)
    train = {t.task_id: t for t in MeetingMinutes().load_validation(data / "train.jsonl")}
    with ArchiveStore(summary.archive, read_only=True) as ro:
        pool = ro.selfevolve_pool(summary.run_id)
        (setup,) = [e.event for e in ro.events(summary.run_id) if e.kind == "setup"]
    (dev_id,) = setup.dev_tasks
    dev = train[dev_id]  # a training window, not a generated meeting
    assert not any(train[p.task_id].group == dev.group for p in pool if p.source == "real")
    texts = [m["content"] for examples, replay in trained for e in examples + replay for m in e.messages]
    assert not any(dev.transcript.strip() in x for x in texts)


def test_the_gate_can_read_the_meta_validation_items(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``selfevolve.dev_source=validation``: the dev set is the meta-validation items the rounds report, scored once a
    round (no separate meta-validation phase, dev score = S_val), and every training item stays in reach of the pool."""
    data = tmp_path / "data"
    data.mkdir()
    overrides = [*_real_overrides(tiny_model_dir, data), "selfevolve.dev_source=validation", "selfevolve.rounds=1",
                 "selfevolve.transfer_limit=0", "selfevolve.real_share=1.0"]
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides)))
    summary = run_selfevolve(cfg, run_dir=tmp_path / "run", console=Console(record=True, width=200))
    with ArchiveStore(summary.archive, read_only=True) as ro:
        (setup,) = [e.event for e in ro.events(summary.run_id) if e.kind == "setup"]
    assert setup.dev_tasks == setup.val_items and len(setup.dev_tasks) == 1
    assert summary.baseline_dev == summary.baseline_val
    (r,) = summary.rounds
    assert r.dev_score == r.val_score and "meta-val" not in r.timings and "dev" in r.timings
    assert setup.dev_tasks[0] not in setup.seed_tasks and len(setup.seed_tasks) == 2
