"""Export one archived policy to a folder: ``prompt.md`` (the system prompt) and ``policy.json``.

The folder is named by the user, never built from archived text. An adapter gene is recorded in
``policy.json`` as archived; copying the adapter folder itself is not done here yet.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evotrainer.archive.store import ArchiveStore
from evotrainer.archive.views import lineage_graph, policy_detail
from evotrainer.errors import ArchiveError
from evotrainer.search.genome import Policy, render_system_prompt

__all__ = ["EXPORT_FORMAT", "export_policy"]

EXPORT_FORMAT = 1
"""Version of the ``policy.json`` layout."""


def export_policy(store: ArchiveStore, run_id: str, policy: Policy, out_dir: str | Path, *,
                  force: bool = False) -> dict[str, Any]:
    """Write ``prompt.md`` and ``policy.json`` for ``policy`` into ``out_dir``.

    ``policy.json`` holds: format, run_id, archive (path), exported_at, policy (genome: sections,
    adapter, decoding; id, parent ids, operator, generation, root), scores (per evaluation kind, as
    ``policy`` shows them) and lineage (every ancestor back to the seeds: id, operator, generation,
    parent ids, archived).

    Args:
        out_dir: the folder to write; created when missing.
        force: write into a folder that already holds files.

    Returns:
        ``{"folder", "files", "policy_id", "adapter"}`` (paths as strings).

    Raises:
        ArchiveError: ``out_dir`` is a file, or a non-empty folder without ``force``, or cannot be written.
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
        (out / "prompt.md").write_text(prompt + "\n", encoding="utf-8")
        (out / "policy.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ArchiveError(f"{out}: cannot write the export ({exc})") from None
    return {"folder": str(out), "files": [str(out / "prompt.md"), str(out / "policy.json")],
            "policy_id": policy.id, "adapter": policy.adapter}
