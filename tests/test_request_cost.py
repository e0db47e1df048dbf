"""The fixed work of one request of a run, done once where it can be (issue 32: a run's requests
each paid for it, and runs stayed under their floor). Unit tests of the client's and transport's
layers: what is made once, and that what each request gets is what it got before."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

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


# -- the connection: no asyncio.timeout around what is done at once --------------------------


def test_a_numeric_address_is_found_once() -> None:
    from nito_nb._transport import transport

    first = transport._numeric_address("127.0.0.1", 8123)
    assert first is not None and first[0][4] == ("127.0.0.1", 8123)
    assert transport._numeric_address("127.0.0.1", 8123) is first  # kept: 7 µs a request
    assert transport._numeric_address("localhost", 8123) is None  # a name goes to the resolver


def _no_timeout_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any ``within`` (an ``asyncio.timeout``) of the transport fail the test."""
    from nito_nb._transport import streams, transport

    def refused(awaitable: Any, timeout: float | None) -> Any:
        awaitable.close()
        raise AssertionError("an asyncio.timeout for work done at once")

    monkeypatch.setattr(transport, "within", refused)
    monkeypatch.setattr(streams, "within", refused)


def test_a_connection_and_its_request_take_no_timeout_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nito_nb._transport.transport import StampingBackend

    _no_timeout_scope(monkeypatch)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        async def main() -> bytes:
            network = await StampingBackend().connect_tcp("127.0.0.1", port, timeout=5.0)
            try:
                await network.write(b"POST / HTTP/1.1\r\n\r\n" + b"x" * 20_000, timeout=5.0)
            finally:
                await network.aclose()
            peer, _ = server.accept()
            with peer:
                got = b""
                while chunk := peer.recv(65536):
                    got += chunk
            return got

        assert asyncio.run(main()) == b"POST / HTTP/1.1\r\n\r\n" + b"x" * 20_000


def test_connect_and_write_still_time_out_and_say_what_asyncio_said() -> None:
    import httpcore

    from nito_nb._transport.transport import StampingBackend

    backend = StampingBackend()
    # a full accept queue: the kernel drops the next SYN, the connection never opens
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        held = []
        for _ in range(4):
            held.append(socket.socket())
            held[-1].setblocking(False)
            held[-1].connect_ex(server.getsockname())
        time.sleep(0.05)

        async def hangs() -> None:
            await backend.connect_tcp("127.0.0.1", server.getsockname()[1], timeout=0.2)

        started = time.perf_counter()
        with pytest.raises(httpcore.ConnectTimeout, match="timed out"):
            asyncio.run(hangs())
        assert 0.15 < time.perf_counter() - started < 2.0
        for sock in held:
            sock.close()

    # refused: asyncio's own words for it
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]

    async def asyncio_says() -> str:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        except OSError as exc:
            return str(exc)
        finally:
            sock.close()
        return "connected"

    with pytest.raises(httpcore.ConnectError) as refused:
        asyncio.run(backend.connect_tcp("127.0.0.1", port, timeout=1.0))
    assert str(refused.value) == asyncio.run(asyncio_says())

    # a write the socket cannot take at once waits, within its timeout
    with socket.create_server(("127.0.0.1", 0)) as server:

        async def stuck() -> None:
            network = await backend.connect_tcp("127.0.0.1", server.getsockname()[1], timeout=1.0)
            try:  # nobody reads: the buffers fill
                await network.write(b"x" * (64 << 20), timeout=0.2)
            finally:
                await network.aclose()

        with pytest.raises(httpcore.WriteTimeout):
            asyncio.run(stuck())


def test_the_response_records_its_request_as_httpx_did_without_working_it_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx
    from httpx import _models

    from nito_nb._transport import direct

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 0\r\n\r\n"
        )
        await writer.drain()
        writer.close()

    async def main() -> tuple[httpx.Request, httpx.Request]:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        url = httpx.URL(f"http://127.0.0.1:{port}/v1/chat/completions")
        timeout = httpx.Timeout(5.0)
        expected = httpx.Request("POST", url, extensions={"timeout": timeout.as_dict()})

        def refused(**_: Any) -> Any:
            raise AssertionError("httpx worked the request's record out again")

        try:
            with monkeypatch.context() as patched:
                # httpx's own making of a request's headers and body from its content: 9-30 µs
                patched.setattr(_models, "encode_request", refused)
                response = await direct.send(
                    url, {"Accept": "text/event-stream"}, b"{}", timeout=timeout, ssl_context=None
                )
            await response.aclose()
        finally:
            server.close()
            await server.wait_closed()
        return response.request, expected

    got, expected = asyncio.run(main())
    assert (got.method, got.url, got.headers.raw, got.content, got.extensions) == (
        expected.method,
        expected.url,
        expected.headers.raw,
        expected.content,
        expected.extensions,
    )


def test_a_connection_already_open_is_not_polled_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # On loopback the handshake is done when connect() returns EINPROGRESS: asking again says so,
    # without an add_writer, a turn of the loop and a remove_writer.
    from nito_nb._transport.transport import StampingBackend

    polled: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        async def main() -> None:
            loop = asyncio.get_running_loop()
            add_writer = loop._add_writer  # type: ignore[attr-defined]

            def counted(fd: int, *args: Any) -> Any:
                polled.append(fd)
                return add_writer(fd, *args)

            # where both loop.add_writer and loop.sock_connect go (asyncio's selector loop)
            monkeypatch.setattr(loop, "_add_writer", counted)
            for _ in range(5):
                network = await StampingBackend().connect_tcp("127.0.0.1", port, timeout=5.0)
                await network.aclose()
                server.accept()[0].close()

        asyncio.run(main())
    assert polled == []


# -- the run's side: what each request of a run makes -----------------------------------------


def test_a_runs_requests_are_read_in_its_workers_tasks_not_a_task_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each request had a reader task of its own (its queue, its future, an asyncio.wait for it):
    # 13 µs of each request's fixed work. Its sender reads it in its own task now.
    import threading

    created: list[str] = []
    create_task = asyncio.BaseEventLoop.create_task

    def counted(self: asyncio.BaseEventLoop, coro: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "nito_nb-run":
            created.append(getattr(coro, "__qualname__", repr(coro)))
        return create_task(self, coro, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "create_task", counted)
    run = nito_nb.run(
        [f"q{i}" for i in range(24)],
        model="sim/echo",
        concurrency=4,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
    )
    run.wait(timeout=60)
    results = run.results()
    assert list(results["status"]) == ["done"] * 24
    assert list(results["content"].str.startswith("q")) == [True] * 24
    # the run's own: its main task, the client monitor, the 4 workers, the loop's shutdown
    assert len(created) <= 7, created


def test_a_runs_senders_go_on_after_a_deadline() -> None:
    # Read in the sender's own task, a body's deadline cancels that task (taken back: the stream
    # says truncated, tests/test_hostile.py the message of each deadline): each sender goes on
    # with its next requests, all of them recorded, none of them stopped.
    run = nito_nb.run(
        [f"q{i}" for i in range(6)],
        model="sim/stall",
        concurrency=2,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0, "stall_s": 30},
        timeout={"first_byte": 10, "between_chunks": 0.2},
    ).wait(timeout=30)
    results = run.results()
    assert list(results["status"]) == ["truncated"] * 6, results["status"]
    assert all("between_chunks deadline (0.2 s" in m for m in results["error_message"])
    assert all(len(c) > 0 for c in results["content"])  # what came before the stall is kept


def test_the_headers_every_request_sends_alike_are_checked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nito_nb._transport import head

    checked: list[bytes] = []

    class Counted:
        def __init__(self, pattern: Any) -> None:
            self._pattern = pattern

        def fullmatch(self, value: bytes) -> Any:
            checked.append(value)
            return self._pattern.fullmatch(value)

    head._kept_line.cache_clear()
    monkeypatch.setattr(head, "_FIELD_NAME", Counted(head._FIELD_NAME))
    monkeypatch.setattr(head, "_FIELD_VALUE", Counted(head._FIELD_VALUE))
    sent = [
        ("User-Agent", "python-httpx/0.28.1"),
        ("Accept", "text/event-stream"),
        ("Content-Type", "application/json"),
        ("Authorization", f"Bearer {KEY}"),
        ("Content-Length", "12"),
        ("Connection", "close"),
    ]
    first = head.request_head(b"/v1/chat/completions", b"127.0.0.1:8000", sent)
    assert len(checked) == 1 + 2 * len(sent)  # the host, each name and value
    checked.clear()
    again = head.request_head(b"/v1/chat/completions", b"127.0.0.1:8000", sent)
    assert again == first and again is not None
    # the host, then the key's header alone: the others were checked once (two regular
    # expressions each, sixteen a request before)
    assert checked == [b"127.0.0.1:8000", b"Authorization", f"Bearer {KEY}".encode()]
    assert head._kept_line.cache_info().currsize == len(sent) - 1  # no key kept
    # a header h11 would refuse is still refused, kept or not
    assert head.request_head(b"/", b"h", [("Accept", "a\nb")]) is None
    assert head.request_head(b"/", b"h", [("Accept", "a\nb")]) is None
