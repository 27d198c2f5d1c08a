"""Which model each role runs: the default, a role following the policy model, ``model.dtype=auto``."""

from __future__ import annotations

from pathlib import Path

import pytest

from evotrainer.backends import numerics
from evotrainer.config import Config, resolve_roles, to_config
from evotrainer.errors import ConfigError
from evotrainer.model_schema import ModelConfig


def test_mutator_follows_the_policy_model_unless_set() -> None:
    cfg = Config()
    cfg.model = ModelConfig(path="/models/x.gguf", dtype="float32", threads=1)
    out = to_config(cfg)
    assert out.mutator == out.model  # one load serves both roles
    cfg = Config()
    cfg.model = ModelConfig(path="/models/x.gguf", gguf_file="a.gguf", dtype="float32")
    cfg.mutator = ModelConfig(path="smollm2-135m", batch_size=4)
    out = to_config(cfg)
    assert (out.mutator.path, out.mutator.gguf_file, out.mutator.batch_size) == ("smollm2-135m", None, 4)
    assert out.mutator.dtype == "float32"  # a run setting left at its default follows
    assert resolve_roles(out) == out  # idempotent


def test_dtype_auto_follows_the_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    amx = tmp_path / "amx"
    amx.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile\n")
    plain = tmp_path / "plain"
    plain.write_text("processor\t: 0\nflags\t\t: fpu sse avx2\n")
    assert numerics.cpu_bf16_flags(str(amx)) == ("amx_bf16",)
    assert numerics.cpu_bf16_flags(str(plain)) == ()
    assert numerics.cpu_bf16_flags(str(tmp_path / "none")) == ()
    monkeypatch.setattr(numerics, "cpu_bf16_flags", lambda: ("amx_bf16",))
    assert numerics.resolve_dtype("auto") == "bfloat16"
    monkeypatch.setattr(numerics, "cpu_bf16_flags", lambda: ())
    assert numerics.resolve_dtype("auto") == "float32"
    assert numerics.resolve_dtype("float16") == "float16"


def test_the_log_says_what_auto_chose_and_why(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """A CPU without native bf16 runs the model in float32, several times slower than one with it: the run's
    log names the choice and the missing flags, so a slow run on such a machine is explained."""
    monkeypatch.setattr(numerics, "cpu_bf16_flags", lambda: ())
    with caplog.at_level("INFO", logger="evotrainer.config"):
        out = to_config(Config())
    assert out.model.dtype == "float32"
    assert "model.dtype=auto: float32 (this CPU lists neither amx_bf16 nor avx512_bf16" in caplog.text
    monkeypatch.setattr(numerics, "cpu_bf16_flags", lambda: ("avx512_bf16",))
    assert numerics.auto_reason() == "this CPU lists avx512_bf16"
    caplog.clear()
    with caplog.at_level("INFO", logger="evotrainer.config"):
        resolve_roles(out)  # already resolved: nothing to say
    assert "model.dtype=auto" not in caplog.text
    monkeypatch.setattr(numerics, "cpu_bf16_flags", lambda: ())
    forced = Config()
    forced.model.dtype = "bfloat16"
    with caplog.at_level("INFO", logger="evotrainer.config"):
        assert to_config(forced).model.dtype == "bfloat16"  # the user's choice stands, with a warning
    assert "torch emulates it" in caplog.text


def test_auto_is_resolved_before_the_run_records_its_config() -> None:
    out = to_config(Config())
    assert out.model.dtype in ("float32", "bfloat16") and out.mutator.dtype == out.model.dtype
    bad = Config()
    bad.model.dtype = "int3"
    with pytest.raises(ConfigError, match="'model.dtype': expected auto, float32, bfloat16 or float16"):
        to_config(bad)


def test_the_archived_config_holds_the_roles_as_they_ran() -> None:
    """What a run stores (and a resume compares) is the resolved dtype and the followed mutator, not ``auto``:
    a resume on hardware that resolves ``auto`` otherwise sees ``model.dtype`` change."""
    from omegaconf import OmegaConf

    from evotrainer.__main__ import _plain
    from evotrainer.run.resume import config_diff

    dcfg = OmegaConf.structured(Config)
    dcfg.model.path = "smollm2-135m"
    cfg = to_config(dcfg)
    plain = _plain(dcfg, cfg)
    assert plain["model"]["dtype"] == cfg.model.dtype != "auto"
    assert plain["mutator"]["path"] == "smollm2-135m"
    other = {**plain, "model": {**plain["model"], "dtype": "float32" if cfg.model.dtype != "float32" else "bfloat16"}}
    assert config_diff(plain, other) == ["model.dtype"]
