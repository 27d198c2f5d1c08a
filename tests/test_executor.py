"""Ray executor (issue 16, item 3): same fitness values as the local executor; deterministic split; errors."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.coevolution import run_evolve
from evotrainer.config import Config, ExecutorConfig, ModelConfig, RayConfig, to_config
from evotrainer.errors import ConfigError
from evotrainer.executor import split_requests
from evotrainer.runtime import build_llm

_NO_RAY = importlib.util.find_spec("ray") is None


def _tiny_config(tiny_run_config: Callable[[], Config]) -> Config:
    cfg = tiny_run_config()
    cfg.seed = 5
    cfg.model.threads = 1
    cfg.decoding.max_new_tokens = 10
    cfg.evaluation.policies = ["terse", "secretary_markdown", "inline_example", "no_role"]
    cfg.inner.population_size = 4
    cfg.inner.generations = 1
    cfg.inner.llm_mutation_share = 0.0  # the mutator would run on the workers too; model-free keeps it short
    cfg.inner.use_embedder = False
    cfg.outer.generations = 1
    cfg.outer.race.sizes = [3]
    return cfg


def _scores(summary) -> dict[str, list]:
    """Every archived score of a run, in archive order (fitness and meta-validation alike)."""
    with ArchiveStore(summary.archive, read_only=True) as store:
        rows = store.evaluations(summary.run_id)
    return {"scores": [(r.kind, r.policy_id, r.batch_id, r.total, r.outer_generation, r.inner_generation)
                       for r in rows],
            "best": [summary.best.id, summary.best_s_val, summary.heldout_s_val]}


@pytest.mark.skipif(_NO_RAY, reason="ray is not installed (pip install -e '.[ray]')")
def test_ray_executor_gives_the_local_fitness_values(tiny_run_config: Callable[[], Config], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    from evotrainer.executor import RayExecutor

    seen: list[float | None] = []  # the CPUs of the Ray instance at each executor call
    real = RayExecutor.generate

    def spy(self, requests):
        seen.append(ray.cluster_resources().get("CPU"))
        return real(self, requests)

    monkeypatch.setattr(RayExecutor, "generate", spy)
    local_cfg = _tiny_config(tiny_run_config)
    ray_cfg = _tiny_config(tiny_run_config)
    ray_cfg.executor = ExecutorConfig(kind="ray", ray=RayConfig(workers=2, threads=1))
    try:
        local = run_evolve(local_cfg, run_dir=tmp_path / "local")
        remote = run_evolve(ray_cfg, run_dir=tmp_path / "ray")
        # the workers really ran, on the local instance this run started (2 one-CPU actors) ...
        assert seen and all(cpu == 2 for cpu in seen)
        assert not ray.is_initialized()  # ... which the run shut down when it ended
    finally:
        ray.shutdown()
    a, b = _scores(local), _scores(remote)
    assert len(a["scores"]) > 10 and any(s[0] == "fitness" for s in a["scores"])
    assert b == a
    assert remote.rollouts == local.rollouts


def _request(transcript: str, policy: str, adapter: str | None = None) -> GenerationRequest:
    messages = ({"role": "system", "content": ""}, {"role": "user", "content": f"{transcript}\n\n{policy}"})
    return GenerationRequest(messages, SamplingParams(), adapter)


def test_split_keeps_transcripts_together_and_covers_every_request() -> None:
    transcripts = [f"Meeting {k}: " + f"speaker {k} says something long enough to share. " * 6 for k in range(4)]
    requests = [_request(t, f"policy {p}") for p in range(6) for t in transcripts]  # policy-major, as rollouts send
    parts = split_requests(requests, 2)
    assert sorted(i for part in parts for i in part) == list(range(len(requests)))
    assert [len(p) for p in parts] == [12, 12]
    for part in parts:  # 4 transcripts of 6 requests: each worker gets 2 whole transcripts
        assert len({requests[i].messages[1]["content"][:9] for i in part}) == 2
    assert split_requests(requests, 2) == parts  # deterministic
    assert [len(p) for p in split_requests(requests[:5], 3)] == [2, 2, 1]
    assert split_requests(requests[:1], 3)[1:] == [[], []]
    adapters = [_request(transcripts[0], "p", adapter=a) for a in (None, "a1", None, "a1")]
    for part in split_requests(adapters, 2):  # rows under different adapters share no prefix
        assert len({adapters[i].adapter for i in part}) == 1


def test_ray_missing_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ConfigError) as err:
        build_llm(ModelConfig(), executor=ExecutorConfig(kind="ray"))
    message = str(err.value)
    assert "executor" in message and "pip install 'evotrainer[ray]'" in message and "\n" not in message


def test_executor_keys_are_validated() -> None:
    cfg = Config()
    cfg.executor.kind = "dask"
    with pytest.raises(ConfigError, match="'executor'"):
        to_config(cfg)
    cfg = Config()
    cfg.executor.ray.workers = 0
    with pytest.raises(ConfigError, match="executor.ray.workers"):
        to_config(cfg)
    cfg = Config(mode="selfevolve")
    cfg.executor.kind = "ray"
    with pytest.raises(ConfigError, match="selfevolve"):
        to_config(cfg)


def test_executor_is_a_hydra_choice() -> None:
    from hydra import compose, initialize_config_dir

    from evotrainer.config import PACKAGE_DATA, register_configs

    register_configs()
    with initialize_config_dir(str(PACKAGE_DATA / "conf"), version_base="1.3"):
        assert to_config(compose("config")).executor.kind == "local"
        cfg = to_config(compose("config", overrides=["executor=ray", "executor.ray.address=auto",
                                                     "executor.ray.workers=3"]))
    assert cfg.executor == ExecutorConfig(kind="ray", ray=RayConfig(address="auto", workers=3))
