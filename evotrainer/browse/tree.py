"""The lineage of a policy as a terminal tree (``rich.tree``) and as positions for a graph plot."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from rich.tree import Tree

from evotrainer.browse.textsafe import clip, fmt

__all__ = ["graph_layout", "lineage_tree"]


def _label(node: dict[str, Any], via_root: bool = False) -> Text:
    t = Text()
    if via_root:
        t.append("root → ", style="dim")
    if not node["archived"]:
        t.append(node["id"], style="yellow")
        t.append("  (not archived", style="dim")
        t.append("; descends from its child's root seed)" if node.get("root_id") else ")", style="dim")
        return t
    seed = node["operator"] == "seed"
    t.append(node["id"], style="bold green" if seed else "bold")
    t.append(f"  {node['operator']}", style="cyan")
    t.append(f"  gen {node['generation']}  fitness {fmt(node['fitness'])}")
    if node.get("meta_val") is not None:
        t.append(f"  S_val {fmt(node['meta_val'])}", style="magenta")
    if seed:
        t.append(f"  [seed] {clip(node['prompt'], 60)}", style="green")
    return t


def lineage_tree(graph: dict[str, Any]) -> Tree:
    """A rich Tree rooted at the graph's policy whose branches are its parents, back to the seeds.

    A node reached a second time (a shared ancestor) is shown once more as "(shown above)" without
    its ancestors. All text passes through :func:`~evotrainer.browse.textsafe.clip`; labels are
    :class:`rich.text.Text`, so model text is never read as markup.

    Args:
        graph: :func:`evotrainer.browse.views.lineage_graph` output.
    """
    nodes = {n["id"]: n for n in graph["nodes"]}
    parents: dict[str, list[tuple[str, str]]] = {}
    for e in graph["edges"]:
        parents.setdefault(e["child"], []).append((e["parent"], e["kind"]))
    top = nodes[graph["policy_id"]]
    tree = Tree(_label(top))
    shown: set[str] = {top["id"]}
    # Preorder walk with an explicit stack (lineages can be deeper than the recursion limit).
    stack: list[tuple[Tree, str, str]] = [(tree, pid, kind) for pid, kind in reversed(parents.get(top["id"], []))]
    while stack:
        branch, nid, kind = stack.pop()
        label = _label(nodes[nid], kind == "root")
        if nid in shown:
            label.append("  (shown above)", style="dim")
            branch.add(label)
            continue
        shown.add(nid)
        sub = branch.add(label)
        stack.extend((sub, pid, k) for pid, k in reversed(parents.get(nid, [])))
    return tree


def graph_layout(graph: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Plot positions: x = inner generation (a placeholder sits half a step before its child), y spreads
    the nodes of one column evenly around 0, in the order they appear in ``graph["nodes"]``.

    Returns:
        ``{node_id: (x, y)}``.
    """
    x: dict[str, float] = {}
    child_gen = {e["parent"]: None for e in graph["edges"]}
    gens = {n["id"]: n["generation"] for n in graph["nodes"]}
    for e in graph["edges"]:
        g = gens.get(e["child"])
        if g is not None:
            prev = child_gen.get(e["parent"])
            child_gen[e["parent"]] = g if prev is None else min(prev, g)
    for n in graph["nodes"]:
        if n["archived"]:
            x[n["id"]] = float(n["generation"])
        else:
            cg = child_gen.get(n["id"])
            x[n["id"]] = (float(cg) if cg is not None else float(n["generation"])) - 0.5
    columns: dict[float, list[str]] = {}
    for n in graph["nodes"]:
        columns.setdefault(x[n["id"]], []).append(n["id"])
    pos = {}
    for col, ids in columns.items():
        k = len(ids)
        for i, nid in enumerate(ids):
            pos[nid] = (col, (i - (k - 1) / 2.0))
    return pos
