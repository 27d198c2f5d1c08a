"""PEFT LoRA adapters resident in :class:`~evotrainer.backends.hf.HFBackend`'s model.

Each distinct adapter folder is loaded once, under its own name, into one PEFT wrapper; adapters are dormant
(their layers disabled) outside ``generate``, so a direct call of the model runs the base model. A chunk of
requests that mixes adapters runs as one ``generate`` with PEFT's per-row ``adapter_names``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evotrainer.backends.base import GenerationRequest
from evotrainer.errors import ModelError

__all__ = ["AdapterSlots"]


@dataclass(frozen=True)
class _LoadedAdapter:
    """A resident adapter: its PEFT name and the (mtime, size) signature of its files when loaded."""

    name: str
    signature: tuple[int, ...]


class AdapterSlots:
    """The adapter half of :class:`~evotrainer.backends.hf.HFBackend` (a mixin).

    The host sets ``model`` (the base model), ``name``, ``prefix_store`` (cleared whenever an adapter goes, as
    its cached prefix states may hold adapter rows) and calls :meth:`_init_adapters` once the model is loaded.
    """

    model: Any
    name: str
    prefix_store: Any

    def _init_adapters(self) -> None:
        self.max_loaded_adapters = 64
        self._peft: Any = None
        self._adapters: dict[str, _LoadedAdapter] = {}
        self._adapter_counter = 0

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
