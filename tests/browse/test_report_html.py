"""The HTML report: content and escaping (fast), and rendering in headless Chromium (screenshot, DOM, console)."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from evotrainer.archive import ArchiveStore, EvaluationRow, open_archive
from evotrainer.browse.cli import main
from evotrainer.browse.report import build_report, write_report
from evotrainer.genome import Policy

from .test_cli_archive import RUN, build_archive

PLOT_IDS = ("fitness-plot", "sval-plot", "race-plot", "harness-plot", "operator-plot", "lineage-graph")
"""``id`` of each plot ``div`` of the report, in page order (a run with a yardstick also gets ``yardstick-plot``)."""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test installs it)")


def _report(tmp_path: Path, **kw) -> tuple[Path, dict[str, Policy]]:
    db = tmp_path / "archive.db"
    pols = build_archive(db, **kw)
    with open_archive(db) as store:
        out = write_report(store, RUN, tmp_path / "out" / "report.html")
    return out, pols


def test_report_is_one_file_with_every_plot_and_the_lineage_data(tmp_path: Path) -> None:
    out, pols = _report(tmp_path)
    doc = out.read_text(encoding="utf-8")
    for div in PLOT_IDS:
        assert f'id="{div}"' in doc
    assert "Plotly.newPlot" in doc and len(doc) > 1_000_000  # plotly.js is inlined ...
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", doc)  # ... and nothing is fetched
    data = json.loads(re.search(r'<script type="application/json" id="lineage-data">(.*?)</script>', doc, re.S).group(1))
    assert set(data) >= {pols["c3"].id, pols["c1"].id, "alpha"}
    assert data["alpha"]["sections"][2] == ["rules", "Only facts. Keep names."]
    assert data[pols["x"].id]["archived"] is False
    assert "S_val regressed" in doc  # the rollback event table
    assert "outer.generations reached" in doc and "current population S_val" in doc


def test_model_text_is_escaped(tmp_path: Path) -> None:
    out, _ = _report(tmp_path, nasty=True)
    doc = out.read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in doc and "onerror=\"document" not in doc
    db = tmp_path / "archive.db"
    with ArchiveStore(db) as store:  # make beta the best policy so its text reaches the panel and the graph
        store.add_evaluations(RUN, [EvaluationRow(policy_id="beta", kind="meta_val", batch_id="val", total=0.9)])
        store.add_event(RUN, "summary", {"best": "beta", "best_s_val": 0.9})
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    assert "<script>alert(1)</script>" not in doc and "<img src=x" not in doc
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in doc  # pre-rendered side panel, escaped
    assert "\\u003c/script\\u003e" in doc  # the JSON for the click handler, script-safe


def test_racing_section_shows_every_race_entry_and_promotion_decision(tmp_path: Path) -> None:
    db = tmp_path / "archive.db"
    build_archive(db)
    entry = {"items": 8, "status": "worse", "mean": -0.04, "low": -0.09, "high": -0.001, "wins": 2, "losses": 5,
             "ties": 1}
    with ArchiveStore(db) as store:
        store.add_event(RUN, "race", {"outer_generation": 1, "harness_id": "g1c0", "reference": "alpha",
                                      "evaluations": 8, "entries": [
                                          {"policy_id": "<b>x</b>", **entry},
                                          {"policy_id": "p2", **entry, "items": 90, "status": "undecided",
                                           "mean": 0.0055, "low": -0.0013, "high": 0.0123}]})
        store.add_event(RUN, "promotion", {"outer_generation": 1, "harness_id": "g1c0", "policy_id": "p2",
                                           "incumbent_policy_id": "alpha", "promoted": False, "s_val": 0.0648,
                                           "incumbent_s_val": 0.0593, "paired": {"mean": 0.0055, "low": -0.0013,
                                                                                  "high": 0.0123, "n": 90,
                                                                                  "wins": 17, "losses": 11,
                                                                                  "ties": 62}})
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    section = doc[doc.index('id="racing"'):doc.index("Harness parameters over outer generations</h2>")]
    assert 'id="race-plot"' in section and "2 policies raced (undecided 1, worse 1)" in section
    assert "[-0.0013, 0.0123]" in section and "17/11/62" in section and "kept incumbent" in section
    assert "<b>x</b>" not in doc and "&lt;b&gt;x&lt;/b&gt;" in section


def test_report_of_a_crashed_run_and_of_an_empty_run(tmp_path: Path) -> None:
    out, _ = _report(tmp_path, finished=False)
    assert "running or crashed" in out.read_text(encoding="utf-8")
    db = tmp_path / "empty.db"
    with ArchiveStore(db) as store:
        store.create_run("r0", seed=0, config={}, code_version="t")
        store.add_policies("r0", [Policy.seed("solo", {"role": "R", "format": "F", "rules": "x"})])
    with open_archive(db) as store:
        doc = build_report(store, "r0")
    assert "No scored policy yet" in doc and all(f'id="{d}"' in doc for d in PLOT_IDS)


def test_report_command(tmp_path: Path, capsys) -> None:
    db = tmp_path / "archive.db"
    build_archive(db)
    out = tmp_path / "r.html"
    assert main(["report", str(db), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"report": str(out), "run_id": RUN}
    assert out.stat().st_size > 1_000_000  # plotly.js is inside


# --- rendering in headless Chromium ------------------------------------------------------------------


def _chromium(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _console_lines(stderr: str) -> list[str]:
    """Page console messages (any level) and uncaught exceptions that Chromium logged."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def _png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit, non-interlaced RGB / RGBA PNG (what Chromium writes) into (h, w, channels) uint8."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat += body
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int32)
        if ftype == 0:
            cur = line
        elif ftype == 1:  # Sub: cumulative per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) & 0xFF
        elif ftype == 2:  # Up
            cur = (line + prev) & 0xFF
        else:  # Average / Paeth depend on the reconstructed left pixel: byte by byte
            cur = line.tolist()
            up = prev.tolist()
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                if ftype == 3:
                    cur[i] = (cur[i] + ((left + up[i]) >> 1)) & 0xFF
                else:
                    ul = up[i - bpp] if i >= bpp else 0
                    p = left + up[i] - ul
                    pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else up[i] if pb <= pc else ul
                    cur[i] = (cur[i] + pred) & 0xFF
            cur = np.array(cur, dtype=np.int32)
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)


@needs_chromium
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    out, pols = _report(tmp_path)
    url = out.resolve().as_uri()

    # 1. Screenshot: the page is not blank and the plots drew (coloured traces).
    shot = tmp_path / "report.png"
    proc = _chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1400,2600", "--hide-scrollbars")
    assert shot.is_file(), proc.stderr[-2000:]
    assert _console_lines(proc.stderr) == []
    # Text and tables alone give a few hundred grey shades and almost no saturated pixels (measured: 257
    # colours, 2 saturated colour bins with plotly.js removed); the plots' coloured traces give many.
    px = _png_pixels(shot)[:, :, :3].astype(np.int32)
    colours = np.unique(px.reshape(-1, 3)[::7], axis=0)
    saturated = (px.max(axis=2) - px.min(axis=2)) > 80
    hue_bins = np.unique(px[saturated] // 32, axis=0)
    assert len(colours) > 400, len(colours)
    assert saturated.mean() > 0.002 and len(hue_bins) >= 10, (saturated.mean(), len(hue_bins))

    # 2. DOM after the scripts ran: every plot drew its SVG; the lineage graph holds a point per node.
    proc = _chromium(tmp_path, url, "--virtual-time-budget=10000", "--dump-dom")
    assert _console_lines(proc.stderr) == [], _console_lines(proc.stderr)
    dom = proc.stdout
    for div in PLOT_IDS:
        start = dom.index(f'id="{div}"')
        assert 'class="main-svg"' in dom[start:start + 3000], f"{div} did not render"
    lineage = dom[dom.index('id="lineage-graph"'):dom.index('id="rollbacks"')]
    assert lineage.count('class="point plotly-customdata"') >= 5  # c3, c1, c2, the unarchived parent, alpha
    assert ">alpha<" in lineage and f">{pols['c3'].id}<" in lineage  # node labels drawn


@needs_chromium
def test_clicking_a_lineage_node_shows_its_prompt_as_text(tmp_path: Path) -> None:
    db = tmp_path / "archive.db"
    build_archive(db, nasty=True)
    with ArchiveStore(db) as store:
        store.add_evaluations(RUN, [EvaluationRow(policy_id="beta", kind="meta_val", batch_id="val", total=0.9)])
    with open_archive(db) as store:
        doc = build_report(store, RUN)
    # Simulate the click plotly would emit on the seed node (same event object shape).
    probe = ("<script>window.addEventListener('load', function () { setTimeout(function () {"
             "document.getElementById('lineage-graph').emit('plotly_click', {points: [{customdata: 'beta'}]});"
             "}, 0); });</script></body>")
    page = tmp_path / "click.html"
    page.write_text(doc.replace("</body>", probe), encoding="utf-8")
    proc = _chromium(tmp_path, page.resolve().as_uri(), "--virtual-time-budget=10000", "--dump-dom")
    assert _console_lines(proc.stderr) == [], _console_lines(proc.stderr)
    dom = proc.stdout
    panel = dom[dom.index('id="prompt-panel"'):]
    assert re.search(r'id="panel-title">beta', panel)
    assert "You are a secretary.&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img" in panel
    assert 'data-pwned="1"' not in dom  # the onerror handler never ran
