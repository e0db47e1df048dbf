"""The stamping transport of load runs (nito_nb/_transport/): a chunk's time is the moment its
bytes reached the process, however late the event loop that reads them gets round to it."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx
import pytest

import nito_nb
from nito_nb._client import AsyncClient
from nito_nb._client.clients import _ssl_context
from nito_nb._transport import (
    PushedBody,
    StampedSocketStream,
    StampingTransport,
    stamping_allowed,
)

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="kernel receive times (SO_TIMESTAMPNS) are Linux's; elsewhere a blocked loop delays the stamp too",
)


def _errors(stream: Any) -> list[int]:
    """arrival − sim_sent_ns (ns) of every stamped JSON event of the stream."""
    out = []
    for t_ns, raw in zip(stream.log.times_ns(), stream.log.raw_slices(), strict=True):
        for line in raw.split(b"\n"):
            if line.startswith(b"data: {"):
                out.append(t_ns - json.loads(line[6:])["sim_sent_ns"])
    return out


@linux_only
def test_a_blocked_run_loop_does_not_move_the_arrival_times() -> None:
    # sim/stall sends 30 chunks, is silent for stall_s, then sends the rest. Once the first chunks
    # are in, the run's own event loop is blocked (as a loop busy with hundreds of streams is) for
    # longer than the silence: the rest arrives while nothing on the loop can run. Its recorded
    # arrival must still be the moment the bytes came, not the moment the loop read them.
    silence, block = 1.0, 1.6
    run = nito_nb.run(
        ["hi"],
        model="sim/stall",
        sim={"stamp": True, "stall_s": silence, "tps": 0},
        progress=False,
        concurrency=1,
    )
    deadline = time.monotonic() + 30
    seen, since = 0, time.monotonic()
    # inside the silence: all first chunks read
    while not seen or time.monotonic() - since < silence / 4:
        assert time.monotonic() < deadline and not run.done, "the stream never started"
        n = sum(s.n_chunks for s in list(run._dispatcher.in_flight.values()))
        if n != seen:
            seen, since = n, time.monotonic()
        time.sleep(0.005)
    assert run._dispatcher.sender.call_soon(time.sleep, block)  # the loop is blocked from now on
    run.wait()
    (stream,) = run._writer.kept_streams().values()
    assert stream.status == "done"
    errors = _errors(stream)
    # one clock: nothing before it was sent (the kernel's realtime stamp is mapped onto
    # perf_counter to about a microsecond)
    assert len(errors) > 30 and min(errors) > -block / 1000 * 1e9
    # The bytes after the silence came about `block - silence` s before the loop could read them:
    # a stamp taken by the reader would be that late. Bound: a quarter of the block.
    assert max(errors) < block / 4 * 1e9, (
        f"worst error {max(errors) / 1e6:.0f} ms after a {block} s block"
    )


@linux_only
def test_an_async_consumer_that_blocks_its_loop_keeps_the_arrival_times() -> None:
    # The same through nito_nb's AsyncClient (astream's): the consumer itself stalls its loop.
    silence, block = 1.0, 1.6

    async def main() -> Any:
        client = AsyncClient()  # its own httpx client per stream, with the stamping transport
        stream = client.stream(
            "hi", model="sim/stall", sim={"stamp": True, "stall_s": silence, "tps": 0}
        )
        blocked = False
        async for _ in stream:
            if not blocked:
                blocked = True
                # The first chunks come at once (tps 0): let the loop read them all (the count
                # stops growing: the silence has begun), then block it
                # (a slow display, a sync call) across the end of the silence. (Had it blocked
                # at once, one socket read would take the first chunks and the rest together,
                # with the time of the last packet: an upper bound, see nito_nb/_transport/.)
                seen, since = 0, time.monotonic()
                while time.monotonic() - since < silence / 4:
                    if stream.n_chunks != seen:
                        seen, since = stream.n_chunks, time.monotonic()
                    await asyncio.sleep(0.005)
                time.sleep(block)
        assert blocked
        return stream

    stream = asyncio.run(main())
    assert stream.status == "done"
    errors = _errors(stream)
    assert len(errors) > 30 and min(errors) > -block / 1000 * 1e9
    assert max(errors) < block / 4 * 1e9, (
        f"worst error {max(errors) / 1e6:.0f} ms after a {block} s block"
    )


def test_the_stamping_transport_gives_the_same_stream_as_httpxs_own(body_read: Any) -> None:
    async def main(stamping: bool) -> Any:
        http = None if stamping else httpx.AsyncClient()
        client = AsyncClient(http_client=http)
        try:
            stream = client.stream(
                "hi",
                model="sim/tools",
                sim={"tps": 0, "seed": 3},
                stream_options={"include_usage": True},
            )
            await stream.wait()
            return stream, body_read(stream)
        finally:
            if http is not None:
                await http.aclose()

    (ours, ours_body), (default, default_body) = asyncio.run(main(True)), asyncio.run(main(False))
    # which read the body: the socket's own callback, and httpx stamped as it yields
    assert isinstance(ours_body, PushedBody) and default_body.args[1] is time.perf_counter_ns
    assert ours.status == default.status == "done"
    assert [e.kind for e in ours.log] == [e.kind for e in default.log]  # whatever reads the socket
    assert [(c.name, c.arguments) for c in ours.tool_calls] == [
        (c.name, c.arguments) for c in default.tool_calls
    ]
    assert ours.n_chunks == default.n_chunks and ours.usage == default.usage and not ours.anomalies
    assert ours.ttfb <= ours.ttft <= ours.elapsed  # one clock: the socket reads' times


def test_a_silent_stream_times_out_between_chunks_through_the_transport() -> None:
    async def main() -> Any:
        client = AsyncClient(timeout={"between_chunks": 0.3})
        stream = client.stream(
            "hi", model="sim/stall", sim={"stall_s": 30, "tps": 0}, raise_errors=False
        )
        started = time.monotonic()
        await stream.wait()
        return stream, time.monotonic() - started

    stream, took = asyncio.run(main())
    assert stream.status == "truncated"
    assert isinstance(stream.exception, nito_nb.StreamTimeoutError)
    assert stream.n_chunks > 0 and took < 30 / 2  # what came is kept; it did not wait for the stall


def test_a_refused_connection_is_a_typed_error() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def main() -> BaseException:
        client = AsyncClient(max_retries=0, api_key="sk-x", base_url=f"http://127.0.0.1:{port}/v1")
        with pytest.raises(nito_nb.ConnectionFailed) as caught:
            await client.stream("hi", model="m").wait()
        return caught.value

    error = asyncio.run(main())
    assert f"127.0.0.1:{port}" in str(error)


def test_httpxs_own_transport_when_the_environment_sets_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A transport given to httpx turns its proxy settings off: with a proxy, httpx's own is kept.
    assert stamping_allowed()
    before = AsyncClient()  # the environment is read when a client is made, as httpx does
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert not stamping_allowed()
    http = AsyncClient()._new_http()
    # httpx routes by proxy
    assert http._mounts and not isinstance(http._transport, StampingTransport)
    asyncio.run(http.aclose())
    http = before._new_http()
    assert isinstance(http._transport, StampingTransport)
    asyncio.run(http.aclose())


def test_the_stream_keeps_the_time_of_the_read_that_carried_each_piece() -> None:
    import socket

    async def main() -> list[tuple[bytes, int]]:
        a, b = socket.socketpair()
        stream = StampedSocketStream(a, asyncio.get_running_loop())
        try:
            b.send(b"first")
            await asyncio.sleep(0.05)  # the loop reads it now
            b.send(b"second")
            await asyncio.sleep(0.05)
            out = []
            for _ in range(2):
                out.append((await stream.read(3), stream.arrival_ns))
                out.append((await stream.read(64), stream.arrival_ns))
            return out
        finally:
            await stream.aclose()
            b.close()

    (d1, t1), (d2, t2), (d3, t3), (d4, t4) = asyncio.run(main())
    assert (d1, d2, d3, d4) == (b"fir", b"st", b"sec", b"ond")  # a piece split keeps its time
    assert t1 == t2 < t3 == t4
    assert t3 - t1 > 0.5 * 0.05e9  # read later, each with the time it arrived


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (made with the openssl command)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_through_the_transport(certificate: tuple[str, str]) -> None:
    import ssl

    from conftest import chunk_line

    cert, key = certificate
    served: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        served.append(head + await reader.readexactly(length))
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        )
        writer.write(chunk_line({"role": "assistant", "content": "Hello"}))
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.write(
            chunk_line({"content": " world"}) + chunk_line(finish="stop") + b"data: [DONE]\n\n"
        )
        await writer.drain()
        writer.close()

    async def main() -> Any:
        server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_side.load_cert_chain(cert, key)
        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_side)
        port = server.sockets[0].getsockname()[1]
        http = httpx.AsyncClient(
            transport=StampingTransport(verify=ssl.create_default_context(cafile=cert))
        )
        client = AsyncClient(
            http_client=http, api_key="sk-test", base_url=f"https://127.0.0.1:{port}/v1"
        )
        try:
            return await client.stream("hi", model="test/model").wait()
        finally:
            await http.aclose()
            server.close()
            await server.wait_closed()

    stream = asyncio.run(main())
    assert stream.status == "done" and stream.content == "Hello world"
    assert served and served[0].startswith(b"POST /v1/chat/completions")
    t = stream.log.times_ns()
    assert t[-1] - t[0] > 0.5 * 0.2e9  # the second write's time, not the first's
    # connect spans the TCP connect and the handshake (tests/test_connect.py has the rule's cases)
    assert stream.connect is not None and 0 < stream.connect < stream.ttfb


def test_windows_keeps_httpx_own_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    # asyncio's default loop on Windows (Proactor) has no add_reader: the stamping backend would
    # fail every stream there, so httpx's own transport serves.
    from nito_nb._transport import transport as _transport

    _ssl_context()  # (before: ssl reads the platform too)
    monkeypatch.setattr(_transport.sys, "platform", "win32")
    assert not _transport.stamping_allowed()


def test_an_ip_address_is_not_sent_to_a_resolver_thread() -> None:
    from nito_nb._transport.transport import _numeric_address

    assert [info[4][:2] for info in _numeric_address("127.0.0.1", 8000) or []] == [
        ("127.0.0.1", 8000)
    ]
    assert _numeric_address("::1", 8000)
    assert _numeric_address("localhost", 8000) is None  # a name: asyncio's getaddrinfo resolves it


def test_a_pushed_read_is_at_most_read_size() -> None:
    # A pushed body is parsed in the read's callback: a large body waiting in the socket is taken
    # READ_SIZE at a time, one callback each, so no callback holds the loop for long.
    import socket

    from nito_nb._transport.streams import READ_SIZE

    class Sizes:
        def __init__(self) -> None:
            self.sizes: list[int] = []
            self.done = asyncio.get_running_loop().create_future()

        def received(self, data: bytes, arrival_ns: int) -> None:
            self.sizes.append(len(data))
            if not data:
                self.done.set_result(None)

        def failed(self, error: OSError) -> None:
            self.done.set_exception(error)

    async def main() -> list[int]:
        a, b = socket.socketpair()
        stream = StampedSocketStream(a, asyncio.get_running_loop())
        b.setblocking(False)
        receiver = Sizes()
        try:
            b.sendall(b"x" * (5 * READ_SIZE))
            await asyncio.sleep(0.05)
            stream.push(receiver)
            b.shutdown(socket.SHUT_WR)
            await asyncio.wait_for(receiver.done, 5)
            return receiver.sizes
        finally:
            await stream.aclose()
            b.close()

    sizes = asyncio.run(main())
    assert sum(sizes) == 5 * READ_SIZE and sizes[-1] == 0
    assert max(sizes) <= READ_SIZE and len(sizes) > 5


def test_a_host_name_is_resolved_and_connected(scripted: Any, body_read: Any) -> None:
    from conftest import KEY, chunk_line
    from scripted_server import Script

    base = scripted.add(
        "by-name", Script(parts=[chunk_line({"content": "hi"}), b"data: [DONE]\n\n"])
    )
    # may resolve to ::1 first: the next address serves
    by_name = base.replace("127.0.0.1", "localhost")

    async def main() -> Any:
        stream = nito_nb.AsyncClient(api_key=KEY, base_url=by_name).stream("hi", model="m")
        return await stream.wait()

    stream = asyncio.run(main())
    assert stream.content == "hi" and isinstance(body_read(stream), PushedBody)


def test_the_ca_file_is_loaded_when_the_client_is_made_not_at_its_first_send() -> None:
    # A run makes its client before its schedule starts: its first requests must not pay for it.
    _ssl_context.cache_clear()
    AsyncClient()
    assert _ssl_context.cache_info().currsize == 1


def test_a_later_read_never_has_an_earlier_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel time mapped onto perf_counter can come out a fraction of a microsecond before the
    # previous read's: the stream's events would be out of order in time.
    import socket

    from nito_nb._transport import streams

    times = iter([5_000, 4_000, 6_000, 5_500])
    monkeypatch.setattr(streams, "_stamp", lambda now, ancillary: next(times))

    async def main() -> list[int]:
        a, b = socket.socketpair()
        stream = StampedSocketStream(a, asyncio.get_running_loop())
        try:
            out = []
            for piece in (b"one", b"two", b"three", b"four"):
                b.send(piece)
                await stream.read(64)
                out.append(stream.arrival_ns)
            return out
        finally:
            await stream.aclose()
            b.close()

    assert asyncio.run(main()) == [5_000, 5_000, 6_000, 6_000]


@pytest.mark.spawns
def test_warm_does_a_first_requests_one_time_work() -> None:
    # httpcore's locks import anyio's asyncio backend when first used (70 ms here): a run warms
    # its client before its schedule starts, so its first requests do not leave late.
    import subprocess

    code = (
        "import asyncio, sys; from nito_nb._client import AsyncClient; "
        "assert 'anyio._backends._asyncio' not in sys.modules; "
        "asyncio.run(AsyncClient().warm()); print('anyio._backends._asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "True", out.stderr


def test_a_connect_and_a_write_that_hang_end_at_their_timeout() -> None:
    # The waits go through streams.within (not wait_for's extra task): still bounded by the timeout.
    import socket

    import httpcore

    from nito_nb._transport import StampingBackend

    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    # never accepted: once its queue is full, the next SYN is dropped and connect hangs
    full.listen(0)
    host, port = full.getsockname()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    async def main() -> None:
        backend = StampingBackend()
        opened = []
        started = time.perf_counter()
        with pytest.raises(httpcore.ConnectTimeout):
            for _ in range(8):
                opened.append(await backend.connect_tcp(host, port, timeout=0.2))
        assert 1 <= len(opened) < 8 and time.perf_counter() - started < 5
        stream = await backend.connect_tcp(*listener.getsockname(), timeout=1)
        # accepted, never read: the socket buffers fill, then the write waits
        peer, _ = listener.accept()
        started = time.perf_counter()
        with pytest.raises(httpcore.WriteTimeout):
            await stream.write(b"x" * (64 << 20), timeout=0.2)
        assert time.perf_counter() - started < 5
        peer.close()
        for one in [*opened, stream]:
            await one.aclose()

    try:
        asyncio.run(main())
    finally:
        full.close()
        listener.close()
