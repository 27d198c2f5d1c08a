"""Write ``validation_set/meeting_minutes_core.txt``: the 40 hand-written meetings the main job uses.

A stratified subset of ``meeting_minutes.jsonl`` (100 items), so that real meetings (QMSum) are the majority
of the main job's meta-validation set while the hand-written items keep their owned-action-item checks.
Run from the repository root:

    python scripts/make_core_validation.py validation_set/meeting_minutes.jsonl \
        validation_set/meeting_minutes_core.txt

How (deterministic: depends only on the input, no seed): ``N`` slots are shared out over the seven styles in
proportion to their counts (largest remainder; ties: the style seen first); within a style, the items that
have action items are ranked by length (words; Chinese and Japanese: characters / 1.7, as the README counts
them; ties: id) and evenly spaced ranks are taken, so every style spans short and long meetings. Meetings
without action items (8 of 100) are left out: the core exists to keep the owned-action-item checks.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

N = 40
HEADER = """\
# The main job's hand-written meta-validation items (task.validation_subset): {n} of the {total} ids of
# meeting_minutes.jsonl, stratified by style and length, all with action items.
# Built by scripts/make_core_validation.py (deterministic); validation_set/README.md says why.
"""


def length(r: dict) -> float:
    """Transcript length in words (CJK: characters / 1.7)."""
    meta = r["meta"]
    if meta.get("language") in ("zh", "ja") and "n_chars" in meta:
        return meta["n_chars"] / 1.7
    return float(meta["n_words"])


def allocate(counts: dict[str, int], k: int) -> dict[str, int]:
    """``k`` shared out in proportion to ``counts`` (largest remainder; ties: the key seen first)."""
    total = sum(counts.values())
    exact = {s: k * n / total for s, n in counts.items()}
    out = {s: math.floor(e) for s, e in exact.items()}
    for s in sorted(counts, key=lambda s: -(exact[s] - out[s]))[:k - sum(out.values())]:
        out[s] += 1
    return out


def pick(rows: list[dict], n: int = N) -> list[dict]:
    """``n`` items with action items, stratified by style (proportional) and length (evenly spaced ranks)."""
    styles: dict[str, int] = {}
    for r in rows:
        styles[r["style"]] = styles.get(r["style"], 0) + 1
    out = []
    for style, k in allocate(styles, n).items():
        pool = sorted((r for r in rows if r["style"] == style and r["action_items"]),
                      key=lambda r: (length(r), r["id"]))
        idx = np.linspace(0, len(pool) - 1, min(k, len(pool))).round().astype(int)
        out += [pool[i] for i in sorted(set(idx.tolist()))]
    return sorted(out, key=lambda r: r["id"])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="Pick the main job's hand-written meta-validation items.")
    parser.add_argument("source", help="validation_set/meeting_minutes.jsonl")
    parser.add_argument("out", help="validation_set/meeting_minutes_core.txt")
    args = parser.parse_args(argv)
    with open(args.source, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    chosen = pick(rows)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(HEADER.format(n=len(chosen), total=len(rows)))
        f.writelines(r["id"] + "\n" for r in chosen)
    langs = sorted({r["meta"]["language"] for r in chosen})
    print(f"{args.out}: {len(chosen)} ids, {sum(len(r['action_items']) for r in chosen)} action items, "
          f"lengths {min(length(r) for r in chosen):.0f}-{max(length(r) for r in chosen):.0f} words, "
          f"languages {langs}")


if __name__ == "__main__":
    main(sys.argv[1:])
