"""Recorded-call replay (test helper): a recording is a JSONL file, one line per request:
``{"hash": request_hash(request), "text": ...}`` plus optional ``prompt_tokens``, ``generated_tokens``,
``finish_reason``. :class:`RecordingLLM` wraps a real backend and writes such a file; :class:`ReplayLLM` answers
from it and raises on any request it has no recording for, so a changed prompt or setting shows up as a clear
test failure, never as a silent fallback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from evotrainer.backends.base import LLM, Generation, GenerationRequest, request_hash
from evotrainer.errors import DataError, ModelError


class ReplayLLM:
    """An :class:`~evotrainer.backends.base.LLM` answering from a recording.

    Args:
        path: the JSONL recording.
        name: backend name reported to caches (use the recorded model's name to share keys).

    Attributes:
        calls: number of ``generate`` calls; ``requests``: number of requests answered.

    Raises:
        DataError: the file is missing or a line is not a JSON object with string ``hash`` and ``text``
            (the message names ``file:line``).
    """

    def __init__(self, path: str | Path, name: str = "replay") -> None:
        self.path = Path(path)
        self.name = name
        self.calls = 0
        self.requests = 0
        if not self.path.is_file():
            raise DataError(f"{self.path}: replay recording not found")
        self._records: dict[str, dict] = {}
        for lineno, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{self.path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not (isinstance(record, dict) and isinstance(record.get("hash"), str)
                    and isinstance(record.get("text"), str)):
                raise DataError(f"{self.path}:{lineno}: expected an object with string 'hash' and 'text'")
            self._records[record["hash"]] = record

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """The recorded generation of each request.

        Raises:
            ModelError: a request has no recording (names its hash and the start of its last message).
        """
        self.calls += 1
        out = []
        for request in requests:
            key = request_hash(request)
            record = self._records.get(key)
            if record is None:
                last = request.messages[-1]["content"] if request.messages else ""
                raise ModelError(
                    f"{self.path}: no recorded generation for request {key[:16]} "
                    f"(last message starts {last[:60]!r}); re-record the file"
                )
            out.append(Generation(
                text=record["text"],
                prompt_tokens=int(record.get("prompt_tokens", 0)),
                generated_tokens=int(record.get("generated_tokens", len(record["text"].split()))),
                finish_reason=str(record.get("finish_reason", "stop")),
            ))
        self.requests += len(requests)
        return out


class RecordingLLM:
    """Wraps a backend and appends each request's answer to a JSONL recording (for making replays)."""

    def __init__(self, inner: LLM, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Run ``requests`` on the wrapped backend and record the answers."""
        generations = self.inner.generate(requests)
        with self.path.open("a", encoding="utf-8") as fh:
            for request, gen in zip(requests, generations, strict=True):
                fh.write(json.dumps({
                    "hash": request_hash(request), "text": gen.text, "prompt_tokens": gen.prompt_tokens,
                    "generated_tokens": gen.generated_tokens, "finish_reason": gen.finish_reason,
                }, ensure_ascii=False) + "\n")
        return generations
