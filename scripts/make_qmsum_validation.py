"""Build ``validation_set/qmsum_meetings.jsonl``: real QMSum meeting windows for the meta-validation set.

Run from the repository root with the shared data beside it (the product never reads ``../shared``):

    python scripts/make_qmsum_validation.py ../shared/data/qmsum_meetings.jsonl validation_set/qmsum_meetings.jsonl

Picks ``N_PER_DOMAIN`` windows of each QMSum domain (Academic: ICSI meetings; Committee: parliamentary
committees) among windows of at most ``MAX_WORDS`` words (the longer ones cost several times a
hand-written item per rollout), evenly spaced over their length ranks, so the subset spans short and
long windows. Deterministic: depends only on the input file. The rest of the 152 windows stay
unseen by selection (``mode=evaluate`` on them is the real-meeting check, see the README).
"""

from __future__ import annotations

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


def main(src: str, dst: str) -> None:
    with open(src, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    chosen = pick(rows)
    with open(dst, "w", encoding="utf-8") as f:
        for r in chosen:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{dst}: {len(chosen)} windows ({', '.join(r['id'] for r in chosen)})")


if __name__ == "__main__":
    main(*sys.argv[1:3])
