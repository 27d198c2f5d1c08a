"""The inner generation loop: select -> vary -> evaluate the new -> hall of fame -> statistics.

One function, :func:`run_inner_loop`, meant to be read top to bottom, in the shape of DEAP's ``eaSimple`` (whose
docs say such loops exist to be rewritten); the helpers below it check what operators return, make the one
batched mutator call and turn failed evaluations into None. Its reports: :mod:`evotrainer.search.inner_report`.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from deap import tools

from evotrainer.backends.base import LLM
from evotrainer.errors import ConfigError, EvoTrainerError, OperatorError, ServerError
from evotrainer.genome import Policy
from evotrainer.search.diversity import enforce_min_diversity, population_diversity
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_report import GenerationReport, InnerResult
from evotrainer.search.operator_stats import OperatorStats
from evotrainer.search.operators import MutationPlan, validity_problem
from evotrainer.search.operators_registry import Operator, crossover_probabilities, mutation_probabilities
from evotrainer.search.toolbox import GenomeHallOfFame, InnerToolbox

__all__ = ["GenerationReport", "InnerResult", "initial_population", "plan_verdict", "run_inner_loop"]

logger = logging.getLogger(__name__)

Evaluate = Callable[[Sequence[Policy]], Sequence["float | None"]]

LOGBOOK_HEADER = ("gen", "nevals", "rejected", "max", "mean", "min", "std", "t_select", "t_vary",
                  "t_evaluate", "skipped", "diversity")
"""Logbook columns; ``diversity`` is the population's mean pairwise cosine distance (None without an
embedder, see :func:`~evotrainer.search.diversity.population_diversity`)."""


def initial_population(population: Sequence[Policy], cfg: InnerConfig, lead: Policy | None = None) -> list[Policy]:
    """The population :func:`run_inner_loop` starts from: ``population``, with ``lead`` first when it gets
    lead slots (``cfg.lead_offspring > 0``) and is not in it. Build the toolbox with these as ``seed_prompts``.

    Raises:
        ConfigError: an empty population or a non-Policy in it (key ``inner.population``).
    """
    population = _checked_population(population, cfg)
    if lead is not None and cfg.lead_offspring > 0 and all(p.id != lead.id for p in population):
        return [lead, *population]
    return population


def run_inner_loop(
    population: Sequence[Policy],
    toolbox: InnerToolbox,
    evaluate: Evaluate,
    cfg: InnerConfig,
    rng: random.Random,
    *,
    start_generation: int = 0,
    on_generation: Callable[[GenerationReport], None] | None = None,
    lead: Policy | None = None,
    lead_tried: Sequence[str] = (),
) -> InnerResult:
    """Evolve ``population`` for ``cfg.generations`` generations; fitness is higher-is-better.

    Per generation: the ``cfg.elites`` best distinct genomes pass unchanged; the other
    ``population_size - elites`` slots are filled by tournament selection then variation (pairs crossed
    with ``cx_prob`` by a crossover drawn from the registry, then offered to its plan crossovers (LLM merge)
    with their shares; each offspring mutated with ``mut_prob`` by a mutation drawn from the mutation
    probabilities (:func:`~evotrainer.search.operators_registry.mutation_probabilities`); LLM rewrites and
    merges of the whole generation go to ``toolbox.mutator`` in one ``generate`` call). Rejected LLM answers
    and invalid, already-seen or near-duplicate genomes are replaced by a structural mutation, or by a copy
    of the parent. Only new genomes are evaluated; a child whose evaluation fails is dropped and its slot
    refilled from the previous population; a generation in which every evaluation fails is skipped
    (population kept, logged). With a ``lead`` and ``cfg.lead_offspring > 0``, that many of the non-elite
    slots are mutants of the lead instead. With ``toolbox.phrases``, the bank then banks the new children's
    sentences and the population is kept at ``cfg.min_diversity``. Operator statistics, the hall of fame
    and a logbook record follow, then ``on_generation(report)``.

    Args:
        population: initial individuals (any number >= 1); evaluated at the start of the call (the
            fitness cache makes this free for already-scored genomes on the same batch).
        toolbox: built by :func:`~evotrainer.search.toolbox.build_toolbox` with
            ``seed_prompts=initial_population(population, cfg, lead)``.
        evaluate: scores policies on one fixed task batch (common random numbers for the whole call):
            returns one value per policy, a finite float (higher is better) or None (failed). Non-finite
            values count as failed. With adapters in the toolbox it must score each policy with its adapter.
        cfg: loop settings (validated here); ``cfg.generations`` generations are run.
        rng: the only random source of the loop and its operators.
        start_generation: number of the generation before the first one run here (children of the
            first generation get ``start_generation + 1``).
        on_generation: called after the initial evaluation and after each generation.
        lead: the policy whose neighbourhood gets ``cfg.lead_offspring`` mutants per generation (the
            caller's best policy on meta-validation); added to the initial population when absent.
        lead_tried: mutation kinds already tried on ``lead`` by earlier calls: each lead slot takes a kind
            tried least often so far (ties drawn with ``rng``), so every kind is tried once before one repeats.

    Returns:
        The final population, all fitnesses, hall of fame, logbook and best policy.

    Raises:
        ConfigError: a bad setting (key ``inner.<field>``), an empty population, a non-Policy in it, or a
            toolbox not built by ``build_toolbox``.
        OperatorError: an operator, ``evaluate`` or the mutator returned the wrong type or shape.
        EvoTrainerError: every policy of the initial population failed evaluation.
    """
    cfg.validate()
    if not isinstance(toolbox, InnerToolbox):
        raise ConfigError(f"inner loop: expected the toolbox of build_toolbox, got {type(toolbox).__name__}")
    toolbox.registry.check_shares(cfg)
    population = initial_population(population, cfg, lead)
    bank = toolbox.phrases
    if bank is not None:
        if len(bank) == 0:
            bank.add(("rules", phrase) for phrase in cfg.rules())
        bank.add_policies(population)
    operator_stats = OperatorStats()
    logbook = tools.Logbook()
    logbook.header = list(LOGBOOK_HEADER)
    hall_of_fame = GenomeHallOfFame(cfg.hall_of_fame_size)
    fitness: dict[str, float] = {}
    skipped_generations: list[int] = []
    lead_kinds: list[str] = []
    tries = Counter(lead_tried)  # mutation kind -> times tried on the lead
    lead_children: dict[str, Policy] = {}

    # --- generation 0 of this call: score the initial population --------------------------------
    t0 = time.perf_counter()
    initial = list({p.id: p for p in population}.values())
    scores = _evaluate(evaluate, initial)
    fitness.update({p.id: s for p, s in zip(initial, scores, strict=True) if s is not None})
    failed = [p.id for p, s in zip(initial, scores, strict=True) if s is None]
    if failed:
        logger.warning("initial evaluation failed for %d policies, dropped: %s", len(failed), failed)
    population = [p for p in population if p.id in fitness]
    if not population:
        raise EvoTrainerError("inner loop: every policy of the initial population failed evaluation")
    hall_of_fame.update(population, fitness)
    timings = {"select": 0.0, "vary": 0.0, "evaluate": time.perf_counter() - t0}
    record = _record(logbook, start_generation, population, fitness, len(initial), 0, timings, False,
                     population_diversity(population, bank.vectors) if bank is not None else None)
    if on_generation is not None:
        on_generation(GenerationReport(
            start_generation, True, tuple(population), {p.id: fitness[p.id] for p in population},
            (), {}, 0, False, record, timings, hall_of_fame.items))
    seen_genomes = {p.genome_hash for p in population}

    for gen in range(start_generation + 1, start_generation + cfg.generations + 1):
        # --- select: elites pass unchanged, tournaments pick the parents of the rest ------------
        t0 = time.perf_counter()
        ranked = sorted(population, key=lambda p: -fitness[p.id])  # best first; ties keep population order
        elites = _distinct_best(ranked, cfg.elites)
        n_offspring = cfg.population_size - len(elites)
        n_lead = min(cfg.lead_offspring, n_offspring) if lead is not None and lead.id in fitness else 0
        pop_fitness = [fitness[p.id] for p in population]
        parents = _checked_list(toolbox.select(population, pop_fitness, n_offspring - n_lead, rng), "select",
                                n_offspring - n_lead) + [lead] * n_lead
        t_select = time.perf_counter() - t0

        # --- vary: crossover, mutation, one batched mutator call, validity and novelty ------------
        t0 = time.perf_counter()
        probabilities = _mutation_probabilities(cfg, toolbox, operator_stats)
        forced = {}
        for i in range(n_offspring - n_lead, n_offspring):
            least = min(tries[k] for k in probabilities)
            forced[i] = rng.choice(sorted(k for k in probabilities if tries[k] == least))
            tries[forced[i]] += 1
            lead_kinds.append(forced[i])
        offspring, origins, rejections, mutator_error, made = _vary(
            parents, population, gen, toolbox, cfg, rng, seen_genomes, probabilities, forced)
        rejected = len(rejections)
        t_vary = time.perf_counter() - t0

        # --- evaluate the new genomes only --------------------------------------------------------
        t0 = time.perf_counter()
        children = list({p.id: p for p in offspring if p.id not in fitness}.values())
        child_scores = _evaluate(evaluate, children) if children else []
        child_fitness = {p.id: s for p, s in zip(children, child_scores, strict=True)}
        lead_children |= {o.id: o for i, o in enumerate(offspring)
                          if i in forced and o is not lead and child_fitness.get(o.id) is not None}
        t_evaluate = time.perf_counter() - t0
        timings = {"select": t_select, "vary": t_vary, "evaluate": t_evaluate}
        seen_genomes.update(p.genome_hash for p in children)

        skipped = bool(children) and all(s is None for s in child_scores)
        swaps = 0
        if skipped:
            logger.warning("generation %d skipped: all %d evaluations failed; population kept", gen, len(children))
            skipped_generations.append(gen)
        else:
            fitness.update({pid: s for pid, s in child_fitness.items() if s is not None})
            survivors = elites + [p for p in offspring if p.id in fitness]
            refill = [p for p in ranked if p.id not in {s.id for s in survivors}]
            population = (survivors + refill)[: cfg.population_size]
            if bank is not None:
                bank.add_policies(p for p in children if p.id in fitness)
                if cfg.min_diversity > 0:
                    pool = ranked + [p for p in children if p.id in fitness]
                    population, swaps = enforce_min_diversity(population, pool, fitness, bank.vectors,
                                                              cfg.min_diversity, protect=max(1, cfg.elites))
            hall_of_fame.update(population, fitness)

        # --- statistics and report ---------------------------------------------------------------
        gen_stats = OperatorStats.from_children(children, child_fitness, _parent_best(offspring, origins, fitness))
        operator_stats = operator_stats.merged(gen_stats)
        record = _record(logbook, gen, population, fitness, len(children), rejected, timings, skipped,
                         population_diversity(population, bank.vectors) if bank is not None else None, rejections)
        logger.info("gen %d: nevals=%d rejected=%d max=%.4f mean=%.4f", gen, len(children), rejected,
                    record["max"], record["mean"])
        if on_generation is not None:
            on_generation(GenerationReport(
                gen, False, tuple(population), {p.id: fitness[p.id] for p in population}, tuple(children),
                child_fitness, rejected, skipped, record, timings, hall_of_fame.items, mutator_error,
                gen_stats, probabilities, swaps, _intermediates(made, children, offspring),
                tuple(rejections)))

    best = hall_of_fame.items[0]
    return InnerResult(tuple(population), dict(fitness), hall_of_fame.items, logbook, best,
                       hall_of_fame.fitness[0], tuple(skipped_generations), operator_stats,
                       tuple(lead_children.values()), tuple(lead_kinds))


def _mutation_probabilities(cfg: InnerConfig, toolbox: InnerToolbox, stats: OperatorStats) -> dict[str, float]:
    """Mutation operator kind -> probability (sums to 1; kinds that cannot run are absent): the shares of the
    toolbox's registry (:func:`~evotrainer.search.operators_registry.mutation_probabilities`), an operator
    counting when ``toolbox`` has its alias; adapted to ``stats`` when ``cfg.adaptive_operators``."""
    return mutation_probabilities(cfg, lambda op: hasattr(toolbox, op.alias), toolbox.mutator is not None, stats,
                                  toolbox.registry)


def _runnable(op: Operator, toolbox: InnerToolbox) -> bool:
    """Whether the record ``op`` can run: its alias is registered and, when it needs one, there is a mutator."""
    return hasattr(toolbox, op.alias) and (toolbox.mutator is not None or "mutator" not in op.needs)


def _pick(probabilities: Mapping[str, float], rng: random.Random) -> str:
    """One key drawn with the given probabilities (no draw when there is only one)."""
    keys = list(probabilities)
    if len(keys) == 1:
        return keys[0]
    u, acc = rng.random(), 0.0
    for key in keys:
        acc += probabilities[key]
        if u < acc:
            return key
    return keys[-1]


def _vary(
    parents: list[Policy],
    population: list[Policy],
    gen: int,
    toolbox: InnerToolbox,
    cfg: InnerConfig,
    rng: random.Random,
    seen_genomes: set[str],
    probabilities: Mapping[str, float],
    forced: Mapping[int, str] | None = None,
) -> tuple[list[Policy], list[tuple[str, ...]], list[str], str | None, dict[str, Policy]]:
    """Offspring of ``parents`` (same length), each slot's origin parent ids, the rejections
    (``"<operator>: <reason>"`` each), the mutator's error, and every genome made on the way (by id).

    ``forced`` maps slot -> mutation kind: such a slot is never crossed and is always mutated by that kind.

    An offspring is either an unchanged parent (keeps its fitness) or a new, valid genome never seen
    before in this call and not a near-duplicate of a population member or an earlier offspring.
    """
    slots = list(parents)
    origins: list[tuple[str, ...]] = [(p.id,) for p in parents]
    varied = [False] * len(parents)
    plans: dict[int, MutationPlan] = {}
    made: dict[str, Policy] = {}
    forced = forced or {}
    registry, mutator = toolbox.registry, toolbox.mutator
    crossovers = crossover_probabilities(cfg, lambda op: _runnable(op, toolbox), registry)
    merges = [op for op in registry.crossovers() if op.output == "plan" and _runnable(op, toolbox)]

    for i in range(0, len(parents) - 1, 2):  # crossover of consecutive pairs
        if i in forced or i + 1 in forced or not crossovers or rng.random() >= cfg.cx_prob:
            continue  # (a registry without a crossover that makes children crosses nothing)
        op = registry[_pick(crossovers, rng)]  # one crossover (the built-in records): no draw
        pair = getattr(toolbox, op.alias)(parents[i], parents[i + 1], rng, gen)
        slots[i], slots[i + 1] = _checked_pair(pair, op.alias)
        made.update({slots[i].id: slots[i], slots[i + 1].id: slots[i + 1]})
        varied[i] = varied[i + 1] = True
        origins[i] = origins[i + 1] = (parents[i].id, parents[i + 1].id)
        for op in merges:  # plan crossovers (LLM merge): the first that draws its share answers slot i
            if i not in plans and rng.random() < op.share(cfg):
                plan = getattr(toolbox, op.alias)(parents[i], parents[i + 1], rng, gen)
                if plan is not None:
                    plans[i] = _checked(plan, op.alias, MutationPlan)

    for i in range(len(slots)):  # mutation
        if i in plans or (i not in forced and rng.random() >= cfg.mut_prob):
            continue
        op = registry[forced[i] if i in forced else _pick(probabilities, rng)]
        result = getattr(toolbox, op.alias)(slots[i], rng, gen)
        while result is None and op.fallback is not None:  # e.g. no feedback for this slot: style rewrite
            op = registry[op.fallback]
            result = getattr(toolbox, op.alias)(slots[i], rng, gen)
        if op.output == "plan":
            plans[i] = _checked(result, op.alias, MutationPlan)
        else:
            slots[i] = _checked(result, op.alias, Policy)
            made[slots[i].id] = slots[i]
        varied[i] = True

    rejections: list[str] = []
    mutator_error = None
    if plans:
        order = sorted(plans)
        texts, mutator_error = _generate(mutator, [plans[i].request for i in order])
        for i, (text, finish) in zip(order, texts, strict=True):
            verdict = "no answer" if text is None else plan_verdict(toolbox, plans[i], text, finish)
            if verdict is None or isinstance(verdict, str):  # the slot keeps its pre-plan content
                rejections.append(f"{plans[i].operator}: {verdict or 'rejected'}")
                if verdict and verdict.startswith("leak:"):
                    logger.info("rejected a %s answer: %s", plans[i].operator, verdict)
            else:
                slots[i] = _checked(verdict, "apply_plan", Policy)
                made[slots[i].id] = slots[i]

    offspring: list[Policy] = []
    references = list(population)
    for i, child in enumerate(slots):
        if varied[i] and (problem := _novelty_problem(child, toolbox, seen_genomes, references)):
            rejections.append(f"{child.operator}: {problem}")
            child = _replacement(child, parents[i], gen, toolbox, rng, seen_genomes, references)
            made[child.id] = child
        if child is not parents[i]:
            seen_genomes.add(child.genome_hash)
            references.append(child)
        offspring.append(child)
    return offspring, origins, rejections, mutator_error, made


def _intermediates(made: Mapping[str, Policy], children: Sequence[Policy], offspring: Sequence[Policy]) -> tuple:
    """The genomes made this generation that an offspring descends from but that are not children.

    Walks parent ids from each offspring through ``made`` so only ancestors of kept offspring are
    returned (rejected dead ends with no descendant are left out).
    """
    child_ids = {c.id for c in children}
    out: dict[str, Policy] = {}
    stack = [pid for o in offspring for pid in o.parent_ids]
    while stack:
        pid = stack.pop()
        if pid in made and pid not in child_ids and pid not in out:
            out[pid] = made[pid]
            stack.extend(made[pid].parent_ids)
    return tuple(out[k] for k in sorted(out))


def _novelty_problem(
    policy: Policy, toolbox: InnerToolbox, seen_genomes: set[str], references: Sequence[Policy]
) -> str | None:
    """Why ``policy`` may not join the offspring (seen genome, invalid, near-duplicate), or None."""
    if policy.genome_hash in seen_genomes:
        return "duplicate genome"
    if not toolbox.is_valid(policy):
        return "invalid genome"
    near_duplicate = getattr(toolbox, "near_duplicate", None)
    if near_duplicate is not None and any(near_duplicate(policy, other) for other in references):
        return "near-duplicate"
    return None


def _replacement(
    child: Policy, parent: Policy, gen: int, toolbox: InnerToolbox, rng: random.Random, seen: set[str],
    references: Sequence[Policy],
) -> Policy:
    """A structural mutation of the rejected child, else of its parent, else the parent itself."""
    for source in (child, parent):
        candidate = _checked(toolbox.mutate(source, rng, gen), "mutate", Policy)
        if _novelty_problem(candidate, toolbox, seen, references) is None:
            return candidate
    return parent


def _parent_best(
    offspring: Sequence[Policy], origins: Sequence[tuple[str, ...]], fitness: Mapping[str, float]
) -> dict[str, float]:
    """Child id -> best fitness among the parents its slot was varied from (those with a fitness)."""
    out: dict[str, float] = {}
    for child, ids in zip(offspring, origins, strict=True):
        scores = [fitness[pid] for pid in ids if pid in fitness and pid != child.id]
        if scores and child.id not in out:
            out[child.id] = max(scores)
    return out


def plan_verdict(toolbox: InnerToolbox, plan: MutationPlan, text: str, finish: str | None) -> Policy | str | None:
    """The inner loop's judgement of a mutator answer to ``plan``: an answer cut at the token limit (``finish ==
    "length"``) is rejected, as mid-sentence text is no instruction; else ``toolbox.apply_plan``'s verdict (the
    child, or a rejection reason)."""
    if finish == "length":
        return "cut at the token limit"
    return toolbox.apply_plan(plan, text)


def _generate(mutator: LLM | None, requests: list) -> tuple[list[tuple[str | None, str | None]], str | None]:
    """One batched mutator call: ``(text, finish_reason)`` per request; on an exception every text is None and
    the error is returned."""
    try:
        generations = mutator.generate(requests)  # type: ignore[union-attr]
    except ServerError:  # the mutator's server is gone: the run stops with its line
        raise
    except Exception as exc:  # a failing mutator batch never stops the loop: children fall back
        logger.warning("mutator call failed for %d requests: %r", len(requests), exc)
        return [(None, None)] * len(requests), f"{type(exc).__name__}: {exc}"
    if not isinstance(generations, Sequence) or len(generations) != len(requests):
        got = len(generations) if isinstance(generations, Sequence) else type(generations).__name__
        raise OperatorError(f"mutator.generate: expected {len(requests)} generations, got {got}")
    return [(g.text if isinstance(getattr(g, "text", None), str) else None, getattr(g, "finish_reason", None))
            for g in generations], None


def _checked_population(population: Sequence[Policy], cfg: InnerConfig) -> list[Policy]:
    if isinstance(population, (str, bytes)) or not isinstance(population, Sequence) or not population:
        raise ConfigError("inner.population: expected a non-empty list of Policy records")
    for i, p in enumerate(population):
        if not isinstance(p, Policy):
            raise ConfigError(f"inner.population[{i}]: expected a Policy, got {type(p).__name__}")
        problem = validity_problem(p, cfg.required_sections, cfg.max_prompt_words)
        if problem:
            logger.warning("initial policy %s is not a valid genome (%s); kept as given", p.id, problem)
    return list(population)


def _checked(result: Any, op: str, kind: type) -> Any:
    """``result`` when operator ``op`` returned a ``kind`` (a Policy or a MutationPlan); OperatorError otherwise."""
    if not isinstance(result, kind):
        raise OperatorError(f"operator {op!r} must return a {kind.__name__}, got {type(result).__name__}")
    return result


def _checked_pair(result: object, op: str) -> tuple[Policy, Policy]:
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(p, Policy) for p in result)):
        shape = f"tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise OperatorError(f"operator {op!r} must return a tuple of two Policy records, got {shape}")
    return result


def _checked_list(result: object, op: str, k: int) -> list[Policy]:
    if not (isinstance(result, Sequence) and len(result) == k and all(isinstance(p, Policy) for p in result)):
        raise OperatorError(f"operator {op!r} must return a list of {k} Policy records")
    return list(result)


def _evaluate(evaluate: Evaluate, policies: list[Policy]) -> list[float | None]:
    """Scores of ``policies``: finite floats, or None for failed or non-finite evaluations."""
    scores = evaluate(policies)
    if isinstance(scores, (str, bytes)) or not isinstance(scores, Sequence) or len(scores) != len(policies):
        raise OperatorError(f"evaluate must return one score per policy ({len(policies)}), got {scores!r:.80}")
    out: list[float | None] = []
    for s in scores:
        if s is None:
            out.append(None)
        elif isinstance(s, (int, float, np.floating, np.integer)) and not isinstance(s, bool):
            out.append(float(s) if math.isfinite(float(s)) else None)
        else:
            raise OperatorError(f"evaluate must return floats or None, got {type(s).__name__}")
    return out


def _distinct_best(ranked: list[Policy], k: int) -> list[Policy]:
    out: list[Policy] = []
    genomes: set[str] = set()
    for p in ranked:
        if len(out) == k:
            break
        if p.genome_hash not in genomes:
            genomes.add(p.genome_hash)
            out.append(p)
    return out


def _record(logbook: tools.Logbook, gen: int, population: list[Policy], fitness: Mapping[str, float], nevals: int,
            rejected: int, timings: Mapping[str, float], skipped: bool, diversity: float | None,
            rejections: Sequence[str] = ()) -> dict[str, Any]:
    """Log one logbook record; ``rejections`` (not a logbook column) joins the record as one string,
    ``"reason xN | ..."``, so the archive keeps why children were rejected."""
    values = np.array([fitness[p.id] for p in population], dtype=float)
    record = {
        "gen": gen, "nevals": nevals, "rejected": rejected,
        "max": float(values.max()), "mean": float(values.mean()), "min": float(values.min()),
        "std": float(values.std()), "t_select": timings["select"], "t_vary": timings["vary"],
        "t_evaluate": timings["evaluate"], "skipped": int(skipped), "diversity": diversity,
        "rejections": " | ".join(r if n == 1 else f"{r} x{n}" for r, n in Counter(rejections).items()),
    }
    logbook.record(**record)
    return record
