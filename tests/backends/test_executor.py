"""Ray executor (issue 16, item 3): same fitness values as the local executor; deterministic split; errors;
no local Ray instance per job of a parallel sweep, and repeated open/close in one process (issue 26, item 7)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.executor import refuse_parallel_local_ray, split_requests
from evotrainer.config import PROJECT_ROOT, Config, ExecutorConfig, ModelConfig, RayConfig, to_config
from evotrainer.errors import ConfigError, ServerError
from evotrainer.evolve.coevolution import run_evolve
from evotrainer.run.runtime import build_llm

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


def _scores(summary, run_dir: Path) -> dict[str, list]:
    """Every archived score of a run, in archive order (fitness and meta-validation alike)."""
    with ArchiveStore(run_dir / "archive.db", read_only=True) as store:
        rows = store.evaluations(store.list_runs()[0].run_id)
    return {"scores": [(r.kind, r.policy_id, r.batch_id, r.total, r.outer_generation, r.inner_generation)
                       for r in rows],
            "best": [summary.best, summary.best_s_val, summary.heldout_s_val]}


@pytest.mark.skipif(_NO_RAY, reason="ray is not installed (pip install -e '.[ray]')")
def test_ray_executor_gives_the_local_fitness_values(tiny_run_config: Callable[[], Config], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    from evotrainer.backends.executor import RayExecutor

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
    a, b = _scores(local, tmp_path / "local"), _scores(remote, tmp_path / "ray")
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


def test_local_ray_in_a_parallel_sweep_is_refused_with_one_line_naming_the_keys() -> None:
    with pytest.raises(ConfigError) as err:
        refuse_parallel_local_ray(ExecutorConfig(kind="ray"), jobs=2)
    message = str(err.value)
    assert "\n" not in message and "ray#53906" in message
    for key in ("'executor'", "'hydra.launcher.n_jobs'", "hydra.launcher.n_jobs=1", "executor=local",
                "executor.ray.address=auto"):
        assert key in message
    refuse_parallel_local_ray(ExecutorConfig(kind="ray"), jobs=1)  # jobs one after another: fine
    refuse_parallel_local_ray(ExecutorConfig(kind="ray", ray=RayConfig(address="auto")), jobs=4)  # one shared
    refuse_parallel_local_ray(ExecutorConfig(kind="local"), jobs=4)


def test_executor_ray_in_a_parallel_sweep_is_refused_before_any_model_loads(tmp_path: Path) -> None:
    if importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None:
        pytest.skip("hydra-joblib-launcher is not installed (pip install -e '.[sweep]')")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "evotrainer", "-m", "+experiment=meeting_minutes", "executor=ray", "seed=0,1",
         "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={tmp_path}"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: job ")]
    assert len(lines) == 2 and all("executor=ray would start a local Ray instance" in line for line in lines)
    assert "ray executor:" not in proc.stderr + proc.stdout  # no worker was started


@pytest.mark.skipif(_NO_RAY, reason="ray is not installed (pip install -e '.[ray]')")
def test_a_local_ray_instance_opens_and_closes_twice_in_one_process(tiny_model_dir: Path) -> None:
    import ray

    from evotrainer.backends.executor import RayExecutor

    model = ModelConfig(path=str(tiny_model_dir), dtype="float32", max_context=1024)
    request = GenerationRequest(({"role": "user", "content": "Say OK."},), SamplingParams(max_new_tokens=4))
    texts = []
    try:
        for _ in range(2):  # e.g. two runs one after another in one process (the basic launcher's jobs)
            executor = RayExecutor(model, RayConfig(workers=1, threads=1), build_llm)
            texts.append(executor.generate([request])[0].text)
            executor.close()
            assert not ray.is_initialized()
    finally:
        ray.shutdown()
    assert texts[0] == texts[1]


@pytest.mark.skipif(_NO_RAY, reason="ray is not installed (pip install -e '.[ray]')")
def test_a_ray_worker_that_dies_is_restarted_once_then_the_run_stops_with_one_line(tmp_path: Path) -> None:
    """A worker killed mid-call (Ray's memory monitor kills workers; here the worker process exits) is
    restarted and its part re-run; a worker that dies again ends the run with one line instead of failing
    every later call (each generation "skipped", the budget spent)."""
    import ray

    from evotrainer.backends.base import Generation
    from evotrainer.backends.executor import RayExecutor

    class Dying:  # defined here so that Ray sends it to the worker by value
        name = "dying"

        def __init__(self, folder: str) -> None:
            self.folder = Path(folder)

        def generate(self, requests):
            for r in requests:
                marker = self.folder / r.messages[-1]["content"]
                if marker.name.startswith("die") and marker.exists():
                    if marker.name == "die once":
                        marker.unlink()
                    os._exit(1)  # the worker process ends mid-call, as when it is killed
            return [Generation(f"ok {r.messages[-1]['content']}", 1, 1, "stop") for r in requests]

    def build(model: ModelConfig) -> Dying:
        return Dying(str(model.path))

    def ask(text: str) -> GenerationRequest:
        return GenerationRequest(({"role": "user", "content": text},), SamplingParams(max_new_tokens=4))

    for name in ("die once", "die always"):
        (tmp_path / name).touch()
    executor = RayExecutor(ModelConfig(path=str(tmp_path)), RayConfig(workers=1, threads=1), build)
    try:
        assert [g.text for g in executor.generate([ask("a"), ask("die once")])] == ["ok a", "ok die once"]
        with pytest.raises(ServerError) as err:
            executor.generate([ask("die always")])
    finally:
        executor.close()
        ray.shutdown()
    message = str(err.value)
    assert "\n" not in message and "executor=ray" in message and "restart" in message
