"""The openai backend against a real server started here: ``transformers serve`` on the embedded SmolLM2
(one server for the module, de-quantised weights written by ``save_served_folder``), compared with the
in-process backend, and ``+experiment=smoke`` with ``model.backend=openai`` against it (issue 28).

``transformers serve`` needs fastapi and uvicorn (the dev extra); without them the module is skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.converted import save_served_folder
from evotrainer.backends.hf import HFBackend
from evotrainer.backends.openai_compat import OpenAIBackend
from evotrainer.browse.views import run_overview
from evotrainer.config import PROJECT_ROOT
from evotrainer.errors import ServerError
from evotrainer.model_schema import ModelConfig, OpenAIConfig

pytestmark = [pytest.mark.real_model,
              pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("fastapi", "uvicorn", "openai")),
                                 reason="transformers serve needs fastapi, uvicorn and openai (pip install -e '.[dev]')")]

STARTUP_S = 300  # a loaded 2-core machine takes a minute or more to import and load


@pytest.fixture(scope="module")
def in_process() -> HFBackend:
    return HFBackend(ModelConfig(path="smollm2-135m", dtype="float32", batch_size=8))


@pytest.fixture(scope="module")
def served(in_process: HFBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``(base_url, model name)`` of a ``transformers serve`` process serving the embedded model."""
    folder = str(save_served_folder(in_process, tmp_path_factory.mktemp("served") / "smollm2"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path_factory.mktemp("served_log") / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from transformers.cli.transformers import app; app()", "serve", folder,
         "--device", "cpu", "--dtype", "float32", "--host", "127.0.0.1", "--port", str(port)],
        env=dict(os.environ, HF_HUB_OFFLINE="1"), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if folder in json.load(r)["data"][0]["id"]:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not answer within {STARTUP_S} s; see {log.name}")
            time.sleep(1.0)
        yield url, folder
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _remote(served: tuple[str, str], **kw) -> OpenAIBackend:
    url, model = served
    return OpenAIBackend(OpenAIConfig(base_url=url, model=model, timeout_s=600, max_retries=0, **kw), max_context=4096)


def _req(text: str, system: str = "", prefill: str | None = None, **params) -> GenerationRequest:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    if prefill is not None:
        messages.append({"role": "assistant", "content": prefill})
    return GenerationRequest(tuple(messages), SamplingParams(no_repeat_ngram_size=0, **params))


def test_greedy_text_and_token_counts_equal_the_in_process_backend(served, in_process) -> None:
    """Greedy decoding without n-gram blocking (no server has it): the server's text, prompt tokens and
    completion tokens (end-of-turn included) are the in-process backend's, prefill by /completions too."""
    transcript = " ".join(f"Speaker {i % 3}: we agreed that item {i} moves to next week and Dana owns the budget."
                          for i in range(12))
    requests = [_req("What is the capital of France?", max_new_tokens=24),
                _req(f"Summarise this meeting in one sentence.\n\n{transcript}", max_new_tokens=24),
                _req("Say OK.", system="You are a concise assistant.", max_new_tokens=12),
                _req("List three fruits.", prefill="- Apple", max_new_tokens=16)]
    remote = _remote(served, concurrency=2)
    assert remote.profile.kind == "transformers" and remote.prefill_mode == "completions"
    got, want = remote.generate(requests), in_process.generate(requests)
    for g, w in zip(got, want, strict=True):
        assert (g.text, g.prompt_tokens, g.generated_tokens, g.finish_reason) == (
            w.text, w.prompt_tokens, w.generated_tokens, w.finish_reason)
    assert "Paris" in got[0].text and got[3].text.startswith("- Apple")
    d = remote.describe()
    assert d["seed"] == "process" and d["prefilled"] == {"completions": 1} and d["usage_missing"] == 0
    assert d["server_cut"] == 0 and d["batch_invariant"]  # its prompt tokens are the ones counted here


def test_the_server_takes_every_sampling_field_sent(served) -> None:
    """transformers serve refuses a field it does not know (HTTP 422): the neutral fields sent so that no
    generation_config.json default applies (frequency_penalty 0, top_k off when sampling) are ones it takes."""
    remote = _remote(served)
    requests = [_req("Say OK.", max_new_tokens=6, temperature=0.7, seed=3),
                _req("List two fruits.", prefill="- Apple", max_new_tokens=6, temperature=0.7, seed=3)]
    assert all(g.generated_tokens > 0 for g in remote.generate(requests))
    d = remote.describe()
    assert d["neutral_sent"] == {"frequency_penalty": 2, "generation_config": 2} and d["server_cut"] == 0


def test_a_wrong_model_name_is_one_line_naming_the_served_one(served) -> None:
    url, model = served
    with pytest.raises(ServerError) as err:
        OpenAIBackend(OpenAIConfig(base_url=url, model="SmolLM2-typo"))
    assert "\n" not in str(err.value) and f"does not serve 'SmolLM2-typo'; it serves '{model}'" in str(err.value)


def test_smoke_experiment_against_the_server(served, tmp_path: Path) -> None:
    """``+experiment=smoke`` with the policy model and the mutator on the server: the summary, the archive and
    the report show the server's tokens."""
    url, model = served
    roles = [f"{role}.{key}" for role in ("model", "mutator") for key in (
        "backend=openai", f"openai.base_url={url}", f"openai.model={model}", "openai.timeout_s=900")]
    proc = subprocess.run(
        [sys.executable, "-m", "evotrainer", "+experiment=smoke", *roles, "model.openai.concurrency=2",
         "mutator.openai.concurrency=1", "decoding.no_repeat_ngram_size=0", "decoding.max_new_tokens=16",
         "inner.mutator_max_new_tokens=40",  # shorter answers: the same calls in less time
         "outer.budget.rollouts=20",  # generation 0 counts 13, so one harness candidate (mutator calls) runs
         f"hydra.run.dir={tmp_path}"],
        cwd=PROJECT_ROOT, env=dict(os.environ, HF_HUB_OFFLINE="1"), capture_output=True, text=True, timeout=2400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"model usage: model (openai:transformers:{model})" in proc.stdout
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        overview = run_overview(store, store.list_runs()[0])
    usage, backends = overview["usage"], overview["backends"]
    assert usage["roles"]["model"]["prompt_tokens"] > 0 and usage["roles"]["model"]["completion_tokens"] > 0
    assert usage["roles"]["mutator"]["requests"] > 0 and backends["model"]["server"] == "transformers"
    assert backends["mutator"]["dropped"].get("no_repeat_ngram_size", 0) > 0  # the mutator's built-in 4, named
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "completion tokens" in report and str(usage["roles"]["model"]["prompt_tokens"]) in report
