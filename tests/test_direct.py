"""The request an AsyncClient sends on its own connection (nito_nb/_transport/direct.py): written by
h11, its head read by h11, no httpx client in between. A raw loopback server answers each case with
the bytes the test gives, and keeps the bytes of the request it got."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import httpx
import pytest
from conftest import KEY, chunk_line
from test_transport import certificate  # noqa: F401 - the fixture

import nito_nb
from nito_nb._client import clients
from nito_nb._core.errors import NitoError

ANSWER = (
    chunk_line({"role": "assistant", "content": "Hello"})
    + chunk_line({"content": " world"})
    + chunk_line(finish="stop")
    + b"data: [DONE]\n\n"
)
EVENT_STREAM = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"


def chunked(body: bytes) -> bytes:
    return b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


async def _serve(
    response: bytes, *, tls: ssl.SSLContext | None = None, **call: Any
) -> tuple[Any, list[bytes]]:
    """One stream through an AsyncClient to a server that answers ``response`` (then closes); the
    Stream (or the error it raised) and the request's bytes as the server got them."""
    got: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            got.append(head + await reader.readexactly(length))
            writer.write(response)
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if tls else "http"
    client = nito_nb.AsyncClient(api_key=KEY, base_url=f"{scheme}://127.0.0.1:{port}/v1", **call)
    try:
        try:
            result: Any = await client.stream("hi", model="test/model").wait()
        except NitoError as exc:
            result = exc
        return result, got
    finally:
        server.close()
        await server.wait_closed()


def serve(response: bytes, **call: Any) -> tuple[Any, list[bytes]]:
    return asyncio.run(_serve(response, **call))


def test_no_httpx_client_is_made_for_a_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any) -> None:
        raise AssertionError("an httpx client was made")

    monkeypatch.setattr(clients.AsyncClient, "_new_http", refuse)
    stream, _ = serve(EVENT_STREAM + chunked(ANSWER))
    assert stream.status == "done" and stream.content == "Hello world"
    assert stream.connect is not None and 0 < stream.connect < stream.ttfb


def test_the_request_is_what_httpx_sent() -> None:
    _, (request,) = serve(EVENT_STREAM + chunked(ANSWER))
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    assert headers[b"host"].startswith(b"127.0.0.1:")
    assert headers[b"authorization"] == b"Bearer " + KEY.encode()
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"accept"] == b"text/event-stream"
    assert headers[b"accept-encoding"] == b"gzip, deflate"
    assert headers[b"user-agent"] == f"python-httpx/{httpx.__version__}".encode()
    assert headers[b"content-length"] == str(len(body)).encode()
    sent = json.loads(body)
    assert sent["model"] == "test/model" and sent["stream"] is True
    # httpx's json=: compact, UTF-8
    assert body == json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode()


def test_informational_answers_before_the_head_are_skipped() -> None:
    stream, _ = serve(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
        + EVENT_STREAM
        + chunked(ANSWER)
    )
    assert stream.status == "done" and stream.content == "Hello world"


def test_a_body_until_the_connection_closes_and_one_of_a_length() -> None:
    stream, _ = serve(EVENT_STREAM + b"\r\n" + ANSWER)
    assert stream.content == "Hello world"
    stream, _ = serve(EVENT_STREAM + b"content-length: %d\r\n\r\n" % len(ANSWER) + ANSWER)
    assert stream.content == "Hello world"


@pytest.mark.parametrize(
    "response",
    [
        pytest.param(b"NOT HTTP AT ALL\r\n\r\n", id="no status line"),
        pytest.param(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", id="a header without colon"),
        pytest.param(b"HTTP/1.1 200 OK\r\ncontent-ty", id="cut in the head"),
        pytest.param(b"", id="closed without a word"),
        pytest.param(b"HTTP/1.1 200 OK\r\nx: " + b"a" * 200_000 + b"\r\n\r\n", id="a huge head"),
    ],
)
def test_a_broken_head_is_one_line_and_no_traceback(response: bytes) -> None:
    error, _ = serve(response, max_retries=0)
    assert isinstance(error, NitoError)
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    assert "Could not reach" in message and "RemoteProtocolError" in message
    assert error.stream.status == "failed"


def test_an_error_page_is_read_and_named() -> None:
    page = b'{"error": {"message": "no such model: test/model"}}'
    error, _ = serve(
        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        % len(page)
        + page
    )
    assert isinstance(error, NitoError) and "no such model: test/model" in str(error)
    assert getattr(error, "status_code", None) == 404


def test_a_key_with_a_line_break_is_refused_and_not_shown() -> None:
    bad = KEY + "\r\nX-Injected: yes"

    async def main() -> Any:
        client = nito_nb.AsyncClient(api_key=bad, base_url="http://127.0.0.1:9/v1", max_retries=0)
        try:
            await client.stream("hi", model="test/model").wait()
        except NitoError as exc:
            return exc
        return None

    error = asyncio.run(main())
    assert isinstance(error, NitoError)
    assert KEY not in str(error) and "X-Injected" not in str(error)


def test_https_on_its_own_connection(
    certificate: tuple[str, str],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    monkeypatch.setattr(clients, "_ssl_context", lambda: ssl.create_default_context(cafile=cert))
    stream, (request,) = serve(EVENT_STREAM + chunked(ANSWER), tls=server_side)
    assert stream.status == "done" and stream.content == "Hello world"
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert stream.connect is not None and 0 < stream.connect < stream.ttfb


def test_an_untrusted_certificate_is_a_connection_failure(
    certificate: tuple[str, str],  # noqa: F811 - the fixture
) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    error, got = serve(EVENT_STREAM + chunked(ANSWER), tls=server_side, max_retries=0)
    assert isinstance(error, NitoError) and "CERTIFICATE_VERIFY_FAILED" in str(error)
    assert got == []  # nothing was sent to a server that could not prove who it is
