"""One self-contained HTML report of a run: plots (plotly, with plotly.js inlined) and the lineage graph.

Sections: the run's summary and budget; generalisation (final best vs best seed on selection and held-out items,
the ``generalisation`` event); transfer (items no selection used, the ``transfer`` event); the yardstick
(:mod:`evotrainer.browse.yardstick_view`); fitness per inner generation; S_val per outer generation; racing (each
raced policy's paired difference against the incumbent, and the whole-set promotion decisions); harness
parameters; operator success rates; the best policy's lineage graph, whose nodes show their prompt in a side panel
when clicked; rollback events (also marked on the S_val and harness plots). Open the file from disk: it needs no
server and no network.

All model-written text is untrusted: it is escaped as :mod:`evotrainer.browse.page` says (the prompts for the side
panel travel as JSON in a script block and are shown with ``textContent``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from evotrainer.archive.store import ArchiveStore
from evotrainer.backends.urls import redact_url
from evotrainer.browse import views
from evotrainer.browse.page import empty_plot, esc, num, page_head, plot_div, script_json, table, write_page
from evotrainer.browse.transfer_view import columns as transfer_columns
from evotrainer.browse.transfer_view import table_rows as transfer_rows
from evotrainer.browse.tree import graph_layout
from evotrainer.browse.yardstick_view import ArchivedYardstick, read_yardstick
from evotrainer.errors import ArchiveError, EvoTrainerError
from evotrainer.stats.generalisation import Generalisation, columns, table_rows
from evotrainer.stats.transfer import TransferReport, read_report

__all__ = ["build_report", "write_report"]

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf")


def _mark_rollbacks(fig: go.Figure, rollbacks: list[dict[str, Any]], **where: Any) -> None:
    for rb in rollbacks:
        g = rb.get("outer_generation")
        if isinstance(g, (int, float)) and not isinstance(g, bool):
            fig.add_vline(x=g, line_dash="dot", line_color="#d62728", **where)
    if rollbacks:
        fig.add_annotation(text=f"{len(rollbacks)} rollback(s): dotted red lines", showarrow=False, x=1, y=1.08,
                           xref="paper", yref="paper", xanchor="right", font={"color": "#d62728"})



def _fitness_figure(series: list[dict[str, Any]]) -> go.Figure:
    fig = go.Figure()
    if not series:
        return empty_plot(fig, "no inner generations archived yet")
    for i, s in enumerate(series):
        color = _PALETTE[(s["outer_generation"] or 0) % len(_PALETTE)] if len(series) > len(_PALETTE) else \
            _PALETTE[i % len(_PALETTE)]
        xs = [p["generation"] for p in s["points"]]
        name = esc(s["harness_id"])
        fig.add_trace(go.Scatter(x=xs, y=[p["max"] for p in s["points"]], mode="lines+markers", name=f"{name} max",
                                 legendgroup=name, line={"color": color}))
        fig.add_trace(go.Scatter(x=xs, y=[p["mean"] for p in s["points"]], mode="lines", name=f"{name} mean",
                                 legendgroup=name, line={"color": color, "dash": "dash"}))
    fig.update_layout(title="Fitness per inner generation (population max solid, mean dashed; higher is better)",
                      xaxis_title="inner generation", yaxis_title="fitness (harness reward)", xaxis={"dtick": 1})
    return fig


def _s_val_figure(traj: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    if not traj["incumbent"] and not traj["candidates"]:
        return empty_plot(fig, "no meta-validation score archived yet")
    inc = traj["incumbent"]
    fig.add_trace(go.Scatter(
        x=[p["outer_generation"] for p in inc], y=[p["s_val"] for p in inc], mode="lines+markers",
        name="incumbent S_val (whole set)", line={"shape": "hv", "color": "#1f77b4", "width": 3},
        hovertext=[f"incumbent {esc(p['policy_id'])}" for p in inc], hoverinfo="x+y+text"))
    cands = traj["candidates"]
    scr = [c for c in cands if c["race_estimate"] is not None]
    full = [c for c in cands if c["s_val"] is not None]
    if scr:
        fig.add_trace(go.Scatter(
            x=[c["outer_generation"] for c in scr], y=[c["race_estimate"] for c in scr], mode="markers",
            name="candidate race estimate (can be < 0)", marker={"color": "#ff7f0e", "size": 8},
            hovertext=[esc(c["harness_id"]) for c in scr], hoverinfo="x+y+text"))
    if full:
        fig.add_trace(go.Scatter(
            x=[c["outer_generation"] for c in full], y=[c["s_val"] for c in full], mode="markers",
            name="promoted candidate S_val (whole set)", marker={"color": "#2ca02c", "size": 12, "symbol": "diamond"},
            hovertext=[esc(c["harness_id"]) for c in full], hoverinfo="x+y+text"))
    if traj.get("current"):
        fig.add_trace(go.Scatter(
            x=[c["outer_generation"] for c in traj["current"]], y=[c["s_val"] for c in traj["current"]],
            mode="lines+markers", name="current population S_val (screening subset)",
            line={"color": "#7f7f7f", "dash": "dash"}))
    _mark_rollbacks(fig, traj["rollbacks"])
    fig.update_layout(title="Meta-validation S_val per outer generation (higher is better)",
                      xaxis_title="outer generation", yaxis_title="S_val", xaxis={"dtick": 1})
    return fig


def _harness_figure(rows: list[dict[str, Any]], rollbacks: list[dict[str, Any]]) -> go.Figure:
    names = list(dict.fromkeys(k for r in rows for k in r["params"]))
    if not names:
        return empty_plot(go.Figure(), "no harness candidates archived yet")
    cols = 3
    nrows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[esc(n) for n in names],
                        vertical_spacing=min(0.12, 0.6 / max(1, nrows)))
    chosen = [r for r in rows if r["status"] == "best"]
    for i, name in enumerate(names):
        row, col = i // cols + 1, i % cols + 1
        pts = [r for r in rows if name in r["params"]]
        fig.add_trace(go.Scatter(
            x=[r["outer_generation"] for r in pts], y=[r["params"][name] for r in pts], mode="markers",
            marker={"color": "#9467bd", "size": 7, "opacity": 0.6}, name="candidate", legendgroup="cand",
            showlegend=i == 0, hovertext=[esc(r["harness_id"]) for r in pts], hoverinfo="x+y+text"), row=row, col=col)
        best = [r for r in chosen if name in r["params"]]
        fig.add_trace(go.Scatter(
            x=[r["outer_generation"] for r in best], y=[r["params"][name] for r in best], mode="lines+markers",
            line={"color": "#2ca02c"}, marker={"size": 9}, name="best candidate of the generation",
            legendgroup="best", showlegend=i == 0, hovertext=[esc(r["harness_id"]) for r in best],
            hoverinfo="x+y+text"), row=row, col=col)
    if rollbacks:
        _mark_rollbacks(fig, rollbacks, row="all", col="all")
    fig.update_layout(title="Harness parameters over outer generations (w: = reward weight)")
    fig.update_xaxes(dtick=1)
    return fig


def _operator_figure(stats: list[dict[str, Any]]) -> go.Figure:
    fig = go.Figure()
    if not stats:
        return empty_plot(fig, "no children archived yet")
    labels = [esc(s["operator"]) for s in stats]
    fig.add_trace(go.Bar(
        x=labels, y=[s["success_rate"] or 0.0 for s in stats], marker={"color": "#17becf"},
        text=[f"{s['improved']}/{s['improved'] + s['equal'] + s['worse']}"
              + (f" (+{s['unknown']} unknown)" if s["unknown"] else "") for s in stats],
        textposition="outside", name="success rate",
        hovertext=[f"children {s['children']}, improved {s['improved']}, equal {s['equal']}, worse {s['worse']}, "
                   f"unknown {s['unknown']}" for s in stats], hoverinfo="x+y+text"))
    fig.update_layout(title="Operator success rate (child fitness > best parent's on the same task batch)",
                      yaxis={"title": "share of compared children", "range": [0, 1.15]}, xaxis_tickangle=-30)
    return fig


def _lineage_figure(graph: dict[str, Any] | None) -> go.Figure:
    fig = go.Figure()
    if graph is None:
        return empty_plot(fig, "no scored policy yet")
    pos = graph_layout(graph)
    for kind, style in (("parent", {"color": "#999", "width": 1.5}),
                        ("root", {"color": "#bbb", "width": 1.5, "dash": "dot"})):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for e in graph["edges"]:
            if e["kind"] == kind and e["parent"] in pos and e["child"] in pos:
                xs += [pos[e["parent"]][0], pos[e["child"]][0], None]
                ys += [pos[e["parent"]][1], pos[e["child"]][1], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=style, hoverinfo="skip",
                                 name="parent → child" if kind == "parent" else "not archived → its root seed"))
    nodes = graph["nodes"]
    colors, symbols, sizes, hover, labels = [], [], [], [], []
    for n in nodes:
        top = n["id"] == graph["policy_id"]
        if top:
            colors.append("#d62728"), symbols.append("star"), sizes.append(20)
        elif not n["archived"]:
            colors.append("#cccccc"), symbols.append("circle-open"), sizes.append(12)
        elif n["operator"] == "seed":
            colors.append("#2ca02c"), symbols.append("square"), sizes.append(15)
        else:
            colors.append("#1f77b4"), symbols.append("circle"), sizes.append(13)
        labels.append(esc(n["id"][:14]))
        hover.append("<br>".join([
            f"<b>{esc(n['id'])}</b>", f"operator: {esc(n['operator'])}", f"generation: {esc(n['generation'])}",
            f"fitness (best): {num(n.get('fitness'))}", f"S_val: {num(n.get('meta_val'))}",
            "click to show the prompt" if n["archived"] else "not archived",
        ]))
    fig.add_trace(go.Scatter(
        x=[pos[n["id"]][0] for n in nodes], y=[pos[n["id"]][1] for n in nodes], mode="markers+text",
        text=labels, textposition="top center", customdata=[n["id"] for n in nodes], hovertext=hover,
        hoverinfo="text", marker={"color": colors, "symbol": symbols, "size": sizes, "line": {"width": 1}},
        name="policy (red star: best; green: seed; grey: not archived)"))
    fig.update_layout(title=f"Lineage of the best policy {esc(graph['policy_id'])} (click a node)",
                      xaxis={"title": "inner generation", "zeroline": False, "dtick": 1},
                      yaxis={"visible": False}, legend={"orientation": "h", "y": -0.15}, hovermode="closest")
    return fig



def _summary_html(ov: dict[str, Any]) -> str:
    b = ov["budget"]
    status_class = "ok" if ov["status"] == "finished" else "warn"
    kv = [("status", f"<span class='{status_class}'>{esc(ov['status'])}</span>"), ("stop reason", esc(ov["stop_reason"])),
          ("stop detail", esc(ov.get("stop_detail"))), ("held-out S_val", num(ov.get("heldout_s_val"))),
          ("seed", esc(ov["seed"])), ("created", esc(ov["created_at"])), ("last event", esc(ov["last_event_at"])),
          ("code", esc(ov["code_version"])), ("best policy", esc(ov["best_policy_id"])),
          ("best S_val", num(ov["best_s_val"])), ("initial best", esc(ov["initial_policy_id"])),
          ("initial S_val", num(ov["initial_s_val"])), ("policies archived", esc(ov["policies"])),
          ("outer generations", esc(ov["outer_generations"])), ("rollbacks", esc(ov["rollbacks"]))]
    left = table(["", ""], [[esc(k), v] for k, v in kv])
    budget_rows = [[esc(kind), esc(k["evaluations"]), esc(k["computed"]), esc(k["failed"]), esc(k["rollouts"]),
                    esc(k["generated_tokens"]), f"{k['seconds']:.0f}"] for kind, k in [*b["by_kind"].items(), ("total", b)]]
    budget = table(["kind", "evaluations", "computed", "failed", "rollouts", "generated tokens", "seconds"], budget_rows)
    config = table(["config", "value"], [[esc(k), esc(v)] for k, v in ov["config"].items()])
    return (f"<div class='row'><div>{left}</div><div>{budget}{_usage_html(ov.get('usage'), ov.get('backends'))}"
            f"<details><summary>config (selected entries)</summary>{config}</details></div></div>")


def _usage_html(usage: dict[str, Any] | None, backends: dict[str, Any] | None) -> str:
    """The model calls per role (requests, the server's prompt and completion tokens, cost) and, for servers,
    what each was sent (``usage`` and ``backend`` phase events); empty for a run archived without them."""
    if not usage:
        return ""
    rows = [[esc(role), esc(d.get("backend")), esc(d.get("requests")), esc(d.get("sent")), esc(d.get("prompt_tokens")),
             esc(d.get("completion_tokens")), esc("-" if d.get("cost_usd") is None else f"{d['cost_usd']:.4f}")]
            for role, d in usage.get("roles", {}).items()]
    calls = table(["role", "backend", "requests", "sent", "prompt tokens", "completion tokens", "cost (USD)"], rows)
    servers = ""
    if backends:
        srows = [[esc(role), esc(d.get("server")), esc(d.get("model")), esc(redact_url(d.get("base_url") or "")), esc(d.get("sent")),
                  esc(d.get("approximated")), esc(d.get("dropped")), esc(d.get("prefill") or d.get("prefill_refusal")),
                  esc(d.get("seed"))] for role, d in backends.items() if d.get("backend") == "openai"]
        if srows:
            servers = ("<details><summary>what each server was sent</summary>"
                       + table(["role", "server", "model", "URL", "sent", "approximated", "dropped", "prefill",
                                 "seed"], srows) + "</details>")
    return calls + servers


def _generalisation_html(g: Generalisation | None, problem: str | None = None) -> str:
    if g is None:
        note = problem or "No generalisation event: the run is still going, crashed, or was archived by older code."
        return f"<p class='note'>{esc(note)}</p>"
    rows = []
    for plain, tone in table_rows(g):
        cells = [esc(x) for x in plain]
        cls = {"up": "ok", "down": "bad"}.get(tone, "")
        cells[4] = f"<span class='{cls}'>{cells[4]}</span>" if cls else cells[4]
        rows.append(cells)
    verdict_class = {True: "ok", False: "bad", None: "warn"}[g.held]
    return (f"<p class='note'>Final best {esc(g.best_id)} vs best seed {esc(g.baseline_id)} (the generation-0 "
            "best), item by item; difference = final best − best seed, paired bootstrap interval over items. "
            "The selection difference is biased upward (the final best was chosen on those items).</p>"
            f"{table(list(columns(g.level)), rows)}<p class='{verdict_class}'>{esc(g.verdict)}</p>")


def _transfer_html(r: TransferReport | None, problem: str | None) -> str:
    if r is None:
        note = problem or ("No transfer event: task.transfer_path gives no items, or the run is still going or "
                           "was archived by older code.")
        return f"<p class='note'>{esc(note)}</p>"
    rows = []
    for cells, tone in transfer_rows(r):
        out = [esc(x) for x in cells]
        rows.append([*out[:2], f"<span class='{tone}'>{out[2]}</span>" if tone else out[2], out[3]])
    return (f"<p class='note'>The final best, the best seed and a plain prompt (the family's plain instruction as "
            f"the whole system prompt) on {len(r.item_ids)} items of task.transfer_path that no selection used, item by item; a "
            "difference is the first policy − the second, with a paired bootstrap interval over items.</p>"
            f"{table(list(transfer_columns(r)), rows)}<p class='{'ok' if r.transfers else 'bad'}'>{esc(r.verdict)}</p>")


def _yardstick_figure(y: ArchivedYardstick) -> go.Figure:
    """Horizontal bars, one per probe (and the policy), top to bottom in table order."""
    rows = y.rows()
    colours = ["#2ca02c" if n == "reference" else "#1f77b4" if n.startswith("policy ") else "#7f7f7f"
               for n, _, _ in rows]
    fig = go.Figure(go.Bar(y=[esc(n) for n, _, _ in rows], x=[v for _, v, _ in rows], orientation="h",
                           marker={"color": colours}, text=[f"{v:.4f}" for _, v, _ in rows], textposition="auto",
                           hoverinfo="y+x"))
    fig.update_layout(xaxis_title="mean S_val (higher is better)", yaxis={"autorange": "reversed"},
                      title="S_val of each probe", showlegend=False)
    return fig


def _yardstick_html(y: ArchivedYardstick) -> str:
    if y.report is None:
        return f"<p class='note'>{esc(y.verdict())}</p>"
    plot = plot_div(_yardstick_figure(y), "yardstick-plot", 240)
    rows = [[esc(n), num(v), esc(share)] for n, v, share in y.rows()]
    misses = y.misses()
    failed = "" if y.ok else ("<p class='bad'>The yardstick failed: S_val did not keep its probes in order, so "
                              "S_val gains in this run may reward a template rather than better outputs.</p>")
    return ("<p class='note'>S_val must score the reference at least 2x every other probe and the policy, the "
            "skeleton and another item's answer (wrong item) at most 5% of the reference, and the policy above the "
            "baseline (<code>harness/yardstick.py</code>); skeleton &le; 10% and wrong item &le; 25% of the policy are "
            f"targets, reported, not enforced. {esc(y.title())}.</p>"
            f"<div class='row'><div>{table(['probe', 'mean S_val', y.share_header()], rows)}</div>"
            f"<div style='flex:1 1 420px;min-width:0'>{plot}</div></div>"
            f"<p class='{'ok' if y.ok else 'bad'}'>{esc(y.verdict())}</p>{failed}"
            + (f"<p class='warn'>{esc(misses)}</p>" if misses else ""))


_STATUS_COLOURS = {"worse": "#d62728", "futile": "#ff7f0e", "cut": "#7f7f7f", "undecided": "#1f77b4",
                   "better": "#2ca02c"}
_STATUS_CLASS = {"better": "ok", "worse": "bad"}


def _race_figure(entries: list[dict[str, Any]]) -> go.Figure:
    """Paired difference vs incumbent (with the race's interval) against items raced, one marker per policy."""
    fig = go.Figure()
    for status, colour in _STATUS_COLOURS.items():
        rows = [r for r in entries if r["status"] == status and r["mean"] is not None]
        if not rows:
            continue
        bounded = all(r["low"] is not None and r["high"] is not None for r in rows)
        error = dict(type="data", symmetric=False, array=[r["high"] - r["mean"] for r in rows],
                     arrayminus=[r["mean"] - r["low"] for r in rows], thickness=1) if bounded else None
        fig.add_trace(go.Scatter(
            x=[r["items"] for r in rows], y=[r["mean"] for r in rows], mode="markers", name=status,
            marker=dict(color=colour, size=9), error_y=error,
            text=[esc(f"{r['policy_id']} ({r['harness_id']}) vs {r['reference']}") for r in rows],
            hovertemplate="%{text}<br>items %{x}<br>paired mean %{y:.4f}<extra></extra>"))
    fig.add_hline(y=0, line=dict(color="#444", dash="dot"))
    fig.update_layout(xaxis_title="selection items raced (log)", yaxis_title="policy − incumbent, S_val",
                      xaxis_type="log", margin=dict(t=30))
    return fig if entries else empty_plot(fig, "No race events: the run raced no candidate yet.")


def _race_html(summary: dict[str, Any], entries: list[dict[str, Any]], decisions: list[dict[str, Any]]) -> str:
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(summary["by_status"].items())) or "none"
    head = (f"<p class='note'>{esc(summary['races'])} races, {esc(summary['entries'])} policies raced ({esc(by_status)}), "
            f"{esc(summary['evaluations'])} policy-item evaluations spent racing; {esc(summary['promotions'])} "
            f"whole-set decisions, {esc(summary['promoted'])} promoted. A policy is dropped as soon as its paired "
            "interval against the incumbent lies below 0 (worse), or when its mean is not above 0 before the last "
            "stage (futile); it is promoted only when the lower bound on the whole selection set is above 0.</p>")
    rows = [[esc(r["outer_generation"]), esc(r["harness_id"]), esc(r["policy_id"]), esc(r["reference"]), esc(r["items"]),
             f"<span class='{_STATUS_CLASS.get(str(r['status']), '')}'>{esc(r['status'])}</span>",
             num(r["mean"]), f"[{num(r['low'])}, {num(r['high'])}]",
             esc(f"{r['wins']}/{r['losses']}/{r['ties']}")] for r in entries]
    entries_html = table(["outer gen", "candidate", "policy", "vs", "items", "status", "paired mean", "interval",
                    "W/L/T"], rows) if rows else ""
    drows = [[esc(d["outer_generation"]), esc(d["harness_id"]), esc(d["policy_id"]), esc(d["incumbent_policy_id"]),
              num(d["s_val"]), num(d["incumbent_s_val"]), num(d["mean"]), f"[{num(d['low'])}, {num(d['high'])}]",
              esc(f"{d['wins']}/{d['losses']}/{d['ties']}"),
              "<span class='ok'>promoted</span>" if d["promoted"] else "kept incumbent"] for d in decisions]
    dtable = ("<h3>Whole-set promotion decisions</h3>" + table(
        ["outer gen", "candidate", "policy", "incumbent", "S_val", "incumbent S_val", "paired mean", "interval",
         "W/L/T", "decision"], drows)) if drows else "<p class='note'>No whole-set promotion decisions.</p>"
    return head + (f"<details><summary>every race entry ({len(rows)})</summary>{entries_html}</details>" if rows else "") + dtable


def _lineage_data(graph: dict[str, Any] | None) -> dict[str, Any]:
    if graph is None:
        return {}
    return {n["id"]: {"operator": n["operator"], "generation": n["generation"], "archived": n["archived"],
                      "fitness": n.get("fitness"), "meta_val": n.get("meta_val"), "parents": n.get("parent_ids", []),
                      "sections": [[s["name"], s["text"]] for s in n.get("sections", [])]}
            for n in graph["nodes"]}


def _panel_html(graph: dict[str, Any] | None) -> str:
    if graph is None:
        return "<p>No scored policy yet.</p>"
    top = next(n for n in graph["nodes"] if n["id"] == graph["policy_id"])
    secs = "".join(f"<h4>{esc(s['name'])}</h4><pre>{esc(s['text'])}</pre>" for s in top["sections"])
    return (f"<h3 id='panel-title'>{esc(top['id'])} — {esc(top['operator'])} (gen {esc(top['generation'])})</h3>"
            f"<div id='panel-meta'>fitness {num(top.get('fitness'))}, S_val {num(top.get('meta_val'))}; "
            f"parents: {esc(', '.join(top['parent_ids']) or 'none (seed)')}</div><div id='panel-body'>{secs}</div>")


_CLICK_JS = """
(function () {
  var data = JSON.parse(document.getElementById('lineage-data').textContent || '{}');
  function fmt(x) { return (x === null || x === undefined) ? '\\u2013' : Number(x).toFixed(4); }
  function show(id) {
    var n = data[id];
    if (!n) { return; }
    document.getElementById('panel-title').textContent = id + ' \\u2014 ' + n.operator + ' (gen ' + n.generation + ')';
    document.getElementById('panel-meta').textContent = 'fitness ' + fmt(n.fitness) + ', S_val ' + fmt(n.meta_val) +
      '; parents: ' + ((n.parents && n.parents.length) ? n.parents.join(', ') : 'none (seed)');
    var body = document.getElementById('panel-body');
    while (body.firstChild) { body.removeChild(body.firstChild); }
    if (!n.archived) {
      var p = document.createElement('p');
      p.textContent = 'This intermediate policy was never archived; its prompt is unknown.';
      body.appendChild(p);
    }
    n.sections.forEach(function (s) {
      var h = document.createElement('h4'); h.textContent = s[0]; body.appendChild(h);
      var pre = document.createElement('pre'); pre.textContent = s[1]; body.appendChild(pre);
    });
  }
  function attach() {
    var gd = document.getElementById('lineage-graph');
    if (!gd || typeof gd.on !== 'function') { return; }
    gd.on('plotly_click', function (ev) {
      if (ev && ev.points && ev.points.length && ev.points[0].customdata) { show(ev.points[0].customdata); }
    });
  }
  if (document.readyState === 'complete') { attach(); } else { window.addEventListener('load', attach); }
})();
"""


def build_report(store: ArchiveStore, run_id: str) -> str:
    """The report of run ``run_id`` as one HTML document (plotly.js inlined, about 5 MB).

    Raises:
        ArchiveError: unknown run, or an unreadable archive.
    """
    run = store.get_run(run_id)
    ov = views.run_overview(store, run)
    traj = views.s_val_trajectory(store, run_id)
    harness = views.harness_trajectory(store, run_id)
    stats = views.operator_stats(store, run_id)
    rbs = views.rollbacks(store, run_id)
    races = views.race_entries(store, run_id)
    gen_problem = None
    try:
        gen = views.run_generalisation(store, run_id)
    except ArchiveError as exc:
        gen, gen_problem = None, f"The generalisation event could not be read: {exc}"
    transfer, transfer_problem = read_report(store.events(run_id, kind="transfer"))
    yard = read_yardstick(store, run_id)
    try:
        best = views.resolve_policy(store, run_id, None)
        graph: dict[str, Any] | None = views.lineage_graph(store, run_id, best.id)
    except EvoTrainerError:
        graph = None
    figs = {
        "fitness-plot": (_fitness_figure(views.fitness_curves(store, run_id)), 420),
        "sval-plot": (_s_val_figure(traj), 400),
        "race-plot": (_race_figure(races), 400),
        "harness-plot": (_harness_figure(harness, traj["rollbacks"]), max(320, 230 * math.ceil(
            len({k for r in harness for k in r["params"]}) / 3))),
        "operator-plot": (_operator_figure(stats), 400),
        "lineage-graph": (_lineage_figure(graph), 620),
    }
    divs = {k: plot_div(fig, k, h) for k, (fig, h) in figs.items()}
    op_table = table(["operator", "children", "improved", "equal", "worse", "unknown", "success rate", "mean Δ fitness"],
                      [[esc(s["operator"]), esc(s["children"]), esc(s["improved"]), esc(s["equal"]), esc(s["worse"]),
                        esc(s["unknown"]), num(s["success_rate"], 2), num(s["mean_delta"])] for s in stats])
    rb_html = table(["id", "time", "outer generation", "details"], [
        [esc(r["id"]), esc(r["created_at"]), esc(r.get("outer_generation")),
         esc(json.dumps({k: v for k, v in r.items() if k not in ("id", "created_at", "outer_generation")},
                       ensure_ascii=False, default=str))] for r in rbs]) if rbs else "<p class='note'>No rollback events.</p>"
    lineage_note = "" if graph is None else (
        f"<p class='note'>{len(graph['nodes'])} nodes; seeds reached: {esc(', '.join(graph['seeds']) or 'none')}"
        f"{'' if graph['reaches_seeds'] else ' (some paths end at policies that were never archived)'}. "
        "Grey open circles are intermediate children that were varied again before evaluation and so were "
        "never archived; a dotted edge links one to its root seed.</p>")
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return f"""{page_head(f"EvoTrainer report — {run_id}")}
<h1>EvoTrainer run {esc(run_id)}</h1>
<p class="note">Archive {esc(store.path)} · report generated {esc(generated)} · scores are higher-is-better.</p>
{_summary_html(ov)}
<h2 id="generalisation">Generalisation: final best vs best seed</h2>{_generalisation_html(gen, gen_problem)}
<h2 id="transfer">Transfer: items no selection used</h2>{_transfer_html(transfer, transfer_problem)}
<h2 id="yardstick">Yardstick: S_val's probes</h2>{_yardstick_html(yard)}
<h2>Fitness per inner generation</h2>{divs["fitness-plot"]}
<h2>Meta-validation S_val per outer generation</h2>{divs["sval-plot"]}
<h2 id="racing">Racing and promotions</h2>{divs["race-plot"]}{_race_html(views.race_summary(store, run_id), races,
                                                                       views.promotions(store, run_id))}
<h2>Harness parameters over outer generations</h2>{divs["harness-plot"]}
<h2>Operator success rates</h2>{divs["operator-plot"]}{op_table}
<h2 id="lineage">Lineage of the best policy</h2>{lineage_note}
<!-- the panel comes first in the page so that the graph measures its final width when plotly draws it -->
<div class="lineage"><div id="prompt-panel">{_panel_html(graph)}</div><div class="graph">{divs["lineage-graph"]}</div></div>
<h2 id="rollbacks">Rollback events</h2>{rb_html}
<script type="application/json" id="lineage-data">{script_json(_lineage_data(graph))}</script>
<script type="text/javascript">{_CLICK_JS}</script>
</body></html>
"""


def write_report(store: ArchiveStore, run_id: str, out: str | Path,
                 build: Callable[[ArchiveStore, str], str] | None = None) -> Path:
    """Write :func:`build_report` (or ``build``, e.g. the self-evolution report) to ``out`` (a file path chosen
    by the user; parent folders created), atomically (:func:`~evotrainer.browse.page.write_page`).

    Returns:
        The path written.

    Raises:
        ArchiveError: the file cannot be written, or as :func:`build_report`.
    """
    return write_page(out, (build or build_report)(store, run_id))
