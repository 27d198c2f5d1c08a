"""URLs as the run prints and stores them: with their credentials replaced by ``***``.

A server's URL (``<role>.openai.base_url``, a tracking URI) may carry a credential: userinfo
(``http://user:key@host/v1``) or a query parameter (``?api_key=...``). Whatever prints or stores a URL (error
lines, the archive's run config and backend record, the call log's server identity, trackers, the HTML report)
writes it through :func:`redact_url`; free text that may quote one (a server's error message) goes through
:func:`redact_urls`, a config through :func:`redact_config`. The key of ``api_key_env`` is scrubbed apart
(``evotrainer/backends/openai_compat.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["MASK", "redact_config", "redact_url", "redact_urls"]

MASK = "***"
"""What a credential is replaced by."""

_URL = re.compile(r"https?://[^\s'\"<>`]+", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` with its userinfo, every query value and its fragment replaced by :data:`MASK`.

    ``http://user:key@host:8000/v1?api_key=k&x=1`` becomes ``http://***@host:8000/v1?api_key=***&x=***``. A query
    piece without ``=`` is masked whole (its name may be the secret). A string that is not an ``http(s)`` URL,
    or a URL with nothing to mask, comes back unchanged; one that cannot be parsed comes back as :data:`MASK`.
    """
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        return url
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return MASK
    if "@" not in parts.netloc and not parts.query and not parts.fragment:
        return url
    netloc = f"{MASK}@{parts.netloc.rpartition('@')[2]}" if "@" in parts.netloc else parts.netloc
    query = "&".join(f"{piece.partition('=')[0]}={MASK}" if "=" in piece else MASK
                     for piece in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, MASK if parts.fragment else ""))


def redact_urls(text: str) -> str:
    """``text`` with every ``http(s)`` URL in it through :func:`redact_url`."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redact_config(config: Any) -> Any:
    """A copy of a nested config (mappings, lists, tuples, scalars) with every string value through
    :func:`redact_url` (what the archive and the trackers store)."""
    if isinstance(config, Mapping):
        return {k: redact_config(v) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return type(config)(redact_config(v) for v in config)
    return redact_url(config) if isinstance(config, str) else config
