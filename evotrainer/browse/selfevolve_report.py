"""The HTML report of a self-evolution run (``mode=selfevolve``): its facts, the dev and val scores per round
(a plotly plot, plotly.js inlined), the rounds table, the task pool and the judged samples.

``archive report`` writes it instead of the co-evolution report (:mod:`evotrainer.browse.report`, whose page
parts it reuses) when :func:`~evotrainer.browse.selfevolve_view.is_selfevolve` holds. Task inputs, references
and sampled outputs are model- or generator-written and untrusted: each is HTML-escaped (``html.escape``)
before it enters the page; plot labels carry numbers and escaped ids only.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import plotly.graph_objects as go

from evotrainer.archive.store import ArchiveStore
from evotrainer.browse import selfevolve_view
from evotrainer.browse.page import empty_plot, esc, num, page_head, plot_div, table

__all__ = ["SCORES_PLOT_ID", "build_selfevolve_report"]

SCORES_PLOT_ID = "selfevolve-scores-plot"
"""``id`` of the plot ``div`` of scores per round (tests look for it)."""

_STATUS_COLOURS = {"kept": "#2ca02c", "reverted": "#d62728", "no_pass": "#7f7f7f", "failed": "#ff7f0e"}


def _scores_figure(ov: dict[str, Any]) -> go.Figure:
    """Dev score, val S_val, mean judge score and pass rate per round; round 0 is the baseline."""
    rounds = ov["rounds"]
    fig = go.Figure()
    if not rounds:
        return empty_plot(fig, "no self-evolution round archived yet")
    xs = [0, *(r["round"] for r in rounds)]
    dev = [ov["baseline_dev"] if ov["baseline_dev"] is not None else rounds[0]["prev_dev_score"],
           *(r["dev_score"] for r in rounds)]
    val = [ov["baseline_val"], *(r["val_score"] for r in rounds)]
    fig.add_trace(go.Scatter(x=xs, y=dev, mode="lines+markers", name="dev score", line={"color": "#1f77b4", "width": 3},
                             marker={"size": 11, "color": ["#1f77b4", *(_STATUS_COLOURS.get(r["status"], "#444")
                                                                        for r in rounds)]},
                             hovertext=["baseline", *(esc(r["status"]) for r in rounds)], hoverinfo="x+y+text"))
    if any(v is not None for v in val):
        fig.add_trace(go.Scatter(x=xs, y=val, mode="lines+markers", name="val S_val (meta-validation)",
                                 line={"color": "#9467bd"}, connectgaps=True))
    fig.add_trace(go.Scatter(x=xs[1:], y=[r["mean_score"] for r in rounds], mode="markers", name="mean judge score",
                             marker={"color": "#ff7f0e", "symbol": "diamond"}))
    fig.add_trace(go.Scatter(x=xs[1:], y=[r["pass_rate"] for r in rounds], mode="markers", name="pass rate",
                             marker={"color": "#7f7f7f", "symbol": "x"}))
    fig.update_layout(title="Scores per round (round 0 = baseline; dev markers: green kept, red reverted, grey no "
                            "pass, orange failed; higher is better)",
                      xaxis={"title": "round", "dtick": 1}, yaxis={"title": "score in [0, 1]"})
    return fig


def _summary_html(ov: dict[str, Any]) -> str:
    kv = selfevolve_view.overview_facts(ov)
    return table(["", ""], [[esc(k), num(v)] for k, v in kv])


def _rounds_html(rounds: list[dict[str, Any]]) -> str:
    if not rounds:
        return "<p class='note'>No self-evolution round archived yet.</p>"
    rows = [[esc(r["round"]), f"<span class='{'ok' if r['status'] == 'kept' else 'warn'}'>{esc(r['status'])}</span>",
             esc(r["curriculum"]), esc(r["pool_size"]), esc(f"{r['n_added']} (+{r['n_duplicates']} dup.)"),
             esc(f"{r['n_kept']}/{r['n_samples']}"), num(r["pass_rate"], 2), num(r["mean_score"]),
             esc(selfevolve_view.grades_text(r["grades_requested"], r["grades_parsed"])),
             f"{num(r['prev_dev_score'])} → {num(r['dev_score'])}", num(r["val_score"]),
             esc(r["steps"]), num(r["tokens_per_second"], 0), num(r["final_loss"]), esc(r["adapter_path"]),
             esc(r["note"])] for r in rounds]
    return table(["round", "status", "curriculum", "tasks", "added", "passed", "pass rate", "mean judge",
                  "grades parsed", "dev score", "val S_val", "steps", "train tok/s", "last loss", "adapter", "note"],
                 rows)



def _text_cell(text: str | None) -> str:
    """Untrusted text, escaped, folded into a ``<details>`` showing its first words."""
    if not text:
        return "–"
    head = " ".join(text.split())[:60]
    return f"<details><summary>{esc(head)}</summary><pre>{esc(text)}</pre></details>"


def _pool_html(store: ArchiveStore, run_id: str) -> str:
    pool = store.selfevolve_pool(run_id)
    if not pool:
        return "<p class='note'>No pool task archived yet.</p>"
    rows = [[esc(p.round), esc(p.task_id), esc(p.source),
             esc(", ".join(f"{k}={v:.3g}" for k, v in p.difficulty.items())), _text_cell(p.task_input),
             _text_cell(p.reference)] for p in pool]
    return table(["round added", "task", "source", "difficulty", "input", "reference"], rows)


def _samples_html(store: ArchiveStore, run_id: str) -> str:
    samples = store.selfevolve_samples(run_id)
    if not samples:
        return "<p class='note'>No judged sample archived yet.</p>"
    parts = []
    for rnd in sorted({s.round for s in samples}):
        mine = [s for s in samples if s.round == rnd]
        rows = [[esc(s.task_id), esc(s.index), num(s.score), num(s.rule),
                 esc(", ".join("–" if g is None else f"{g:g}" for g in s.grades)),
                 "<span class='ok'>yes</span>" if s.passed else "no", esc(s.degenerate), esc(s.error),
                 _text_cell(s.output)] for s in mine]
        shown = table(["task", "sample", "judge score", "rule", "model grades", "passed", "degenerate", "error",
                       "output"], rows)
        parts.append(f"<details><summary>round {esc(rnd)}: {len(mine)} samples, "
                     f"{sum(s.passed for s in mine)} passed</summary>{shown}</details>")
    return "".join(parts)


def build_selfevolve_report(store: ArchiveStore, run_id: str) -> str:
    """The report of self-evolution run ``run_id`` as one HTML document (plotly.js inlined, about 5 MB).

    Raises:
        ArchiveError: unknown run, or an unreadable archive.
    """
    ov = selfevolve_view.selfevolve_overview(store, store.get_run(run_id))
    plot = plot_div(_scores_figure(ov), SCORES_PLOT_ID, 420)
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return f"""{page_head(f"EvoTrainer self-evolution report — {run_id}")}
<h1>EvoTrainer self-evolution run {esc(run_id)}</h1>
<p class="note">Archive {esc(store.path)} · report generated {esc(generated)} · mode=selfevolve: one policy's LoRA
adapter trained in rounds (no harness, no outer generations) · scores are higher-is-better.</p>
{_summary_html(ov)}
<h2 id="rounds">Rounds</h2>{plot}{_rounds_html(ov["rounds"])}
<h2 id="pool">Task pool</h2>{_pool_html(store, run_id)}
<h2 id="samples">Judged samples</h2>{_samples_html(store, run_id)}
</body></html>
"""
