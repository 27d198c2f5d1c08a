"""``+experiment=smoke`` with ``model.backend=openai`` against a scripted local server (tests/backends/
_fake_openai.py): the server's tokens in the summary, the archive and the report; ``outer.budget.usd``; and a
run whose server fails (unreachable, a revoked key, a 429 storm) ends with one clear line, keeps what it
archived and logged, and resumes without sending a logged request again. The same run against a real server
(``transformers serve``): tests/backends/test_openai_server.py."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evotrainer.archive import ArchiveStore
from evotrainer.backends.call_log import CALL_LOG_NAME
from evotrainer.browse.views import run_overview
from evotrainer.config import PROJECT_ROOT, Config, register_configs, to_config
from tests.backends._fake_openai import FakeServer

pytestmark = pytest.mark.slow

SECRET = "sk-test-secret-value-42"


def _overrides(url: str) -> list[str]:
    """The smoke experiment on the server at ``url``: policy model and mutator (two roles: the mutator's
    concurrency differs), n-gram blocking off (no server has it)."""
    return ["+experiment=smoke", "model.backend=openai", f"model.openai.base_url={url}",
            "model.openai.model=fake-model", "model.openai.max_retries=1", "model.openai.concurrency=1",
            "model.openai.api_key_env=EVO_FAKE_KEY", "mutator.backend=openai", f"mutator.openai.base_url={url}",
            "mutator.openai.model=fake-model", "mutator.openai.concurrency=2", "mutator.openai.max_retries=1",
            "mutator.openai.api_key_env=EVO_FAKE_KEY", "decoding.no_repeat_ngram_size=0", "archive.live_report=true"]


def _compose(overrides: list[str]) -> Config:
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return to_config(compose(config_name="config", overrides=overrides))


def _cli(args: list[str], run_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", EVO_FAKE_KEY=SECRET)
    return subprocess.run([sys.executable, "-m", "evotrainer", *args, f"hydra.run.dir={run_dir}"], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=900)


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]


def test_smoke_run_shows_the_servers_tokens_and_never_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evotrainer.evolve.coevolution import run_evolve

    monkeypatch.setenv("EVO_FAKE_KEY", SECRET)
    with FakeServer(owned_by="vllm", key=SECRET) as server:
        run_evolve(_compose(_overrides(server.url)), run_dir=tmp_path)
        answers, prompt, completion = server.usage
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        overview = run_overview(store, store.list_runs()[0])
        phases = [e.payload for e in store.events(overview["run_id"], kind="phase")]
    usage = overview["usage"]  # the run's last usage phase event
    roles = usage["roles"]
    assert set(roles) == {"model", "mutator"} and roles["model"]["backend"] == "openai:vllm:fake-model"
    assert usage["requests"] == answers and usage["prompt_tokens"] == prompt
    assert usage["completion_tokens"] == completion and usage["cost_usd"] is None
    assert roles["mutator"]["requests"] > 0  # the mutator's calls counted apart
    assert usage["outer_generation"] is None
    model = overview["backends"]["model"]
    assert model["server"] == "vllm" and model["api_key_env"] == "EVO_FAKE_KEY"
    assert model["sent"]["max_new_tokens"] == roles["model"]["requests"] and model["dropped"] == {}
    assert overview["backends"]["mutator"]["dropped"]["no_repeat_ngram_size"] > 0  # the mutator's built-in 4
    assert [p["outer_generation"] for p in phases if p["name"] == "usage"] == [0, 1, None]
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "completion tokens" in report and str(roles["model"]["prompt_tokens"]) in report
    for path in tmp_path.rglob("*"):  # the key is in no file the run wrote
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_the_usd_budget_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evotrainer.evolve.coevolution import run_evolve

    monkeypatch.setenv("EVO_FAKE_KEY", SECRET)
    with FakeServer(owned_by="vllm", key=SECRET) as server:
        cfg = _compose([*_overrides(server.url), "model.openai.price_prompt=2.5", "model.openai.price_completion=10",
                        "outer.budget.usd=0.0001"])
        summary = run_evolve(cfg, run_dir=tmp_path)
    assert summary.stop_reason == "outer.budget.usd" and summary.candidates == 0  # spent by generation 0
    with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
        usage = run_overview(store, store.list_runs()[0])["usage"]
    assert usage["cost_usd"] == pytest.approx(
        (usage["roles"]["model"]["prompt_tokens"] * 2.5 + usage["roles"]["model"]["completion_tokens"] * 10) / 1e6)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_ends_in_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    proc = _cli(_overrides(url), tmp_path)
    assert proc.returncode == 2
    (line,) = _error_lines(proc)
    assert line.startswith(f"error: model: the server at {url} cannot be reached after 1 retries")
    assert not (tmp_path / "archive.db").exists()  # refused before the run wrote anything


@pytest.mark.parametrize(("fail", "expected", "resume"), [
    ("429", "error: model: the server at {url} kept refusing with HTTP 429 (rate limit or quota) after 1 retries",
     True),
    ("401", "error: model: the server at {url} refused the key in $EVO_FAKE_KEY (HTTP 401)", False),
])
def test_a_server_failing_mid_run_loses_nothing_and_resumes_without_paying_twice(
        tmp_path: Path, fail: str, expected: str, resume: bool) -> None:
    with FakeServer(owned_by="vllm", key=SECRET, fail=fail, fail_from=8) as server:
        proc = _cli(_overrides(server.url), tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        (line,) = _error_lines(proc)
        assert line.startswith(expected.format(url=server.url)) and SECRET not in proc.stderr
        first_answers = server.usage[0]
        assert first_answers == 8  # generation 0's first call (6) and two answers of the next before the storm
        with sqlite3.connect(tmp_path / CALL_LOG_NAME) as conn:
            assert conn.execute("SELECT count(*) FROM calls").fetchone()[0] == first_answers
        with ArchiveStore(tmp_path / "archive.db", read_only=True) as store:
            (run,) = store.list_runs()
            assert len(store.evaluations(run.run_id, kind="fitness")) == 3  # the seeds' scores are kept
        if not resume:
            return
        server.fail = None  # the server recovers: resume
        resumed = _cli([*_overrides(server.url), f"resume={tmp_path}"], tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "summary" in resumed.stdout and "model usage: model (openai:vllm:fake-model)" in resumed.stdout
        with sqlite3.connect(tmp_path / CALL_LOG_NAME) as conn:
            logged = conn.execute("SELECT count(*) FROM calls").fetchone()[0]
        assert server.usage[0] == logged  # every answer the run has was paid for once


URL_SECRET = "url-secret-value-77"


def test_a_credential_in_base_url_reaches_no_log_archive_or_error_text(tmp_path: Path) -> None:
    """A key in ``base_url``'s userinfo (sent as HTTP basic auth) is in neither the run log (the HTTP client's
    request lines included), the archive, the call log, nor the error line of a failing server; Hydra's own
    ``.hydra/`` copy of the overrides is the one place that keeps the URL as given (docs/scaling_out.md)."""
    with FakeServer(owned_by="vllm", fail="500", fail_from=8) as server:
        url = server.url.replace("http://", f"http://evo:{URL_SECRET}@")
        proc = _cli(_overrides(url), tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = _error_lines(proc)
    assert line.startswith("error: model: the server at http://***@127.0.0.1:") and "HTTP 500" in line
    assert URL_SECRET not in proc.stderr + proc.stdout
    assert list(tmp_path.glob("*.log"))  # the run log (Hydra's file handler, root logger at INFO)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ".hydra" not in p.parts]
    assert {"archive.db", CALL_LOG_NAME} <= {p.name for p in written}
    for path in written:
        assert URL_SECRET.encode() not in path.read_bytes(), path
