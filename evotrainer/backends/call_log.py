"""A persisted log of every generation a backend answered, so that a resumed run replays them.

A run's LLM calls (policy rollouts, mutations, reflections, merges) go through :class:`LoggedLLM`, which
stores each answer in a SQLite file beside the archive (:data:`CALL_LOG_NAME`; or the file ``archive.call_log``
names, which several runs may share: a study's runs then serve each other's identical calls), keyed by
:func:`call_key`: the request (messages, decoding settings with the seed, adapter) and the model's identity
(:func:`model_identity`; for a server, its URL and the weights it reports serving, so a resume against another
server, or two runs sharing the file, never replay one server's answers as another's: a :class:`LoggedLLM`
whose model the log holds answers of from another server says so in one warning line). A resumed run re-runs
the engine from its start; every call whose answers are all in the log is served from it without touching the
model, so the run replays what the killed process did at the cost of scoring alone
(``evotrainer/run/resume.py``).

A call with any request missing from the log runs as a whole on the real backend (the batch the
uninterrupted run would have sent), and requests the log already held keep their logged answers. Each
call's new answers are written in one transaction, so a killed process leaves whole calls or nothing.
The file is append-only (``INSERT OR IGNORE``: an answer is never replaced).

A backend whose requests are independent of each other (``independent_requests``: a server) is
sent only the requests the log has no answer for, each distinct request once, so a resumed run never pays
twice for a logged answer; when such a call fails part-way, the answers it did receive (the error's ``done``)
are logged before the error goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evotrainer import testhooks
from evotrainer.backends.base import LLM, Generation, GenerationRequest, request_hash
from evotrainer.backends.urls import redact_url
from evotrainer.errors import ArchiveError, ModelError

__all__ = ["CALL_LOG_NAME", "CallLog", "LoggedLLM", "ReportsServedModel", "call_key", "model_identity"]

logger = logging.getLogger(__name__)

CALL_LOG_NAME = "llm_calls.db"
"""File name of the call log, beside the run's ``archive.db``."""

_IDENTITY_KEYS = ("backend", "path", "gguf_file", "dtype", "max_context", "device")
_OPENAI_IDENTITY_KEYS = ("model", "server", "prefill", "tokenizer", "approximate")
_SCHEMA = """CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    generated_tokens INTEGER NOT NULL,
    finish_reason TEXT NOT NULL,
    prompt_truncated INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS identities (
    model TEXT NOT NULL,
    identity TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (model, identity)
)"""
_CHUNK = 400  # keys per SELECT ... IN (...) (SQLite's default limit is 32766 variables)


@runtime_checkable
class ReportsServedModel(Protocol):
    """A server backend that says which weights it serves (:meth:`OpenAIBackend.served_model
    <evotrainer.backends.openai_compat.OpenAIBackend.served_model>`)."""

    def served_model(self) -> Mapping[str, Any]:
        """What the server reports about the weights behind the served name (empty when nothing)."""
        ...


def model_identity(model: Any, served: Mapping[str, Any] | None = None) -> str:
    """The settings of a model role that decide its text (``ModelConfig``-like object or mapping).

    Backend, weights (``path``, ``gguf_file``), ``dtype``, ``max_context`` (prompt truncation) and ``device``.
    Batch size, threads, prefix sharing and the KV cache kind are left out: the backends give the same text
    whatever they are (``evotrainer/backends/hf.py``; for threads measured at 1-8 on one machine, not promised
    by BLAS libraries: the run records its count and a resume reuses it, ``evotrainer/backends/threads.py``). With
    ``backend=openai`` the served model's name and the ``openai`` keys that change text (``server``, ``prefill``,
    ``tokenizer``, ``approximate``) are added, and under ``server`` the server itself: its URL with credentials
    masked (:func:`~evotrainer.backends.urls.redact_url`) and ``weights``, what it reports about the weights behind
    the name (:class:`ReportsServedModel`; None when unknown). The key variable, concurrency, timeouts and prices
    are left out.

    Args:
        model: the role's settings.
        served: the backend's :meth:`ReportsServedModel.served_model`, for ``backend=openai``.
    """
    get = model.get if isinstance(model, Mapping) else (lambda k, d=None: getattr(model, k, d))
    identity = {k: get(k, None) for k in _IDENTITY_KEYS}
    if identity["backend"] == "openai":
        o = get("openai", None) or {}
        oget = o.get if isinstance(o, Mapping) else (lambda k, d=None: getattr(o, k, d))
        identity["openai"] = {k: oget(k, None) for k in _OPENAI_IDENTITY_KEYS}
        identity["openai"]["approximate"] = sorted(identity["openai"]["approximate"] or [])
        identity["server"] = {"url": redact_url(str(oget("base_url", "") or "")),
                              "weights": dict(served) if served is not None else None}
    return json.dumps(identity, sort_keys=True, default=str)


def _model_of(identity: str) -> str:
    """``identity`` without its ``server`` part: the same model and settings, whichever server answers."""
    data = json.loads(identity)
    data.pop("server", None)
    return json.dumps(data, sort_keys=True)


def _server_change(before: str, now: str) -> str:
    """What differs between the ``server`` parts of two identities, on one line."""
    a, b = json.loads(before).get("server") or {}, json.loads(now).get("server") or {}
    return "; ".join(f"{k} {json.dumps(a.get(k))[:120]} -> {json.dumps(b.get(k))[:120]}"
                     for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def call_key(identity: str, request: GenerationRequest) -> str:
    """sha256 hex of ``identity`` (:func:`model_identity`) and the request's own hash (``request_hash``).

    A greedy request (temperature 0) is keyed with seed 0, since the backends ignore its seed: runs with other
    root seeds that share a log (``archive.call_log``) share its greedy answers. A sampled request keeps its seed.
    """
    if request.params.temperature == 0 and request.params.seed != 0:
        request = replace(request, params=replace(request.params, seed=0))
    return hashlib.sha256(f"{identity}\n{request_hash(request)}".encode()).hexdigest()


class CallLog:
    """The SQLite file of logged answers (created when missing; WAL, one transaction per write).

    Args:
        path: the file, normally ``<run dir>/llm_calls.db``.

    Raises:
        ArchiveError: the file cannot be opened or is not a call log (names the path).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=10.0, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ArchiveError(f"{self.path}: cannot open the LLM call log ({exc})") from None

    def get_many(self, keys: Iterable[str]) -> dict[str, Generation]:
        """The logged answers of those ``keys`` that have one."""
        wanted = list(dict.fromkeys(keys))
        out: dict[str, Generation] = {}
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i: i + _CHUNK]
            rows = self._conn.execute(
                "SELECT key, text, prompt_tokens, generated_tokens, finish_reason, prompt_truncated FROM calls "
                f"WHERE key IN ({', '.join('?' for _ in chunk)})", chunk).fetchall()
            for key, text, pt, gt, fr, trunc in rows:
                out[key] = Generation(text, int(pt), int(gt), str(fr), bool(trunc))
        return out

    def put_many(self, items: Sequence[tuple[str, Generation]]) -> None:
        """Append answers in one transaction (a key already logged keeps its answer)."""
        if not items:
            return
        stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")  # as the archive's rows
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT OR IGNORE INTO calls (key, text, prompt_tokens, generated_tokens, finish_reason, "
                "prompt_truncated, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(k, g.text, int(g.prompt_tokens), int(g.generated_tokens), str(g.finish_reason),
                  int(bool(g.prompt_truncated)), stamp) for k, g in items])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def claim(self, identity: str) -> str | None:
        """Record that ``identity`` (:func:`model_identity`) answers through this log; return the identity most
        recently recorded for the same model and settings on another server (or other served weights), or None."""
        model = _model_of(identity)
        stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        rows = self._conn.execute("SELECT identity FROM identities WHERE model = ? ORDER BY rowid DESC",
                                  (model,)).fetchall()
        self._conn.execute("INSERT OR IGNORE INTO identities (model, identity, created_at) VALUES (?, ?, ?)",
                           (model, identity, stamp))
        known = [r[0] for r in rows]
        return None if not known or identity in known else known[0]

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        """Close the file (idempotent), folding its WAL in."""
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()


class LoggedLLM:
    """An :class:`~evotrainer.backends.base.LLM` that answers from a :class:`CallLog` when it can.

    Args:
        inner: the real backend.
        log: the call log (shared by the roles of one run).
        identity: :func:`model_identity` of ``inner``'s model. When the log holds answers of the same model and
            settings from another server or other served weights (:meth:`CallLog.claim`), a warning line says so:
            those answers are not replayed, the calls run again.
        log_adapters: False: a request naming an adapter is never served from the log nor written to it (adapter
            genes train their adapters in the run, so a folder's weights are not fixed by its path); a call holding
            any such request runs whole on ``inner`` (the batch an unlogged run sends) and only its adapter-free
            answers are logged. Calls without an adapter are logged and served as usual.

    Attributes:
        replayed: requests answered from the log; ``generated``: requests sent to ``inner``.
    """

    def __init__(self, inner: LLM, log: CallLog, identity: str, *, log_adapters: bool = True) -> None:
        self.inner = inner
        self.log = log
        self.identity = identity
        self.log_adapters = log_adapters
        other = log.claim(identity)
        if other is not None:
            logger.warning("call log %s: the answers it holds for %s came from another server (%s); they are not "
                           "replayed, these calls run again", log.path, inner.name, _server_change(other, identity))
        self.name = inner.name
        self.replayed = 0
        self.generated = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Every answer from the log, or the whole call on ``inner`` when any is missing (module docstring)."""
        keys = [call_key(self.identity, r) for r in requests]
        if not self.log_adapters and any(r.adapter is not None for r in requests):
            return self._with_adapters(requests, keys)
        logged = self.log.get_many(keys)
        if all(k in logged for k in keys):
            self.replayed += len(keys)
            return [logged[k] for k in keys]
        testhooks.reached("llm_call")
        if getattr(self.inner, "independent_requests", False):
            return self._missing_only(requests, keys, logged)
        fresh = self.inner.generate(requests)
        self.generated += len(keys)
        new = {k: g for k, g in zip(keys, fresh, strict=True) if k not in logged}
        self.log.put_many(list(new.items()))
        return [logged.get(k, g) for k, g in zip(keys, fresh, strict=True)]

    def _with_adapters(self, requests: Sequence[GenerationRequest], keys: list[str]) -> list[Generation]:
        """The whole call on ``inner``; adapter-free answers already logged are kept, new ones logged."""
        plain = [k for k, r in zip(keys, requests, strict=True) if r.adapter is None]
        logged = self.log.get_many(plain) if plain else {}
        testhooks.reached("llm_call")
        fresh = self.inner.generate(requests)
        self.generated += len(keys)
        self.log.put_many([(k, g) for k, g, r in zip(keys, fresh, requests, strict=True)
                           if r.adapter is None and k not in logged])
        return [logged.get(k, g) for k, g in zip(keys, fresh, strict=True)]

    def _missing_only(self, requests: Sequence[GenerationRequest], keys: list[str],
                      logged: dict[str, Generation]) -> list[Generation]:
        """Send each distinct unlogged request once; log what came back, also when the call failed part-way."""
        todo = list(dict.fromkeys(k for k in keys if k not in logged))
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        try:
            fresh = self.inner.generate([requests[first[k]] for k in todo])
        except ModelError as exc:
            done = getattr(exc, "done", None) or {}
            self.log.put_many([(todo[j], g) for j, g in sorted(done.items())])
            self.generated += len(done)
            raise
        self.generated += len(todo)
        self.log.put_many(list(zip(todo, fresh, strict=True)))
        answers = {**logged, **dict(zip(todo, fresh, strict=True))}
        return [answers[k] for k in keys]

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)
