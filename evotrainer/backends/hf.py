"""The transformers backend: batched chat completion on CPU or GPU, the embedded Qwen2.5-Coder-1.5B GGUF by default.

Design choices (each one a correctness requirement, not a speed-up only):

- **Chat template, explicit system turn.** Every chat starts with a system message; an absent one is
  sent as an explicit *empty* system turn, because chat templates such as SmolLM2's inject a default
  persona ("You are a helpful AI assistant named SmolLM ...") when the first message is not a system one.
- **Content is text.** Message content and the prefill are tokenized as text: an input spelling
  ``<|im_end|>`` cannot close its turn; only the template writes control tokens
  (:mod:`evotrainer.backends.chat_tokens`).
- **Pad distinct from end-of-turn.** The SmolLM2 GGUF ships ``pad = eos = <|im_end|>``; we pad with an
  existing distinct special token (``<|endoftext|>`` there) and add one only if none exists.
- **Left padding + attention mask**, requests sorted by prompt length and run in chunks of
  ``batch_size``; results come back in request order. Greedy batched output equals one-at-a-time output.
- **No grouping by decoding settings.** Every :class:`SamplingParams` field is applied per row by the
  processors in :mod:`evotrainer.backends.logits` (temperature/top-p sampling with a per-request
  ``torch.Generator``, repetition penalty and n-gram blocking over generated tokens only, a per-row token
  budget), and ``generate`` itself always runs greedy; so any requests may share a batch.
- **Adapters (PEFT LoRA folders).** ``GenerationRequest.adapter`` names a saved adapter folder; each distinct
  folder is loaded once under its own name into one PEFT wrapper and a chunk mixing adapters and base rows
  runs as one ``generate`` with PEFT's per-row ``adapter_names`` (``"__base__"`` for base rows). Adapter
  layers are enabled only inside :meth:`HFBackend.generate`, so ``backend.model(...)`` stays the base model;
  :meth:`HFBackend.unload_adapters` removes the wrapper (training does this first).
- **Context.** The GGUF tokenizer reports ``model_max_length`` ~1e30; the window is the model config's
  ``max_position_embeddings`` (capped by ``max_context``). A prompt that leaves no room for
  ``max_new_tokens`` has the middle of its longest user message cut (see :func:`fit_messages`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import torch

from evotrainer import progress
from evotrainer.backends.base import Generation, GenerationRequest, Message, split_prefill
from evotrainer.backends.chat_tokens import chat_ids, render_chat
from evotrainer.backends.hf_adapters import AdapterSlots
from evotrainer.backends.hf_loading import (
    _cache_kwarg,
    _plain_kv_cache,
    _resolve_source,
    contiguous_head_input,
    load_model,
)
from evotrainer.backends.logits import build_processors
from evotrainer.backends.numerics import resolve_dtype
from evotrainer.backends.prefix import PrefixStore, plan_prefixes
from evotrainer.backends.prompt_fit import ensure_system_turn, fit_messages
from evotrainer.errors import ConfigError, ModelError
from evotrainer.model_schema import ModelConfig

__all__ = ["GenerationStats", "HFBackend", "ensure_system_turn", "fit_messages"]

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_PAD_CANDIDATES = ("<|endoftext|>", "<pad>", "<|pad|>", "[PAD]", "<|finetune_right_pad_id|>")


@dataclass
class GenerationStats:
    """Running token counts of one backend, for benchmarks and the run summary.

    Attributes:
        requests: requests generated.
        prompt_tokens: prompt tokens of those requests (after context fitting).
        prefix_tokens_reused: prompt tokens not run through the model because a shared prefix's states
            were computed once (or found in the prefix store) and reused.
        prefix_tokens_computed: prompt tokens of shared prefixes that were run through the model.
        generated_tokens: tokens generated, end-of-turn included.
    """

    requests: int = 0
    prompt_tokens: int = 0
    prefix_tokens_reused: int = 0
    prefix_tokens_computed: int = 0
    generated_tokens: int = 0


@dataclass(frozen=True)
class _Prepared:
    """A request rendered to prompt token ids, after fitting the context window."""

    ids: list[int]
    truncated: bool
    omitted_words: int
    prefill: str = ""  # start of the answer, already in ``ids``; prepended to the decoded continuation


class HFBackend(AdapterSlots):
    """Batched chat completion with transformers (implements :class:`~evotrainer.backends.base.LLM`).

    Args:
        cfg: the model role's settings, the ``model.*`` keys as they are (:class:`~evotrainer.model_schema.ModelConfig`;
            ``backend`` and ``openai`` are not read; ``threads`` None leaves torch's thread count as it is;
            ``dtype=auto`` is resolved here). None = the schema's defaults (the embedded Qwen2.5-Coder-1.5B-Instruct
            GGUF). The model loads once, here.
        progress: show a progress bar over batches.

    Attributes:
        name: "hf:<model file or path> (<dtype>)", e.g. ``hf:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (bfloat16)``.
        model: the ``PreTrainedModel`` in eval mode (shared with trainers that need it).
        tokenizer: its tokenizer, with a pad token distinct from end-of-turn.
        context_length: context window in tokens (prompt + generated).
        stop_token_ids: ids that end a turn (generation config eos ids + tokenizer eos).
        load_seconds: wall time of the load.

    Raises:
        ModelError: the model cannot be located or loaded, or has no chat template.
        ConfigError: a config value is out of range.
    """

    def __init__(self, cfg: ModelConfig | None = None, *, progress: bool = False) -> None:
        cfg = cfg or ModelConfig()
        cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, cfg.device))  # auto: bf16 where the hardware has it
        for key, ok, want in (("dtype", cfg.dtype in _DTYPES, f"one of {sorted(_DTYPES)}"),
                              ("batch_size", cfg.batch_size >= 1, ">= 1"),
                              ("prefix_min_tokens", cfg.prefix_min_tokens >= 1, ">= 1"),
                              ("kv_cache", cfg.kv_cache in ("dynamic", "static"), "'dynamic' or 'static'"),
                              ("max_batch_tokens", cfg.max_batch_tokens is None or cfg.max_batch_tokens >= 1,
                               ">= 1 or null"),
                              ("prefix_cache_mb", cfg.prefix_cache_mb >= 0, ">= 0"),
                              ("max_context", cfg.max_context is None or cfg.max_context >= 16, ">= 16 tokens or null"),
                              ("threads", cfg.threads is None or cfg.threads >= 1, ">= 1 or null")):
            if not ok:
                raise ConfigError(f"model.{key} must be {want}, got {getattr(cfg, key)!r}")
        if cfg.threads is not None:
            torch.set_num_threads(cfg.threads)
        self.cfg, self.progress = cfg, progress
        source, gguf_file = _resolve_source(cfg)
        self.name = f"hf:{gguf_file or source} ({cfg.dtype})"
        start = time.perf_counter()
        self.tokenizer, self.model = load_model(source, gguf_file, _DTYPES[cfg.dtype])
        contiguous_head_input(self.model)  # else a frozen head weight is copied per row (PEFT freezes it)
        try:
            self.model.to(cfg.device).eval()
        except (RuntimeError, AssertionError) as exc:  # unknown or unavailable device
            raise ConfigError(f"model.device {cfg.device!r} is not usable: {exc}") from exc
        self.load_seconds = time.perf_counter() - start
        self.stop_token_ids = self._stop_ids()
        self.pad_token_id = self._set_pad_token()
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if not limit:
            tok_limit = getattr(self.tokenizer, "model_max_length", None)
            limit = tok_limit if tok_limit and tok_limit < 10**7 else 2048
        self.context_length = min(limit, cfg.max_context) if cfg.max_context else int(limit)
        self._init_adapters()  # one PEFT wrapper at most, one named adapter per distinct folder
        # shared prefixes: only for models whose cache is plain per-layer key/value tensors
        self.stats = GenerationStats()
        self.prefix_store = PrefixStore(cfg.prefix_cache_mb * 2**20)
        self.prefix_sharing = cfg.prefix_sharing and _plain_kv_cache(self.model)

    def _stop_ids(self) -> tuple[int, ...]:
        """End-of-turn ids: the generation config's eos id(s), then the tokenizer's eos; first is forced."""
        ids: list[int] = []
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        for value in [*(gen_eos if isinstance(gen_eos, list) else [gen_eos]), self.tokenizer.eos_token_id]:
            if value is not None and int(value) not in ids:
                ids.append(int(value))
        if not ids:
            raise ModelError(
                f"{self.name}: neither the tokenizer nor the generation config names an eos token"
            )
        return tuple(ids)

    def _set_pad_token(self) -> int:
        """Choose a pad token that is not an end-of-turn token; add ``<|pad|>`` only if none exists."""
        tok = self.tokenizer
        stops = set(self.stop_token_ids)
        if tok.pad_token_id is not None and tok.pad_token_id not in stops:
            pad_id = int(tok.pad_token_id)
        else:
            candidates = [tok.unk_token, *_PAD_CANDIDATES, *tok.all_special_tokens]
            vocab = tok.get_vocab()
            pad_id = next(
                (
                    vocab[t]
                    for t in candidates
                    if t and t in vocab and vocab[t] not in stops and vocab[t] != tok.bos_token_id
                ),
                None,
            )
            if pad_id is None:
                tok.add_special_tokens({"pad_token": "<|pad|>"})
                self.model.resize_token_embeddings(len(tok))
                pad_id = tok.convert_tokens_to_ids("<|pad|>")
            tok.pad_token = tok.convert_ids_to_tokens(pad_id)
        tok.padding_side = "left"
        self.model.config.pad_token_id = pad_id
        self.model.generation_config.pad_token_id = pad_id
        return pad_id

    # ------------------------------------------------------------------ prompts
    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text for ``messages`` (system turn ensured, generation prompt appended, then the
        prefill of a trailing assistant message, see :func:`~evotrainer.backends.base.split_prefill`)."""
        chat, prefill = split_prefill(ensure_system_turn(messages))
        return render_chat(self.tokenizer, chat, prefill)

    def _prepare(self, index: int, request: GenerationRequest) -> _Prepared:
        messages = ensure_system_turn(request.messages, where=f"request {index}")
        budget = self.context_length - request.params.max_new_tokens
        if request.params.max_new_tokens < 1 or budget < 1:
            raise ConfigError(
                f"request {index}: max_new_tokens={request.params.max_new_tokens} must be in "
                f"[1, {self.context_length - 1}] (context window {self.context_length} tokens)"
            )
        chat, prefill = split_prefill(messages)
        ids = chat_ids(self.tokenizer, chat, prefill)
        if len(ids) <= budget:
            return _Prepared(ids, False, 0, prefill)
        fitted, omitted = fit_messages(chat, lambda m: len(chat_ids(self.tokenizer, m, prefill)), budget)
        return _Prepared(chat_ids(self.tokenizer, fitted, prefill), True, omitted, prefill)

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Run all requests, batched; the i-th result answers the i-th request.

        Requests whose prompts start with the same tokens (same adapter) share one computation of that
        prefix when ``prefix_sharing`` is on, and a prompt that starts like one computed in an earlier call
        reuses it from the prefix store (:meth:`_schedule`); chunks of ``batch_size`` rows are then formed
        group by group, so that a chunk holds few distinct prefixes. Without it, requests are sorted by prompt
        length and chunked (least padding).

        Args:
            requests: chats with their decoding settings; any mix of settings may share a batch.

        Returns:
            One :class:`Generation` per request, in order. Greedy results equal those of running each
            request alone; sampled results depend only on the request and its seed.

        Raises:
            DataError: a malformed chat. ConfigError: ``max_new_tokens`` outside the context window.
            ModelError: a request names a folder that is not a loadable PEFT adapter for this model.
        """
        requests = list(requests)
        folders = list(dict.fromkeys(r.adapter for r in requests if r.adapter is not None))
        self._load_adapters(folders)  # fail before any work
        prepared = [self._prepare(i, r) for i, r in enumerate(requests)]
        cut = [p for p in prepared if p.truncated]
        if cut:
            log.warning(
                "%d of %d prompts exceeded the %d-token context window minus max_new_tokens; the middle "
                "of their longest user message was cut (up to %d words omitted)",
                len(cut),
                len(prepared),
                self.context_length,
                max(p.omitted_words for p in cut),
            )
        order, prefix_len, source = self._schedule(prepared, requests)
        chunks = self._chunks(order, prepared, requests, prefix_len)
        results: list[Generation | None] = [None] * len(requests)
        for chunk in self._progress(chunks):
            outs = self._generate_chunk(
                [prepared[i] for i in chunk], [requests[i] for i in chunk], [prefix_len[i] for i in chunk],
                [source[i] for i in chunk],
            )
            for i, out in zip(chunk, outs, strict=True):
                results[i] = out
            progress.advance(len(chunk))  # the phase's progress line (evotrainer.progress), if one is open
        self.stats.requests += len(requests)
        self.stats.prompt_tokens += sum(len(p.ids) for p in prepared)
        self.stats.generated_tokens += sum(r.generated_tokens for r in results if r is not None)
        return [r for r in results if r is not None]

    def _schedule(
        self, prepared: list[_Prepared], requests: list[GenerationRequest]
    ) -> tuple[list[int], list[int], list[tuple | None]]:
        """Row order for chunking, each row's prefix length (0: none) and where its prefix states come from.

        A row's source is ``(state key, entry ids)``: the states of ``entry ids``, of which the row uses
        the first ``prefix_len`` tokens (``entry ids`` starts with them). Per group of :func:`plan_prefixes`:
        when the prefix store already holds a prefix covering at least half of what the group shares (the
        input every row reads), each row uses its own longest stored match; otherwise a prefix several rows
        share is computed once; a row alone has all its prompt but the last token computed as its prefix when
        the store keeps anything, so that rows of later calls reading the same input find it.
        """
        rows_n = len(prepared)
        if not self.prefix_sharing:
            return sorted(range(rows_n), key=lambda i: len(prepared[i].ids)), [0] * rows_n, [None] * rows_n
        least = self.cfg.prefix_min_tokens
        keys = [self._state_key(r.adapter) for r in requests]
        groups = plan_prefixes([p.ids for p in prepared], keys, least)
        prefix_len: list[int] = [0] * rows_n
        source: list[tuple | None] = [None] * rows_n
        for group in groups:
            reach = group.length or len(prepared[group.rows[0]].ids) - 1  # what computing here would share
            found = {i: self.prefix_store.match(keys[i], prepared[i].ids, len(prepared[i].ids) - 1)
                     for i in group.rows}
            if max(m for m, _ in found.values()) >= max(least, reach / 2):
                picks = {i: found[i] for i in group.rows if found[i][0] >= least}
            elif group.length:
                picks = {i: (group.length, tuple(prepared[i].ids[: group.length])) for i in group.rows}
            elif self.prefix_store.max_bytes > 0 and reach >= least:
                picks = {group.rows[0]: (reach, tuple(prepared[group.rows[0]].ids[:reach]))}
            else:
                picks = {}
            for i, (n, entry) in picks.items():
                prefix_len[i], source[i] = n, (keys[i], entry)
        groups.sort(key=lambda g: (prefix_len[g.rows[0]] == 0, max(len(prepared[i].ids) for i in g.rows)))
        order = [i for g in groups for i in sorted(g.rows, key=lambda i: len(prepared[i].ids))]
        return order, prefix_len, source

    def _chunks(
        self, order: list[int], prepared: list[_Prepared], requests: list[GenerationRequest], prefix_len: list[int]
    ) -> list[list[int]]:
        """Consecutive rows of ``order`` in chunks of at most ``batch_size`` rows and ``max_batch_tokens``
        padded tokens."""
        cap = self.cfg.max_batch_tokens
        chunks: list[list[int]] = []
        chunk: list[int] = []
        lead = tail = new = 0
        for i in order:
            n = prefix_len[i]
            grown = (max(lead, n), max(tail, len(prepared[i].ids) - n), max(new, requests[i].params.max_new_tokens))
            too_big = cap is not None and (len(chunk) + 1) * sum(grown) > cap
            if chunk and (len(chunk) >= self.cfg.batch_size or too_big):
                chunks.append(chunk)
                chunk, grown = [], (n, len(prepared[i].ids) - n, requests[i].params.max_new_tokens)
            chunk.append(i)
            lead, tail, new = grown
        if chunk:
            chunks.append(chunk)
        return chunks

    def _state_key(self, adapter: str | None) -> tuple | None:
        """What a prefix's key/value states depend on besides its tokens: the adapter and its files."""
        return None if adapter is None else self._adapter_folder(adapter)

    def _progress(self, chunks: list[list[int]]) -> Iterator[list[int]]:
        if not self.progress or not chunks:
            yield from chunks
            return
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"generating ({sum(map(len, chunks))} requests)", total=len(chunks))
            for chunk in chunks:
                yield chunk
                bar.advance(task)

    def _prefix_states(
        self, sources: list[tuple | None], requests: list[GenerationRequest], prefix_len: list[int]
    ) -> dict[tuple, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Per-layer ``(keys, values)``, each ``(1, kv_heads, L, head_dim)``, of every distinct prefix source
        of a chunk (``sources``: per row ``(adapter key, entry ids)`` or None, :meth:`_schedule`), from the
        prefix store or from one forward pass each (under the rows' adapter), then stored."""
        states: dict[tuple, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        for key, r, n in zip(sources, requests, prefix_len, strict=True):
            if key is None:
                continue
            if key in states:
                self.stats.prefix_tokens_reused += n
                continue
            found = self.prefix_store.get(*key)
            if found is not None:
                states[key] = found
                self.stats.prefix_tokens_reused += n
                continue
            ids = torch.tensor([key[1]], dtype=torch.long, device=self.model.device)  # (1, L)
            with torch.inference_mode(), self._generator([r]) as (model, _):
                out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            cache = out.get("cache") or out.get("past_key_values")
            states[key] = [(layer.keys, layer.values) for layer in cache.layers]
            self.prefix_store.put(*key, states[key])
            self.stats.prefix_tokens_computed += len(key[1])
        return states

    def _chunk_cache(
        self, prepared: list[_Prepared], requests: list[GenerationRequest], prefix_len: list[int], capacity: int,
        sources: list[tuple | None] | None = None,
    ):
        """A KV cache (``model.kv_cache``) holding each row's prefix states (the first ``prefix_len`` tokens
        of its source, :meth:`_schedule`; its own prompt when ``sources`` is None), left-padded to the chunk's
        longest prefix; a static one is allocated for ``capacity`` tokens (prompt width + new tokens)."""
        from transformers import DynamicCache, StaticCache

        if self.cfg.kv_cache == "static":
            cache = StaticCache(config=self.model.config, max_cache_len=capacity)
        else:
            cache = DynamicCache(config=self.model.config)
        width = max(prefix_len)
        if width == 0:
            return cache
        if sources is None:
            sources = [(self._state_key(r.adapter), tuple(p.ids[:n])) if n else None
                       for p, r, n in zip(prepared, requests, prefix_len, strict=True)]
        states = self._prefix_states(sources, requests, prefix_len)
        template = next(iter(states.values()))
        for layer, (k0, v0) in enumerate(template):
            keys = k0.new_zeros((len(prepared), k0.shape[1], width, k0.shape[3]))  # (B, H, Lp, D)
            values = v0.new_zeros((len(prepared), v0.shape[1], width, v0.shape[3]))
            for row, (key, n) in enumerate(zip(sources, prefix_len, strict=True)):
                if key is not None and n:
                    k, v = states[key][layer]
                    keys[row, :, width - n :] = k[0, :, :n]
                    values[row, :, width - n :] = v[0, :, :n]
            cache.update(keys, values, layer)
        return cache

    def _generate_chunk(
        self, prepared: list[_Prepared], requests: list[GenerationRequest], prefix_len: list[int] | None = None,
        sources: list[tuple | None] | None = None,
    ) -> list[Generation]:
        """Generate one chunk. Row layout: ``[pad | prefix][pad | suffix]``: the prefix part (all pad when a
        row has no shared prefix) comes from a precomputed cache, only the suffix part runs here;
        positions follow the attention mask, so padding in the middle changes nothing."""
        from transformers import GenerationConfig

        prefix_len = prefix_len or [0] * len(prepared)
        sources = sources or [None] * len(prepared)
        lead = max(prefix_len)  # width of the cached part
        tail = max(len(p.ids) - n for p, n in zip(prepared, prefix_len, strict=True))
        width = lead + tail
        input_ids = torch.full((len(prepared), width), self.pad_token_id, dtype=torch.long)  # (B, P)
        attention_mask = torch.zeros((len(prepared), width), dtype=torch.long)  # (B, P)
        for row, (p, n) in enumerate(zip(prepared, prefix_len, strict=True)):
            ids = torch.tensor(p.ids, dtype=torch.long)
            input_ids[row, lead - n : lead] = ids[:n]
            attention_mask[row, lead - n : lead] = 1
            input_ids[row, width - (len(p.ids) - n) :] = ids[n:]
            attention_mask[row, width - (len(p.ids) - n) :] = 1
        params = [r.params for r in requests]
        gen_cfg = GenerationConfig(
            do_sample=False,  # sampling happens per row inside SeededSampler
            max_new_tokens=max(p.max_new_tokens for p in params),  # shorter budgets: RowBudget
            eos_token_id=list(self.stop_token_ids),
            pad_token_id=self.pad_token_id,
        )
        cache_kwargs = (
            {_cache_kwarg(): self._chunk_cache(prepared, requests, prefix_len, width + gen_cfg.max_new_tokens, sources)}
            if lead or self.cfg.kv_cache == "static" else {}
        )
        device = self.model.device
        with torch.inference_mode(), self._generator(requests) as (model, adapter_kwargs):
            out = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                generation_config=gen_cfg,
                logits_processor=build_processors(width, params, self.stop_token_ids[0]),
                **cache_kwargs,
                **adapter_kwargs,
            )
        new_tokens = out[:, width:].cpu()  # (B, T)
        return [
            self._finish(new_tokens[row].tolist(), p, params[row].max_new_tokens)
            for row, p in enumerate(prepared)
        ]

    def _finish(self, tokens: list[int], prepared: _Prepared, budget: int) -> Generation:
        """Cut one row at its first stop token or its budget and decode it."""
        stops = set(self.stop_token_ids)
        end = next((k for k, t in enumerate(tokens) if t in stops), len(tokens))
        if end < budget:
            kept, count, reason = tokens[:end], end + 1, "stop"
        else:  # out of budget: any stop token at position `budget` was forced, not generated
            kept = tokens[:budget]
            count, reason = len(kept), "length"
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        # with a prefill the continuation's leading space belongs to the answer ("-" + " Kit order");
        # a prefill the model did not continue is an empty answer, not an answer of its own
        text = (prepared.prefill + text).strip() if prepared.prefill and text.strip() else text.strip()
        return Generation(
            text=text,
            prompt_tokens=len(prepared.ids),
            generated_tokens=count,
            finish_reason=reason,
            prompt_truncated=prepared.truncated,
            omitted_words=prepared.omitted_words,
        )
