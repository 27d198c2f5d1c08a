"""Every gene works on the policy's backend or the run is refused before it starts.

The in-process backends honour every :class:`~evotrainer.backends.base.SamplingParams` field, answer prefills
and adapters. A server may not (:mod:`evotrainer.backends.openai_fields`): a policy whose genes the server
ignores would be scored on something other than what its genome says, and evolution would search a dimension
that does nothing. :func:`refusals` lists, for a policy backend that can tell (one with ``unsupported``,
``prefill_refusal`` and ``adapter_refusal``), every setting of the run it cannot honour, naming the config key
or policy and what to change; :func:`check_policy_backend` raises them as one line.

The run's *default* decoding genes (``inner.decoding_genes: null``) are narrowed to those a server honours
(:func:`remote_decoding_genes`) instead: a default is not a choice the user made, and leaving a gene out changes
no genome's meaning. Genes listed explicitly are checked, not narrowed. A reading gene
(:data:`~evotrainer.genome.READING_GENES`: ``window_tokens``) is no server field: the task family reads it, and
windows only with the backend's tokenizer and context length, which a server backend does not give; it is
refused there (listed, or carried by a starting policy) and never among the narrowed defaults. The mutator and
the judge send built-in settings (``no_repeat_ngram_size=4`` in mutator requests); a server drops what it lacks
there and the archive counts it (``backend`` phase event), since those settings are not genes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar

from evotrainer.backends.usage import unwrap
from evotrainer.config import Config, ModelConfig
from evotrainer.errors import ConfigError
from evotrainer.genome import PREFILL_SECTION, READING_GENES, Policy

__all__ = ["DecodingRange", "check_policy_backend", "refusals", "remote_decoding_genes"]


class DecodingRange(Protocol):
    """A decoding gene's name and range, as :class:`~evotrainer.search.decoding.DecodingGene` has them."""

    @property
    def name(self) -> str: ...
    @property
    def low(self) -> float: ...
    @property
    def default(self) -> float: ...
    @property
    def high(self) -> float: ...


_Gene = TypeVar("_Gene", bound=DecodingRange)

_SERVER_GENES = ("max_new_tokens", "temperature", "top_p")
"""Decoding genes every OpenAI-compatible server takes as a request field of the same meaning."""


def remote_decoding_genes(genes: Iterable[_Gene], model: ModelConfig) -> list[_Gene]:
    """``genes`` without those a ``model.backend=openai`` server cannot honour (``repetition_penalty`` stays when
    ``model.openai.approximate`` lists it; reading genes go); ``genes`` as they are for the other backends."""
    genes = list(genes)
    if model.backend != "openai":
        return genes
    keep = set(_SERVER_GENES) | ({"repetition_penalty"} & set(model.openai.approximate))
    return [g for g in genes if g.name in keep]


def _values(gene: DecodingRange) -> tuple[float, ...]:
    return (gene.low, gene.default, gene.high)


def refusals(llm: Any, cfg: Config, population: Sequence[Policy], genes: Sequence[DecodingRange] | None) -> list[str]:
    """Reasons the policy backend ``llm`` cannot run this configuration (empty: it can, or it cannot tell).

    Args:
        llm: the policy backend, unwrapped (it answers ``unsupported(name, value)``, ``prefill_refusal`` and
            ``adapter_refusal`` when it may refuse anything).
        cfg: the run config (``decoding.*``, ``inner.*_mutation_share``).
        population: the policies the run starts from (their decoding genes, prefills, adapters).
        genes: the decoding genes the decoding mutation may change (``inner_config(cfg).genes``); None when
            nothing mutates (``mode=evaluate``): then the ``inner.*`` shares are not checked either.
    """
    server = getattr(llm, "unsupported", None)
    if server is None:
        return []

    def unsupported(name: str, value: float) -> str | None:
        if name in READING_GENES and not isinstance(getattr(llm, "context_length", None), int):
            return (f"{name}={value:g}: a reading gene of the task family, which windows a long input only with the "
                    "backend's tokenizer and context length (model.backend=hf or vllm)")
        return server(name, value)
    out: list[str] = []
    for name in ("repetition_penalty", "no_repeat_ngram_size"):
        why = unsupported(name, float(getattr(cfg.decoding, name)))
        if why:
            out.append(f"decoding.{name}: {why}")
    evolving = genes is not None
    if evolving and cfg.inner.decoding_mutation_share > 0:
        for gene in genes:
            why = next((w for v in _values(gene) if (w := unsupported(gene.name, float(v)))), None)
            if why:
                out.append(f"inner.decoding_genes[{gene.name}] (range {gene.low:g}..{gene.high:g}): {why}")
    prefill_why = getattr(llm, "prefill_refusal", None)
    if evolving and prefill_why and cfg.inner.prefill_mutation_share > 0:
        out.append(f"inner.prefill_mutation_share={cfg.inner.prefill_mutation_share:g}: {prefill_why}; or set "
                   "inner.prefill_mutation_share=0")
    adapter_why = getattr(llm, "adapter_refusal", None)
    for p in population:
        for name, value in p.decoding:
            why = unsupported(name, float(value))
            if why:
                out.append(f"policy {p.id}: decoding gene {why}")
        if prefill_why and p.section_dict.get(PREFILL_SECTION, "").strip():
            out.append(f"policy {p.id}: answer prefill: {prefill_why}")
        if adapter_why and p.adapter:
            out.append(f"policy {p.id}: adapter: {adapter_why}")
    return out


def check_policy_backend(llm: Any, cfg: Config, population: Sequence[Policy],
                         genes: Sequence[DecodingRange] | None = None) -> None:
    """Raise the :func:`refusals` of ``llm`` (unwrapped from any meter or call log) as one ConfigError line
    (``genes`` None: nothing mutates, as in ``mode=evaluate``).

    Raises:
        ConfigError: ``model.backend=<backend> (<name>) cannot honour: <reason>; <reason>; ...``.
    """
    llm = unwrap(llm)
    reasons = refusals(llm, cfg, population, genes)
    if reasons:
        raise ConfigError(f"model.backend={cfg.model.backend} ({getattr(llm, 'name', type(llm).__name__)}) cannot "
                          f"honour: {'; '.join(reasons)}")
