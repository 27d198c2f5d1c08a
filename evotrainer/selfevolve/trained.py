"""A round's training kept beside its adapter, so a resumed run loads the adapter instead of training it again.

Training is the one step of a self-evolution round that the call log cannot replay (it is not an LLM call), and
two thirds of a round's time on a CPU. After a round trains, :func:`save_trained` writes ``train_result.json`` into
the round's adapter folder (atomically, after the adapter itself): the :class:`~evotrainer.adapters.train.TrainResult`
and a fingerprint of what was trained (:func:`fingerprint`: every SFT example of the pool and the replay buffer,
the LoRA settings and the parent adapter). A resumed run (``evotrainer/run/resume.py``) replays the round up to
its training from the call log and then calls :func:`load_trained`: when the folder holds a finished adapter
trained on exactly these examples, that result is used; otherwise it trains as usual. The adapter's weights on
disk are the ones the killed process evaluated, so the rows after it replay alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from evotrainer.adapters.train import SFTExample, TrainResult
from evotrainer.atomic import write_text_atomic

__all__ = ["TRAINED_NAME", "fingerprint", "load_trained", "save_trained"]

TRAINED_NAME = "train_result.json"
"""File name of the kept training result inside a round's adapter folder."""

_ADAPTER_FILES = ("adapter_config.json",)


def fingerprint(pool: Sequence[SFTExample], replay: Sequence[SFTExample], lora: Any,
                parent_adapter: str | None) -> str:
    """SHA-256 (hex) of what one training call learns from: the examples in order, the LoRA settings (a
    dataclass) and the parent adapter's path (None: trained from the base model)."""
    blob = json.dumps({"pool": [asdict(e) for e in pool], "replay": [asdict(e) for e in replay],
                       "lora": asdict(lora), "parent": parent_adapter}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def save_trained(out_dir: Path, result: TrainResult, digest: str) -> None:
    """Write ``out_dir/train_result.json``: ``result`` (its ``adapter_dir`` left out) and ``digest``."""
    data = {k: v for k, v in asdict(result).items() if k != "adapter_dir"}
    write_text_atomic(Path(out_dir) / TRAINED_NAME, json.dumps({"fingerprint": digest, "result": data}, indent=1))


def load_trained(out_dir: Path, digest: str) -> TrainResult | None:
    """The kept result of a training of ``out_dir`` on the examples ``digest`` names, or None (no file, another
    fingerprint, an unreadable file, or the adapter's files missing): then the round trains."""
    path = Path(out_dir) / TRAINED_NAME
    if not path.is_file() or not all((Path(out_dir) / name).is_file() for name in _ADAPTER_FILES):
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("fingerprint") != digest:
            return None
        known = {f.name for f in fields(TrainResult)} - {"adapter_dir"}
        data = {k: v for k, v in doc["result"].items() if k in known}
        data["losses"] = tuple(float(x) for x in data.get("losses", ()))
        return TrainResult(adapter_dir=str(out_dir), **data)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
