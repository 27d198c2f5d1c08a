"""``mode=distill`` end to end on a tiny random Llama: the real backend, LoRA trainer and archive; ``mode=evaluate``
then reads the distilled student from its export folder and from the archive (the command line's dispatch to this
mode: tests/test_command_line.py)."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf
from rich.console import Console

from evotrainer.archive.store import ArchiveStore
from evotrainer.config import PACKAGE_DATA, Config, to_config
from evotrainer.distill.run import run_distill
from evotrainer.evaluate.run import run_evaluate
from evotrainer.genome import load_population


def _data(tmp_path: Path) -> tuple[Path, Path]:
    """Training and comparison items: short written items the first two (the meta-validation set here) are not."""
    lines = (PACKAGE_DATA / "validation_set" / "meeting_minutes.jsonl").read_text(encoding="utf-8").splitlines()
    train, transfer = tmp_path / "train.jsonl", tmp_path / "transfer.jsonl"
    train.write_text("\n".join(lines[2:4]) + "\n", encoding="utf-8")
    transfer.write_text("\n".join(lines[4:6]) + "\n", encoding="utf-8")
    return train, transfer


def _overrides(model: Path, train: Path, transfer: Path) -> list[str]:
    return [f"model.path={model}", "model.dtype=float32", "model.max_context=1024", "decoding.max_new_tokens=8",
            "task.validation_limit=2", f"task.train_path={train}", f"task.transfer_path={transfer}",
            "distill.lora.steps=2", "distill.lora.batch_size=2", "distill.lora.rank=4", "distill.lora.max_length=1024",
            "distill.lora.lr=0.05"]  # a large step, so two steps move the random model's greedy text


def test_distill_trains_exports_and_compares_on_tiny_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    train, transfer = _data(tmp_path)
    run = tmp_path / "run"
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist([
        "mode=distill", "task.plain_prompt=Summarize the meeting.", "distill.teacher=secretary_markdown",
        *_overrides(tiny_model_dir, train, transfer)])))
    console = Console(record=True, width=200)
    run_distill(cfg, run_dir=run, console=console)
    text = console.export_text()
    assert "paired differences a − b" in text and "prompt tokens per call: teacher" in text

    doc = json.loads((run / "distill.json").read_text(encoding="utf-8"))
    assert list(doc["arms"]) == ["plain", "teacher", "student"]  # the student's prompt is the plain prompt
    assert [(c["a"], c["b"]) for c in doc["comparisons"]] == [("student", "teacher"), ("student", "plain"),
                                                              ("teacher", "plain")]
    assert all(c["wins"] + c["losses"] + c["ties"] == 2 for c in doc["comparisons"])
    t = doc["training"]
    assert t["items"] == 2 and t["kept"] + sum(t["dropped"].values()) == 2 and len(t["losses"]) == 2
    tokens = doc["prompt_tokens"]
    arms = doc["arms"]
    assert arms["teacher"]["prompt_tokens_per_call"]["policy"] > arms["student"]["prompt_tokens_per_call"]["policy"] > 0
    assert 0 < tokens["share_of_policy_tokens"] < 1 and tokens["saved_per_call"] > 0
    assert set(doc["timings"]) == {"load", "teacher", "train", "export", "score", "tokens", "total"}
    assert [i["id"] for i in doc["items"]] == [json.loads(line)["id"] for line in transfer.read_text().splitlines()]

    export = run / "student"
    assert {"prompt.md", "policy.json", "adapter_config.json", "adapter_model.safetensors"} <= {
        p.name for p in export.iterdir()}
    assert (export / "prompt.md").read_text(encoding="utf-8").strip() == "Summarize the meeting."
    assert not list(run.glob(".distill-train-*"))  # the training scratch folder is gone
    with ArchiveStore(run / "archive.db", read_only=True) as store:
        (info,) = store.list_runs()
        student = store.get_policy(info.run_id, doc["student"])
        assert student.adapter == "student" and student.parent_ids == ("plain_prompt", "secretary_markdown")
        kinds = [r.kind for r in store.evaluations(info.run_id)]
        assert kinds == ["meta_transfer"] * 3

    # mode=evaluate reads the student from its export folder and from the archive; the adapter moves its text
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist([
        *_overrides(tiny_model_dir, train, transfer), "mode=evaluate", f"evaluate.dataset={transfer}",
        f"evaluate.policies=[plain_summary,{export},archive:{doc['student']}]", f"evaluate.archive={run}"])))
    out = run_evaluate(cfg, run_dir=tmp_path / "evaluate", console=Console(record=True, width=200))
    plain, exported, archived = out.results
    assert exported.ref.policy.adapter == archived.ref.policy.adapter == str(export.resolve())
    assert exported.ref.policy.genome_hash == archived.ref.policy.genome_hash
    assert exported.evaluation.outputs != plain.evaluation.outputs  # same prompt: the adapter made the difference
    assert list(exported.evaluation.per_item) == [i["student"] for i in doc["items"]]


def test_a_seed_student_adds_its_prompt_alone_as_an_arm(tiny_model_dir: Path, tmp_path: Path) -> None:
    train, transfer = _data(tmp_path)
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist([
        *_overrides(tiny_model_dir, train, transfer), "mode=distill", "task.plain_prompt=Summarize the meeting.",
        "distill.teacher=secretary_markdown", "distill.student=terse", "distill.train_limit=1", "distill.eval_limit=1",
        "distill.lora.steps=1", "distill.results=small"])))
    out = run_distill(cfg, run_dir=tmp_path / "run", console=Console(record=True, width=200))
    assert list(out.arms) == ["plain", "teacher", "student_prompt", "student"]
    assert [(c.a, c.b) for c in out.comparisons][2] == ("student", "student_prompt")
    terse = next(p for p in load_population(PACKAGE_DATA / "populations" / "meeting_minutes.yaml") if p.id == "terse")
    assert out.student.sections == terse.sections
    assert out.student.adapter == str((tmp_path / "run" / "student").resolve())
    assert len(out.kept.kept) + sum(out.kept.dropped.values()) == 1 and out.train.steps == 1
    doc = json.loads((tmp_path / "run" / "small.json").read_text(encoding="utf-8"))
    assert doc["student_prompt"] == "terse" and len(doc["items"]) == 1


def test_the_training_references_can_be_the_teacher(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``distill.teacher=reference``: the training items' written references are the SFT targets (no teacher
    rollouts, no teacher arm); the student is compared with the plain prompt alone."""
    train, transfer = _data(tmp_path)
    cfg = to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist([
        *_overrides(tiny_model_dir, train, transfer), "mode=distill", "task.plain_prompt=Summarize the meeting.",
        "distill.teacher=reference"])))
    console = Console(record=True, width=200)
    out = run_distill(cfg, run_dir=tmp_path / "run", console=console)
    assert list(out.arms) == ["plain", "student"]
    assert [(c.a, c.b) for c in out.comparisons] == [("student", "plain")]
    refs = [json.loads(line)["reference_minutes"] for line in train.read_text().splitlines()]
    assert [text for _, text in out.kept.kept] == refs and out.kept.dropped == {}
    assert "teacher" not in out.timings and out.student.parent_ids == ("plain_prompt",)
    doc = json.loads((tmp_path / "run" / "distill.json").read_text(encoding="utf-8"))
    assert doc["teacher"] == "the training references" and doc["training"]["teacher_s_val_on_training_references"] is None
    assert "saved_per_call" not in doc["prompt_tokens"]
    assert "prompt tokens per call" not in console.export_text()
