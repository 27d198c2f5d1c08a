"""LoRA adapters loaded into a running vLLM server (``/v1/load_lora_adapter``), under content-addressed names.

An adapter folder is loaded once per process under ``evo-<sha256 of its files, 16 hex digits>``
(:func:`~evotrainer.backends.adapter_files.adapter_digest`) and requested by that name. The server outlives the
process: a rerun, a resumed run, a sweep's next job or a second process finds the name already held, and vLLM
refuses the load with HTTP 400 "The lora adapter '<name>' has already been loaded ..." (vLLM
``vllm/entrypoints/openai/models/serving.py``; vllm PR#31326). Since the name is the files' digest, the adapter
it holds is this one: the refusal is read as loaded.

Every adapter of a call is loaded before the call sends anything (:meth:`RuntimeAdapters.load`). An adapter the
server cannot load (no files there: HTTP 404 "Loading lora ... failed"; a bad adapter: 400 or 500) fails the
requests carrying it and no other: the call raises :class:`~evotrainer.errors.AdapterLoadError` naming them,
and the rollout runs their batch mates without them. An unreachable server, a refused key, a rate limit that did
not lift, or a server without the endpoint (404 or 405 without vLLM's error body: started without
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) is systemic: :class:`~evotrainer.errors.ServerError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from evotrainer.errors import AdapterLoadError, ModelError, ServerError

__all__ = ["RuntimeAdapters", "adapter_name"]

_HELD = "has already been loaded"  # vLLM's refusal of a name it holds


def adapter_name(folder: str | Path) -> str:
    """The name an adapter folder is loaded under: ``evo-`` and 16 hex digits of its files' sha256.

    Raises:
        ModelError: the folder holds no files or cannot be read.
    """
    from evotrainer.backends.adapter_files import adapter_digest

    return "evo-" + adapter_digest(folder)[:16]


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else ""


def _systemic(exc: Any) -> bool:
    """Whether a failed load means no adapter can load on this server (module docstring)."""
    import openai

    if isinstance(exc, openai.APIConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return status in (401, 403, 429) or (status in (404, 405) and not _server_message(exc))


class RuntimeAdapters:
    """The adapters this process loaded into one vLLM server.

    Args:
        post: ``(path, body) -> None``, the client's POST to the server (raises ``openai`` errors).
        describe_error: ``(exc, what) -> str``, the one-line description of a failed call.
    """

    def __init__(self, post: Callable[[str, dict[str, Any]], Any], describe_error: Callable[[Any, str], str]) -> None:
        self._post = post
        self._describe = describe_error
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}  # resolved folder -> name the server holds it under
        self.already_held = 0  # loads the server answered with "already loaded" (a name held from before)

    def name(self, adapter: str) -> str:
        """The loaded name of ``adapter`` (a request's ``adapter`` value, loaded by :meth:`load`)."""
        return self._names[str(Path(adapter).expanduser().resolve())]

    def load(self, adapters: Iterable[str]) -> None:
        """Load every adapter not loaded yet; all are tried.

        Raises:
            ServerError: a failure no adapter can get past (module docstring); raised at once.
            AdapterLoadError: some adapters failed; names them, one line.
        """
        import openai

        failed: dict[str, str] = {}
        for adapter in dict.fromkeys(adapters):
            folder = str(Path(adapter).expanduser().resolve())
            with self._lock:
                if folder in self._names:
                    continue
                try:
                    name = adapter_name(folder)
                    self._post("/load_lora_adapter", {"lora_name": name, "lora_path": folder})
                except ModelError as exc:  # the folder itself
                    failed[adapter] = str(exc)
                    continue
                except openai.APIError as exc:
                    if getattr(exc, "status_code", None) == 400 and _HELD in _server_message(exc):
                        self.already_held += 1  # the same files under the same name: this adapter
                    elif _systemic(exc):
                        hint = ("; start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
                                if getattr(exc, "status_code", None) in (404, 405) else "")
                        raise ServerError(self._describe(exc, f"loading adapter {folder}") + hint) from None
                    else:
                        failed[adapter] = self._describe(exc, f"loading adapter {folder}")
                        continue
                self._names[folder] = name
        if failed:
            shown = "; ".join(list(failed.values())[:3])
            more = f" (and {len(failed) - 3} more adapters)" if len(failed) > 3 else ""
            raise AdapterLoadError(f"{len(failed)} adapter(s) could not be loaded: {shown}{more}", set(failed))
