"""A loopback HTTP server that misbehaves on purpose: it trickles, never ends a line, or sends a
compression bomb. For the tests of the client's deadlines and body limits (tests/test_hostile.py).

Written on raw sockets (asyncio streams), not on a framework: a trickle of header bytes, or a
body that a framework would buffer, has to go out byte by byte as written. Each request's path
names what the server does (``/<behaviour>/chat/completions``); it runs on 127.0.0.1 in a thread
of its own, in the test's process, so that a client in a subprocess can be measured alone.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import socket
import threading
import time
import zlib
from collections.abc import Awaitable, Callable

#: Seconds between two trickled bytes: far shorter than the tests' deadlines, so a per-read socket
#: timeout never fires, and far longer than a deadline divided by an event's length.
TRICKLE = 0.05

_SSE_HEADERS = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"


def one_char_chunk(text: str = "a") -> bytes:
    """A chunk of one character, as small as a chat chunk gets."""
    chunk = {"id": "b", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


@functools.cache
def bomb(kind: str, size: int) -> bytes:
    """A gzip body that decodes to ``size`` bytes of: keep-alive comments (``comments``), one-char
    chunks (``chars``) or newlines (``newlines``). Made by compressing a block again and again (a
    bytes object of ``size`` would cost the test what the client is meant not to spend)."""
    unit = {"comments": b": keep-alive\n", "chars": one_char_chunk(), "newlines": b"\n"}[kind]
    head = b": PROCESSING\n\n" + one_char_chunk("H")  # an answer starts: what arrives first is kept
    block = unit * ((1 << 20) // len(unit))
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(head)]
    left = size
    while left > 0:
        piece = block[: min(len(block), left)]
        piece = piece[: len(piece) - len(piece) % len(unit)] or unit
        parts.append(compressor.compress(piece))
        left -= len(piece)
    parts.append(compressor.compress(b"data: [DONE]\n\n"))
    parts.append(compressor.flush())
    return b"".join(parts)


class HostileServer:
    """Serves ``/<behaviour>/...``: ``trickle-headers``, ``trickle-body``, ``endless-line``,
    ``gzip-<kind>-<megabytes>`` (a bomb, see :func:`bomb`), ``flood-<comments|newlines>-<megabytes>``
    (the same, not compressed), ``brotli`` (a coding nobody asked for), ``plain`` (a good answer,
    gzipped when the path says ``plain-gzip``)."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="hostile-server")
        #: Requests received, by behaviour.
        self.hits: dict[str, int] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base(self, behaviour: str) -> str:
        return f"{self.url}/{behaviour}"

    def start(self) -> HostileServer:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the hostile server did not start")
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for task in asyncio.all_tasks(self._loop):  # connections still served
                task.cancel()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            path = head.split(b" ", 2)[1].decode()
            behaviour = path.strip("/").split("/", 1)[0]
            self.hits[behaviour] = self.hits.get(behaviour, 0) + 1
            await self._behave(behaviour, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client gave up: that is what the tests want of it
        finally:
            writer.close()

    async def _behave(self, behaviour: str, writer: asyncio.StreamWriter) -> None:
        send = _sender(writer)
        # the status line, then one header byte at a time, forever
        if behaviour == "trickle-headers":
            await send(b"HTTP/1.1 200 OK\r\n")
            await _trickle(send, b"x-slow: " + b"z" * 10_000)
        elif behaviour == "trickle-body":  # the headers at once, then every byte of the body alone
            await send(_SSE_HEADERS + b"\r\n")
            await _trickle(send, one_char_chunk("H") * 1000)
        elif behaviour == "endless-line":  # a data line that goes on and never ends
            await send(_SSE_HEADERS + b"\r\n")
            await send(one_char_chunk("H") + b"data: ")
            await _trickle(send, b"a" * 1_000_000)
        elif behaviour.startswith("gzip-"):
            _, kind, megabytes = behaviour.split("-")
            body = bomb(kind, int(float(megabytes) * (1 << 20)))
            await send(
                _SSE_HEADERS + b"content-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(body)
            )
            await send(body)
        elif behaviour.startswith("flood-"):  # not compressed: what a sender pays for in full
            _, kind, megabytes = behaviour.split("-")
            unit = {"comments": b": keep-alive\n\n", "newlines": b"\n"}[kind]
            await send(_SSE_HEADERS + b"\r\n" + b": PROCESSING\n\n" + one_char_chunk("H"))
            block, left = unit * (65536 // len(unit)), int(float(megabytes) * (1 << 20))
            while left > 0:
                await send(block)
                left -= len(block)
            await send(b"data: [DONE]\n\n")
        elif behaviour == "brotli":  # a coding nobody asked for
            await send(
                _SSE_HEADERS + b"content-encoding: br\r\ncontent-length: 4\r\n\r\n\x0b\x00\x80\x03"
            )
        elif behaviour in ("plain", "plain-gzip"):
            body = (
                b": PROCESSING\n\n"
                + one_char_chunk("Hel")
                + one_char_chunk("lo")
                + b"data: [DONE]\n\n"
            )
            extra = b""
            if behaviour == "plain-gzip":
                body, extra = gzip.compress(body), b"content-encoding: gzip\r\n"
            await send(_SSE_HEADERS + extra + b"content-length: %d\r\n\r\n" % len(body) + body)
        else:
            await send(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")


def _sender(writer: asyncio.StreamWriter) -> Callable[[bytes], Awaitable[None]]:
    async def send(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    return send


async def _trickle(
    send: Callable[[bytes], Awaitable[None]], data: bytes, interval: float = TRICKLE
) -> None:
    """``data`` one byte at a time, ``interval`` seconds apart (the client closing ends it)."""
    for i in range(len(data)):
        await send(data[i : i + 1])
        await asyncio.sleep(interval)


def elapsed(start: float) -> float:
    return time.monotonic() - start


#: The key the tests send (echoed by no behaviour here: see test_hostile's log test).
KEY = "sk-test-SECRET-0123456789abcdef"
#: The ways a call is made: ``nito_nb.stream`` (its default client retries), ``Client`` without
#: retries, ``AsyncClient``, and ``nito_nb.run`` (the async client, its own retries).
MODES = ("stream", "client", "async", "run")


def ask(mode: str, base: str, **options: object) -> dict[str, object]:
    """One request to ``base`` the way ``mode`` makes it; what came of it: ``status``, ``error``
    (the exception's type, None for a run: its results have no type), ``message``, ``content``,
    ``attempts``, ``seconds``."""
    import asyncio

    import nito_nb

    start = time.monotonic()
    if mode == "run":
        run = nito_nb.run("hi", model="m", base_url=base, api_key=KEY, progress=False, **options)  # type: ignore[arg-type]
        row = run.wait().results().iloc[0].astype(object).where(lambda r: r.notna(), "")
        return {
            "status": row["status"],
            "error": None,
            "message": str(row["error_message"]),
            "content": str(row["content"]),
            "attempts": int(row["attempts"]),
            "seconds": elapsed(start),
        }
    stream: object
    try:
        if mode == "stream":
            stream = nito_nb.stream(
                "hi", model="m", base_url=base, api_key=KEY, raise_errors=False, **options
            )
            stream.wait()  # type: ignore[attr-defined]
        elif mode == "client":
            with nito_nb.Client(api_key=KEY, base_url=base, max_retries=0) as client:
                stream = client.stream("hi", model="m", raise_errors=False, **options)  # type: ignore[arg-type]
                stream.wait()  # type: ignore[attr-defined]
        else:

            async def main() -> object:
                s = nito_nb.AsyncClient(api_key=KEY, base_url=base).stream(
                    "hi", model="m", raise_errors=False, **options
                )  # type: ignore[arg-type]
                return await s.wait()

            stream = asyncio.run(main())
    except nito_nb.NitoError as exc:  # refused before the body: the error carries the stream
        stream = exc.stream
    error = stream.exception  # type: ignore[attr-defined]
    return {
        "status": str(stream.status),
        "error": None if error is None else type(error).__name__,  # type: ignore[attr-defined]
        "message": "" if error is None else str(error),
        "content": stream.content,  # type: ignore[attr-defined]
        "attempts": stream.attempts,
        "seconds": elapsed(start),
    }  # type: ignore[attr-defined]
