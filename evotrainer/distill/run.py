"""``mode=distill``: an elite prompt distilled into a LoRA adapter used under a short prompt, top to bottom.

    data and policies -> the teacher writes outputs on the training items (greedy; the family's guard drops
    degenerate ones) -> SFT examples under the student's short prompt -> LoRA fine-tune (no replay)
    -> export (prompt + adapter) and archive -> score the arms on the comparison items -> prompt tokens per call
    -> paired differences, table, result file

Training items (``task.train_path``) never share a group or an input with the meta-validation or transfer items
(:func:`~evotrainer.run.runtime.load_training`), nor with ``distill.dataset`` when that is set. The arms and their
comparison: :mod:`evotrainer.distill.report`. Method: sequence-level knowledge distillation (Kim & Rush 2016,
https://arxiv.org/abs/1606.07947: the student learns the teacher's greedy outputs) with the teacher's long prompt
as the thing distilled (prompt distillation; Askell et al. 2021, https://arxiv.org/abs/2112.00861, sec. 3.4).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from evotrainer.adapters.batches import capped_steps
from evotrainer.adapters.export import export_policy
from evotrainer.adapters.train import SFTExample, TrainResult, train_lora
from evotrainer.archive.recorder import RunRecorder
from evotrainer.archive.store import ArchiveStore, archive_path
from evotrainer.atomic import write_text_atomic
from evotrainer.backends.base import LLM, Message, split_prefill
from evotrainer.backends.chat_tokens import chat_ids
from evotrainer.backends.prompt_fit import ensure_system_turn
from evotrainer.config import Config, resolve_path
from evotrainer.distill.report import (
    ArmComparison,
    ArmScore,
    KeptOutputs,
    compare_arms,
    keep_outputs,
    prompt_tokens,
    render_arms,
    render_comparisons,
    result_json,
    score_arms,
    token_savings,
)
from evotrainer.errors import ConfigError, DataError
from evotrainer.events.kinds import PhaseEvent
from evotrainer.genome import Policy, load_population, render_system_prompt
from evotrainer.progress import stdout_console, task
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.policy_refs import resolve_policy_ref
from evotrainer.run.runtime import (
    build_family,
    build_llm,
    check_apart,
    load_seed_population,
    load_training,
    load_transfer,
    load_validation,
    sampling_from,
    task_settings,
)
from evotrainer.seeding import Seeds
from evotrainer.stats.transfer import plain_policy
from evotrainer.tasks.base import SelfEvolving, Task, TaskFamily

__all__ = ["DistillOutcome", "run_distill"]

EXPORT_FOLDER = "student"
"""The student's export folder in the run dir: ``prompt.md``, ``policy.json`` and the adapter's PEFT files."""

REFERENCE_TEACHER = "reference"
"""``distill.teacher`` value that trains on the training items' own written references (the family's
``reference_answer``, e.g. QMSum's human summaries) instead of a teacher prompt's outputs: supervised fine-tuning on
real references, with no teacher arm in the comparison."""


@dataclass(frozen=True)
class DistillOutcome:
    """What one ``mode=distill`` run produced.

    Attributes:
        run_id: the archive's run id.
        student: the student policy (short prompt + the export folder as its adapter).
        kept: the teacher outputs that trained, and what was dropped.
        train: the fine-tune's result.
        arms: each arm's score on the comparison items, by role.
        comparisons: the paired differences.
        timings: wall seconds per phase.
        files: the result file, the export folder, the archive.
    """

    run_id: str
    student: Policy
    kept: KeptOutputs
    train: TrainResult
    arms: dict[str, ArmScore]
    comparisons: tuple[ArmComparison, ...]
    timings: dict[str, float]
    files: tuple[Path, ...]


@contextmanager
def _phase(timings: dict[str, float], name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0


def run_distill(cfg: Config, *, run_dir: str | Path, config_dict: dict | None = None, llm: LLM | None = None,
                console: Console | None = None) -> DistillOutcome:
    """Distil ``distill.teacher`` into an adapter under ``distill.student``; compare the arms; write the results.

    Args:
        cfg: the validated config (``distill.*``, ``task.*``, ``evaluate.archive``/``bootstrap``/``level``,
            ``decoding.*``, ``model``).
        run_dir: the Hydra run dir: the archive, the export folder ``student/`` and ``<distill.results>.json``.
        config_dict: the resolved config for the archive (``asdict(cfg)`` when None).
        llm: the policy model's hf backend (built from ``cfg.model`` when None); it is trained through a wrapper
            and left as it was.
        console: where tables go (stdout when None).

    Raises:
        ConfigError: an unknown teacher or student (names ``distill.teacher`` / ``distill.student``), a family
            without training outputs (the SelfEvolving capability), a student carrying an adapter.
        DataError: missing or overlapping data, or no teacher output the guard passed.
        ArchiveError / ModelError: an unreadable archive reference, an unloadable model.
    """
    t_run = time.perf_counter()
    console = console or stdout_console()
    d, e, seeds = cfg.distill, cfg.evaluate, Seeds(cfg.seed)
    run_dir = Path(run_dir)
    timings: dict[str, float] = {}

    # ---- 1. data and policies: training items apart from every item that selects or reports ------------------
    family = build_family(cfg)
    if not isinstance(family, SelfEvolving):
        raise ConfigError(f"task.name: mode=distill trains on the family's outputs, and the {family.name!r} family "
                          "gives no training chats (the SelfEvolving capability)")
    validation = load_validation(cfg, family)
    transfer = load_transfer(cfg, family, validation)
    train_items = load_training(cfg, family, validation, transfer)[: d.train_limit]
    items, items_path = _comparison_items(cfg, family, transfer, train_items)
    seeds_pop = load_population(resolve_path(cfg.evaluation.population_path, "evaluation.population_path"))
    from_references = d.teacher.strip() == REFERENCE_TEACHER
    teacher = None if from_references else _teacher(cfg, seeds_pop)
    teacher_name = "the training references" if teacher is None else teacher.id
    student_prompt = _student_prompt(cfg, seeds_pop)
    plain = plain_policy(cfg.task.plain_prompt)
    console.print(f"[bold]distill[/]: teacher {escape(teacher_name)} -> student prompt {escape(student_prompt.id)} "
                  f"+ adapter; {len(train_items)} training items, {len(items)} comparison items from "
                  f"{escape(str(items_path))}")

    # ---- 2. the policy model --------------------------------------------------------------------------------
    with _phase(timings, "load"):
        backend = llm if llm is not None else build_llm(cfg.model)
    evaluator = RolloutEvaluator(backend, family, sampling=sampling_from(cfg.decoding, seed=seeds.int("decoding")))

    # ---- 3. the teacher writes on the training items (or their references train); degenerate outputs dropped ------
    teacher_s_val = None
    if teacher is None:
        kept = _references(family, train_items)
    else:
        with _phase(timings, "teacher"), task(f"teacher {teacher.id} on {len(train_items)} training items",
                                              len(train_items), console=console):
            written = evaluator.evaluate([teacher], train_items, task_settings(cfg, family).reward_weights)[0]
            graded = evaluator.meta_evaluate([teacher], train_items)[0]  # the same outputs against the references
        kept = keep_outputs(train_items, written.outputs, written.per_task, written.degenerate)
        teacher_s_val = graded.s_val
    dropped = ", ".join(f"{n} {why}" for why, n in kept.dropped.items()) or "none"
    graded_text = "" if teacher is None else f"; their S_val against the training references {teacher_s_val or 0.0:.4f}"
    console.print(f"teacher outputs: {len(kept.kept)}/{len(train_items)} kept (dropped: {dropped}){graded_text}")
    if not kept.kept:
        why = "" if teacher is None else _why(written.error)
        raise DataError(f"mode=distill: none of the {len(train_items)} {'references' if teacher is None else 'teacher outputs'} "
                        f"on task.train_path passed the family's guard (dropped: {dropped}){why}")

    # ---- 4. SFT examples under the student's short prompt; LoRA fine-tune, no replay -----------------------------
    examples = [SFTExample(chat, "distill") for item, text in kept.kept
                for chat in family.training_chats(student_prompt.sections, item, text)]
    run_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".distill-train-", dir=run_dir))
    try:
        steps = capped_steps(len(examples), 0, d.lora)
        with _phase(timings, "train"), task(f"LoRA on {len(examples)} examples", steps, console=console,
                                            unit="steps"):
            trained = train_lora(backend, examples, [], d.lora, scratch, rng=seeds.numpy("distill/train"))

        # ---- 5. export the student (prompt + adapter) where mode=evaluate reads it; archive the policies ------
        with _phase(timings, "export"):
            export = run_dir / EXPORT_FOLDER
            student = _student(teacher, student_prompt, export.resolve(), cfg.seed)
            export_policy(render_system_prompt(student.sections), trained.adapter_dir, export,
                          meta={"teacher": teacher_name, "student_prompt": student_prompt.id,
                                "model": getattr(backend, "name", cfg.model.path), "train_items": len(train_items),
                                "examples": len(examples), "losses": list(trained.losses)},
                          policy=_policy_doc(student))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    config_dict = config_dict if config_dict is not None else asdict(cfg)
    run_id = _run_id(cfg, config_dict)
    db_path = archive_path(cfg.archive.path, run_dir)
    store = ArchiveStore(db_path)
    rec = RunRecorder(store, run_id)
    rec.start(cfg.seed, config_dict)
    arms = _arms(plain, teacher, student_prompt, student)
    rec.policies([replace(p, adapter=EXPORT_FOLDER) if p is student else p for p in arms.values()])

    # ---- 6. the arms on the comparison items (one batched call), archived as transfer scores -----------------
    with _phase(timings, "score"), task(f"{len(arms)} arms on {len(items)} comparison items",
                                        len(arms) * len(items), console=console):
        evaluations = evaluator.meta_evaluate(list(arms.values()), items)
    for ev in evaluations:
        rec.meta(ev, kind="meta_transfer")

    # ---- 7. prompt tokens per call, the paired comparisons, the result file --------------------------------------
    with _phase(timings, "tokens"):
        count = _prompt_counter(backend)
        tokens = {role: prompt_tokens(count, family.build_messages, p.sections, items) for role, p in arms.items()}
    stats = {"seed": cfg.seed, "level": e.level, "n_resamples": e.bootstrap}
    scores = score_arms({r: p.id for r, p in arms.items()}, {r: ev.per_item for r, ev in zip(arms, evaluations,
                                                                                             strict=True)},
                        tokens, **stats)
    groups = [t.group or t.task_id for t in items]
    comparisons = compare_arms(scores, groups, **stats)
    savings = token_savings(tokens["teacher"], tokens["student"]) if "teacher" in tokens else {}
    timings["total"] = time.perf_counter() - t_run
    header = {
        "run_id": run_id, "model": getattr(backend, "name", cfg.model.path), "seed": cfg.seed,
        "dataset": str(items_path), "bootstrap": e.bootstrap, "level": e.level,
        "max_new_tokens": cfg.decoding.max_new_tokens, "scorer_version": family.spec.scorer_version,
        "teacher": teacher_name, "student": student.id, "student_prompt": student_prompt.id,
        "export": str(export), "training": {
            "items": len(train_items), "kept": len(kept.kept), "dropped": dict(kept.dropped),
            "teacher_s_val_on_training_references": teacher_s_val, "examples": len(examples),
            "skipped_examples": trained.skipped_examples, "steps": trained.steps, "losses": list(trained.losses),
            "answer_tokens": trained.answer_tokens, "lora": asdict(d.lora)},
        "prompt_tokens": {"method": "the family's opening chat of each comparison item through the model's chat "
                                    "template; policy tokens = that count minus the same chat with empty prompt "
                                    "sections", **savings},
        "timings": timings,
    }
    results = run_dir / f"{d.results}.json"
    write_text_atomic(results, result_json(header, scores, comparisons, [t.task_id for t in items], groups))
    rec.emit(PhaseEvent(name="distill", fields=dict(timings)))
    store.close()

    console.print(render_arms(scores, level=e.level))
    console.print(render_comparisons(comparisons, level=e.level))
    share = savings.get("share_of_policy_tokens")
    if savings:
        console.print(f"prompt tokens per call: teacher {tokens['teacher'].total:.0f} ({tokens['teacher'].policy:.0f} of "
                      f"its prompt), student {tokens['student'].total:.0f} ({tokens['student'].policy:.0f}); saved "
                      f"{savings['saved_per_call']:.0f} per call"
                      + (f", {share:.0%} of the teacher's prompt tokens" if share is not None else ""))
    console.print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    console.print(f"student: {export} (mode=evaluate reads it: evaluate.policies=[{export}]); results {results}; "
                  f"archive {db_path}", markup=False, highlight=False)
    return DistillOutcome(run_id, student, kept, trained, scores, tuple(comparisons), timings,
                          (results, export, db_path))


# --- steps ----------------------------------------------------------------------------------------------------


def _comparison_items(cfg: Config, family: TaskFamily, transfer: list[Task],
                      train_items: Sequence[Task]) -> tuple[list[Task], Path]:
    """``distill.dataset`` (first ``distill.eval_limit``; apart from the training items), else the transfer items."""
    d = cfg.distill
    if d.dataset is None:
        path = resolve_path(str(cfg.task.transfer_path), "task.transfer_path")
        items = transfer[: d.eval_limit]
    else:
        path = resolve_path(d.dataset, "distill.dataset")
        if path.is_dir():
            raise DataError(f"{path}: distill.dataset must be a JSONL file, got a folder")
        items = family.load_validation(path, limit=d.eval_limit, field_map=dict(cfg.task.field_map))
        if not items:
            raise DataError(f"{path}: no items in distill.dataset (the file is empty or blank)")
    check_apart(path, items, train_items, "training", "comparison")
    return items, path


def _teacher(cfg: Config, seeds: Sequence[Policy]) -> Policy:
    """``distill.teacher`` resolved (a seed, ``archive:<id>`` in ``evaluate.archive``, an export folder); "" is the
    first seed of ``evaluation.policies``."""
    if not cfg.distill.teacher.strip():
        return load_seed_population(cfg)[0]
    return resolve_policy_ref(cfg.distill.teacher, seeds=seeds, archive=cfg.evaluate.archive,
                              key="distill.teacher").policy


def _student_prompt(cfg: Config, seeds: Sequence[Policy]) -> Policy:
    """The student's short prompt: ``task.plain_prompt`` for "", else ``distill.student`` resolved (no adapter)."""
    ref = cfg.distill.student.strip()
    if not ref:
        plain = plain_policy(cfg.task.plain_prompt)
        if plain is None:
            raise ConfigError("config key 'distill.student': \"\" means task.plain_prompt, which is empty; name a seed "
                              "or an export folder")
        return plain
    policy = resolve_policy_ref(ref, seeds=seeds, archive=cfg.evaluate.archive, key="distill.student").policy
    if policy.adapter is not None:
        raise ConfigError(f"config key 'distill.student': {ref!r} carries an adapter ({policy.adapter}); the student "
                          "is a prompt alone, its adapter is the one this run trains")
    return policy


def _student(teacher: Policy | None, prompt: Policy, adapter: Path, seed: int) -> Policy:
    """The student: the short prompt with the distilled adapter, the teacher (when there is one) and the prompt as
    parents."""
    source = REFERENCE_TEACHER if teacher is None else teacher.genome_hash
    digest = hashlib.sha256(f"{source}|{prompt.genome_hash}|distill|{seed}".encode()).hexdigest()
    parents = (prompt.id,) if teacher is None else (prompt.id, teacher.id)
    return replace(prompt, id=f"distill-{digest[:10]}", parent_ids=tuple(dict.fromkeys(parents)),
                   operator="distill_lora", generation=1, root_id=prompt.root_id or prompt.id, adapter=str(adapter))


def _references(family: SelfEvolving, items: Sequence[Task]) -> KeptOutputs:
    """The training items' written references as the outputs that train; an item without one is dropped."""
    refs = [(item, family.reference_answer(item)) for item in items]
    missing = sum(1 for _, ref in refs if not (ref or "").strip())
    return KeptOutputs(tuple((item, ref) for item, ref in refs if ref and ref.strip()),
                       {"no reference": missing} if missing else {})


def _arms(plain: Policy | None, teacher: Policy | None, prompt: Policy, student: Policy) -> dict[str, Policy]:
    """The arms by role (no teacher arm when the references trained); the student's prompt alone only when it is
    not already the plain or the teacher arm."""
    arms = {"plain": plain, "teacher": teacher}
    if prompt.genome_hash not in {p.genome_hash for p in arms.values() if p is not None}:
        arms["student_prompt"] = prompt
    arms["student"] = student
    return {role: p for role, p in arms.items() if p is not None}


def _policy_doc(p: Policy) -> dict[str, Any]:
    """``policy.json``'s ``policy`` object (:func:`~evotrainer.run.policy_refs.load_exported_policy` reads it); the
    adapter is the export folder itself (``"."``)."""
    return {"id": p.id, "sections": [{"name": k, "text": v} for k, v in p.sections], "adapter": ".",
            "decoding": dict(p.decoding), "parent_ids": list(p.parent_ids), "operator": p.operator,
            "generation": p.generation, "root_id": p.root_id}


def _prompt_counter(backend: Any) -> Callable[[Sequence[Message]], int]:
    """Prompt tokens of a chat as the hf backend sends it (system turn ensured, chat template, prefill), uncut."""
    tokenizer = backend.tokenizer
    return lambda messages: len(chat_ids(tokenizer, *split_prefill(ensure_system_turn(messages))))


def _run_id(cfg: Config, config_dict: dict) -> str:
    blob = json.dumps(config_dict, sort_keys=True, default=str).encode()
    return f"di-s{cfg.seed}-{hashlib.sha256(blob).hexdigest()[:10]}"


def _why(error: str | None) -> str:
    return f"; {error}" if error else ""
