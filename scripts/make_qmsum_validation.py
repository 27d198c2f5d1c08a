"""Build ``evotrainer/validation_set/qmsum_meetings.jsonl``: real QMSum meeting windows (meta-validation).

The input is the 152-window QMSum extract the project keeps for tests and benchmarks
(``../shared/data/qmsum_meetings.jsonl``, from github.com/Yale-LILY/QMSum, MIT); the product never reads
it. Run from the repository root:

    python scripts/make_qmsum_validation.py ../shared/data/qmsum_meetings.jsonl \
        evotrainer/validation_set/qmsum_meetings.jsonl [--rest unseen.jsonl]

Picks ``N_PER_DOMAIN`` windows of each QMSum domain (Academic: ICSI meetings; Committee: parliamentary
committees), from any of QMSum's train/val/test splits, among windows of at most ``MAX_WORDS`` words
(the longer ones cost several times a hand-written item per rollout), evenly spaced over their length
ranks, so the subset spans short and long windows. Deterministic: depends only on the input file.
``--rest`` also writes the windows *not* picked: the real meetings no selection of the main job saw,
for the held-out check with ``mode=evaluate`` (README).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

N_PER_DOMAIN = 10
MAX_WORDS = 1600


def pick(rows: list[dict]) -> list[dict]:
    out = []
    for domain in sorted({r["meta"]["domain"] for r in rows}):
        pool = sorted((r for r in rows if r["meta"]["domain"] == domain and r["meta"]["n_words"] <= MAX_WORDS),
                      key=lambda r: (r["meta"]["n_words"], r["id"]))
        idx = np.linspace(0, len(pool) - 1, min(N_PER_DOMAIN, len(pool))).round().astype(int)
        out += [pool[i] for i in sorted(set(idx.tolist()))]
    return sorted(out, key=lambda r: r["id"])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="Pick the QMSum windows shipped in evotrainer/validation_set/.")
    parser.add_argument("source", help="the 152-window QMSum JSONL (../shared/data/qmsum_meetings.jsonl)")
    parser.add_argument("out", help="where to write the picked windows (evotrainer/validation_set/qmsum_meetings.jsonl)")
    parser.add_argument("--rest", help="also write the windows not picked to this JSONL")
    args = parser.parse_args(argv)
    with open(args.source, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    chosen = pick(rows)
    _write(args.out, chosen)
    print(f"{args.out}: {len(chosen)} windows ({', '.join(r['id'] for r in chosen)})")
    if args.rest:
        ids = {r["id"] for r in chosen}
        rest = [r for r in rows if r["id"] not in ids]
        _write(args.rest, rest)
        print(f"{args.rest}: {len(rest)} windows never used by selection")


def _write(path: str, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
