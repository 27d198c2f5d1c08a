"""Keep a study's job folders in the repository, so a study too long for one session adds up across sessions.

A Hydra multirun of a study (``python -m evotrainer -m +study=ablation ...``) writes one folder per job under
``archive/multirun/<sweep>/`` and one LLM call log for the sweep; both are git-ignored and lost when the machine
changes. ``pack`` copies what ``python -m evotrainer.archive sweep`` and a resume need into compressed tarballs
under a folder of the repository; ``unpack`` puts them back where they came from, so a killed job can go on
with ``resume=<its folder>`` and the table can be printed over jobs run in several sessions.

Layout written by ``pack`` (``<dest>`` e.g. ``benchmarks/study_archives/ablation_float32``)::

    <dest>/<sweep>/sweep.tar.gz    multirun.yaml, sweep_index.json, llm_calls.db (the shared call log)
    <dest>/<sweep>/<job>.tar.gz    the job folder: archive.db, .hydra/, its log, any arm_result.json; a peer arm's
                                   folder (``gepa_seed0/``: an arm_result.json, no archive.db) is a job too

SQLite files are copied with the online backup API, so a job still running is packed in a consistent state
(its write-ahead log folded in). Left out: lock files, ``-wal``/``-shm`` files and ``report.html`` (several MB;
``python -m evotrainer.archive report <job>/archive.db`` writes it again), and any path matching an ``--exclude``
glob (relative to the job folder, e.g. a weight-training run's intermediate adapters, tens of MB each). Unpacking uses tarfile's ``data``
filter: no absolute paths, no links out of the target, no device files.

Usage (from the repository root)::

    .venv/bin/python scripts/study_archive.py pack archive/multirun/<sweep> benchmarks/study_archives/ablation_float32
    .venv/bin/python scripts/study_archive.py pack archive/multirun/<sweep> <dest> --job 0_coevolve_seed0
    .venv/bin/python scripts/study_archive.py pack archive/multirun/<sweep> <dest> --exclude 'adapters/*'
    .venv/bin/python scripts/study_archive.py list benchmarks/study_archives/ablation_float32
    .venv/bin/python scripts/study_archive.py unpack benchmarks/study_archives/ablation_float32 archive/multirun
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sqlite3
import sys
import tarfile
import tempfile
from pathlib import Path

from evotrainer.archive.schema import BUDGET_KINDS
from evotrainer.stats.ablation import ARM_RESULT_NAME

SWEEP_FILES = ("multirun.yaml", "sweep_index.json")
SKIPPED_NAMES = ("report.html",)
SKIPPED_SUFFIXES = (".lock", "-wal", "-shm", "-journal")


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(16) == b"SQLite format 3\x00"


def _copy_sqlite(src: Path, dst: Path) -> None:
    """Copy one SQLite database with the backup API (consistent while another process writes it)."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _stage(src: Path, dst: Path, exclude: tuple[str, ...] = ()) -> list[str]:
    """Copy ``src`` (a file or a folder) into ``dst`` without the skipped files and the paths (relative to ``src``)
    matching an ``exclude`` glob; return the relative names copied."""
    copied: list[str] = []
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    for path in files:
        rel = path.name if src.is_file() else path.relative_to(src).as_posix()
        if (path.name in SKIPPED_NAMES or path.name.endswith(SKIPPED_SUFFIXES)
                or any(fnmatch.fnmatchcase(rel, pattern) for pattern in exclude)):
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if _is_sqlite(path):
            _copy_sqlite(path, out)
        else:
            out.write_bytes(path.read_bytes())
        copied.append(rel)
    return copied


def _write_tar(staged: Path, arcname: str, target: Path) -> None:
    """Write ``staged`` as ``arcname`` into ``target`` atomically (a temporary file, then a rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(staged, arcname=arcname)
    partial.replace(target)


def job_folders(sweep: Path) -> list[Path]:
    """The job folders of a sweep folder: its subfolders holding an ``archive.db``, or an ``arm_result.json`` (a
    peer arm's result, e.g. ``gepa_seed0/`` of ``benchmarks/gepa_arm.py``), sorted by name."""
    return sorted(p for p in sweep.iterdir()
                  if p.is_dir() and ((p / "archive.db").is_file() or (p / ARM_RESULT_NAME).is_file()))


def pack(sweep: Path, dest: Path, jobs: list[str] | None = None, exclude: tuple[str, ...] = ()) -> list[Path]:
    """Pack a sweep's shared files and its job folders (all, or those named in ``jobs``) under ``dest/<sweep>/``,
    leaving out the job files whose path relative to the job folder matches a glob of ``exclude``.

    Returns the tarballs written. Raises ``SystemExit`` with one line when the sweep folder or a named job is
    missing.
    """
    if not sweep.is_dir():
        raise SystemExit(f"study_archive: {sweep}: no such sweep folder")
    found = {p.name: p for p in job_folders(sweep)}
    names = jobs or list(found)
    for name in names:
        if name not in found:
            raise SystemExit(f"study_archive: {sweep / name}: no job folder with an archive.db or {ARM_RESULT_NAME}")
    out_dir = dest / sweep.name
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        shared = Path(tmp) / "sweep"
        shared.mkdir()
        for name in (*SWEEP_FILES, "llm_calls.db"):
            if (sweep / name).is_file():
                _stage(sweep / name, shared)
        _write_tar(shared, ".", out_dir / "sweep.tar.gz")
        written.append(out_dir / "sweep.tar.gz")
        for name in names:
            staged = Path(tmp) / name
            _stage(found[name], staged, exclude)
            _write_tar(staged, name, out_dir / f"{name}.tar.gz")
            written.append(out_dir / f"{name}.tar.gz")
    return written


def unpack(src: Path, root: Path) -> list[Path]:
    """Extract every ``<sweep>/*.tar.gz`` under ``src`` into ``root/<sweep>/``; return the sweep folders.

    Raises ``SystemExit`` with one line when ``src`` holds no packed sweep.
    """
    sweeps = (
        sorted(p for p in src.iterdir() if p.is_dir() and (p / "sweep.tar.gz").is_file())
        if src.is_dir()
        else []
    )
    if not sweeps:
        raise SystemExit(f"study_archive: {src}: no <sweep>/sweep.tar.gz below it (written by `pack`)")
    for packed in sweeps:
        target = root / packed.name
        target.mkdir(parents=True, exist_ok=True)
        for tarball in sorted(packed.glob("*.tar.gz")):
            with tarfile.open(tarball, "r:gz") as tar:
                tar.extractall(target, filter="data")
    return [root / p.name for p in sweeps]


def describe(job: Path) -> dict:
    """One row about an unpacked job folder: its run id, code version, mode, dtype, arm, seed, whether it finished,
    the harness candidates of its finished outer generations (an outer generation writes its candidates' rows when
    it ends, so a killed generation's are not counted), the rollouts its budget counted
    (``archive.schema.budget_rollouts``) and, for a self-evolution run, its rounds archived. A peer arm's folder
    (an ``arm_result.json``, no archive) gives its arm, seed and rollouts; it is finished by construction."""
    if not (job / "archive.db").is_file():
        doc = json.loads((job / ARM_RESULT_NAME).read_text())
        return {"job": job.name, "run_id": doc.get("run_id"), "code_version": doc.get("extra", {}).get("code_version"),
                "seed": doc.get("seed"), "mode": None, "dtype": doc.get("extra", {}).get("dtype"),
                "arm": doc.get("arm"), "finished": True, "harness_candidates_of_finished_generations": 0,
                "rollouts": doc.get("rollouts"), "selfevolve_rounds": 0}
    con = sqlite3.connect(f"file:{job / 'archive.db'}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT run_id, code_version, seed, config_json FROM runs ORDER BY created_at LIMIT 1"
        ).fetchone()
        finished = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'summary'").fetchone()[0] > 0
        candidates = con.execute("SELECT COUNT(*) FROM harness_candidates").fetchone()[0]
        marks = ", ".join("?" for _ in BUDGET_KINDS)
        rollouts = con.execute(f"SELECT COALESCE(SUM(n_tasks), 0) FROM evaluations WHERE kind IN ({marks}) "
                               "AND cached = 0", BUDGET_KINDS).fetchone()[0]
        has_rounds = con.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' "
                                 "AND name = 'selfevolve_rounds'").fetchone()[0] > 0
        rounds = con.execute("SELECT COUNT(*) FROM selfevolve_rounds").fetchone()[0] if has_rounds else 0
    finally:
        con.close()
    if row is None:
        return {"job": job.name, "run_id": None}
    config = json.loads(row[3])
    # an arm only where an outer loop ran: mode=evolve, or self-evolution's training-harness search
    searched = config.get("mode") in (None, "evolve") or bool(config.get("selfevolve", {}).get("outer_loop"))
    return {
        "job": job.name,
        "run_id": row[0],
        "code_version": row[1],
        "seed": row[2],
        "mode": config.get("mode"),
        "dtype": config.get("model", {}).get("dtype"),
        "arm": config.get("outer", {}).get("candidate_source") if searched else None,
        "finished": finished,
        "harness_candidates_of_finished_generations": candidates,
        "rollouts": rollouts,
        "selfevolve_rounds": rounds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_pack = sub.add_parser("pack", help="pack a sweep folder's jobs and call log under DEST/<sweep>/")
    p_pack.add_argument("sweep", type=Path, help="archive/multirun/<sweep>")
    p_pack.add_argument("dest", type=Path, help="e.g. benchmarks/study_archives/ablation_float32")
    p_pack.add_argument("--job", action="append", help="pack only this job folder (repeatable); default: all")
    p_pack.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="leave out job files whose path relative to the job folder matches GLOB (repeatable), "
                             "e.g. 'adapters/*'")
    p_unpack = sub.add_parser("unpack", help="extract SRC/<sweep>/*.tar.gz into ROOT/<sweep>/")
    p_unpack.add_argument("src", type=Path)
    p_unpack.add_argument("root", type=Path, help="e.g. archive/multirun")
    p_list = sub.add_parser("list", help="the packed jobs: code version, mode, dtype, arm, seed, finished, the "
                                         "candidates of finished outer generations, rollouts, self-evolution rounds")
    p_list.add_argument("src", type=Path)
    args = parser.parse_args(argv)
    if args.command == "pack":
        for path in pack(args.sweep, args.dest, args.job, tuple(args.exclude)):
            print(f"{path}  {path.stat().st_size / 1e3:.0f} kB")
    elif args.command == "unpack":
        for sweep in unpack(args.src, args.root):
            print(sweep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for sweep in unpack(args.src, Path(tmp)):
                for job in job_folders(sweep):
                    print(sweep.name, json.dumps(describe(job)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
