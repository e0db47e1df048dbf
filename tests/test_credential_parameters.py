"""One list of the query parameters that carry a credential (``_core/credentials.py``), and both
paths that use it: a URL as the client shows it (``shown_url``) and the secrets capture takes out
of what it keeps (``_capture._secrets``). They disagreed: capture knew 7 names, the client 13 and
any name containing ``key``, ``token``, ``secret`` or ``password``."""

from __future__ import annotations

import httpx
import pytest

from nito_nb._capture import _secrets
from nito_nb._client.endpoint import shown_url
from nito_nb._core.credentials import CREDENTIAL_NAMES, CREDENTIAL_PARTS

VALUE = "Sup3rSecretValue42"
#: Every listed name, and one name holding each listed part.
NAMES = (
    sorted(CREDENTIAL_NAMES)
    + [f"client_{part}" for part in CREDENTIAL_PARTS]
    + ["X-Goog-Api-Key", "ID_TOKEN"]
)


@pytest.mark.parametrize("name", NAMES)
def test_the_client_never_shows_the_parameter(name: str) -> None:
    shown = shown_url(f"https://gateway.example/v1?api-version=1&{name}={VALUE}")
    assert VALUE not in shown and "api-version=1" in shown


@pytest.mark.parametrize("name", NAMES)
def test_capture_takes_the_parameter_for_a_secret(name: str) -> None:
    request = httpx.Request(
        "POST", f"https://gateway.example/v1/chat/completions?api-version=1&{name}={VALUE}"
    )
    assert VALUE in [secret.value for secret in _secrets(request)]


def test_a_parameter_that_is_no_credential_is_kept() -> None:
    request = httpx.Request("POST", f"https://gateway.example/v1?api-version={VALUE}")
    assert _secrets(request) == [] and VALUE in shown_url(str(request.url))
