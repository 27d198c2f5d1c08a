"""What the archive CLI and the HTML report show, as JSON-ready dicts built from read-only queries.

Each function takes an open :class:`~evotrainer.archive.store.ArchiveStore` (read-only is enough) and a
run id, and returns plain dicts and lists (no records), so ``--json`` output, tables and plots all read
the same numbers. Scores are higher-is-better throughout: fitness is the harness reward of a policy on
a task batch, in [0, 1]; S_val is the meta-validation score on the fixed validation set, in [0, 1].

A run without a ``summary`` event is reported as "running or crashed": the archive is append-only and
the summary is the last thing a finished run writes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeVar

from evotrainer.archive.schema import EvaluationRow, EventRow, RunInfo
from evotrainer.archive.store import ArchiveStore
from evotrainer.browse.race_views import promotions, race_entries, race_summary
from evotrainer.browse.sweep_views import run_generalisation, sweep_summary
from evotrainer.errors import ArchiveError
from evotrainer.events.kinds import (
    Event,
    IncumbentEvent,
    InnerGenerationEvent,
    OuterGenerationEvent,
    SummaryEvent,
)
from evotrainer.genome import PREFILL_SECTION, Policy, render_system_prompt

__all__ = ["RUNNING_OR_CRASHED", "best_policies", "fitness_curves", "harness_trajectory", "lineage_graph",
           "operator_stats", "pick_run", "policy_detail", "promotions", "policy_json", "resolve_policy",
           "race_entries", "race_summary", "rollbacks", "run_generalisation", "run_overview",
           "s_val_trajectory", "sweep_summary"]

RUNNING_OR_CRASHED = "running or crashed (no summary event)"
"""Stop reason shown for a run whose archive has no ``summary`` event yet."""

_CONFIG_KEYS: tuple[tuple[str, ...], ...] = (
    ("mode",), ("seed",), ("model", "path"), ("model", "backend"), ("mutator",), ("task", "name"),
    ("task", "tasks_per_generation"), ("task", "validation_limit"), ("inner", "population_size"),
    ("inner", "generations"), ("inner", "elites"), ("inner", "cx_prob"), ("inner", "mut_prob"),
    ("inner", "llm_mutation_share"), ("outer", "generations"), ("outer", "popsize"), ("outer", "sigma0"),
    ("outer", "screen_size"), ("outer", "candidate_source"), ("outer", "budget", "rollouts"),
    ("decoding", "max_new_tokens"), ("decoding", "temperature"),
)
"""Config entries shown by ``show`` (the whole config is in its ``--json`` output)."""



def pick_run(store: ArchiveStore, run_id: str | None = None) -> RunInfo:
    """The run ``run_id``, or the last run of the file when None.

    Raises:
        ArchiveError: no such run, or the file holds no run yet.
    """
    if run_id is not None:
        return store.get_run(run_id)
    runs = store.list_runs()
    if not runs:
        raise ArchiveError(f"{store.path}: the archive holds no run yet")
    return runs[-1]


T = TypeVar("T", bound=Event)


def _typed(events: Iterable[EventRow], cls: type[T]) -> list[T]:
    """The typed events of ``events`` that are ``cls`` instances, in order (DataError on a malformed one)."""
    return [ev for ev in (e.event for e in events if e.kind == cls.kind) if isinstance(ev, cls)]


def _config_summary(config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in _CONFIG_KEYS:
        node: Any = config
        for key in path:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            out[".".join(path)] = node
    return out


def _budget(evals: list[EvaluationRow]) -> dict[str, Any]:
    by_kind: dict[str, dict[str, float]] = {}
    for e in evals:
        k = by_kind.setdefault(e.kind, {"evaluations": 0, "computed": 0, "failed": 0, "rollouts": 0,
                                        "generated_tokens": 0, "seconds": 0.0})
        k["evaluations"] += 1
        k["failed"] += e.error is not None
        if not e.cached:
            k["computed"] += 1
            k["rollouts"] += e.n_tasks
        k["generated_tokens"] += e.generated_tokens
        k["seconds"] += e.seconds
    total = {key: sum(k[key] for k in by_kind.values())
             for key in ("evaluations", "computed", "failed", "rollouts", "generated_tokens", "seconds")}
    return {"by_kind": by_kind, **total}


def run_overview(store: ArchiveStore, run: RunInfo) -> dict[str, Any]:
    """``show``: config summary, S_val (initial and best), budget used, progress and stop reason.

    Returns:
        dict with run_id, seed, created_at, code_version, host, status ("finished" or
        :data:`RUNNING_OR_CRASHED`), stop_reason, stop_detail, heldout_s_val, last_event_at, config (selected entries),
        config_full, best_policy_id, best_s_val, initial_policy_id, initial_s_val, policies,
        outer_generations (completed, from harness candidates), incumbents (outer generation, policy,
        S_val), budget (evaluations / rollouts / generated tokens / seconds, per kind and in total;
        rollouts are model calls for policies, counted from the non-cached evaluation rows),
        summary_rollouts (the engine's own count from the summary event, or None), rollbacks, usage (the last
        ``usage`` phase event: requests, prompt and completion tokens and cost per model role, or None) and
        backends (the last ``backend`` phase event: what each server was sent, or None).
    """
    rid = run.run_id
    events = store.events(rid)
    summaries = [e.event for e in events if e.kind == "summary"]
    summary = summaries[-1] if summaries else None  # co-evolution or self-evolution
    coevo = summary if isinstance(summary, SummaryEvent) else SummaryEvent()
    evals = store.evaluations(rid)
    cands = store.harness_candidates(rid)
    incumbents = _typed(events, IncumbentEvent)
    best = store.best_policy(rid, "meta_val")
    if summary is not None:
        best_id, best_s = coevo.best, coevo.best_s_val
    else:
        best_id, best_s = (best[0].id, best[1]) if best else (None, None)
    first = incumbents[0] if incumbents else IncumbentEvent()
    return {
        "run_id": rid, "seed": run.seed, "created_at": run.created_at, "code_version": run.code_version,
        "host": run.host, "status": "finished" if summary is not None else RUNNING_OR_CRASHED,
        "stop_reason": (coevo.stop_reason or "finished") if summary is not None else RUNNING_OR_CRASHED,
        "stop_detail": coevo.stop_detail, "heldout_s_val": coevo.heldout_s_val,
        "last_event_at": events[-1].created_at if events else None,
        "config": _config_summary(run.config), "config_full": run.config,
        "best_policy_id": best_id, "best_s_val": best_s,
        "initial_policy_id": first.policy_id, "initial_s_val": first.s_val,
        "policies": len(store.policies(rid)),
        "outer_generations": max((c.outer_generation for c in cands), default=0),
        "incumbents": [{"outer_generation": i.outer_generation, "policy_id": i.policy_id, "s_val": i.s_val,
                        "harness_id": i.harness_id} for i in incumbents],
        "budget": _budget(evals), "summary_rollouts": coevo.rollouts,
        "rollbacks": sum(e.kind == "rollback" for e in events),
        "usage": _last_phase(events, "usage"), "backends": _last_phase(events, "backend"),
    }


def _last_phase(events: list[EventRow], name: str) -> dict[str, Any] | None:
    """The payload (without ``name``) of the last ``phase`` event called ``name``, or None."""
    found = [e.payload for e in events if e.kind == "phase" and e.payload.get("name") == name]
    return {k: v for k, v in found[-1].items() if k != "name"} if found else None



def resolve_policy(store: ArchiveStore, run_id: str, ref: str | None) -> Policy:
    """The policy named by ``ref``: None or "best" (highest meta-validation S_val, else highest
    fitness), an exact id, or a unique id prefix.

    Raises:
        ArchiveError: nothing matches, the prefix is ambiguous, or the run has no scored policy.
    """
    if ref is None or ref == "best":
        for kind in ("meta_val", "meta_screen", "fitness"):
            found = store.best_policy(run_id, kind)
            if found is not None:
                return found[0]
        raise ArchiveError(f"{store.path}: run {run_id!r} has no scored policy yet")
    ids = [p.id for p in store.policies(run_id)]
    if ref in ids:
        return store.get_policy(run_id, ref)
    matches = [i for i in ids if i.startswith(ref)]
    if len(matches) == 1:
        return store.get_policy(run_id, matches[0])
    if matches:
        raise ArchiveError(f"run {run_id!r}: policy id prefix {ref!r} is ambiguous ({', '.join(matches[:5])}, ...)")
    raise ArchiveError(f"{store.path}: run {run_id!r} has no policy {ref!r}")


def policy_json(p: Policy) -> dict[str, Any]:
    """A policy as a JSON-ready dict: id, sections (ordered list of ``{name, text}``), prompt (the
    rendered system prompt), prefill (the answer prefill, or None), adapter, decoding, parent_ids, operator, generation, root_id."""
    return {"id": p.id, "sections": [{"name": k, "text": v} for k, v in p.sections],
            "prompt": render_system_prompt(p.sections), "prefill": p.section_dict.get(PREFILL_SECTION),
            "adapter": p.adapter, "decoding": {k: v for k, v in p.decoding}, "parent_ids": list(p.parent_ids),
            "operator": p.operator, "generation": p.generation, "root_id": p.root_id}


def _mean(xs: Iterable[float]) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def _score_summary(rows: list[EvaluationRow]) -> dict[str, Any]:
    ok = [r for r in rows if r.error is None]
    names = sorted({k for r in ok for k in r.components})
    return {"n": len(rows), "failed": len(rows) - len(ok), "best": max((r.total for r in ok), default=None),
            "mean": _mean(r.total for r in ok),
            "components": {k: _mean(r.components[k] for r in ok if k in r.components) for k in names}}


def policy_detail(store: ArchiveStore, run_id: str, policy: Policy) -> dict[str, Any]:
    """``policy``: the genome, its scores by kind and component, parents, children, operator, generation.

    Returns:
        :func:`policy_json` plus ``scores`` (per evaluation kind: n, failed, best and mean total,
        mean of each component), ``evaluations`` (every row: kind, batch, harness, outer / inner
        generation, total, components, cached, error) and ``children`` (ids).
    """
    rows = store.evaluations(run_id, policy_id=policy.id)
    kinds: dict[str, list[EvaluationRow]] = defaultdict(list)
    for r in rows:
        kinds[r.kind].append(r)
    return {
        **policy_json(policy),
        "scores": {k: _score_summary(v) for k, v in kinds.items()},
        "evaluations": [
            {"kind": r.kind, "batch_id": r.batch_id, "harness_id": r.harness_id,
             "outer_generation": r.outer_generation, "inner_generation": r.inner_generation,
             "total": r.total, "components": dict(r.components), "n_tasks": r.n_tasks,
             "cached": r.cached, "error": r.error}
            for r in rows
        ],
        "children": store.children(run_id, policy.id),
    }


def best_policies(store: ArchiveStore, run_id: str, n: int = 10, by: str = "meta_val") -> list[dict[str, Any]]:
    """``best``: the top ``n`` policies by their best ``by`` score (one row per policy).

    Args:
        n: rows, >= 1.
        by: an evaluation kind ("meta_val", "meta_screen" or "fitness"); rows with an error are skipped.

    Returns:
        rows sorted by score (higher is better), ties by first evaluation: rank, policy_id, score,
        meta_val, meta_screen, fitness (each the policy's best, or None), operator, generation,
        root_id, and the first words of the prompt.
    """
    evals = [e for e in store.evaluations(run_id) if e.error is None]
    best: dict[str, dict[str, float]] = defaultdict(dict)
    order: dict[str, int] = {}
    for i, e in enumerate(evals):
        cur = best[e.policy_id].get(e.kind)
        if cur is None or e.total > cur:
            best[e.policy_id][e.kind] = e.total
        if e.kind == by:
            order.setdefault(e.policy_id, i)
    ranked = sorted(order, key=lambda pid: (-best[pid][by], order[pid]))[: max(1, int(n))]
    out = []
    for rank, pid in enumerate(ranked, 1):
        p = store.get_policy(run_id, pid)
        prompt = render_system_prompt(p.sections)
        out.append({
            "rank": rank, "policy_id": pid, "score": best[pid][by], "by": by,
            "meta_val": best[pid].get("meta_val"), "meta_screen": best[pid].get("meta_screen"),
            "fitness": best[pid].get("fitness"), "operator": p.operator, "generation": p.generation,
            "root_id": p.root_id, "prompt_start": " ".join(prompt.split()[:12]),
        })
    return out



def _flat_values(values: dict[str, Any]) -> dict[str, float]:
    """Named harness values: difficulty, extra and strategy knobs by name, reward weights as ``w:<name>``."""
    out: dict[str, float] = {}
    if isinstance(values.get("difficulty"), dict) or isinstance(values.get("reward_weights"), dict):
        for k, v in (values.get("difficulty") or {}).items():
            if isinstance(v, (int, float)):
                out[str(k)] = float(v)
        for k, v in (values.get("reward_weights") or {}).items():
            if isinstance(v, (int, float)):
                out[f"w:{k}"] = float(v)
        for group in ("extras", "strategy"):
            for k, v in (values.get(group) or {}).items():
                if isinstance(v, (int, float)):
                    out[str(k)] = float(v)
        return out
    return {str(k): float(v) for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def harness_trajectory(store: ArchiveStore, run_id: str) -> list[dict[str, Any]]:
    """``harness``: every harness candidate by outer generation, then index.

    Returns:
        rows: harness_id, outer_generation, index, status, race_estimate, s_val (whole set, only for a
        candidate whose race estimate beat the incumbent), best_policy_id, params (difficulty, extra and strategy
        knobs and ``w:<name>`` reward weights, decoded values), vector (normalised search point, each in [0, 1]).
    """
    return [
        {"harness_id": c.harness_id, "outer_generation": c.outer_generation, "index": c.index,
         "status": c.status, "race_estimate": c.race_estimate, "s_val": c.s_val,
         "best_policy_id": c.best_policy_id, "params": _flat_values(dict(c.values)), "vector": list(c.vector)}
        for c in store.harness_candidates(run_id)
    ]


def rollbacks(store: ArchiveStore, run_id: str) -> list[dict[str, Any]]:
    """``rollbacks``: events of kind "rollback" (id, created_at and the payload as written); [] when none."""
    return [{"id": e.id, "created_at": e.created_at, **e.payload} for e in store.events(run_id, kind="rollback")]


def _outer_of_events(events: list[EventRow]) -> dict[int, int | None]:
    """Outer generation of each event: its own ``outer_generation``, else the last one seen before it."""
    out: dict[int, int | None] = {}
    current: int | None = None
    for e in events:
        g = e.payload.get("outer_generation")
        if isinstance(g, int) and not isinstance(g, bool):
            current = g
        out[e.id] = current
    return out


def s_val_trajectory(store: ArchiveStore, run_id: str) -> dict[str, Any]:
    """S_val per outer generation: the incumbent's (carried forward), and each candidate's scores.

    Returns:
        dict with ``incumbent`` (list of ``{outer_generation, s_val, policy_id}``, one per generation
        reached), ``candidates`` (harness_id, outer_generation, race_estimate, s_val), ``rollbacks``
        (event id, outer_generation it happened in or after, payload), and ``current`` (the race estimate of
        the candidate the run continued from, per outer generation, from ``outer_generation`` events when the
        run writes them).
    """
    events = store.events(run_id)
    cands = store.harness_candidates(run_id)
    inc = {i.outer_generation: i for i in _typed(events, IncumbentEvent) if i.outer_generation is not None}
    last_gen = max([*inc, *(c.outer_generation for c in cands)], default=-1)
    curve, current = [], None
    for g in range(0, last_gen + 1):
        current = inc.get(g, current)
        if current is not None:
            curve.append({"outer_generation": g, "s_val": current.s_val, "policy_id": current.policy_id})
    where = _outer_of_events(events)
    return {
        "incumbent": curve,
        "candidates": [{"harness_id": c.harness_id, "outer_generation": c.outer_generation,
                        "race_estimate": c.race_estimate, "s_val": c.s_val} for c in cands],
        "rollbacks": [{"id": e.id, "outer_generation": e.payload.get("outer_generation", where[e.id]),
                       "payload": e.payload} for e in events if e.kind == "rollback"],
        "current": [{"outer_generation": o.outer_generation, "s_val": o.current_s_val}
                    for o in _typed(events, OuterGenerationEvent) if o.current_s_val is not None],
    }


def fitness_curves(store: ArchiveStore, run_id: str) -> list[dict[str, Any]]:
    """Fitness max / mean / min of the population per inner generation, one series per harness candidate.

    From the ``inner_generation`` events (population statistics after each generation); when a run
    wrote none, from the fitness rows grouped by (harness_id, inner_generation) instead.

    Returns:
        series: harness_id, outer_generation, points (list of ``{generation, max, mean, min}``).
    """
    series: dict[str, dict[str, Any]] = {}
    for e in _typed(store.events(run_id, kind="inner_generation"), InnerGenerationEvent):
        rec = e.record
        if not all(isinstance(rec.get(k), (int, float)) for k in ("max", "mean")):
            continue
        hid = str(e.harness_id)
        s = series.setdefault(hid, {"harness_id": hid, "outer_generation": e.outer_generation, "points": []})
        s["points"].append({"generation": e.generation, "max": rec["max"], "mean": rec["mean"],
                            "min": rec.get("min")})
    if series:
        return list(series.values())
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    outer: dict[str, int | None] = {}
    for r in store.evaluations(run_id, kind="fitness"):
        if r.error is None and r.inner_generation is not None:
            hid = str(r.harness_id)
            groups[(hid, r.inner_generation)].append(r.total)
            outer[hid] = r.outer_generation
    for (hid, gen), vals in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        s = series.setdefault(hid, {"harness_id": hid, "outer_generation": outer[hid], "points": []})
        s["points"].append({"generation": gen, "max": max(vals), "mean": sum(vals) / len(vals), "min": min(vals)})
    return list(series.values())


def operator_stats(store: ArchiveStore, run_id: str) -> list[dict[str, Any]]:
    """Operator success rates: a child succeeds when its fitness beats its best parent's on the same batch.

    A child is compared on the task batch of its first successful fitness evaluation with each
    parent's fitness on that batch (inner fitness is always computed per batch, so parent and child
    meet the same tasks). Children whose parents have no fitness on that batch (e.g. a parent that
    was never archived) count as ``unknown``.

    Returns:
        rows sorted by operator: operator, children, improved, equal, worse, unknown, success_rate
        (improved / compared, in [0, 1], None when nothing was compared), mean_delta (child minus
        best parent fitness, higher is better, None when nothing was compared).
    """
    fit: dict[tuple[str, str], float] = {}
    first_batch: dict[str, str] = {}
    for r in store.evaluations(run_id, kind="fitness"):
        if r.error is not None:
            continue
        fit.setdefault((r.policy_id, r.batch_id), r.total)
        first_batch.setdefault(r.policy_id, r.batch_id)
    stats: dict[str, dict[str, Any]] = {}
    for p in store.policies(run_id):
        if not p.parent_ids:
            continue
        s = stats.setdefault(p.operator, {"operator": p.operator, "children": 0, "improved": 0, "equal": 0,
                                          "worse": 0, "unknown": 0, "_deltas": []})
        s["children"] += 1
        batch = first_batch.get(p.id)
        parents = [fit[(q, batch)] for q in p.parent_ids if batch is not None and (q, batch) in fit]
        if batch is None or not parents:
            s["unknown"] += 1
            continue
        delta = fit[(p.id, batch)] - max(parents)
        s["_deltas"].append(delta)
        s["improved" if delta > 0 else "equal" if delta == 0 else "worse"] += 1
    out = []
    for name in sorted(stats):
        s = stats[name]
        deltas = s.pop("_deltas")
        s["success_rate"] = s["improved"] / len(deltas) if deltas else None
        s["mean_delta"] = _mean(deltas)
        out.append(s)
    return out



def lineage_graph(store: ArchiveStore, run_id: str, policy_id: str) -> dict[str, Any]:
    """The ancestry of ``policy_id`` back to the seeds, as nodes and edges (a DAG: crossovers have two parents).

    Parents that were never archived (e.g. a crossover child that was mutated before evaluation)
    become placeholder nodes (``archived: False``). Such a placeholder in first-parent position
    shares its child's root, so it is linked to that seed by a ``root`` edge; the seed is added
    when it is not an archived ancestor already.

    Returns:
        dict with ``policy_id``; ``nodes`` (id, archived, operator, generation, parent_ids, root_id,
        depth, fitness (best), meta_val (best), sections, prompt); ``edges`` (``{parent, child,
        kind}``, kind "parent" or "root"); ``seeds`` (ids of the seeds reached) and
        ``reaches_seeds`` (True when every path up ends at a seed).

    Raises:
        ArchiveError: ``policy_id`` is not archived in the run.
    """
    lineage = store.lineage(run_id, policy_id)
    best: dict[tuple[str, str], float] = {}
    for e in store.evaluations(run_id):
        if e.error is None and e.kind in ("fitness", "meta_val"):
            key = (e.policy_id, e.kind)
            best[key] = max(best.get(key, e.total), e.total)

    def node(p: Policy, depth: int, archived: bool = True) -> dict[str, Any]:
        return {**policy_json(p), "archived": archived, "depth": depth,
                "fitness": best.get((p.id, "fitness")), "meta_val": best.get((p.id, "meta_val"))}

    nodes: dict[str, dict[str, Any]] = {n.policy.id: node(n.policy, n.depth) for n in lineage}
    edges: list[dict[str, str]] = []
    open_ends = 0
    for n in lineage:
        for pos, parent in enumerate(n.parent_ids):
            edges.append({"parent": parent, "child": n.policy.id, "kind": "parent"})
            if parent in nodes:
                continue
            nodes[parent] = {"id": parent, "archived": False, "operator": "(not archived)",
                             "generation": n.policy.generation, "parent_ids": [], "depth": n.depth + 1,
                             "root_id": n.policy.root_id if pos == 0 else None, "sections": [], "prompt": "",
                             "adapter": None, "decoding": {}, "fitness": None, "meta_val": None}
            root = nodes[parent]["root_id"]
            if not root:
                open_ends += 1
                continue
            if root not in nodes:
                try:
                    nodes[root] = node(store.get_policy(run_id, root), n.depth + 2)
                except ArchiveError:
                    open_ends += 1
                    continue
            edges.append({"parent": root, "child": parent, "kind": "root"})
    has_parent = {e["child"] for e in edges}
    for nid, nd in nodes.items():
        if nd["archived"] and nd["operator"] != "seed" and nid not in has_parent:
            open_ends += 1
    seeds = [nid for nid, nd in nodes.items() if nd["archived"] and nd["operator"] == "seed"]
    return {"policy_id": policy_id, "nodes": list(nodes.values()), "edges": edges, "seeds": seeds,
            "reaches_seeds": open_ends == 0 and bool(seeds)}
