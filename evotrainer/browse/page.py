"""The parts every HTML page of the archive is made of (the run report, the self-evolution report, the study).

A page needs no server and no network (its Content-Security-Policy forbids fetching; plotly.js is inlined). All
model-written text is untrusted: :func:`esc` HTML-escapes it wherever it enters markup or plot labels, and JSON for
a script travels in a ``<script type="application/json">`` block with ``<``, ``>`` and ``&`` escaped
(:func:`script_json`), read with ``textContent``.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from evotrainer.atomic import write_text_atomic
from evotrainer.browse.textsafe import fmt
from evotrainer.errors import ArchiveError

__all__ = ["empty_plot", "esc", "num", "page_head", "plot_div", "script_json", "table", "write_page"]

_PLOT_CONFIG = {"displaylogo": False, "responsive": True}
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:4px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f4f4f4} .row{display:flex;gap:24px;flex-wrap:wrap} .ok{color:#2a7d2a;font-weight:bold}
.warn{color:#b36b00;font-weight:bold} .bad{color:#b22222;font-weight:bold} .lineage{display:flex;gap:12px;align-items:stretch}
.lineage .graph{flex:1 1 65%;min-width:0;order:1} #prompt-panel{flex:0 0 33%;order:2;border:1px solid #ddd;padding:8px 12px;
max-height:620px;overflow:auto;background:#fafafa} pre{white-space:pre-wrap;word-wrap:break-word;margin:4px 0;
font-size:12.5px;background:#fff;border:1px solid #eee;padding:6px} .note{color:#666;font-size:13px}
#prompt-panel h3{font-size:15px;margin:6px 0} #prompt-panel h4{font-size:13px;margin:10px 0 2px} #panel-meta{font-size:13px;color:#444}
"""


def esc(x: Any) -> str:
    """HTML-escaped text of ``x`` (quotes too); "–" for None."""
    return html.escape("–" if x is None else str(x), quote=True)


def num(x: Any, digits: int = 4) -> str:
    """:func:`~evotrainer.browse.textsafe.fmt`'s cell, HTML-escaped."""
    return esc(fmt(x, digits))


def script_json(obj: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def table(headers: list[str], rows: list[list[str]]) -> str:
    """An HTML table; ``headers`` are escaped here, ``rows`` hold cells already escaped by the caller."""
    head_cells = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head_cells}</tr></thead><tbody>{body}</tbody></table>"


def plot_div(fig: go.Figure, div_id: str, height: int) -> str:
    """The plot ``fig`` as a ``div`` with id ``div_id`` and ``height`` pixels (plotly.js comes from :func:`page_head`)."""
    fig.update_layout(height=height, margin={"l": 60, "r": 20, "t": 50, "b": 50}, template="plotly_white")
    return fig.to_html(full_html=False, include_plotlyjs=False, include_mathjax=False, div_id=div_id,
                       config=_PLOT_CONFIG)


def empty_plot(fig: go.Figure, message: str) -> go.Figure:
    """``fig`` with no axes and ``message`` in its middle."""
    fig.add_annotation(text=esc(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 16, "color": "#888"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def page_head(title: str) -> str:
    """The page up to ``<body>``: no network (the CSP), the style sheet, plotly.js inlined; ``title`` escaped."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:">
<title>{esc(title)}</title>
<style>{_CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head><body>"""


def write_page(out: str | Path, doc: str, what: str = "report") -> Path:
    """Write the page ``doc`` to ``out`` (parent folders created) atomically: a temporary file in the same folder
    replaces ``out``, so a browser reloading the page of a running run never reads half a file.

    Raises:
        ArchiveError: the file cannot be written (names it and ``what``).
    """
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, doc, mode=0o644)  # a page is for reading
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot write the {what} ({exc})") from None
    return path
