"""``mode=evaluate``: score policies on a dataset; overall, per-source and per-length tables.

Read top to bottom, :func:`run_evaluate` does: load the dataset (any shape a family with the datasets capability
reads, :class:`~evotrainer.tasks.base.Datasets`; else its validation loader)
-> resolve the policies (seed names, archived ids, exported folders; :mod:`evotrainer.run.policy_refs`)
-> one batched rollout of every policy x item -> per-policy intervals and per-stratum means
(:mod:`evotrainer.evaluate.report`) -> optional generalisation comparison (best seed vs a policy,
paired bootstrap) -> tables on the console and result files in the run folder.

Defaults keep the old behaviour: with no ``evaluate.*`` keys it ranks the seed population (or
``evaluation.policies``) on ``task.validation_path`` (first ``task.validation_limit`` items).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evotrainer.archive.store import archive_path
from evotrainer.backends.base import LLM, Embedder
from evotrainer.backends.call_log import CallLog, LoggedLLM, ReportsServedModel, model_identity
from evotrainer.backends.embedder import shared_embedder
from evotrainer.config import Config, resolve_path
from evotrainer.errors import ConfigError, DataError
from evotrainer.evaluate.report import (
    Comparison,
    PolicyResult,
    compare,
    item_strata,
    render_comparison,
    render_groups,
    render_handling,
    shown_kinds,
    summarise,
    write_results,
)
from evotrainer.genome import load_population
from evotrainer.input_handling import InputHandling, handling_summary
from evotrainer.progress import stdout_console, task
from evotrainer.rollout import MetaEvaluation, RolloutEvaluator
from evotrainer.run.gene_support import check_policy_backend
from evotrainer.run.policy_refs import PolicyRef, resolve_policy_ref, resolve_policy_refs
from evotrainer.run.runtime import build_family, build_llm, load_seed_population, sampling_from
from evotrainer.stats.bootstrap import bootstrap_interval
from evotrainer.tasks.base import Datasets, EmbeddingMeta, Task, TaskFamily

__all__ = ["EvaluateOutcome", "bootstrap_interval", "load_eval_items", "render_table", "run_evaluate",
           "select_policies"]

log = logging.getLogger(__name__)
_COMPARE_PREFIX = "best_seed_vs:"
_KIND_TITLES = {"source": "per source", "domain": "per domain"}  # "length": per the family's size_name


@dataclass(frozen=True)
class EvaluateOutcome:
    """What one ``mode=evaluate`` run produced.

    Attributes:
        results: per-policy results, in evaluation order.
        comparison: the generalisation comparison, or None.
        files: result files written (empty when there is no run folder).
    """

    results: tuple[PolicyResult, ...]
    comparison: Comparison | None
    files: tuple[Path, ...]


def render_table(results: Sequence[PolicyResult], *, title: str, parts: Sequence[tuple[str, str]] = ()) -> Table:
    """A ranked rich table: rank, policy, S_val with its bootstrap interval, the meta score's ``parts`` (``(part,
    column title)``, a column when some result has that part; ``FamilySpec.report_parts``), tokens, seconds, and
    how its items were read (``6 whole, 2 windowed, 1 cut``; :mod:`evotrainer.input_handling`)."""
    table = Table(title=title)
    shown = [(p, t) for p, t in parts if any(p in r.evaluation.parts for r in results)]
    cols = ("rank", "policy", "S_val", "interval", *(t for _, t in shown), "degenerate", "tokens", "seconds",
            "items read")
    for col in cols:
        table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=col == "policy")
    for rank, r in enumerate(sorted(results, key=lambda r: -r.mean), 1):
        ev, got = r.evaluation, r.evaluation.parts
        table.add_row(
            str(rank), escape(r.label),
            "failed" if ev.s_val is None else f"{ev.s_val:.4f}",
            f"[{r.low:.3f}, {r.high:.3f}]",
            *(f"{got[p]:.4f}" if p in got else "-" for p, _ in shown),
            f"{got.get('degenerate', 0.0):.2f}",
            str(ev.generated_tokens), f"{ev.seconds:.1f}", escape(handling_summary(ev.handling)) or "-",
        )
    return table


def load_eval_items(cfg: Config, family: TaskFamily) -> tuple[list[Task], Path, str]:
    """The dataset of ``evaluate.dataset`` (else ``task.validation_path``), first N items, read by the
    family (``Datasets.load_dataset``, e.g. JSONL files or a folder; a family without that capability reads
    JSONL with ``TaskFamily.load_validation``).

    N is ``evaluate.limit``, else ``task.validation_limit``; the field map is ``evaluate.field_map``,
    else ``task.field_map``.

    Returns:
        (items, resolved path, shape "jsonl" | "folder").

    Raises:
        ConfigError: the path does not exist (names the key), bad format / field map.
        DataError: malformed data (``file:LINE`` and what was expected) or no items.
    """
    e = cfg.evaluate
    key = "evaluate.dataset" if e.dataset else "task.validation_path"
    path = resolve_path(e.dataset or cfg.task.validation_path, key)
    field_map = dict(e.field_map) or dict(cfg.task.field_map)
    limit = e.limit if e.limit is not None else cfg.task.validation_limit
    if isinstance(family, Datasets):
        items, shape = family.load_dataset(path, fmt=e.format, field_map=field_map, limit=limit,
                                           field_map_key="evaluate.field_map" if e.field_map else "task.field_map")
        return items, path, shape
    if e.format not in ("auto", "jsonl") or path.is_dir():
        raise ConfigError(f"evaluate.format: the {family.name!r} family reads JSONL files only, got "
                          f"{'a folder' if path.is_dir() else repr(e.format)}")
    items = family.load_validation(path, limit=limit, field_map=field_map)
    if not items:
        raise DataError(f"{path}: no items (the file is empty or blank)")
    return items, path, "jsonl"


def select_policies(cfg: Config) -> tuple[list[PolicyRef], PolicyRef | None]:
    """The policies to evaluate and the comparison target (None without ``evaluate.compare``).

    ``evaluate.policies`` when set, else ``evaluation.policies`` (seed names), else every seed. With
    ``evaluate.compare=best_seed_vs:<ref>`` every seed is evaluated when the list names none, and the
    target is added when it is not in the list.

    Raises:
        ConfigError / ArchiveError / DataError: an unresolvable reference (names the key).
    """
    e = cfg.evaluate
    seeds = load_population(resolve_path(cfg.evaluation.population_path, "evaluation.population_path"))
    if e.policies:
        refs = resolve_policy_refs(list(e.policies), seeds=seeds, archive=e.archive)
    else:
        chosen = load_seed_population(cfg)  # honours evaluation.policies (its errors name that key)
        refs = [PolicyRef(p.id, p.id, "seed", p) for p in chosen]
    target = None
    if e.compare:
        ref = e.compare[len(_COMPARE_PREFIX):].strip()
        if not any(r.kind == "seed" for r in refs):
            refs = [PolicyRef(p.id, p.id, "seed", p) for p in seeds] + refs
        target = next((r for r in refs if r.ref == ref), None)
        if target is None:
            target = resolve_policy_ref(ref, seeds=seeds, archive=e.archive, key="evaluate.compare")
            if target.label in {r.label for r in refs}:
                target = next(r for r in refs if r.label == target.label)
            else:
                refs.append(target)
    return refs, target


def _run_dir(run_dir: str | Path | None) -> Path | None:
    if run_dir is not None:
        return Path(run_dir)
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:  # not under a Hydra app (a library call): no files
        return None


def _call_log(cfg: Config, folder: Path | None) -> CallLog | None:
    """The call log ``archive.call_log`` names (relative: under the run folder, else the current folder), or None
    without the key: evaluate mode logs nothing unless asked."""
    if not cfg.archive.call_log:
        return None
    return CallLog(archive_path(cfg.archive.call_log, folder if folder is not None else Path.cwd()))


def _logged(llm: LLM, calls: CallLog, model_cfg: Any) -> LoggedLLM:
    """``llm`` answering from ``calls`` where it can; requests naming an adapter are neither served nor logged
    (an adapter folder's weights are not fixed by its path)."""
    served = llm.served_model() if isinstance(llm, ReportsServedModel) else None
    return LoggedLLM(llm, calls, model_identity(model_cfg, served), log_adapters=False)


def run_evaluate(
    cfg: Config, *, run_dir: str | Path | None = None, llm: LLM | None = None, embedder: Embedder | None = None,
    console: Console | None = None,
) -> EvaluateOutcome:
    """Score policies on a dataset and print overall, per-source, per-length (and comparison) tables.

    Args:
        cfg: the run config (``evaluate.*``, ``task.*``, ``evaluation.*``, ``decoding.*``, ``model``; with
            ``archive.call_log`` set, answers are served from and written to that call log, one call per policy).
        run_dir: where result files go (default: the Hydra run folder; none outside Hydra).
        llm: the policy model (built from ``cfg.model`` when None).
        embedder: the meta metric's embedder when ``inner.use_embedder`` is true and the family takes one for
            these items (:meth:`~evotrainer.tasks.base.EmbeddingMeta.with_embedder`; MiniLM is loaded then when
            None).
        console: where tables go (default: stdout; 200 columns when not a terminal).

    Returns:
        The per-policy results, the comparison and the files written.

    Raises:
        ConfigError, DataError, ArchiveError, ModelError: bad keys, data, references or model.
    """
    console = console or stdout_console()
    e = cfg.evaluate
    family = build_family(cfg)
    items, path, shape = load_eval_items(cfg, family)
    strata = item_strata(items, family)
    refs, target = select_policies(cfg)
    console.print(f"[bold]evaluate[/]: {len(refs)} policies × {len(items)} items from {escape(str(path))} "
                  f"({shape}; max {cfg.decoding.max_new_tokens} new tokens)")
    notes, data_facts = family.describe_items(items) if isinstance(family, Datasets) else ([], {})
    for line in notes:
        console.print(escape(line))

    # The run's embedder (inner.use_embedder) goes to the metric when the family takes one for these items.
    embedded = None
    if cfg.inner.use_embedder and isinstance(family, EmbeddingMeta):
        embedded = family.with_embedder(items, (lambda: embedder) if embedder is not None else shared_embedder)
    family = embedded or family
    t0 = time.perf_counter()
    if llm is None:
        llm = build_llm(cfg.model, executor=cfg.executor)  # progress: the evotrainer.progress task below
    load_s = time.perf_counter() - t0

    policies = [r.policy for r in refs]
    check_policy_backend(llm, cfg, policies)  # a server that cannot honour a policy's genes: refused here
    folder = _run_dir(run_dir)
    calls = _call_log(cfg, folder)
    logged = llm if calls is None else _logged(llm, calls, cfg.model)
    evaluator = RolloutEvaluator(logged, family, sampling=sampling_from(cfg.decoding, seed=cfg.seed))
    t0 = time.perf_counter()
    try:
        with task(f"evaluate: {len(refs)} policies on {len(items)} items",
                  len({p.genome_hash for p in policies}) * len(items), console=console):
            # with a call log, one call per policy, so a policy whose answers are all logged is served whole
            evaluations: list[MetaEvaluation] = (
                evaluator.meta_evaluate(policies, items) if calls is None else
                [e for p in policies for e in evaluator.meta_evaluate([p], items)])
    finally:
        if calls is not None:
            calls.close()
    wall = time.perf_counter() - t0
    if calls is not None:
        console.print(f"call log {escape(str(calls.path))}: {logged.replayed} answers served from it, "
                      f"{logged.generated} generated")

    stats = {"seed": cfg.seed, "n_resamples": e.bootstrap, "level": e.level}
    results = summarise(refs, evaluations, items, strata=strata, **stats)
    pct = f"{round(e.level * 100)}%"
    console.print(render_table(results, title=f"S_val on {len(items)} items (higher is better; {pct} bootstrap "
                                              "intervals over items)", parts=family.spec.report_parts))
    for kind in shown_kinds(strata):
        title = _KIND_TITLES.get(kind, f"per {family.spec.texts.size_name}")
        console.print(render_groups(results, kind, title=f"S_val {title} (mean; best in bold)"))
    _report_handling(results, items, console)
    comparison = _comparison(results, target, items, strata, stats, console)
    n_gen = len(refs) * len(items)
    tokens = sum(r.generated_tokens for r in evaluations)
    console.print(
        f"model {getattr(llm, 'name', cfg.model.path)}: load {load_s:.1f} s; generation+scoring {wall:.1f} s for {n_gen} outputs: "
        f"{wall / max(n_gen, 1):.2f} s per output, {tokens / max(wall, 1e-9):.1f} generated tokens/s"
    )
    best = max(results, key=lambda r: r.mean)
    if cfg.evaluation.show_best_output and best.evaluation.outputs:
        console.rule(f"best policy {escape(best.label)}: output on {escape(items[0].task_id)}")
        console.print(best.evaluation.outputs[0], markup=False, highlight=False)

    files: tuple[Path, ...] = ()
    if folder is not None:
        header = {"dataset": str(path), "format": shape, "seed": cfg.seed, "bootstrap": e.bootstrap,
                  "level": e.level, "model": getattr(llm, "name", cfg.model.path),
                  "max_new_tokens": cfg.decoding.max_new_tokens,
                  "metric": {"scorer_version": family.spec.scorer_version, "embedder": embedded is not None},
                  **data_facts}
        files = tuple(write_results(folder, e.results, header=header, results=results, items=items,
                                    comparison=comparison, strata=strata))
        console.print(f"results: {escape(str(files[0]))} (+ {files[1].name}, {files[2].name})")
    return EvaluateOutcome(tuple(results), comparison, files)


def _report_handling(results: Sequence[PolicyResult], items: Sequence[Task], console: Console) -> None:
    """How each item was read (a table when any was not read whole), and one warning line per item whose
    input lost words, naming the item (no cut goes unsaid)."""
    table = render_handling(results, items, title="how each item was read")
    if table is None:
        console.print(f"every item was read whole by every policy ({len(items)} items)")
        return
    console.print(table)
    for k, item in enumerate(items):
        cuts = [InputHandling.parse(r.evaluation.handling[k]) for r in results
                if len(r.evaluation.handling) == len(items)]
        cuts = [h for h in cuts if h.lost_words]
        if cuts:
            worst = min(cuts, key=lambda h: -1.0 if h.share_seen is None else h.share_seen)
            console.print(f"[yellow]warning[/]: item {escape(item.task_id)} ({item.size} words) was cut for "
                          f"{len(cuts)} of {len(results)} policies: {escape(worst.label())}; its output is scored "
                          "against the whole reference")


def _comparison(results: Sequence[PolicyResult], target: PolicyRef | None, items: Sequence[Task],
                strata: Sequence[Mapping[str, str]], stats: dict[str, Any], console: Console) -> Comparison | None:
    """Best seed (by this dataset's score) vs ``target``; prints the table. None without a target."""
    if target is None:
        return None
    seeds = [r for r in results if r.ref.kind == "seed" and r.label != target.label]
    if not seeds:
        raise ConfigError("evaluate.compare: no seed policy to compare against; list seeds in evaluate.policies")
    base = max(seeds, key=lambda r: r.mean)
    other = next((r for r in results if r.label == target.label), None)
    if other is None:  # cannot happen: select_policies adds the target
        raise DataError(f"evaluate.compare: {target.ref!r} was not evaluated")
    comp = compare(base, other, items, strata=strata, **stats)
    console.print(render_comparison(comp, level=stats["level"]))
    console.print("note: the best seed is picked on this same dataset, so its score is optimistic "
                  "(winner's curse); a difference whose interval holds 0 is noise.")
    return comp
