"""Word-level diff of two policies' prompts, section by section (stdlib ``difflib.SequenceMatcher``)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from evotrainer.genome import Policy

__all__ = ["diff_policies", "diff_words", "words"]

_TOKEN = re.compile(r"\n|[^\s]+")


def words(text: str) -> list[str]:
    """Word tokens of ``text``: runs of non-space characters, and each line break as its own token."""
    return _TOKEN.findall(text)


def _join(tokens: list[str]) -> str:
    out = ""
    for t in tokens:
        if t == "\n":
            out = out.rstrip(" ") + "\n"
        else:
            out += t if (not out or out.endswith("\n")) else " " + t
    return out


def diff_words(a: str, b: str) -> list[dict[str, str]]:
    """Word-level edit script from ``a`` to ``b``.

    Returns:
        ops in order, each ``{"op", "a", "b"}`` with op one of "equal", "delete", "insert", "replace";
        ``a`` / ``b`` hold the words of each side (joined by single spaces, line breaks kept).
    """
    ta, tb = words(a), words(b)
    ops = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ta, b=tb, autojunk=False).get_opcodes():
        ops.append({"op": tag, "a": _join(ta[i1:i2]), "b": _join(tb[j1:j2])})
    return ops


def diff_policies(a: Policy, b: Policy) -> dict[str, Any]:
    """Section-by-section diff of two genomes (sections matched by name; ``a``'s order, then ``b``'s extras).

    Returns:
        dict with ``a`` and ``b`` (ids), ``sections`` (each ``{name, status, ops}`` with status
        "same", "changed", "added" (only in b) or "removed" (only in a); ops as :func:`diff_words`),
        ``changed`` (number of sections not "same"), and ``decoding`` / ``adapter`` (``{"a", "b"}``
        when they differ, else None).
    """
    sa, sb = dict(a.sections), dict(b.sections)
    names = [k for k, _ in a.sections] + [k for k, _ in b.sections if k not in sa]
    sections = []
    for name in names:
        ta, tb = sa.get(name), sb.get(name)
        if ta is None:
            status = "added"
        elif tb is None:
            status = "removed"
        else:
            status = "same" if words(ta) == words(tb) else "changed"
        sections.append({"name": name, "status": status, "ops": diff_words(ta or "", tb or "")})
    da, db = dict(a.decoding), dict(b.decoding)
    return {
        "a": a.id,
        "b": b.id,
        "sections": sections,
        "changed": sum(s["status"] != "same" for s in sections),
        "decoding": None if da == db else {"a": da, "b": db},
        "adapter": None if a.adapter == b.adapter else {"a": a.adapter, "b": b.adapter},
    }
