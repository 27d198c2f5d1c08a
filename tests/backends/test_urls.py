"""A credential in a server's URL (userinfo or a query value) is masked wherever the URL is shown or stored
(evotrainer/backends/urls.py); the whole run against a server: tests/backends/test_openai_run.py."""

from __future__ import annotations

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.openai_compat import OpenAIBackend
from evotrainer.backends.urls import redact_config, redact_url, redact_urls
from evotrainer.errors import ServerError
from evotrainer.model_schema import OpenAIConfig
from evotrainer.run.resume import config_diff, run_config
from tests.backends._fake_openai import FakeServer

SECRET = "q-secret-31"


def test_redact_url_masks_userinfo_query_values_and_fragment_only() -> None:
    assert redact_url(f"http://evo:{SECRET}@host:8000/v1?api_key={SECRET}&v=2#{SECRET}") == \
        "http://***@host:8000/v1?api_key=***&v=***#***"
    assert redact_url(f"https://host/v1?{SECRET}") == "https://host/v1?***"  # a bare piece may be the key
    for plain in ("http://127.0.0.1:8000/v1", "HTTPS://Host/v1/", "not a url", "/a/path", ""):
        assert redact_url(plain) == plain
    assert redact_url("http://host:notaport/v1") == "***"  # unparsable: nothing of it is shown
    assert redact_urls(f"GET http://u:{SECRET}@h/v1/models failed; see https://docs.x/y") == \
        "GET http://***@h/v1/models failed; see https://docs.x/y"
    nested = {"model": {"openai": {"base_url": f"http://u:{SECRET}@h/v1", "concurrency": 8}}, "tags": [f"http://h/?k={SECRET}"]}
    assert SECRET not in str(redact_config(nested)) and redact_config(nested)["model"]["openai"]["concurrency"] == 8


def test_a_query_credential_in_base_url_stays_out_of_the_error_line() -> None:
    """The openai client appends the endpoint after a base URL's query, so such a server answers 404: the line
    that says so names the server with its key masked."""
    with FakeServer(owned_by="vllm") as server:
        backend = OpenAIBackend(OpenAIConfig(base_url=f"{server.url}?api_key={SECRET}", model=server.model,
                                             max_retries=0))
        with pytest.raises(ServerError) as err:
            backend.generate([GenerationRequest(({"role": "user", "content": "hi"},), SamplingParams())])
        backend.close()
    assert SECRET not in str(err.value) and f"{server.url}?api_key=***" in str(err.value)
    assert SECRET not in str(backend.describe())


def test_a_run_stores_and_compares_its_config_with_url_credentials_masked() -> None:
    given = {"model": {"openai": {"base_url": f"http://evo:{SECRET}@h:1/v1"}}, "resume": "x"}
    stored = run_config(given)
    assert SECRET not in str(stored) and "resume" not in stored
    assert config_diff(stored, run_config(given)) == []
    assert config_diff(given, run_config(given)) == []  # an archive written before masking still matches
