"""How often each LLM operator's answer becomes a child, and why the rest are rejected, on the run's own model.

The main job's seeds are scored on one generated training batch (their worst task feeds reflective mutation),
then every seed is mutated ``--per-seed`` times by each LLM operator (rewrite, reflective rewrite, merge with a
random other seed), all plans answered in one batched mutator call, and each answer judged by the inner loop's
own checks (``search.inner_loop.plan_verdict``: an answer cut at the token limit is rejected, then ``apply_plan``: cleaning, growth, on-topic
share, leak guard, genome validity). Prints accepted shares
per operator and style with the rejection reasons, and writes every answer to ``--out`` (JSON) for reading.

    python -m benchmarks.mutator_validity                      # the main job's model (the 1.5B)
    python -m benchmarks.mutator_validity --per-seed 4 model.path=smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from benchmarks.fig_loops import compose_config


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides on +experiment=meeting_minutes")
    ap.add_argument("--per-seed", type=int, default=3, help="plans per seed and operator (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="root seed (tasks, plans, sampling)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/mutator_validity.json"))
    args = ap.parse_args(argv)

    from evotrainer.backends.embedder import shared_embedder
    from evotrainer.config import resolve_roles
    from evotrainer.evolve.llm_objective import inner_config
    from evotrainer.harness.space import space_from_specs
    from evotrainer.rollout import FeedbackRecorder, RolloutEvaluator
    from evotrainer.run.runtime import (
        build_family,
        build_llm,
        load_seed_population,
        sampling_from,
        task_settings,
    )
    from evotrainer.search.inner_loop import plan_verdict
    from evotrainer.search.phrases import PhraseBank
    from evotrainer.search.toolbox import build_toolbox
    from evotrainer.seeding import Seeds

    cfg = resolve_roles(compose_config("meeting_minutes", [f"seed={args.seed}", *args.overrides]))
    family = build_family(cfg)
    settings = task_settings(cfg, family)
    space = space_from_specs(settings.space, family.spec.difficulty_bounds, settings.difficulty, settings.reward_weights)
    harness = space.decode(space.initial_vector())
    seeds = Seeds(cfg.seed)
    population = load_seed_population(cfg)
    llm = build_llm(cfg.model)
    print(f"model {getattr(llm, 'name', cfg.model.path)}; {len(population)} seeds", flush=True)

    tasks = family.generate(seeds.numpy("tasks/g0"), harness.difficulty, cfg.task.tasks_per_generation)
    evaluator = RolloutEvaluator(llm, family, sampling=sampling_from(cfg.decoding, seed=seeds.int("decoding")))
    feedback = FeedbackRecorder(tasks)
    t0 = time.perf_counter()
    fitness = evaluator.fitness_function(tasks, harness.reward_weights, feedback=feedback)(population)
    t_eval = time.perf_counter() - t0
    print("training fitness: " + ", ".join(f"{p.id} {f:.3f}" for p, f in zip(population, fitness, strict=True)
                                           if f is not None), flush=True)

    bank = PhraseBank(shared_embedder())
    bank.add_policies(population)
    icfg = inner_config(cfg, family)
    tb = build_toolbox(icfg, mutator=llm, phrases=bank, feedback=feedback, seed_prompts=population)
    rng = random.Random(args.seed)
    plans = []
    for parent in population:
        for _ in range(args.per_seed):
            plans.append(tb.plan_rewrite(parent, rng, 1))
            reflect = tb.plan_reflect(parent, rng, 1)
            if reflect is not None:
                plans.append(reflect)
            other = rng.choice([p for p in population if p.id != parent.id])
            merge = tb.plan_merge(parent, other, rng, 1)
            if merge is not None:
                plans.append(merge)
    t0 = time.perf_counter()
    answers = llm.generate([p.request for p in plans])
    t_mut = time.perf_counter() - t0
    rows, by_op, by_kind = [], defaultdict(Counter), defaultdict(Counter)
    for plan, answer in zip(plans, answers, strict=True):
        verdict = plan_verdict(tb, plan, answer.text, getattr(answer, "finish_reason", None))
        reason = "accepted" if not isinstance(verdict, str) else verdict.split(" (")[0].split(":")[0]
        kind = plan.operator.split("/")[0]
        by_op[plan.operator][reason] += 1
        by_kind[kind][reason] += 1
        rows.append({"operator": plan.operator, "parent": plan.parent.id, "section": plan.section,
                     "old": plan.parent.section(plan.section), "answer": answer.text,
                     "finish_reason": getattr(answer, "finish_reason", None),
                     "verdict": verdict if isinstance(verdict, str) else "accepted",
                     "child": None if isinstance(verdict, str) else verdict.section(plan.section)})
    print(f"\n{len(plans)} plans answered in {t_mut:.0f} s ({t_mut / max(len(plans), 1):.1f} s each); "
          f"seeds scored in {t_eval:.0f} s")
    print(f"{'operator':<34} {'n':>3} {'accepted':>9}  rejections")
    for table in (by_kind, by_op):
        for op in sorted(table):
            c = table[op]
            n = sum(c.values())
            rej = ", ".join(f"{k} {v}" for k, v in c.most_common() if k != "accepted")
            print(f"{op:<34} {n:>3} {c['accepted'] / n:>8.0%}  {rej}")
        print()
    result = {"model": getattr(llm, "name", None), "overrides": args.overrides, "per_seed": args.per_seed,
              "seed": args.seed, "fitness": dict(zip([p.id for p in population], fitness, strict=True)),
              "seconds": {"seeds": t_eval, "mutations": t_mut},
              "by_operator": {k: dict(v) for k, v in by_kind.items()}, "by_style": {k: dict(v) for k, v in by_op.items()},
              "answers": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False))
    print(f"answers: {args.out}")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
