"""The transformers backend: batched chat completion on CPU or GPU, embedded SmolLM2 GGUF by default.

Design choices (each one a correctness requirement, not a speed-up only):

- **Chat template, explicit system turn.** Every chat starts with a system message; an absent one is
  sent as an explicit *empty* system turn, because chat templates such as SmolLM2's inject a default
  persona ("You are a helpful AI assistant named SmolLM ...") when the first message is not a system one.
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

import contextlib
import functools
import logging
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from evotrainer import progress
from evotrainer.backends.base import Generation, GenerationRequest, Message, split_prefill
from evotrainer.backends.converted import converted_dir, load_converted, save_converted, save_plain
from evotrainer.backends.embedded import embedded_gguf
from evotrainer.backends.logits import build_processors
from evotrainer.backends.prefix import PrefixStore, plan_prefixes
from evotrainer.errors import ConfigError, DataError, ModelError

__all__ = [
    "GenerationStats",
    "HFBackend",
    "HFBackendConfig",
    "ensure_system_turn",
    "fit_messages",
    "load_backend",
    "save_served_folder",
]

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_PAD_CANDIDATES = ("<|endoftext|>", "<pad>", "<|pad|>", "[PAD]", "<|finetune_right_pad_id|>")


@dataclass(frozen=True)
class HFBackendConfig:
    """Settings of :class:`HFBackend`.

    Attributes:
        path: None for the embedded SmolLM2-135M-Instruct GGUF; else a local HF model folder, a local
            ``.gguf`` file, or a hub id (hub ids must already be in the local cache: runs are offline,
            ``HF_HUB_OFFLINE=1``).
        gguf_file: GGUF file name inside ``path`` (None: auto-detected when the folder holds exactly
            one ``.gguf`` file and no ``config.json``).
        dtype: "float32" (CPU default), "bfloat16" or "float16".
        batch_size: requests per ``generate`` call, >= 1 (a population generation of 8 policies x 3
            meetings fits one call at the default).
        max_context: cap on the context window in tokens (prompt + generated); None uses the model's
            ``max_position_embeddings``.
        threads: ``torch.set_num_threads`` value (process-wide); None leaves torch's default.
        progress: show a progress bar over batches (off by default).
        device: torch device for the model ("cpu", "cuda", "cuda:1", ...).
        prefix_sharing: compute a token prefix shared by several requests of one ``generate`` call
            once and reuse its key/value states for each of them (:mod:`evotrainer.backends.prefix`);
            False runs every request's whole prompt (the per-pair path). Greedy text is the same either
            way up to floating-point rounding.
        prefix_min_tokens: shortest shared prefix worth reusing, tokens, >= 1.
        prefix_cache_mb: MiB of computed prefix states kept across calls for the backend's life (entries
            never served dropped first, then the least recently used; :class:`~evotrainer.backends.prefix.
            PrefixStore`), >= 0; 0 keeps none (prefixes are still shared inside one call). SmolLM2-135M in
            fp32 takes 45 KiB per prompt token (30 layers x keys and values x 3 heads x 64 x 4 bytes).
        kv_cache: "dynamic" (transformers' ``DynamicCache``: grows by concatenation each step) or
            "static" (a ``StaticCache`` preallocated to the chunk's prompt width + max new tokens and
            written in place; same text, no per-step copy of the whole cache).
        max_batch_tokens: cap on a chunk's padded size, rows x (prompt width + max new tokens), tokens;
            a chunk closes before it would pass the cap or ``batch_size`` rows (a single row is always
            allowed). None: rows only. Bounds memory when long prompts meet large batches.
    """

    path: str | None = None
    gguf_file: str | None = None
    dtype: str = "float32"
    batch_size: int = 32
    max_context: int | None = None
    threads: int | None = None
    progress: bool = False
    device: str = "cpu"
    prefix_sharing: bool = True
    prefix_min_tokens: int = 32
    prefix_cache_mb: int = 512
    max_batch_tokens: int | None = 32768
    kv_cache: str = "static"


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
class _LoadedAdapter:
    """A resident adapter: its PEFT name and the (mtime, size) signature of its files when loaded."""

    name: str
    signature: tuple[int, ...]


@dataclass(frozen=True)
class _Prepared:
    """A request rendered to prompt token ids, after fitting the context window."""

    ids: list[int]
    truncated: bool
    omitted_words: int
    prefill: str = ""  # start of the answer, already in ``ids``; prepended to the decoded continuation


def ensure_system_turn(messages: Sequence[Message], where: str = "request") -> list[Message]:
    """Return a copy of ``messages`` that starts with a system message (empty one inserted if absent).

    Args:
        messages: chat messages ``{"role": ..., "content": str}``, at least one.
        where: label used in error messages (e.g. "request 3").

    Raises:
        DataError: no messages, or a message without a string ``role``/``content``.
    """
    if not messages:
        raise DataError(f"{where}: a chat needs at least one message")
    out: list[Message] = []
    for j, msg in enumerate(messages):
        if not isinstance(msg.get("role"), str) or not isinstance(msg.get("content"), str):
            raise DataError(f"{where}, message {j}: expected {{'role': str, 'content': str}}, got {msg!r}")
        out.append({"role": msg["role"], "content": msg["content"]})
    if out[0]["role"] != "system":
        out.insert(0, {"role": "system", "content": ""})
    return out


def _cut_middle(text: str, omit: int) -> str:
    """``text`` with ``omit`` whitespace-separated words removed from its middle and a marker in their place."""
    words = re.findall(r"\S+\s*", text)  # keeps each word's trailing whitespace (line breaks survive)
    if omit <= 0:
        return text
    omit = min(omit, len(words))
    keep = len(words) - omit
    head = "".join(words[: (keep + 1) // 2]).rstrip()
    tail = "".join(words[len(words) - keep // 2 :]) if keep // 2 else ""
    return f"{head}\n[... {omit} words omitted ...]\n{tail}"


def fit_messages(
    messages: Sequence[Message], count_tokens: Callable[[list[Message]], int], budget: int
) -> tuple[list[Message], int]:
    """Shorten ``messages`` until their rendered prompt has at most ``budget`` tokens.

    The longest user message loses words from its middle (a "[... N words omitted ...]" marker takes
    their place), found by binary search on the number of omitted words; if emptying it is not enough,
    the next longest user message follows, then the other messages (system last).

    Args:
        messages: the chat (not modified).
        count_tokens: prompt length in tokens of a chat, chat template included.
        budget: allowed prompt tokens (context window minus ``max_new_tokens``), >= 1.

    Returns:
        ``(messages, omitted_words)``; the same content and 0 when it already fits.

    Raises:
        ConfigError: the chat cannot fit even with every message emptied (``max_new_tokens`` too large
            for the context window).
    """
    msgs = [dict(m) for m in messages]
    if count_tokens(msgs) <= budget:
        return msgs, 0
    order = sorted(
        range(len(msgs)),
        key=lambda j: (msgs[j]["role"] != "user", msgs[j]["role"] == "system", -len(msgs[j]["content"])),
    )
    omitted = 0
    for j in order:
        original = msgs[j]["content"]
        n_words = len(original.split())
        if n_words == 0:
            continue

        def fits(omit: int, j: int = j, original: str = original) -> bool:
            trial = [*msgs[:j], {**msgs[j], "content": _cut_middle(original, omit)}, *msgs[j + 1 :]]
            return count_tokens(trial) <= budget

        if not fits(n_words):
            msgs[j]["content"] = _cut_middle(original, n_words)
            omitted += n_words
            continue
        lo, hi = 1, n_words  # smallest omit in [lo, hi] that fits; hi is known to fit
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid + 1
        msgs[j]["content"] = _cut_middle(original, lo)
        return msgs, omitted + lo
    raise ConfigError(
        f"the prompt does not fit in {budget} tokens even with every message emptied; "
        "lower max_new_tokens (SamplingParams) or raise max_context"
    )


@functools.cache
def _cache_kwarg() -> str:
    """The ``generate`` keyword of a user-built KV cache: ``cache`` since transformers renamed
    ``past_key_values`` (5.x deprecation), ``past_key_values`` before."""
    import inspect

    from transformers import LlamaModel

    return "cache" if "cache" in inspect.signature(LlamaModel.forward).parameters else "past_key_values"


def _plain_kv_cache(model: torch.nn.Module) -> bool:
    """True when ``model``'s cache is plain per-layer key/value tensors that rows can share (no sliding
    window, no linear-attention state): the condition for prefix sharing."""
    from transformers import DynamicCache

    try:
        layers = DynamicCache(config=model.config).layers
    except Exception:  # an exotic config: share nothing rather than guess
        return False
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Silence transformers' weight-loading and GGUF de-quantisation progress bars, then restore them."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    old_tqdm = getattr(gguf_utils, "tqdm", None)
    hf_logging.disable_progress_bar()
    if old_tqdm is not None:
        gguf_utils.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        if old_tqdm is not None:
            gguf_utils.tqdm = old_tqdm
        if was_on:
            hf_logging.enable_progress_bar()


def _resolve_source(cfg: HFBackendConfig) -> tuple[str, str | None]:
    """``(folder or hub id, gguf file name or None)`` for ``from_pretrained``; ModelError if absent."""
    if cfg.path is None:
        gguf = embedded_gguf()
        return str(gguf.parent), cfg.gguf_file or gguf.name
    local = Path(cfg.path).expanduser()
    if local.is_file() and local.suffix == ".gguf":
        return str(local.parent), local.name
    if local.is_dir():
        if cfg.gguf_file is None and not (local / "config.json").is_file():
            ggufs = sorted(local.glob("*.gguf"))
            if len(ggufs) == 1:
                return str(local), ggufs[0].name
        if cfg.gguf_file is not None and not (local / cfg.gguf_file).is_file():
            raise ModelError(f"model.gguf_file {cfg.gguf_file!r} not found in {local}")
        return str(local), cfg.gguf_file
    if local.exists() or not _HUB_ID.match(cfg.path) or cfg.path.startswith((".", "~")):
        raise ModelError(f"model.path does not exist or is not a model folder: {cfg.path}")
    return cfg.path, cfg.gguf_file  # a hub id: resolved from the local cache (offline)


class HFBackend:
    """Batched chat completion with transformers (implements :class:`~evotrainer.backends.base.LLM`).

    Args:
        cfg: backend settings; the model loads once, here.

    Attributes:
        name: "hf:<model file or path>".
        model: the ``PreTrainedModel`` in eval mode (shared with trainers that need it).
        tokenizer: its tokenizer, with a pad token distinct from end-of-turn.
        context_length: context window in tokens (prompt + generated).
        stop_token_ids: ids that end a turn (generation config eos ids + tokenizer eos).
        load_seconds: wall time of the load.

    Raises:
        ModelError: the model cannot be located or loaded, or has no chat template.
        ConfigError: a config value is out of range.
    """

    def __init__(self, cfg: HFBackendConfig | None = None) -> None:
        cfg = cfg or HFBackendConfig()
        if cfg.dtype not in _DTYPES:
            raise ConfigError(f"model.dtype must be one of {sorted(_DTYPES)}, got {cfg.dtype!r}")
        if cfg.batch_size < 1:
            raise ConfigError(f"model.batch_size must be >= 1, got {cfg.batch_size}")
        if cfg.prefix_min_tokens < 1:
            raise ConfigError(f"model.prefix_min_tokens must be >= 1, got {cfg.prefix_min_tokens}")
        if cfg.kv_cache not in ("dynamic", "static"):
            raise ConfigError(f"model.kv_cache must be 'dynamic' or 'static', got {cfg.kv_cache!r}")
        if cfg.max_batch_tokens is not None and cfg.max_batch_tokens < 1:
            raise ConfigError(f"model.max_batch_tokens must be >= 1 or null, got {cfg.max_batch_tokens}")
        if cfg.prefix_cache_mb < 0:
            raise ConfigError(f"model.prefix_cache_mb must be >= 0, got {cfg.prefix_cache_mb}")
        if cfg.max_context is not None and cfg.max_context < 16:
            raise ConfigError(f"model.max_context must be >= 16 tokens or null, got {cfg.max_context}")
        if cfg.threads is not None:
            if cfg.threads < 1:
                raise ConfigError(f"model.threads must be >= 1 or null, got {cfg.threads}")
            torch.set_num_threads(cfg.threads)
        self.cfg = cfg
        source, gguf_file = _resolve_source(cfg)
        self.name = f"hf:{gguf_file or source}"
        start = time.perf_counter()
        self.tokenizer, self.model = self._load(source, gguf_file, _DTYPES[cfg.dtype])
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
        # adapters (issue 6): one PEFT wrapper at most, one named adapter per distinct folder
        self.max_loaded_adapters = 64
        self._peft = None
        self._adapters: dict[str, _LoadedAdapter] = {}
        self._adapter_counter = 0
        # shared prefixes (issue 14): only for models whose cache is plain per-layer key/value tensors
        self.stats = GenerationStats()
        self.prefix_store = PrefixStore(cfg.prefix_cache_mb * 2**20)
        self.prefix_sharing = cfg.prefix_sharing and _plain_kv_cache(self.model)

    # ------------------------------------------------------------------ loading
    @staticmethod
    def _load(source: str, gguf_file: str | None, dtype: torch.dtype):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs = {"gguf_file": gguf_file} if gguf_file else {}
        converted = converted_dir(source, gguf_file, dtype)
        if converted is not None:  # the GGUF converted once already: a safetensors load, fingerprint-checked
            with _quiet_loading():
                cached = load_converted(converted, dtype)
            if cached is not None:
                return cached
        try:
            with _quiet_loading():
                tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
                model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **kwargs)
        except (OSError, ValueError, ImportError) as exc:
            raise ModelError(
                f"cannot load model {source!r}{f' (gguf_file={gguf_file})' if gguf_file else ''}: {exc}. "
                "Hub ids must already be cached locally (runs are offline, HF_HUB_OFFLINE=1)."
            ) from exc
        if not getattr(tokenizer, "chat_template", None):
            raise ModelError(f"model {source!r} has no chat template; use an instruction-tuned model")
        if converted is not None:
            save_converted(converted, tokenizer, model)
        return tokenizer, model

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
        return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) + prefill

    def _encode(self, messages: list[Message], prefill: str = "") -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefill
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _prepare(self, index: int, request: GenerationRequest) -> _Prepared:
        messages = ensure_system_turn(request.messages, where=f"request {index}")
        budget = self.context_length - request.params.max_new_tokens
        if request.params.max_new_tokens < 1 or budget < 1:
            raise ConfigError(
                f"request {index}: max_new_tokens={request.params.max_new_tokens} must be in "
                f"[1, {self.context_length - 1}] (context window {self.context_length} tokens)"
            )
        chat, prefill = split_prefill(messages)
        ids = self._encode(chat, prefill)
        if len(ids) <= budget:
            return _Prepared(ids, False, 0, prefill)
        fitted, omitted = fit_messages(chat, lambda m: len(self._encode(m, prefill)), budget)
        return _Prepared(self._encode(fitted, prefill), True, omitted, prefill)

    # ------------------------------------------------------------------ adapters (issue 6)
    @property
    def loaded_adapters(self) -> dict[str, str]:
        """Adapters resident in the model: ``{resolved folder: internal PEFT adapter name}``."""
        return {folder: entry.name for folder, entry in self._adapters.items()}

    def load_adapter(self, folder: str | Path) -> str:
        """Load the PEFT LoRA adapter saved in ``folder`` (once per distinct folder) and return its name.

        Adapters stay resident (least recently used ones are evicted past ``max_loaded_adapters``) and are
        dormant outside :meth:`generate`: their layers are disabled, so a direct ``self.model(...)`` call
        runs the base model. A folder whose ``adapter_model.safetensors`` or ``adapter_config.json``
        changed on disk since it was loaded is reloaded.

        Args:
            folder: a folder written by PEFT ``save_pretrained`` (``adapter_config.json`` +
                ``adapter_model.safetensors``) for this base model.

        Returns:
            The internal adapter name (``"a<k>"``), used as a row entry of PEFT ``adapter_names``.

        Raises:
            ModelError: the folder is missing, is not a PEFT adapter, or does not fit this model.
        """
        return self._load_adapters([folder])[0]

    def unload_adapter(self, folder: str | Path) -> bool:
        """Remove the adapter loaded from ``folder``; True if it was loaded.

        When the last adapter goes, the PEFT wrapper is unloaded and the model is the plain base model
        again (same module objects and weights as before any adapter was loaded).
        """
        key = str(Path(folder).expanduser().resolve())
        entry = self._adapters.pop(key, None)
        if entry is None:
            return False
        self.prefix_store.clear()
        if not self._adapters:
            self.unload_adapters()
            return True
        with warnings.catch_warnings():  # "adapter X was active, setting active adapter to Y"
            warnings.simplefilter("ignore")
            self._peft.delete_adapter(entry.name)
        return True

    def unload_adapters(self) -> None:
        """Remove every loaded adapter and the PEFT wrapper: the model is the plain base model again."""
        self._adapters.clear()
        self.prefix_store.clear()
        if self._peft is not None:
            peft, self._peft = self._peft, None
            self.model = peft.unload()
            self.model.eval()

    def _adapter_folder(self, folder: str | Path) -> tuple[str, tuple[int, ...]]:
        """``(resolved folder, file signature)``; ModelError when it is not a PEFT adapter folder."""
        path = Path(folder).expanduser().resolve()
        files = [path / "adapter_config.json", path / "adapter_model.safetensors"]
        if not path.is_dir() or not files[0].is_file():
            raise ModelError(f"adapter {folder}: not a PEFT adapter folder (expected adapter_config.json)")
        stats = [f.stat() for f in files if f.is_file()]
        return str(path), tuple(v for st in stats for v in (st.st_mtime_ns, st.st_size))

    def _load_adapters(self, folders: Sequence[str | Path]) -> list[str]:
        """Names of the adapters in ``folders`` (loading or reloading as needed), evicting LRU others."""
        from peft import PeftModel

        from evotrainer.backends.adapter_files import check_fits, read_adapter

        names: list[str] = []
        wanted = {self._adapter_folder(f)[0] for f in folders}
        for folder in folders:
            key, signature = self._adapter_folder(folder)
            entry = self._adapters.get(key)
            if entry is not None and entry.signature != signature:  # rewritten on disk since loaded
                self.unload_adapter(key)
                entry = None
            if entry is None:
                self._evict(wanted)
                name = f"a{self._adapter_counter}"
                self._adapter_counter += 1
                try:
                    check_fits(self.model, read_adapter(key))  # before PEFT injects anything
                except ModelError as exc:
                    raise ModelError(f"adapter {folder}: cannot be loaded into {self.name}: {exc}") from None
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        if self._peft is None:
                            self._peft = PeftModel.from_pretrained(self.model, key, adapter_name=name)
                        else:
                            self._peft.load_adapter(key, adapter_name=name)
                except Exception as exc:  # PEFT/safetensors raise many types; all mean "unloadable"
                    if self._peft is not None and not self._adapters:
                        self.unload_adapters()
                    raise ModelError(f"adapter {folder}: cannot be loaded into {self.name}: {exc}") from exc
                self._peft.eval()
                self._peft.base_model.disable_adapter_layers()  # dormant outside generate()
                entry = _LoadedAdapter(name, signature)
            self._adapters.pop(key, None)
            self._adapters[key] = entry  # most recently used last
            names.append(entry.name)
        return names

    def _evict(self, wanted: set[str]) -> None:
        """Unload least recently used adapters not in ``wanted`` until one more fits the cap."""
        for key in list(self._adapters):
            if len(self._adapters) < self.max_loaded_adapters:
                return
            if key not in wanted:
                self.unload_adapter(key)

    @contextlib.contextmanager
    def _generator(self, requests: Sequence[GenerationRequest]) -> Iterator[tuple[torch.nn.Module, dict]]:
        """The module to call ``generate`` on for one chunk, and the extra ``generate`` kwargs.

        Three cases, cheapest first: no row uses an adapter (or none is resident) → the model with its
        adapter layers off, no kwargs; every row uses the same adapter → that adapter made active, plain
        LoRA forward; a mix → PEFT's per-row ``adapter_names`` (``"__base__"`` for base rows), see
        https://huggingface.co/docs/peft/developer_guides/lora ("Inference with different LoRA adapters in
        the same batch"). The per-row path masks every LoRA layer per sub-batch and is the slowest, so it is
        used only when rows really differ.
        """
        folders = list(dict.fromkeys(r.adapter for r in requests))
        if self._peft is None or folders == [None]:
            yield self.model, {}
            return
        wanted = [f for f in folders if f is not None]
        names = dict(zip(wanted, self._load_adapters(wanted), strict=True))
        if len(folders) == 1:
            self._peft.set_adapter(names[folders[0]])
            kwargs: dict = {}
        else:
            kwargs = {"adapter_names": [names[r.adapter] if r.adapter is not None else "__base__" for r in requests]}
        self._peft.base_model.enable_adapter_layers()
        try:
            yield self._peft, kwargs
        finally:
            self._peft.base_model.disable_adapter_layers()

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
        meeting every row reads), each row uses its own longest stored match; otherwise a prefix several rows
        share is computed once; a row alone has all its prompt but the last token computed as its prefix when
        the store keeps anything, so that rows of later calls reading the same meeting find it.
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
        if not self.cfg.progress or not chunks:
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
        )


def save_served_folder(backend: HFBackend, folder: str | Path) -> Path:
    """Write ``backend``'s model as a plain transformers folder another process can serve (issue 28), e.g.
    ``transformers serve FOLDER`` or ``vllm serve FOLDER``: the embedded GGUF cannot be served as it is (its
    config names no architecture).

    The folder holds the tokenizer with its chat template, the config with ``architectures`` set, the weights
    as safetensors (de-quantised, in the backend's dtype: the same numbers the in-process backend runs), and a
    generation config with ``do_sample: true, top_k: 0`` so that a request with temperature > 0 samples
    (``transformers serve`` applies the temperature without switching sampling on; temperature 0 still decodes
    greedily) with no top-k cut, as the in-process sampler.

    Args:
        backend: a loaded backend.
        folder: where to write (created; existing files are overwritten).

    Returns:
        The folder.
    """
    import json

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    backend.tokenizer.save_pretrained(str(out))
    save_plain(backend.model, out)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    config["architectures"] = [type(backend.model).__name__]
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    gen_path = out / "generation_config.json"
    generation = json.loads(gen_path.read_text(encoding="utf-8")) if gen_path.is_file() else {}
    generation.update(do_sample=True, top_k=0, eos_token_id=list(backend.stop_token_ids))
    gen_path.write_text(json.dumps(generation, indent=2) + "\n", encoding="utf-8")
    return out


def load_backend(cfg: HFBackendConfig | None = None) -> HFBackend:
    """Load an :class:`HFBackend` (the model loads once); see :class:`HFBackendConfig` for the fields."""
    return HFBackend(cfg)
