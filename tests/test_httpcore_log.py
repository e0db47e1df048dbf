"""httpcore's own DEBUG log shows a response's headers: a key a gateway echoes there is redacted
(nito_nb/_client/logs.py; issue 28). What it does not log (the request's headers, body bytes)
is checked too, so that the docs' statement stays true."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from conftest import KEY
from scripted_server import Script, ScriptedServer

import nito_nb


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # what logging.basicConfig(level=logging.DEBUG) turns on
    return caplog


def echoing(scripted: ScriptedServer) -> str:
    body = (
        b'data: {"choices":[{"delta":{"content":"your key is '
        + KEY.encode()
        + b'"}}]}\n\ndata: [DONE]\n\n'
    )
    return scripted.add("log-echo", Script(parts=[body], headers={"x-echo": f"Bearer {KEY}"}))


def test_a_key_echoed_in_a_header_is_redacted_from_httpcores_log(
    scripted: ScriptedServer, debug_log: pytest.LogCaptureFixture
) -> None:
    base = echoing(scripted)
    with nito_nb.Client(api_key=KEY, base_url=base) as client:
        client.stream("hi", model="m").wait()

    async def main() -> None:
        await nito_nb.AsyncClient(api_key=KEY, base_url=base).stream("hi", model="m").wait()

    asyncio.run(main())
    # httpcore logged the Client's response headers, nito_nb's own connection
    # (_transport/direct.py) the AsyncClient's...
    headers = [
        r
        for r in debug_log.records
        if "receive_response_headers.complete" in r.getMessage() or r.name == "nito_nb.http"
    ]
    assert sorted(r.name for r in headers) == ["httpcore.http11", "nito_nb.http"]
    # ...without the key. ("Bearer [redacted]", or "[redacted]" whole when a capture earlier in the
    # run protects a whole "Bearer <key>" header value, as it does while its Stream is kept.)
    assert all(
        re.search(r"\(b'x-echo', b'(Bearer )?\[redacted\]'\)", r.getMessage()) for r in headers
    )
    assert KEY not in debug_log.text
    # no piece of it either (the body, the request's Authorization)
    assert KEY[8:] not in debug_log.text


def test_nito_api_key_is_redacted_even_before_a_stream_carries_it(
    scripted: ScriptedServer, debug_log: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    logging.getLogger("httpcore.http11").debug("header value %s", f"Bearer {KEY}")
    assert KEY not in debug_log.text and "[redacted]" in debug_log.text
