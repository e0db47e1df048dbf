"""Which query parameters carry a credential: the one list, for every URL nito_nb shows
(``_client/endpoint.py`` ``shown_url``) and every request whose secrets capture takes out of what
it keeps (``_capture.py``)."""

from __future__ import annotations

import urllib.parse

__all__ = ["CREDENTIAL_NAMES", "CREDENTIAL_PARTS", "is_credential_parameter"]

#: Query parameters that carry a credential: API keys (Azure OpenAI's ``api-key``, Google's
#: ``key``), OAuth tokens and codes, signatures of signed URLs (``sig``, AWS's ``Signature``).
CREDENTIAL_NAMES = frozenset(
    {
        "key",
        "api-key",
        "api_key",
        "apikey",
        "token",
        "access_token",
        "secret",
        "password",
        "passwd",
        "sig",
        "signature",
        "auth",
        "code",
    }
)
#: ... and any name that contains one of these (``x-goog-api-key``, ``client_secret``, ``id_token``).
CREDENTIAL_PARTS = ("key", "token", "secret", "password")


def is_credential_parameter(name: str) -> bool:
    """Whether a query (or fragment) parameter of this name carries a credential; ``name`` as it
    is in the URL (percent-encoded or not) or decoded, in any case."""
    plain = urllib.parse.unquote_plus(name).strip().lower()
    return plain in CREDENTIAL_NAMES or any(part in plain for part in CREDENTIAL_PARTS)
