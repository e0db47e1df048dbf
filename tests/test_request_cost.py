"""The fixed work of one request of a run, done once where it can be (issue 32: a run's requests
each paid for it, and runs stayed under their floor). Unit tests of the client's and transport's
layers: what is made once, and that what each request gets is what it got before."""

from __future__ import annotations

import pytest

import nito_nb
from nito_nb._core import errors

KEY = "sk-request-cost-0123456789"


@pytest.fixture
def secrets_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The value of every Secret made from now on."""
    made: list[str] = []
    init = errors.Secret.__init__

    def counted(self: errors.Secret, value: str) -> None:
        made.append(value)
        init(self, value)

    monkeypatch.setattr(errors.Secret, "__init__", counted)
    return made


def test_a_key_becomes_a_secret_once_per_client(secrets_made: list[str]) -> None:
    client = nito_nb.AsyncClient(max_retries=0)
    url = "http://127.0.0.1:9/v1"
    streams = [client.stream(f"hi {i}", model="m", api_key=KEY, base_url=url) for i in range(5)]
    assert secrets_made == [KEY]  # was two per stream: 28 µs each
    # every stream redacts the key it sent, with the same Secret
    protected = {id(stream._state.secret) for stream in streams}
    assert len(protected) == 1
    assert streams[0]._state.secret is not None and streams[0]._state.secret.value == KEY
    # another key gets its own
    other = "sk-another-key-9876543210"
    client.stream("hi", model="m", api_key=other, base_url=url)
    assert secrets_made == [KEY, other]
