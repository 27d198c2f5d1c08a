"""The archive browser CLI on a small archive built here: JSON of every command, diff, bad archives."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore, EvaluationRow, HarnessCandidateRow
from evotrainer.browse.cli import main
from evotrainer.browse.diff import diff_policies
from evotrainer.browse.views import RUNNING_OR_CRASHED
from evotrainer.genome import Policy, render_system_prompt

RUN = "run-test"
NASTY = "</script><script>alert(1)</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"


def _sections(role: str, fmt: str, rules: str) -> dict[str, str]:
    return {"role": role, "format": fmt, "rules": rules}


def _harness(g: int, j: int, length: float, w: float, status: str, s_val=None, screen=0.1, best=None):
    values = {"difficulty": {"length": length, "speakers": 2 + j}, "reward_weights": {"completeness": w, "format": 1 - w},
              "extras": {}, "values": {}}
    return HarnessCandidateRow(harness_id=f"g{g}c{j}", outer_generation=g, index=j, vector=(0.5, 0.2 + 0.1 * j),
                               values=values, s_val=s_val, race_estimate=screen, best_policy_id=best, status=status)


def build_archive(path: Path, *, finished: bool = True, rollback: bool = True, nasty: bool = False) -> dict[str, Policy]:
    """A two-outer-generation run: seeds alpha and beta, a mutation, a crossover child that was mutated
    before evaluation (its parent never archived), and a gen-2 crossover of the two; scores for all."""
    alpha = Policy.seed("alpha", _sections("You write minutes.", "## Topics\n## Action items",
                                           "Only facts. Keep names."))
    beta = Policy.seed("beta", _sections("You are a secretary." + (NASTY if nasty else ""), "## Decisions",
                                         "Be brief.\x1b[2J"))
    c1 = alpha.child(list(_sections("You write minutes.", "## Topics\n## Action items",
                                    "Keep names. Only facts from the transcript.").items()),
                     operator="mut_structural/add", generation=1)
    x = alpha.child(list(_sections("You write minutes.", "## Decisions", "Only facts. Keep names.").items()),
                    operator="cx_section", generation=1, parents=[beta])
    c2 = x.child(list(_sections("You write minutes.", "## Decisions", "Only facts.").items()),
                 operator="mut_structural/drop", generation=1)
    c3 = c1.child(list(_sections("You write short minutes.", "## Topics\n## Action items", "Only facts.").items()),
                  operator="cx_section", generation=2, parents=[c2])
    with ArchiveStore(path) as store:
        store.create_run(RUN, seed=7, config={"seed": 7, "inner": {"population_size": 4, "generations": 1},
                                              "outer": {"generations": 2, "popsize": 2}}, code_version="test")
        store.add_policies(RUN, [alpha, beta])
        store.add_event(RUN, "setup", {"population": ["alpha", "beta"]})
        fit = [("alpha", "b1", 0.30, 1), ("beta", "b1", 0.20, 1), (c1.id, "b1", 0.40, 1), (c2.id, "b1", 0.10, 1),
               (c1.id, "b2", 0.35, 2), (c2.id, "b2", 0.25, 2), (c3.id, "b2", 0.50, 2)]
        store.add_evaluations(RUN, [EvaluationRow(
            policy_id="alpha", kind="meta_val", batch_id="val", total=0.20, components={"rouge_l": 0.3}, n_tasks=10,
            generated_tokens=500, seconds=1.0, outer_generation=0)])
        store.add_event(RUN, "incumbent", {"outer_generation": 0, "policy_id": "alpha", "s_val": 0.20})
        for g in (1, 2):
            store.add_event(RUN, "inner_generation", {"harness_id": f"g{g}c0", "outer_generation": g, "generation": g,
                                                      "record": {"max": 0.3 + 0.1 * g, "mean": 0.2 + 0.05 * g}})
            if g == 1:
                store.add_policies(RUN, [c1, c2])
            else:
                store.add_policies(RUN, [c3])
            store.add_evaluations(RUN, [EvaluationRow(
                policy_id=pid, kind="fitness", batch_id=b, total=t, components={"completeness": t, "format": 1.0},
                n_tasks=3, generated_tokens=100, seconds=0.5, harness_id=f"g{g}c0", outer_generation=g,
                inner_generation=g) for pid, b, t, gg in fit if gg == g])
            store.add_evaluations(RUN, [EvaluationRow(
                policy_id=c3.id if g == 2 else c1.id, kind="meta_screen", batch_id="screen", total=0.15 + 0.1 * g,
                n_tasks=2, generated_tokens=50, seconds=0.2, harness_id=f"g{g}c0", outer_generation=g)])
        store.add_evaluations(RUN, [EvaluationRow(
            policy_id=c3.id, kind="meta_val", batch_id="val", total=0.45, components={"rouge_l": 0.5}, n_tasks=10,
            generated_tokens=500, seconds=1.0, harness_id="g2c0", outer_generation=2)])
        store.add_harness_candidate(RUN, _harness(1, 0, 120, 0.5, "best", screen=0.25, best=c1.id))
        store.add_harness_candidate(RUN, _harness(1, 1, 300, 0.7, "evaluated", screen=0.05, best=c2.id))
        store.add_harness_candidate(RUN, _harness(2, 0, 200, 0.6, "best", s_val=0.45, screen=0.35, best=c3.id))
        store.add_harness_candidate(RUN, _harness(2, 1, 90, 0.4, "evaluated", screen=0.12, best=c2.id))
        store.add_event(RUN, "incumbent", {"outer_generation": 2, "policy_id": c3.id, "s_val": 0.45})
        for g, cur in ((1, 0.25), (2, 0.35)):
            store.add_event(RUN, "outer_generation", {"outer_generation": g, "current_s_val": cur})
        if rollback:
            store.add_event(RUN, "rollback", {"outer_generation": 2, "to_outer_generation": 0, "sigma": 0.1,
                                              "reason": "S_val regressed"})
        if finished:
            store.add_event(RUN, "summary", {"best": c3.id, "best_s_val": 0.45, "rollouts": 41,
                                             "stop_reason": "outer.generations reached", "heldout_s_val": 0.4})
    return {"alpha": alpha, "beta": beta, "c1": c1, "x": x, "c2": c2, "c3": c3}


@pytest.fixture()
def archive(tmp_path: Path) -> tuple[Path, dict[str, Policy]]:
    path = tmp_path / "run" / "archive.db"
    return path, build_archive(path)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys: pytest.CaptureFixture[str], *args: str):
    code, out, err = _cli(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_show_json_reports_best_budget_and_stop_reason(archive, capsys) -> None:
    path, pols = archive
    ov = _json(capsys, "show", path)
    assert ov["run_id"] == RUN and ov["status"] == "finished"
    assert ov["stop_reason"] == "outer.generations reached" and ov["heldout_s_val"] == pytest.approx(0.4)
    assert ov["best_policy_id"] == pols["c3"].id and ov["best_s_val"] == pytest.approx(0.45)
    assert ov["initial_policy_id"] == "alpha" and ov["initial_s_val"] == pytest.approx(0.20)
    budget = ov["budget"]
    assert budget["by_kind"]["fitness"]["evaluations"] == 7
    assert budget["rollouts"] == 7 * 3 + 2 * 10 + 2 * 2  # fitness + meta_val + meta_screen tasks
    assert budget["generated_tokens"] == 7 * 100 + 2 * 500 + 2 * 50
    assert ov["outer_generations"] == 2 and ov["policies"] == 5 and ov["rollbacks"] == 1
    # The folder holding the archive works as well as the file.
    assert _json(capsys, "show", path.parent)["run_id"] == RUN


def test_show_on_a_crashed_run_says_so(tmp_path: Path, capsys) -> None:
    path = tmp_path / "archive.db"
    build_archive(path, finished=False)
    ov = _json(capsys, "show", path)
    assert ov["status"] == RUNNING_OR_CRASHED and ov["stop_reason"] == RUNNING_OR_CRASHED
    assert ov["best_s_val"] == pytest.approx(0.45)  # from the evaluations when there is no summary
    code, out, _ = _cli(capsys, "show", path)
    assert code == 0 and "running or crashed" in out


def test_runs_groups_multirun_jobs_and_reports_bad_files(tmp_path: Path, capsys) -> None:
    sweep = tmp_path / "multirun" / "2026-01-01" / "12-00-00"
    for job in ("0", "1"):
        build_archive(sweep / job / "archive.db", finished=job == "0")
        (sweep / job / ".hydra").mkdir()
        (sweep / job / ".hydra" / "overrides.yaml").write_text(f"- seed={job}\n- +experiment=meeting_minutes\n")
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    (sweep / "2").mkdir()
    (sweep / "2" / "archive.db").write_bytes(b"not a database at all" * 100)
    rows = _json(capsys, "runs", tmp_path)
    assert [r["job"] for r in rows] == ["0", "1", "2"]
    assert {r["group"] for r in rows} == {str(sweep)}
    assert rows[0]["overrides"] == ["seed=0", "+experiment=meeting_minutes"]
    assert rows[0]["status"] == "finished" and rows[1]["status"] == RUNNING_OR_CRASHED
    assert rows[2]["run_id"] is None and "not an EvoTrainer archive" in rows[2]["error"]
    code, out, _ = _cli(capsys, "runs", tmp_path)
    assert code == 0 and "multirun" in out and "seed=1" in out


def test_policy_json_has_genome_scores_parents_operator(archive, capsys) -> None:
    path, pols = archive
    d = _json(capsys, "policy", path, pols["c1"].id[:6])  # a unique prefix works
    assert d["id"] == pols["c1"].id and d["operator"] == "mut_structural/add" and d["generation"] == 1
    assert d["parent_ids"] == ["alpha"] and d["children"] == [pols["c3"].id] and d["root_id"] == "alpha"
    assert [s["name"] for s in d["sections"]] == ["role", "format", "rules"]
    assert d["prompt"] == render_system_prompt(pols["c1"].sections)
    assert d["scores"]["fitness"]["n"] == 2 and d["scores"]["fitness"]["best"] == pytest.approx(0.40)
    assert d["scores"]["fitness"]["components"]["completeness"] == pytest.approx(0.375)
    assert d["scores"]["meta_screen"]["best"] == pytest.approx(0.25)
    best = _json(capsys, "policy", path)  # default: the best policy by S_val
    assert best["id"] == pols["c3"].id and best["parent_ids"] == [pols["c1"].id, pols["c2"].id]


def test_lineage_of_best_reaches_the_seeds(archive, capsys) -> None:
    path, pols = archive
    g = _json(capsys, "lineage", path)
    ids = {n["id"] for n in g["nodes"]}
    assert g["policy_id"] == pols["c3"].id
    assert {pols["c1"].id, pols["c2"].id, "alpha", pols["x"].id} <= ids
    missing = next(n for n in g["nodes"] if n["id"] == pols["x"].id)
    assert missing["archived"] is False and missing["root_id"] == "alpha"
    assert {"parent": "alpha", "child": pols["x"].id, "kind": "root"} in g["edges"]
    assert g["seeds"] == ["alpha"] and g["reaches_seeds"] is True
    code, out, _ = _cli(capsys, "lineage", path)
    assert code == 0 and "alpha" in out and "not archived" in out and "reaches the seeds" in out


def test_diff_of_two_known_prompts(archive, capsys) -> None:
    path, pols = archive
    d = _json(capsys, "diff", path, "alpha", pols["c1"].id)
    assert [(s["name"], s["status"]) for s in d["sections"]] == [("role", "same"), ("format", "same"),
                                                                 ("rules", "changed")]
    assert d["changed"] == 1 and d["decoding"] is None and d["adapter"] is None
    ops = [(o["op"], o["a"], o["b"]) for o in d["sections"][2]["ops"]]
    assert ops == [("delete", "Only facts.", ""), ("equal", "Keep names.", "Keep names."),
                   ("insert", "", "Only facts from the transcript.")]
    code, out, _ = _cli(capsys, "diff", path, "alpha", pols["c1"].id)
    assert code == 0 and "[-Only facts.-] Keep names. {+Only facts from the transcript.+}" in out


def test_diff_words_keeps_line_breaks() -> None:
    from evotrainer.browse.diff import diff_words

    assert diff_words("## Topics\n## Action items", "## Topics\n## Decisions\nBe brief") == [
        {"op": "equal", "a": "## Topics\n##", "b": "## Topics\n##"},
        {"op": "replace", "a": "Action items", "b": "Decisions\nBe brief"},
    ]


def test_diff_sections_added_and_removed() -> None:
    a = Policy.seed("a", {"role": "R", "format": "F", "rules": "x", "examples": "E one"})
    b = Policy.seed("b", {"role": "R", "format": "F", "rules": "x", "style": "S"})
    d = diff_policies(a, b)
    assert [(s["name"], s["status"]) for s in d["sections"]][-2:] == [("examples", "removed"), ("style", "added")]
    assert d["sections"][-1]["ops"] == [{"op": "insert", "a": "", "b": "S"}]


def test_best_json_ranks_by_kind(archive, capsys) -> None:
    path, pols = archive
    rows = _json(capsys, "best", path)
    assert [r["policy_id"] for r in rows] == [pols["c3"].id, "alpha"]
    assert rows[0]["score"] == pytest.approx(0.45) and rows[0]["rank"] == 1
    rows = _json(capsys, "best", path, "--by", "fitness", "-n", "3")
    assert [r["policy_id"] for r in rows] == [pols["c3"].id, pols["c1"].id, "alpha"]
    code, _, err = _cli(capsys, "best", path, "--by", "nonsense")
    assert code != 0 and "--by" in err


def test_harness_json_lists_candidates_with_values(archive, capsys) -> None:
    path, pols = archive
    rows = _json(capsys, "harness", path)
    assert [r["harness_id"] for r in rows] == ["g1c0", "g1c1", "g2c0", "g2c1"]
    assert rows[2]["s_val"] == pytest.approx(0.45) and rows[2]["status"] == "best"
    assert rows[0]["params"] == {"length": 120, "speakers": 2, "w:completeness": 0.5, "w:format": 0.5}
    code, out, _ = _cli(capsys, "harness", path)
    assert code == 0 and "length=120" in out


def test_rollbacks_json(tmp_path: Path, archive, capsys) -> None:
    path, _ = archive
    rows = _json(capsys, "rollbacks", path)
    assert len(rows) == 1 and rows[0]["reason"] == "S_val regressed" and rows[0]["outer_generation"] == 2
    plain = tmp_path / "plain.db"
    build_archive(plain, rollback=False)
    assert _json(capsys, "rollbacks", plain) == []
    code, out, _ = _cli(capsys, "rollbacks", plain)
    assert code == 0 and "no rollback events" in out


def test_export_writes_prompt_and_policy_json(tmp_path: Path, archive, capsys) -> None:
    path, pols = archive
    out_dir = tmp_path / "exported"
    res = _json(capsys, "export", path, "--out", out_dir)
    assert res["policy_id"] == pols["c3"].id
    assert (out_dir / "prompt.md").read_text(encoding="utf-8") == render_system_prompt(pols["c3"].sections) + "\n"
    doc = json.loads((out_dir / "policy.json").read_text(encoding="utf-8"))
    assert doc["policy"]["id"] == pols["c3"].id and doc["policy"]["operator"] == "cx_section"
    assert [s["name"] for s in doc["policy"]["sections"]] == ["role", "format", "rules"]
    assert {n["id"] for n in doc["lineage"]} >= {"alpha", pols["c1"].id} and doc["lineage_reaches_seeds"]
    assert doc["scores"]["meta_val"]["best"] == pytest.approx(0.45)
    code, _, err = _cli(capsys, "export", path, "alpha", "--out", out_dir)  # non-empty folder
    assert code == 2 and "not empty" in err
    assert _json(capsys, "export", path, "alpha", "--out", out_dir, "--force")["policy_id"] == "alpha"


def test_every_command_has_help(capsys) -> None:
    for cmd in ("runs", "show", "policy", "lineage", "diff", "best", "harness", "rollbacks", "export", "report"):
        code, out, _ = _cli(capsys, cmd, "--help")
        assert code == 0 and "Usage" in out, cmd


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"\x00garbage, not SQLite" * 50)
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    return {"corrupt": corrupt, "foreign": foreign, "missing": tmp_path / "nope.db", "empty dir": empty_dir}


@pytest.mark.parametrize("kind", ["corrupt", "foreign", "missing", "empty dir"])
def test_bad_archive_gives_one_clear_line(tmp_path: Path, capsys, kind: str) -> None:
    bad = _bad_files(tmp_path)[kind]
    code, out, err = _cli(capsys, "show", bad)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0], err
    assert "Traceback" not in err


def test_bad_archive_in_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    bad = _bad_files(tmp_path)["foreign"]
    env = dict(os.environ, COLUMNS="100")
    proc = subprocess.run([sys.executable, "-m", "evotrainer.archive", "lineage", str(bad)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "not an EvoTrainer archive" in proc.stderr


def test_unknown_run_or_policy(archive, capsys) -> None:
    path, _ = archive
    for args in (("show", path, "--run", "nope"), ("policy", path, "zzz"), ("diff", path, "alpha", "zzz")):
        code, _, err = _cli(capsys, *args)
        assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_terminal_escapes_in_model_text_are_neutralised(tmp_path: Path, capsys) -> None:
    path = tmp_path / "archive.db"
    build_archive(path, nasty=True)
    code, out, _ = _cli(capsys, "policy", path, "beta")
    assert code == 0 and "\x1b" not in out and "\\x1b[2J" in out
    assert "</script>" in out  # shown as text, verbatim
    code, out, _ = _cli(capsys, "policy", path, "beta", "--json")
    assert json.loads(out)["sections"][2]["text"] == "Be brief.\x1b[2J" and "\x1b" not in out


def test_reads_while_a_writer_holds_the_archive(archive, capsys) -> None:
    path, _ = archive
    with ArchiveStore(path) as writer:  # a run still going: open for writing, in WAL mode
        writer.add_event(RUN, "phase", {"name": "x"})
        assert _json(capsys, "show", path)["run_id"] == RUN
        writer.add_event(RUN, "phase", {"name": "y"})  # the reader held no lock
