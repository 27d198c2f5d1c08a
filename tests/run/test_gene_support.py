"""Every gene works on the policy's server or the run is refused up front (issue 28), and the openai keys'
validation, usage meters, prices and the ``outer.budget.usd`` stop."""

from __future__ import annotations

import pytest

from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.backends.openai_compat import OpenAIBackend
from evotrainer.backends.usage import Prices, RunUsage, usage_lines
from evotrainer.config import Config, validate
from evotrainer.errors import ConfigError
from evotrainer.evolve.llm_objective import inner_config
from evotrainer.genome import PREFILL_SECTION, Policy
from evotrainer.harness.stopping import BudgetLimits, Usage, budget_stop
from evotrainer.model_schema import OpenAIConfig
from evotrainer.run.control import RunControl
from evotrainer.run.gene_support import check_policy_backend, refusals, remote_decoding_genes
from evotrainer.search.decoding import DecodingGene
from tests.backends._fake_openai import FakeServer


def _openai_config(url: str = "http://127.0.0.1:9/v1") -> Config:
    cfg = Config()
    cfg.model.backend = "openai"
    cfg.model.openai.base_url = url
    cfg.model.openai.model = "fake-model"
    return cfg


def _policy(pid: str = "p", **extra) -> Policy:
    sections = [("role", "You write minutes."), ("format", "Use bullets.")]
    if "prefill" in extra:
        sections.append((PREFILL_SECTION, extra.pop("prefill")))
    return Policy(id=pid, sections=tuple(sections), **extra)


def test_default_genes_are_narrowed_to_what_a_server_honours() -> None:
    cfg = _openai_config()
    names = [g.name for g in inner_config(cfg).genes]
    assert names == ["max_new_tokens"]  # repetition_penalty and no_repeat_ngram_size left out
    cfg.model.openai.approximate = ["repetition_penalty"]
    assert [g.name for g in inner_config(cfg).genes] == ["repetition_penalty", "max_new_tokens"]
    assert [g.name for g in inner_config(Config()).genes] == ["repetition_penalty", "no_repeat_ngram_size",
                                                               "max_new_tokens"]  # in process: all of them
    explicit = [DecodingGene("no_repeat_ngram_size", 0, 6, 0, 1, integer=True)]
    assert remote_decoding_genes(explicit, Config().model) == explicit


def test_refusals_name_each_setting_and_what_to_change() -> None:
    with FakeServer(owned_by="someone") as server:  # a generic server: no prefill path, no adapters
        llm = OpenAIBackend(OpenAIConfig(base_url=server.url, model=server.model))
        cfg = _openai_config(server.url)
        genes = [DecodingGene("repetition_penalty", 1.0, 1.3, 1.0, 0.05)]
        population = [_policy("plain"), _policy("prefilled", prefill="- "),
                      _policy("loopy", decoding=(("no_repeat_ngram_size", 3.0),)),
                      _policy("tuned", adapter="/adapters/a1")]
        reasons = refusals(llm, cfg, population, genes)
        text = "\n".join(reasons)
        assert reasons[0].startswith("decoding.no_repeat_ngram_size: no_repeat_ngram_size=4")  # the default
        assert "inner.decoding_genes[repetition_penalty] (range 1..1.3)" in text
        assert "inner.prefill_mutation_share=0.25" in text and "set inner.prefill_mutation_share=0" in text
        assert "policy prefilled: answer prefill" in text and "policy loopy: decoding gene no_repeat_ngram_size=3" in text
        assert "policy tuned: adapter" in text and "plain" not in text
        evaluate_only = refusals(llm, cfg, [_policy("plain")], None)  # mode=evaluate: no mutation shares checked
        assert len(evaluate_only) == 1 and evaluate_only[0].startswith("decoding.no_repeat_ngram_size")
        with pytest.raises(ConfigError) as err:
            check_policy_backend(llm, cfg, population, genes)
        assert "\n" not in str(err.value) and str(err.value).startswith("model.backend=openai (openai:generic:")
        cfg.decoding.no_repeat_ngram_size = 0
        cfg.inner.prefill_mutation_share = 0.0
        check_policy_backend(llm, cfg, [_policy("plain")], inner_config(cfg).genes)  # nothing left to refuse
    with FakeServer(owned_by="vllm") as server:  # vLLM continues prefills and loads adapters
        llm = OpenAIBackend(OpenAIConfig(base_url=server.url, model=server.model))
        cfg = _openai_config(server.url)
        cfg.decoding.no_repeat_ngram_size = 0
        check_policy_backend(llm, cfg, [_policy("prefilled", prefill="- "), _policy("tuned", adapter="/a")],
                             inner_config(cfg).genes)


def test_a_window_gene_is_refused_on_a_server_and_never_among_its_defaults() -> None:
    """A server backend gives the family no tokenizer and context length, so nothing is read in windows there:
    a listed ``window_tokens`` gene or one a starting policy carries would search a dimension that does nothing."""
    window = DecodingGene("window_tokens", 512, 3072, 1536, 256, integer=True)
    assert remote_decoding_genes([window], _openai_config().model) == []
    assert remote_decoding_genes([window], Config().model) == [window]
    with FakeServer(owned_by="vllm") as server:
        llm = OpenAIBackend(OpenAIConfig(base_url=server.url, model=server.model))
        cfg = _openai_config(server.url)
        cfg.decoding.no_repeat_ngram_size = 0
        reasons = refusals(llm, cfg, [_policy("wide", decoding=(("window_tokens", 2048.0),))], [window])
    assert len(reasons) == 2 and all("a reading gene of the task family" in r for r in reasons)
    assert reasons[0].startswith("inner.decoding_genes[window_tokens] (range 512..3072): window_tokens=512")
    assert reasons[1].startswith("policy wide: decoding gene window_tokens=2048")


def test_in_process_backends_are_never_refused() -> None:
    class InProcess:
        name = "hf:x"

        def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
            return []

    assert refusals(InProcess(), Config(), [_policy(prefill="- ")], inner_config(Config()).genes) == []


def test_openai_keys_are_validated_with_the_key_never_shown() -> None:
    cfg = Config()
    cfg.model.backend = "openai"
    with pytest.raises(ConfigError, match="model.openai.base_url"):
        validate(cfg)
    cfg = _openai_config()
    validate(cfg)
    cfg.model.openai.api_key_env = "sk-live-abcdef"  # the key pasted where its variable's name belongs
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert "model.openai.api_key_env" in str(err.value) and "sk-live" not in str(err.value)
    for key, value, match in (("concurrency", 0, "concurrency"), ("server", "tgi", "server"),
                              ("approximate", ["no_repeat_ngram_size"], "approximate"),
                              ("price_prompt", -1.0, "price_prompt")):
        cfg = _openai_config()
        setattr(cfg.model.openai, key, value)
        with pytest.raises(ConfigError, match=match):
            validate(cfg)
    cfg = _openai_config()
    cfg.executor.kind = "ray"
    with pytest.raises(ConfigError, match="executor"):
        validate(cfg)
    cfg = _openai_config()
    cfg.inner.adapter_mutation_share = 0.1
    with pytest.raises(ConfigError, match="adapter genes are trained"):
        validate(cfg)
    cfg = _openai_config()
    cfg.outer.budget.usd = 1.0
    with pytest.raises(ConfigError, match="outer.budget.usd"):
        validate(cfg)  # no price anywhere
    cfg.mutator.backend = "openai"
    cfg.mutator.openai.base_url, cfg.mutator.openai.model, cfg.mutator.openai.price_completion = "http://h/v1", "m", 0.6
    validate(cfg)


def test_usage_meters_price_each_role_and_the_usd_budget_stops_the_run() -> None:
    class Fixed:
        name = "fixed"

        def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
            return [Generation("x", 1000, 200, "stop") for _ in requests]

    cfg = _openai_config()
    cfg.model.openai.price_prompt, cfg.model.openai.price_completion = 0.5, 2.0
    usage = RunUsage()
    policy = usage.wrap(Fixed(), "model", cfg.model)
    free = usage.wrap(Fixed(), "mutator", Config().mutator)  # in process: unpriced
    policy.generate([GenerationRequest(({"role": "user", "content": "a"},))] * 3)
    free.generate([GenerationRequest(({"role": "user", "content": "a"},))])
    d = usage.as_dict()
    assert d["roles"]["model"]["cost_usd"] == pytest.approx((3000 * 0.5 + 600 * 2.0) / 1e6)
    assert d["roles"]["mutator"]["cost_usd"] is None and d["prompt_tokens"] == 4000 and d["requests"] == 4
    lines = usage_lines(d)
    assert lines[0] == "model (fixed): 3 requests, 3,000 prompt + 600 completion tokens, $0.0027"
    assert lines[-1].startswith("cost: $0.0027")
    assert Prices().cost(10, 10) is None and Prices(completion=1.0).cost(5, 1_000_000) == pytest.approx(1.0)
    assert budget_stop(Usage(usd=0.01), BudgetLimits(usd=0.01)).key == "outer.budget.usd"

    class Rec:
        events: list = []

        def emit(self, event) -> None:
            self.events.append(event)

    control = RunControl(Rec(), BudgetLimits(usd=0.002), cost=usage.cost_usd)
    stop = control.check(Usage(seconds=1.0), outer_generation=1, harness_id="g1c0")
    assert stop is not None and stop.key == "outer.budget.usd" and "0.0027 USD used" in stop.detail
