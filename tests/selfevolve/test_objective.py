"""``mode=selfevolve selfevolve.outer_loop=true``: the outer loop over the training harness, on the tiny random model."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf
from rich.console import Console

from evotrainer.archive.store import ArchiveStore
from evotrainer.browse.cli import main as archive_cli
from evotrainer.config import Config, SelfEvolveConfig, to_config
from evotrainer.errors import ConfigError
from evotrainer.harness.space import Harness
from evotrainer.selfevolve.objective import candidate_settings
from evotrainer.selfevolve.run import run_selfevolve
from tests.selfevolve.test_run_tiny import _real_overrides

SEARCH = [  # 1 outer generation of 2 candidates, 1 round of 1 LoRA step each; real_share and pass_threshold searched
    "selfevolve.outer_loop=true", "selfevolve.rounds=1", "outer.generations=1", "outer.popsize=2",
    "outer.screen_size=1", "outer.race.sizes=[]", "outer.knobs=[length]",
    "outer.space.length.low=80", "outer.space.length.high=120", "outer.space.length.integer=true",
    "outer.extras.real_share.low=0.0", "outer.extras.real_share.high=1.0", "outer.extras.real_share.init=0.5",
    "outer.extras.pass_threshold.low=0.0", "outer.extras.pass_threshold.high=0.2", "outer.extras.pass_threshold.init=0.0",
]


def _cfg(tiny_model_dir: Path, data: Path, *extra: str) -> Config:
    dotlist = [*_real_overrides(tiny_model_dir, data), *SEARCH, *extra]
    return to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(dotlist)))


def _run(tiny_model_dir: Path, tmp_path: Path, *extra: str):
    data = tmp_path / "data"
    data.mkdir()
    cfg = _cfg(tiny_model_dir, data, *extra)
    console = Console(record=True, width=200)
    return cfg, run_selfevolve(cfg, run_dir=tmp_path / "run", console=console), console.export_text()


def test_frozen_harness_search_trains_one_adapter_per_candidate_and_archives_the_candidates(
        tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    """Each candidate: a fresh adapter from the base model, trained under the start harness (frozen arm), raced on
    the meta-validation items; both are harness_candidates rows the archive CLI lists."""
    cfg, summary, text = _run(tiny_model_dir, tmp_path, "outer.candidate_source=frozen_harness")
    with ArchiveStore(summary.archive, read_only=True) as ro:
        cands = ro.harness_candidates(summary.run_id)
        phases = [e.payload for e in ro.events(summary.run_id, kind="phase")
                  if e.payload.get("name") == "selfevolve candidate"]
        pool = ro.selfevolve_pool(summary.run_id)
    assert [(c.harness_id, c.outer_generation) for c in cands] == [("g1c0", 1), ("g1c1", 1)]
    assert all(c.race_estimate is not None for c in cands)
    start = cands[0].values
    for c in cands:  # the frozen arm: every candidate is the start harness
        assert c.values["extras"] == {"real_share": 0.5, "pass_threshold": 0.0}
        assert c.values["difficulty"] == start["difficulty"] == {"length": 80}
    # one round per candidate, numbered on; each from the base policy with its own adapter folder
    assert [r.round for r in summary.rounds] == [3, 5]
    assert all(r.policy_id == summary.rounds[0].policy_id and r.val_score is None for r in summary.rounds)
    assert [p["rounds"] for p in phases] == [[3], [5]]
    assert all(p["train_tokens"] > 0 for p in phases)
    assert {p.round for p in pool if p.source == "real"} >= {2, 4}  # real_share 0.5 of each candidate's seed tasks
    for r in summary.rounds:
        assert r.adapter_path.startswith("adapters/g1c") and r.config["real_share"] == 0.5
    assert "outer loop over the training harness" in text and "training tokens" in text
    capsys.readouterr()
    assert archive_cli(["harness", str(summary.archive.parent), "--json"]) == 0
    listed = capsys.readouterr().out
    assert "g1c0" in listed and "g1c1" in listed


def test_the_training_token_budget_stops_new_candidates(tiny_model_dir: Path, tmp_path: Path) -> None:
    """outer.budget.train_tokens=1: the first candidate's LoRA step spends it; the second never starts."""
    cfg, summary, text = _run(tiny_model_dir, tmp_path, "outer.budget.train_tokens=1")
    with ArchiveStore(summary.archive, read_only=True) as ro:
        cands = ro.harness_candidates(summary.run_id)
        stops = [e.payload for e in ro.events(summary.run_id, kind="stop")]
    assert [c.harness_id for c in cands] == ["g1c0"] and len(summary.rounds) == 1
    assert stops and stops[0]["key"] == "outer.budget.train_tokens"
    assert "outer.budget.train_tokens" in text


def test_a_candidate_applies_its_real_share_and_pass_threshold() -> None:
    h = Harness({}, {}, {}, {"real_share": 0.25, "pass_threshold": 0.4}, ())
    s = candidate_settings(SelfEvolveConfig(real_share=0.0, pass_threshold=0.7), h)
    assert (s.real_share, s.pass_threshold) == (0.25, 0.4)
    kept = candidate_settings(SelfEvolveConfig(real_share=0.1, pass_threshold=0.7), Harness({}, {}, {}, {}, ()))
    assert (kept.real_share, kept.pass_threshold) == (0.1, 0.7)


@pytest.mark.parametrize(("dotlist", "key"), [
    (["selfevolve.outer_loop=true"], "selfevolve.outer_loop"),  # mode=evolve
    (["mode=selfevolve", "outer.budget.train_tokens=100"], "outer.budget.train_tokens"),  # nothing counts them
    (["mode=selfevolve", "selfevolve.outer_loop=true", "outer.budget.train_tokens=0"], "outer.budget.train_tokens"),
    (["mode=selfevolve", "selfevolve.outer_loop=true", "outer.extras.replay_ratio.low=0", "outer.extras.replay_ratio.high=1", "outer.extras.replay_ratio.init=0.5"],
     "outer.extras"),
    (["mode=selfevolve", "selfevolve.outer_loop=true", "outer.extras.pass_threshold.low=0", "outer.extras.pass_threshold.high=2", "outer.extras.pass_threshold.init=0.5"],
     "outer.extras.pass_threshold"),
    (["mode=selfevolve", "selfevolve.outer_loop=true",
      "outer.strategy.mutator_temperature.low=0.1", "outer.strategy.mutator_temperature.high=1", "outer.strategy.mutator_temperature.init=0.5"], "outer.strategy"),
])
def test_bad_harness_search_configs_are_one_line_errors(dotlist: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        to_config(OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(dotlist)))
    msg = str(err.value)
    assert f"config key '{key}'" in msg and "\n" not in msg



def test_the_training_harness_study_composes_two_arms_two_seeds_at_one_training_token_budget() -> None:
    from hydra import compose, initialize_config_dir

    from evotrainer.config import PACKAGE_DATA, register_configs
    from evotrainer.sweep_index import planned_jobs

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_DATA / "conf"), version_base="1.3"):
        dcfg = compose(config_name="config", overrides=["+study=selfevolve_harness"], return_hydra_config=True)
        cfg = to_config(compose(config_name="config", overrides=["+study=selfevolve_harness"]))
    params = dict(dcfg.hydra.sweeper.params)
    assert params == {"outer.candidate_source": "coevolve,frozen_harness", "seed": "0,1"}
    assert planned_jobs([], params) == (4, 4)
    assert cfg.mode == "selfevolve" and cfg.selfevolve.outer_loop and cfg.model.threads == 2
    assert cfg.outer.budget.train_tokens and cfg.outer.budget.seconds is None and cfg.outer.patience >= 100
    assert set(cfg.outer.extras) == {"real_share", "pass_threshold"} and cfg.task.train_path
    assert cfg.task.validation_path.endswith("qmsum_meetings.jsonl") and not cfg.task.validation_extra  # real race
