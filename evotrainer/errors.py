"""Error hierarchy.

Systemic failures (bad config, malformed data file, missing model, broken archive) raise an
``EvoTrainerError`` subclass that also inherits the matching builtin, so callers may catch either
(the pattern Nevergrad uses). A single failing example never raises: it gets a fallback score.
"""

from __future__ import annotations

__all__ = ["AdapterLoadError", "ArchiveError", "ConfigError", "DataError", "EvoTrainerError", "ModelError",
           "OperatorError", "ServerError"]


class EvoTrainerError(Exception):
    """Base class of every error EvoTrainer raises on purpose."""


class ConfigError(EvoTrainerError, ValueError):
    """A config key has a missing, unknown or out-of-range value. The message names the key."""


class DataError(EvoTrainerError, ValueError):
    """A data file is malformed. The message names ``file:line`` and what was expected."""


class ModelError(EvoTrainerError, RuntimeError):
    """A model or embedder cannot be located or loaded."""


class ServerError(ModelError):
    """A model server failed in a way no retry or other request mends (unreachable, a refused key, an unknown
    model, a rate limit that did not lift): systemic, so the code that gives a failing example a fallback score
    lets it through and the run stops with its one line."""


class AdapterLoadError(ModelError):
    """Adapters a backend could not load, raised before it sends anything: the requests carrying them fail, the
    other requests of the call can run without them (the rollout fails those policies only).

    Attributes:
        adapters: the failed requests' ``adapter`` values, as the requests give them.
    """

    def __init__(self, message: str, adapters: frozenset[str] | set[str]) -> None:
        super().__init__(message)
        self.adapters = frozenset(adapters)


class ArchiveError(EvoTrainerError, RuntimeError):
    """An archive file is missing, corrupt, foreign, or of an unknown schema version."""


class OperatorError(EvoTrainerError, TypeError):
    """A variation operator returned something that is not a list of valid policies."""
