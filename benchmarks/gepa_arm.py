"""The ablation study's peer arm: GEPA's optimiser (the ``gepa`` package) on EvoTrainer's model, seed prompt,
training tasks, selection items and rollout budget, scored by EvoTrainer's evaluator (issue 25).

GEPA (Agrawal et al. 2025, "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement Learning",
arXiv:2507.19457; github.com/gepa-ai/gepa) evolves named text components with a reflection model that reads
minibatch feedback, keeps a per-item Pareto front on a validation set, and stops after ``max_metric_calls``
item evaluations. This script plugs EvoTrainer into it through ``gepa.optimize`` with a custom adapter
(``GEPAAdapter``: ``evaluate`` and ``make_reflective_dataset``) and pairs it with one finished run of
``+study=ablation`` of the same seed, from which it takes everything the arms must share:

- the config (model, decoding, task family, meta-validation split, transfer items, budget);
- the seed prompt: that run's best seed (its generation-0 winner, the start of every product arm); GEPA evolves
  its instruction sections (``role``, ``format``, ``rules``), its prefill and decoding genes stay;
- the model: the run's policy model (the embedded default unless the study sets another) as the task model,
  and the same model as GEPA's reflection model, sampled with the run's mutator settings (``inner.mutator_*``);
- training tasks: drawn at the run's start harness (difficulty, reward weights and share of real training meetings
  of its generation 0), scored by the harness reward as the inner loop scores them; GEPA reflects on these only;
- GEPA's validation set: the run's selection items, scored by S_val (its meta metric), as the racing does;
- the budget: ``outer.budget.rollouts`` less the rollouts the paired run spent in generation 0 to find the best
  seed (GEPA starts from it without paying for it again), counted as GEPA counts metric calls: one per
  (candidate, item) evaluated; the arm reports the rollouts its evaluator actually sent plus those of generation 0.

At the end the best seed, GEPA's best candidate (highest mean on its validation set) and the plain prompt are
scored on the held-out items and the transfer items by the same evaluator, and the arm writes an
``arm_result.json`` (:func:`evotrainer.stats.ablation.write_arm_result`) that ``archive sweep`` pools with the other arms:

    make install                   # the gepa package comes with the dev extra ('.[peers]' alone: pip install -e '.[peers]')
    .venv/bin/python -m benchmarks.gepa_arm --pair archive/multirun/<sweep>/0_coevolve_seed0
    .venv/bin/python -m evotrainer.archive sweep archive/multirun/<sweep>/   # the study table with a gepa row

``--out`` defaults to ``<sweep>/gepa_seed<S>``. Run it once per seed of the study (the pair can be any arm's
job of that seed: generation 0 is the same in every arm). The arm has no resume of its own: a killed arm started
again with the same command gets the model calls it already paid for back from the study's call log.
Progress: GEPA's own logger prints one line per iteration (the candidate it picked, the text it proposed, the
minibatch scores), and the arm reports rollouts spent of the budget, with rate and ETA (a bar on a terminal, a line
every 30 s in a log), then the held-out and transfer requests the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from evotrainer import progress
from evotrainer.archive.recorder import code_version
from evotrainer.archive.schema import budget_rollouts
from evotrainer.archive.store import open_archive
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.browse.views import run_generalisation
from evotrainer.config import Config, to_config
from evotrainer.errors import ConfigError, DataError
from evotrainer.events.kinds import SetupEvent
from evotrainer.evolve.llm_objective import task_batch
from evotrainer.genome import Policy, instruction_sections
from evotrainer.harness import space_from_specs
from evotrainer.rollout import RolloutEvaluator
from evotrainer.run.resume import RunFiles
from evotrainer.run.runtime import (
    build_family,
    build_llm,
    load_seed_population,
    load_training,
    load_transfer,
    load_validation,
    sampling_from,
    task_settings,
)
from evotrainer.run.validation_split import split_validation
from evotrainer.seeding import Seeds
from evotrainer.stats.ablation import ArmRun, ItemScores, write_arm_result
from evotrainer.stats.transfer import plain_policy, read_report
from evotrainer.tasks.base import SelfEvolving

__all__ = ["FamilyAdapter", "ReflectionModel", "run_gepa_arm"]

_CLIP_INPUT, _CLIP_OUTPUT, _CLIP_TRUTH = 900, 500, 500  # characters shown to the reflection model per example


def _clip(text: str, n: int) -> str:
    text = str(text).strip()
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass(frozen=True)
class _Item:
    """A GEPA data instance: a training task (scored by the harness reward) or a selection item (by S_val)."""

    kind: str  # "train" | "val"
    task: Any


class FamilyAdapter:
    """GEPA's adapter (``gepa.core.adapter.GEPAAdapter``) over EvoTrainer's evaluator and its task family.

    A candidate is ``{section name: text}`` of the seed's instruction sections; :meth:`policy` puts the texts
    back into the seed's genome (prefill and decoding genes kept). Training items score the harness reward under
    ``weights``, selection items S_val; a failed item scores 0.0 (GEPA: an example never raises).

    Args:
        evaluator: the run's rollout evaluator (its ``rollouts`` counts the requests sent; its ``family`` gives the
            reflection hints, ``spec.texts``, and with the self-evolution capability the items' truth).
        seed_policy: the best seed (its non-text genes are kept).
        weights: the start harness's reward weights, by component, on the simplex.
    """

    def __init__(self, evaluator: RolloutEvaluator, seed_policy: Policy, weights: Mapping[str, float]) -> None:
        self.evaluator, self.seed_policy, self.weights = evaluator, seed_policy, dict(weights)
        self.propose_new_texts = None  # GEPA's default reflective proposer, with our reflection model

    def policy(self, candidate: Mapping[str, str]) -> Policy:
        """The policy of ``candidate`` (the seed itself when nothing changed)."""
        sections = [(name, str(candidate.get(name, text))) for name, text in self.seed_policy.sections]
        if sections == list(self.seed_policy.sections):
            return self.seed_policy
        return self.seed_policy.child(sections, operator="gepa", generation=1)

    def evaluate(self, batch: list[_Item], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa import EvaluationBatch

        policy = self.policy(candidate)
        scores: list[float] = [0.0] * len(batch)
        outputs: list[str] = [""] * len(batch)
        traces: list[dict[str, Any]] = [{} for _ in batch]
        for kind in ("train", "val"):
            idx = [i for i, it in enumerate(batch) if it.kind == kind]
            if not idx:
                continue
            tasks = [batch[i].task for i in idx]
            if kind == "train":
                e = self.evaluator.evaluate([policy], tasks, self.weights)[0]
                values, parts = e.per_task, e.per_task_components or [{} for _ in tasks]
            else:
                m = self.evaluator.meta_evaluate([policy], tasks)[0]
                values, parts = m.per_item, [{} for _ in tasks]
                e = m
            for j, i in enumerate(idx):
                scores[i] = float(values[j]) if values[j] is not None else 0.0
                outputs[i] = e.outputs[j] if j < len(e.outputs) else ""
                traces[i] = {"task": batch[i].task, "parts": dict(parts[j]) if j < len(parts) else {},
                             "error": e.error}
        progress.advance(len(batch), unit="rollouts")
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traces if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Per component, the minibatch's examples: the input (clipped), the output (clipped, untrusted model
        text shown to the reflection model only) and feedback: the score, its low reward parts in plain words
        (the family's reflection hints), and the item's reference answer or ground truth. Training tasks only:
        GEPA never reflects on its validation set."""
        family = self.evaluator.family
        hints_of = family.spec.texts.reflection_hints
        records = []
        for trace, output, score in zip(eval_batch.trajectories or [], eval_batch.outputs, eval_batch.scores,
                                        strict=False):
            task = trace.get("task")
            low = sorted((v, k) for k, v in (trace.get("parts") or {}).items() if v < 0.5)
            hints = "; ".join(f"{k} {v:.2f}: {hints_of.get(k, k)}" for v, k in low)
            truth = _truth(family, task) if task is not None else ""
            records.append({
                "Inputs": {"input": _clip(task.text if task is not None else "", _CLIP_INPUT)},
                "Generated Outputs": _clip(output, _CLIP_OUTPUT) or "(empty)",
                "Feedback": f"score {score:.3f} of 1." + (f" Low parts: {hints}." if hints else "")
                            + (f" The item's ground truth: {_clip(truth, _CLIP_TRUTH)}" if truth else ""),
            })
        return {name: records for name in components_to_update}


def _truth(family: Any, task: Any) -> str:
    """The task's reference answer, else its ground truth as ``key: value`` pairs; "" for a family without the
    self-evolution capability."""
    if not isinstance(family, SelfEvolving):
        return ""
    return family.reference_answer(task) or "; ".join(
        f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in family.ground_truth(task).items())


class ReflectionModel:
    """GEPA's reflection LM (``LanguageModel``: prompt -> text) on EvoTrainer's model, sampled with the run's
    mutator settings and a per-call seed (calls are reproducible given their order)."""

    def __init__(self, llm: Any, params: SamplingParams, seed: int) -> None:
        self.llm, self.params, self.seed, self.calls = llm, params, int(seed), 0

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        messages = ({"role": "user", "content": prompt},) if isinstance(prompt, str) else tuple(
            {"role": str(m.get("role", "user")), "content": str(m.get("content", ""))} for m in prompt)
        self.calls += 1
        params = replace(self.params, seed=(self.seed * 1_000_003 + self.calls) % 2**31)
        return self.llm.generate([GenerationRequest(messages=messages, params=params)])[0].text


def _mutator_params(cfg: Config) -> SamplingParams:
    from evotrainer.evolve.llm_objective import inner_config

    return inner_config(cfg).mutator_params


@dataclass(frozen=True)
class _Pair:
    cfg: Config
    run_id: str
    seed_id: str
    selection_ids: tuple[str, ...]
    heldout_ids: tuple[str, ...]
    gen0_rollouts: int
    gen0_seconds: float
    transfer: Any


def _read_pair(pair: Path, model_path: str | None) -> _Pair:
    """What the arm shares with the paired run: config, best seed, item split, generation-0 cost."""
    archive = pair / "archive.db" if pair.is_dir() else pair
    with open_archive(archive) as store:
        runs = store.list_runs()
        if not runs:
            raise DataError(f"{archive}: no run")
        run = runs[-1]
        gen = run_generalisation(store, run.run_id)
        if gen is None:
            raise DataError(f"{archive}: run {run.run_id} has not finished (no generalisation event)")
        setups = [e.event for e in store.events(run.run_id, kind="setup") if isinstance(e.event, SetupEvent)]
        rows = [r for r in store.evaluations(run.run_id) if r.harness_id == "h0"]
        transfer, _ = read_report(store.events(run.run_id, kind="transfer"))
    config = dict(run.config)
    if model_path is not None:
        config.setdefault("model", {})["path"] = model_path
    cfg = to_config(OmegaConf.create(config))
    if not setups:
        raise DataError(f"{archive}: run {run.run_id} has no setup event")
    return _Pair(cfg, run.run_id, gen.baseline_id, tuple(setups[-1].selection_items),
                 tuple(setups[-1].heldout_items), sum(budget_rollouts(r) for r in rows),
                 sum(r.seconds for r in rows), transfer)


def run_gepa_arm(pair: str | Path, out: str | Path | None = None, *, budget: int | None = None,
                 train_tasks: int = 12, minibatch: int = 3, model_path: str | None = None) -> ArmRun:
    """Run GEPA paired with the study run in ``pair`` (module docstring) and write its ``arm_result.json``.

    Args:
        pair: a finished ``+study=ablation`` job folder (or its ``archive.db``).
        out: the arm's folder; default ``<sweep>/gepa_seed<S>`` beside the pair.
        budget: total rollouts (default the pair's ``outer.budget.rollouts``); GEPA gets this less the pair's
            generation-0 rollouts as ``max_metric_calls``.
        train_tasks: generated training tasks GEPA draws minibatches from; minibatch: GEPA's reflection minibatch
            (the inner loop's ``task.tasks_per_generation`` is the matching size).
        model_path: another policy model folder than the pair's (tests: a tiny model).

    Raises:
        ConfigError: no budget; DataError: the pair is unfinished, or its items no longer match the data.
    """
    import gepa

    t0 = time.perf_counter()
    pair = Path(pair)
    p = _read_pair(pair, model_path)
    cfg = p.cfg
    total = budget if budget is not None else cfg.outer.budget.rollouts
    if total is None:
        raise ConfigError("gepa arm: the pair has no outer.budget.rollouts; pass --budget")
    calls = total - p.gen0_rollouts
    if calls < 1:
        raise ConfigError(f"gepa arm: budget {total} is spent by generation 0 ({p.gen0_rollouts} rollouts)")
    family = build_family(cfg)
    val_items = load_validation(cfg, family)
    selection, heldout = split_validation(val_items, cfg.outer.heldout_share)
    if (tuple(t.task_id for t in selection) != p.selection_ids
            or tuple(t.task_id for t in heldout) != p.heldout_ids):
        raise DataError(f"{pair}: the meta-validation split differs from the paired run's (data or code changed)")
    transfer_items = load_transfer(cfg, family, val_items)
    seed_policy = next((s for s in load_seed_population(cfg) if s.id == p.seed_id), None)
    if seed_policy is None:
        raise DataError(f"{pair}: best seed {p.seed_id!r} is not in evaluation.population_path")
    settings = task_settings(cfg, family)
    o = cfg.outer
    space = space_from_specs(settings.space, family.spec.difficulty_bounds, settings.difficulty, settings.reward_weights,
                             knobs=o.knobs, evolve_reward_weights=o.evolve_reward_weights,
                             reward_logit_bounds=tuple(o.reward_weight_bounds), extras=o.extras)
    harness0 = space.decode(space.initial_vector())
    seeds = Seeds(cfg.seed)
    # the product arms' training mix: the start harness' share of real training meetings (outer.extras.real_share)
    train = task_batch(family, seeds.numpy("gepa/train"), harness0, train_tasks,
                       load_training(cfg, family, val_items, transfer_items))
    forbidden = {t.content_hash for t in [*val_items, *transfer_items]}
    if any(t.content_hash in forbidden for t in train):
        raise DataError("gepa arm: a training task equals a meta-validation or transfer item")

    llm = build_llm(cfg.model)
    if cfg.archive.call_log:  # the study's shared call log: the seeds' held-out and transfer calls are paid already
        run_dir = pair if pair.is_dir() else pair.parent
        llm = RunFiles.open(cfg, run_dir, None).logged(llm, cfg.model)
    evaluator = RolloutEvaluator(llm, family, sampling=sampling_from(cfg.decoding, seed=seeds.int("decoding")))
    adapter = FamilyAdapter(evaluator, seed_policy, harness0.reward_weights)
    reflection = ReflectionModel(llm, _mutator_params(cfg), seeds.int("gepa/reflection"))
    seed_candidate = dict(instruction_sections(seed_policy.sections))
    t_search = time.perf_counter()
    with progress.task(f"gepa arm (seed {cfg.seed}): search", total=calls, unit="rollouts"):
        result = gepa.optimize(
            seed_candidate=seed_candidate, trainset=[_Item("train", t) for t in train],
            valset=[_Item("val", t) for t in selection], adapter=adapter, reflection_lm=reflection,
            max_metric_calls=calls, reflection_minibatch_size=minibatch, candidate_selection_strategy="pareto",
            seed=cfg.seed, display_progress_bar=False, raise_on_exception=False)
    search_seconds = time.perf_counter() - t_search
    search_rollouts = evaluator.rollouts
    best = adapter.policy(result.best_candidate)

    # the held-out items and the transfer items: best seed, GEPA's best (and the plain prompt), one call each
    pair_policies = [seed_policy] if best.genome_hash == seed_policy.genome_hash else [seed_policy, best]
    plain = plain_policy(cfg.task.plain_prompt)
    tr_policies = [*pair_policies, *([plain] if plain is not None else [])]
    n_final = len(pair_policies) * len(heldout) + (len(tr_policies) * len(transfer_items) if transfer_items else 0)
    with progress.task(f"gepa arm (seed {cfg.seed}): held-out and transfer items", total=n_final):
        held = evaluator.meta_evaluate(pair_policies, heldout)
        tr = evaluator.meta_evaluate(tr_policies, transfer_items) if transfer_items else []

    def values(e: Any) -> tuple[float, ...]:
        return tuple(0.0 if v is None else float(v) for v in e.per_item)

    heldout_scores = ItemScores(tuple(t.task_id for t in heldout),
                                {"best_seed": values(held[0]), "final_best": values(held[len(pair_policies) - 1])})
    transfer_scores = None
    if tr:
        roles = {"best_seed": values(tr[0]), "final_best": values(tr[len(pair_policies) - 1])}
        if plain is not None:
            roles["plain_prompt"] = values(tr[-1])
        transfer_scores = ItemScores(tuple(t.task_id for t in transfer_items), roles)
    check = None
    if p.transfer is not None and transfer_scores is not None and "best_seed" in p.transfer.roles:
        same = tuple(p.transfer.values[p.transfer.roles.index("best_seed")]) == transfer_scores.roles["best_seed"]
        check = "the best seed scores as in the paired run" if same else \
            "WARNING: the best seed scores differently from the paired run (model or code changed)"
    seconds = time.perf_counter() - t0 + p.gen0_seconds
    digest = hashlib.sha256(json.dumps([p.run_id, total, train_tasks, minibatch], sort_keys=True).encode())
    arm = ArmRun(arm="gepa", seed=cfg.seed, run_id=f"gepa-s{cfg.seed}-{digest.hexdigest()[:10]}", source="",
                 rollouts=p.gen0_rollouts + search_rollouts, budget=total, seconds=seconds, heldout=heldout_scores,
                 transfer=transfer_scores)
    folder = Path(out) if out is not None else (pair if pair.is_dir() else pair.parent).parent / f"gepa_seed{cfg.seed}"
    extra = {"pair": str(pair), "pair_run_id": p.run_id, "gepa_version": getattr(gepa, "__version__", "?"),
             "max_metric_calls": calls, "metric_calls": result.total_metric_calls,
             "generation0_rollouts": p.gen0_rollouts, "search_rollouts": search_rollouts,
             "search_seconds": search_seconds, "reflection_calls": reflection.calls,
             "candidates": len(result.candidates), "val_scores": list(result.val_aggregate_scores),
             "best_idx": result.best_idx, "best_candidate": dict(result.best_candidate),
             "seed_policy": seed_policy.id, "best_is_seed": best.genome_hash == seed_policy.genome_hash,
             "train_tasks": train_tasks, "minibatch": minibatch, "best_seed_check": check,
             "code_version": code_version(), "dtype": cfg.model.dtype}
    path = write_arm_result(folder, arm, extra=extra)
    return replace(arm, source=str(path))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gepa_arm", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", required=True, help="a finished +study=ablation job folder of the seed to run")
    ap.add_argument("--out", default=None, help="the arm's folder (default: <sweep>/gepa_seed<S>)")
    ap.add_argument("--budget", type=int, default=None, help="total rollouts (default: the pair's budget)")
    ap.add_argument("--train-tasks", type=int, default=12,
                    help="generated training tasks GEPA draws its minibatches from (default: 12)")
    ap.add_argument("--minibatch", type=int, default=3, help="GEPA's reflection minibatch size (default: 3)")
    ap.add_argument("--model", default=None, help="another policy model folder than the pair's")
    args = ap.parse_args(argv)
    arm = run_gepa_arm(args.pair, args.out, budget=args.budget, train_tasks=args.train_tasks,
                       minibatch=args.minibatch, model_path=args.model)
    held = arm.heldout.diff("final_best", "best_seed") if arm.heldout is not None else None
    print(f"gepa arm (seed {arm.seed}): {arm.rollouts} rollouts of {arm.budget}, {arm.seconds:.0f} s; held-out "
          f"final best − best seed {0.0 if held is None else float(held.mean()):+.4f}; wrote {arm.source}")


if __name__ == "__main__":
    main()
