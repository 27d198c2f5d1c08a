"""``mode=evaluate`` on any dataset and any policy: refs, per-stratum results, comparison, files."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from evotrainer.archive import ArchiveStore, EvaluationRow
from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.browse.policy_export import export_policy
from evotrainer.config import Config, validate
from evotrainer.errors import ArchiveError, ConfigError
from evotrainer.evaluate.report import compare, item_strata, shown_kinds, summarise
from evotrainer.evaluate.run import run_evaluate, select_policies
from evotrainer.genome import Policy
from evotrainer.rollout import MetaEvaluation
from evotrainer.run.policy_refs import load_exported_policy, resolve_policy_ref, resolve_policy_refs
from evotrainer.stats.bootstrap import paired_difference, rng_for
from evotrainer.tasks.meeting_minutes.family import MeetingMinutes
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask

SEEDS = [Policy.seed("terse", {"role": "R", "format": "F", "rules": "X"}),
         Policy.seed("wordy", {"role": "You write minutes.", "format": "## Topics", "rules": "Be exact."})]


class MinutesLLM:
    """Deterministic fake policy model: Markdown minutes whose quality depends on the system prompt."""

    name = "fake-minutes"

    def __init__(self) -> None:
        self.requests = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.requests += len(requests)
        out = []
        for r in requests:
            system, user = r.messages[0]["content"], r.messages[-1]["content"]
            good = int(hashlib.sha256(system.encode()).hexdigest(), 16) % 3 != 0
            speaker = next((line.split(":")[0] for line in user.splitlines() if ": " in line), "Someone")
            text = ("## Topics\n- Budget\n## Decisions\n- Phase the boiler\n## Action items\n"
                    f"- {speaker}: ask for a revised quote") if good else "## Topics\n- Weather talk"
            out.append(Generation(text, 10, len(text.split()), "stop"))
        return out


class FakeEmbedder:
    name = "fake-embedder"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8).astype(np.float32) for t in texts]
        arr = np.stack(rows) if rows else np.zeros((0, 32), np.float32)
        return arr / np.maximum(np.linalg.norm(arr, axis=1, keepdims=True), 1e-9)


def _folder_dataset(root: Path) -> Path:
    minutes = "## Topics\n- Budget\n## Decisions\n- Phase the boiler\n## Action items\n- {o}: ask for a revised quote\n"
    long_text = "\n".join(f"Aiko: point {i} " + "word " * 20 for i in range(20))  # ~460 words
    for sub, name, text, owner in (("club", "a", "Aiko: the budget\nBao: the boiler", "Aiko"),
                                   ("club", "b", "[00:01] Bao: the quote\n[00:09] Aiko: fine", "Bao"),
                                   ("board", "c", long_text, "Aiko")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / f"{name}.txt").write_text(text)
        (root / sub / f"{name}.md").write_text(minutes.format(o=owner))
    return root


def _archive(path: Path) -> Policy:
    child = SEEDS[0].child([("role", "You keep minutes."), ("format", "F"), ("rules", "X")],
                           operator="mut_phrase", generation=1)
    with ArchiveStore(path) as store:
        store.create_run("r1", seed=0, config={}, code_version="t")
        store.add_policies("r1", [SEEDS[0], child])
        store.add_evaluations("r1", [EvaluationRow(child.id, "meta_val", "b", 0.7, {}, 3),
                                     EvaluationRow("terse", "meta_val", "b", 0.5, {}, 3)])
    return child


# --- policy references ----------------------------------------------------------------------------

def test_refs_resolve_seed_archive_and_export(tmp_path: Path) -> None:
    db = tmp_path / "run" / "archive.db"
    db.parent.mkdir()
    child = _archive(db)
    assert resolve_policy_ref("terse", seeds=SEEDS).policy == SEEDS[0]
    by_prefix = resolve_policy_ref(f"archive:{child.id[:6]}", seeds=SEEDS, archive=str(db.parent))
    assert by_prefix.policy == child and by_prefix.label == f"archive:{child.id}" and by_prefix.kind == "archive"
    assert resolve_policy_ref("archive:best", seeds=SEEDS, archive=str(db)).policy == child
    with ArchiveStore(db, read_only=True) as store:
        export_policy(store, "r1", child, tmp_path / "exported")
    exported = resolve_policy_ref(str(tmp_path / "exported"), seeds=SEEDS)
    assert exported.kind == "export" and exported.label == "export:exported"
    assert exported.policy.sections == child.sections and exported.policy.genome_hash == child.genome_hash
    assert load_exported_policy(tmp_path / "exported" / "prompt.md").sections[0][0] == "prompt"
    refs = resolve_policy_refs(["terse", "terse", f"archive:{child.id}", str(tmp_path / "exported")],
                               seeds=SEEDS, archive=str(db))
    assert [r.label for r in refs] == ["terse", f"archive:{child.id}", "export:exported"]


def test_bad_refs_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"evaluate.policies: 'nobody' is not a seed name.*known seeds: \['terse', 'wordy'\]"):
        resolve_policy_ref("nobody", seeds=SEEDS)
    with pytest.raises(ConfigError, match="evaluate.archive: needed"):
        resolve_policy_ref("archive:abc", seeds=SEEDS)
    _archive(tmp_path / "archive.db")
    with pytest.raises(ArchiveError, match="no policy 'zzz'"):
        resolve_policy_ref("archive:zzz", seeds=SEEDS, archive=str(tmp_path / "archive.db"))
    bad = tmp_path / "bad_export"
    bad.mkdir()
    (bad / "policy.json").write_text(json.dumps({"policy": {"id": "p", "sections": "oops"}}))
    with pytest.raises(Exception, match=r"policy\.json: field 'policy\.sections' expected"):
        load_exported_policy(bad)


# --- statistics and aggregation --------------------------------------------------------------------

def test_paired_difference_is_deterministic_given_seed() -> None:
    a = [0.2, 0.3, 0.25, 0.4, 0.1, 0.35]
    b = [v + 0.05 for v in a]
    d1 = paired_difference(a, b, rng=rng_for(7, "x"), n_resamples=500)
    d2 = paired_difference(a, b, rng=rng_for(7, "x"), n_resamples=500)
    assert d1 == d2 and d1.mean == pytest.approx(0.05) and d1.low == pytest.approx(0.05)
    assert d1.share_b_better == 1.0
    noisy = paired_difference(a, [0.3, 0.2, 0.3, 0.3, 0.2, 0.3], rng=rng_for(7, "x"), n_resamples=500)
    assert noisy.low < noisy.mean < noisy.high and noisy.low < 0 < noisy.high
    assert paired_difference(a, b, rng=rng_for(8, "x"), n_resamples=500) != noisy


def _ev(pid: str, values: list[float | None]) -> MetaEvaluation:
    ok = [v for v in values if v is not None]
    mean = sum(v or 0.0 for v in values) / len(values) if ok else None
    return MetaEvaluation(pid, pid, "b", mean, None, {"rouge_l": 0.1}, tuple(values), ("",) * len(values), 0, 0.0, False)


def test_per_source_and_length_bucket_aggregation() -> None:
    items = [MeetingTask("a", "A: x " * 10, "r", source="s1", meta={"domain": "d1"}),
             MeetingTask("b", "A: x " * 200, "r", source="s1", meta={"domain": "d2"}),
             MeetingTask("c", "A: x " * 600, "r", source="s2", meta={"domain": "d1"})]
    refs = resolve_policy_refs(["terse", "wordy"], seeds=SEEDS)
    strata = item_strata(items, MeetingMinutes())
    results = summarise(refs, [_ev("terse", [0.2, 0.4, None]), _ev("wordy", [0.1, 0.1, 0.7])], items, seed=1,
                        strata=strata)
    groups = {(g.kind, g.group): (g.n, round(g.mean, 6)) for g in results[0].groups}
    assert groups[("source", "s1")] == (2, 0.3) and groups[("source", "s2")] == (1, 0.0)  # a failed item counts 0
    assert groups[("length", "<300")] == (1, 0.2) and groups[("length", "300-600")] == (1, 0.4)
    assert groups[("length", ">=1000")] == (1, 0.0) and groups[("domain", "d1")] == (2, 0.1)
    assert [g.group for g in results[0].groups if g.kind == "length"] == ["<300", "300-600", ">=1000"]
    comp = compare(results[0], results[1], items, seed=1, n_resamples=200, strata=strata)
    assert comp.rows[0].kind == "all" and comp.rows[0].diff.mean == pytest.approx(0.3 / 3 - 0.0)


# --- the mode end to end (fake model) ---------------------------------------------------------------

def _cfg(dataset: Path, **evaluate) -> Config:
    cfg = Config(mode="evaluate")
    cfg.evaluate.dataset = str(dataset)
    cfg.evaluate.bootstrap = 200
    for k, v in evaluate.items():
        setattr(cfg.evaluate, k, v)
    cfg.evaluation.show_best_output = False
    validate(cfg)
    return cfg


def test_run_evaluate_on_a_folder_with_comparison_and_files(tmp_path: Path) -> None:
    data = _folder_dataset(tmp_path / "meetings")
    db = tmp_path / "archive.db"
    child = _archive(db)
    cfg = _cfg(data, policies=["terse", "secretary_markdown"], archive=str(db),
               compare=f"best_seed_vs:archive:{child.id[:8]}")
    console = Console(record=True, width=200)
    llm = MinutesLLM()
    out = run_evaluate(cfg, run_dir=tmp_path / "run", llm=llm, embedder=FakeEmbedder(), console=console)
    text = console.export_text()
    assert [r.label for r in out.results] == ["terse", "secretary_markdown", f"archive:{child.id}"]
    assert llm.requests == 3 * 3
    for title in ("S_val per source", "S_val per transcript length", "generalisation"):
        assert title in text
    assert "board" in text and "club" in text and "300-600" in text
    assert out.comparison is not None and out.comparison.other == f"archive:{child.id}"
    assert {r.kind for r in out.comparison.rows} == {"all", "source", "length"}
    doc = json.loads(out.files[0].read_text())
    assert doc["n_items"] == 3 and doc["format"] == "folder" and len(doc["policies"]) == 3
    assert doc["items"][0]["source"] == "board" and doc["comparison"]["base"] in ("terse", "secretary_markdown")
    with out.files[1].open() as fh:
        assert len(list(csv.DictReader(fh))) == 9
    again = run_evaluate(cfg, run_dir=tmp_path / "run2", llm=MinutesLLM(), embedder=FakeEmbedder(),
                         console=Console(record=True, width=200))
    assert again.comparison == out.comparison  # same seed, same intervals


def test_a_call_log_serves_a_second_evaluation_policy_by_policy(tmp_path: Path) -> None:
    data = _folder_dataset(tmp_path / "meetings")
    cfg = _cfg(data, policies=["terse", "secretary_markdown"])
    cfg.archive.call_log = str(tmp_path / "calls.db")
    first = MinutesLLM()
    out = run_evaluate(cfg, run_dir=tmp_path / "run", llm=first, embedder=FakeEmbedder(),
                       console=Console(record=True, width=200))
    assert first.requests == 2 * 3
    cfg.evaluate.policies = ["terse", "secretary_markdown", "no_role"]
    second, console = MinutesLLM(), Console(record=True, width=200)
    again = run_evaluate(cfg, run_dir=tmp_path / "run2", llm=second, embedder=FakeEmbedder(), console=console)
    assert second.requests == 3  # only the new policy's items reach the model
    assert "6 answers served from it, 3 generated" in console.export_text()
    assert [r.values for r in again.results[:2]] == [r.values for r in out.results]
    cfg.archive.call_log = None  # without the key nothing is logged or served
    third = MinutesLLM()
    run_evaluate(cfg, run_dir=tmp_path / "run3", llm=third, embedder=FakeEmbedder(),
                 console=Console(record=True, width=200))
    assert third.requests == 3 * 3


def test_defaults_keep_the_old_behaviour(tmp_path: Path) -> None:
    cfg = Config(mode="evaluate")
    cfg.task.validation_limit = 2
    cfg.evaluation.policies = ["terse", "secretary_markdown"]
    cfg.evaluation.show_best_output = False
    refs, target = select_policies(cfg)
    assert [r.label for r in refs] == ["terse", "secretary_markdown"] and target is None
    out = run_evaluate(cfg, run_dir=None, llm=MinutesLLM(), embedder=FakeEmbedder(),
                       console=Console(record=True, width=200))
    assert len(out.results) == 2 and out.files == ()
    assert all(len(r.values) == 2 for r in out.results)


def test_compare_adds_all_seeds_and_bad_keys_fail_early(tmp_path: Path) -> None:
    data = _folder_dataset(tmp_path / "m")
    cfg = _cfg(data, policies=[], compare="best_seed_vs:terse")
    refs, target = select_policies(cfg)
    assert target is not None and target.label == "terse" and len(refs) >= 10  # the whole seed population
    for key, value in (("compare", "terse"), ("format", "csv"), ("limit", 0), ("results", "a/b")):
        bad = Config(mode="evaluate")
        setattr(bad.evaluate, key, value)
        with pytest.raises(ConfigError, match=f"evaluate.{key}"):
            validate(bad)


def test_metric_gets_the_embedder_when_items_need_one() -> None:
    """``EmbeddingMeta.with_embedder``: the run's embedder reaches the metric only for items with action items."""
    family, emb, loads = MeetingMinutes(), FakeEmbedder(), []

    def load() -> FakeEmbedder:
        loads.append(1)
        return emb

    assert family.with_embedder([MeetingTask("t", "A: b", "- b")], load) is None and not loads
    task = MeetingTask("t", "Ann: I send it.", "- Ann: send it", action_items=(ActionItem("Ann", "send it"),))
    wrapped = family.with_embedder([task], load)
    assert wrapped is not None and loads == [1] and wrapped.spec.scorer_version == family.spec.scorer_version + "+embedder"
    assert wrapped._embedder is emb and family._embedder is None  # the original family is unchanged


def test_domain_table_only_when_domains_group_items() -> None:
    one_each = [{"source": "s", "domain": f"d{i}", "length": "<300"} for i in range(3)]
    grouped = [{"source": "s", "domain": d, "length": "<300"} for d in ("a", "a", "b")]
    assert "domain" not in shown_kinds(one_each)
    assert shown_kinds(grouped) == ("source", "domain", "length")
    assert "domain" not in shown_kinds([{"source": "s", "domain": "", "length": "<300"}] * 3)
