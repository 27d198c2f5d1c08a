"""Export one archived policy to a folder: ``prompt.md``, ``policy.json``, ``prefill.txt`` when it has an answer prefill,
and, with an adapter gene, its PEFT files.

The folder is named by the user, never built from archived text. A policy carrying a LoRA adapter gets the
adapter's ``adapter_config.json`` and ``adapter_model.safetensors`` (plus EvoTrainer's provenance file) at
the folder's top level, copied by :func:`evotrainer.adapters.export_policy`, so
``PeftModel.from_pretrained(base, folder)`` loads it (``base``: the run's policy model). Its ``policy.json``
names the export folder itself as the adapter (``"."``), so the folder loads as a policy wherever it is moved; an
adapter archived relative to its run folder (as self-evolution records them) is found next to the archive.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evotrainer.archive.locate import resolve_beside
from evotrainer.archive.store import ArchiveStore
from evotrainer.browse.views import lineage_graph, policy_detail
from evotrainer.errors import ArchiveError, EvoTrainerError
from evotrainer.genome import PREFILL_SECTION, Policy, render_system_prompt

__all__ = ["EXPORT_FORMAT", "export_policy"]

EXPORT_FORMAT = 1
"""Version of the ``policy.json`` layout."""


def export_policy(store: ArchiveStore, run_id: str, policy: Policy, out_dir: str | Path, *,
                  force: bool = False) -> dict[str, Any]:
    """Write ``prompt.md`` and ``policy.json`` for ``policy`` into ``out_dir``, and its adapter's PEFT files.

    ``policy.json`` holds: format, run_id, archive (path), exported_at, policy (genome: sections,
    adapter, decoding; id, parent ids, operator, generation, root), scores (per evaluation kind, as
    ``policy`` shows them) and lineage (every ancestor back to the seeds: id, operator, generation,
    parent ids, archived); with an adapter also ``adapter_export`` (rank, alpha, target modules, source
    folder, files copied), and ``policy.adapter`` is ``"."`` (the export folder holds the adapter).

    Args:
        out_dir: the folder to write; created when missing.
        force: write into a folder that already holds files.

    Returns:
        ``{"folder", "files", "policy_id", "adapter"}`` (paths as strings; ``files`` lists every file
        written, adapter files included).

    Raises:
        ArchiveError: ``out_dir`` is a file, or a non-empty folder without ``force``, or cannot be written;
            or the policy's adapter folder is missing or not a plain PEFT LoRA adapter.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ArchiveError(f"{out}: export target exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ArchiveError(f"{out}: export folder is not empty (pass --force to write into it)")
    detail = policy_detail(store, run_id, policy)
    graph = lineage_graph(store, run_id, policy.id)
    doc = {
        "format": EXPORT_FORMAT,
        "run_id": run_id,
        "archive": str(store.path),
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "policy": {k: detail[k] for k in ("id", "sections", "adapter", "decoding", "parent_ids", "operator",
                                          "generation", "root_id")},
        "scores": detail["scores"],
        "lineage": [{k: n.get(k) for k in ("id", "operator", "generation", "parent_ids", "root_id", "archived")}
                    for n in graph["nodes"]],
        "lineage_reaches_seeds": graph["reaches_seeds"],
    }
    prompt = render_system_prompt(policy.sections)
    try:
        out.mkdir(parents=True, exist_ok=True)
        adapter_files = _copy_adapter(policy, resolve_beside(policy.adapter, Path(store.path).resolve().parent), prompt, out, doc) \
            if policy.adapter is not None else []
        (out / "prompt.md").write_text(prompt + "\n", encoding="utf-8")
        prefill = policy.section_dict.get(PREFILL_SECTION, "")
        if prefill.strip():  # the start of the assistant turn, not part of the system prompt
            (out / "prefill.txt").write_text(prefill, encoding="utf-8")
        (out / "policy.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ArchiveError(f"{out}: cannot write the export ({exc})") from None
    extra = [str(out / "prefill.txt")] if policy.section_dict.get(PREFILL_SECTION, "").strip() else []
    return {"folder": str(out), "files": [str(out / "prompt.md"), str(out / "policy.json"), *extra, *adapter_files],
            "policy_id": policy.id, "adapter": policy.adapter}


def _copy_adapter(policy: Policy, source: str, prompt: str, out: Path, doc: dict[str, Any]) -> list[str]:
    """Copy the adapter files of ``source`` into ``out`` with :func:`evotrainer.adapters.export_policy`.

    That function writes a complete export into an empty folder; it runs in a scratch folder inside ``out``
    (so ``--force`` exports work too) and only its adapter files are moved up. Adds ``doc["adapter_export"]``
    and points ``doc["policy"]["adapter"]`` at the export folder. Returns the paths of the files placed in ``out``.
    """
    from evotrainer.adapters import export_policy as export_with_adapter  # lazy: pulls in torch

    scratch = Path(tempfile.mkdtemp(prefix=".adapter-export-", dir=out))
    try:
        try:
            export_with_adapter(prompt, source, scratch / "export", meta={"policy_id": policy.id})
        except EvoTrainerError as exc:
            raise ArchiveError(f"policy {policy.id}: its adapter {policy.adapter} cannot be exported ({exc})") from None
        info = json.loads((scratch / "export" / "policy.json").read_text(encoding="utf-8"))
        names = [n for n in info["files"] if n not in ("prompt.md", "policy.json")]
        for name in names:
            shutil.move(str(scratch / "export" / name), str(out / name))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    doc["adapter_export"] = {**info["adapter"], "files": names}
    doc["policy"]["adapter"] = "."
    return [str(out / n) for n in names]
