"""Build the shipped real-meeting sets from QMSum, split by meeting.

The input is the 152-window QMSum extract the project keeps for tests and benchmarks
(``../shared/data/qmsum_meetings.jsonl``, from github.com/Yale-LILY/QMSum, MIT; 65 meetings, ``meta.meeting``
names a window's meeting); the product never reads it. Run from the repository root:

    python scripts/make_qmsum_validation.py ../shared/data/qmsum_meetings.jsonl \
        validation_set/qmsum_meetings.jsonl \
        --transfer validation_set/qmsum_transfer.jsonl [--rest unseen.jsonl]

How (deterministic: depends only on the input file, no seed):

1. Only windows of at most ``MAX_WORDS`` words are shipped (longer ones cost several times a hand-written item
   per rollout). The meetings with at least one such window are split, per QMSum domain (Academic: ICSI;
   Committee: parliamentary committees), into *validation* and *transfer* meetings: rank the domain's
   meetings by the total words of their short windows (ties: meeting id) and send evenly spaced ranks
   (``1 - VAL_SHARE`` of them, offset by half a stride) to transfer, the others to validation, so both sides
   span small and large meetings.
2. ``out`` (``qmsum_meetings.jsonl``, the meta-validation set): every short window of the validation
   meetings, in an order whose every prefix mixes the domains in proportion (``validation_limit`` keeps a prefix).
   A meeting is never split between selection and anything else.
3. ``--transfer`` (``qmsum_transfer.jsonl``, the run's transfer report): ``N_TRANSFER`` short windows per
   domain from the transfer meetings only, at evenly spaced length ranks, at most ``MAX_PER_MEETING`` per
   meeting: real meetings that no selection uses.
4. ``--rest``: every other window of a non-validation meeting (the meetings with no short window, the transfer
   meetings' windows not sampled, long ones included), for benchmarks on meetings selection never saw
   (``mode=evaluate``, README). It shares meetings with ``--transfer`` (no window), never with ``out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

import numpy as np

from evotrainer.run.validation_split import interleave

MAX_WORDS = 1600
VAL_SHARE = 0.6  # of each domain's meetings; 0.6 gives 64 windows (33 Academic, 31 Committee)
N_TRANSFER = 12  # windows per domain
MAX_PER_MEETING = 2  # in the transfer sample


def _short(r: dict) -> bool:
    return r["meta"]["n_words"] <= MAX_WORDS


def split_meetings(rows: list[dict]) -> tuple[set[str], set[str]]:
    """(validation meetings, transfer meetings): per domain, evenly spaced ranks by short-window words go
    to transfer. Meetings without a short window are in neither."""
    val: set[str] = set()
    transfer: set[str] = set()
    for domain in sorted({r["meta"]["domain"] for r in rows}):
        words: dict[str, int] = defaultdict(int)
        for r in rows:
            if r["meta"]["domain"] == domain and _short(r):
                words[r["meta"]["meeting"]] += r["meta"]["n_words"]
        ranked = sorted(words, key=lambda m: (words[m], m))
        n = len(ranked)
        n_transfer = n - int(np.floor(n * VAL_SHARE + 0.5))
        held = {ranked[min(n - 1, int((i + 0.5) * n / n_transfer))] for i in range(n_transfer)}
        transfer |= held
        val |= set(ranked) - held
    return val, transfer


def pick_transfer(rows: list[dict], meetings: set[str]) -> list[dict]:
    """``N_TRANSFER`` short windows per domain of ``meetings``, spread over length ranks, at most
    ``MAX_PER_MEETING`` per meeting (a rank whose meeting is full moves to the nearest free rank)."""
    out = []
    for domain in sorted({r["meta"]["domain"] for r in rows}):
        pool = sorted((r for r in rows if r["meta"]["domain"] == domain and _short(r)
                       and r["meta"]["meeting"] in meetings), key=lambda r: (r["meta"]["n_words"], r["id"]))
        per_meeting: dict[str, int] = defaultdict(int)
        taken: set[int] = set()
        for target in np.linspace(0, len(pool) - 1, min(N_TRANSFER, len(pool))).round().astype(int).tolist():
            free = [i for i in range(len(pool)) if i not in taken
                    and per_meeting[pool[i]["meta"]["meeting"]] < MAX_PER_MEETING]
            if not free:
                break
            i = min(free, key=lambda i: (abs(i - target), i))
            taken.add(i)
            per_meeting[pool[i]["meta"]["meeting"]] += 1
        out += [pool[i] for i in sorted(taken)]
    return sorted(out, key=lambda r: r["id"])


def mixed_order(rows: list[dict]) -> list[dict]:
    """``rows`` in an order whose every prefix spans the domains in proportion and many meetings: within a domain,
    one window of each meeting in turn (meetings and their windows by id); the domains interleaved, the next window
    from the domain with the smallest share taken so far (ties: domain name). A config's ``validation_limit`` keeps a
    prefix, so a file sorted by id would give its first windows from one domain (the ICSI ids sort first)."""
    queues = []
    for domain in sorted({r["meta"]["domain"] for r in rows}):
        meetings: dict[str, list[dict]] = defaultdict(list)
        for r in sorted((r for r in rows if r["meta"]["domain"] == domain), key=lambda r: r["id"]):
            meetings[r["meta"]["meeting"]].append(r)
        lists = [meetings[m] for m in sorted(meetings)]
        queues.append([ws[i] for i in range(max(map(len, lists))) for ws in lists if i < len(ws)])
    return interleave(queues)


def build(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(validation windows in :func:`mixed_order`, transfer sample, rest sorted by id); no window in two of them and
    no validation meeting in the other two."""
    val_meetings, transfer_meetings = split_meetings(rows)
    val = mixed_order([r for r in rows if r["meta"]["meeting"] in val_meetings and _short(r)])
    transfer = pick_transfer(rows, transfer_meetings)
    sampled = {r["id"] for r in transfer}
    rest = sorted((r for r in rows if r["meta"]["meeting"] not in val_meetings and r["id"] not in sampled),
                  key=lambda r: r["id"])
    return val, transfer, rest


def _describe(rows: list[dict]) -> str:
    by: dict[str, set[str]] = defaultdict(set)
    n: dict[str, int] = defaultdict(int)
    for r in rows:
        by[r["meta"]["domain"]].add(r["meta"]["meeting"])
        n[r["meta"]["domain"]] += 1
    parts = ", ".join(f"{d} {n[d]} windows / {len(by[d])} meetings" for d in sorted(n))
    return f"{len(rows)} windows, {len(set().union(*by.values()))} meetings ({parts})"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="Split the QMSum windows by meeting into the shipped "
                                                 "meta-validation and transfer sets.")
    parser.add_argument("source", help="the 152-window QMSum JSONL (../shared/data/qmsum_meetings.jsonl)")
    parser.add_argument("out", help="meta-validation windows (validation_set/qmsum_meetings.jsonl)")
    parser.add_argument("--transfer", help="transfer sample (validation_set/qmsum_transfer.jsonl)")
    parser.add_argument("--rest", help="every other window of a non-validation meeting, for benchmarks")
    args = parser.parse_args(argv)
    with open(args.source, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    val, transfer, rest = build(rows)
    _write(args.out, val)
    print(f"{args.out}: {_describe(val)}")
    if args.transfer:
        _write(args.transfer, transfer)
        print(f"{args.transfer}: {_describe(transfer)}")
    if args.rest:
        _write(args.rest, rest)
        shared = {r["meta"]["meeting"] for r in rest} & {r["meta"]["meeting"] for r in transfer}
        print(f"{args.rest}: {_describe(rest)}; {len(shared)} meetings also in the transfer sample (no window)")


def _write(path: str, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
