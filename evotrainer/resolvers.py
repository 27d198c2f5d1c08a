"""OmegaConf resolvers of the Hydra app: ``${evotrainer_unique:}``, a short suffix that keeps run folders apart.

Hydra names run and sweep folders by ``${now:%Y-%m-%d_%H-%M-%S}``: two runs (or two sweeps) started in the
same second with the same settings got the same folder and wrote into one ``archive.db``. The
``conf/config.yaml`` folder names end in ``_${evotrainer_unique:}`` instead: 6 hex digits of a fresh
``uuid.uuid4()`` (16.7 million values; two runs of the same second collide with probability 6e-8).
The suffix names a folder only: it never reaches a seed or a result.

The resolver is registered with ``use_cache=True``, like Hydra's own ``now``
(``hydra/core/utils.py: setup_globals``): within one composed config every use gives the same value,
and Hydra copies that cache into each job's config of a sweep (``ConfigLoaderImpl.load_sweep_config``),
so the sweep folder that the sweeper creates is the folder its jobs write into.
"""

from __future__ import annotations

import uuid

from omegaconf import OmegaConf

__all__ = ["UNIQUE_RESOLVER", "register_resolvers", "unique_suffix"]

UNIQUE_RESOLVER = "evotrainer_unique"
"""Name of the resolver: ``${evotrainer_unique:}`` in a config."""


def unique_suffix() -> str:
    """A fresh folder-name suffix: 6 lowercase hex digits from :func:`uuid.uuid4` (not seeded: names only)."""
    return uuid.uuid4().hex[:6]


def register_resolvers() -> None:
    """Register ``${evotrainer_unique:}`` with OmegaConf (cached per config); calling it again does nothing."""
    if not OmegaConf.has_resolver(UNIQUE_RESOLVER):
        OmegaConf.register_new_resolver(UNIQUE_RESOLVER, unique_suffix, use_cache=True)


register_resolvers()  # at import, so a joblib worker that unpickles a job gets it before composing its config
