"""A byte source of the user's, written through the one documented entry, ``nito_nb.StreamSource``
(docs/ENGINE_API.md, "A source of your own"): fed bytes by hand, and a live body read from a real
loopback server with the standard library's ``http.client`` (a client nito_nb knows nothing of)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import HELLO, chunk_line
from scripted_server import Script, ScriptedServer

import nito_nb

REQUEST = {"model": "test/model", "messages": [{"role": "user", "content": "hi"}], "params": {}}


def test_a_source_fed_bytes_by_hand_gives_a_whole_stream(tmp_path: Path) -> None:
    source = nito_nb.StreamSource(REQUEST)
    ended: list[str] = []
    source.stream.on_done(lambda s: ended.append(s.status))
    t0 = time.perf_counter_ns()
    source.start(t0)
    source.set_response(
        200, {"content-type": "text/event-stream", "set-cookie": "a=b"}, t0 + 5_000_000
    )
    body = b"".join(HELLO)
    for i, at in enumerate(range(0, len(body), 40)):  # reads that cut events anywhere
        source.feed(body[at : at + 40], t0 + (10 + i) * 1_000_000)
    assert ended == []
    source.end(t0 + 40_000_000)
    s = source.stream
    assert (s.content, s.status, s.finish_reason, s.usage["total_tokens"]) == (
        "Hello wörld",
        "done",
        "stop",
        5,
    )
    assert ended == ["done"] and s.ttfb == pytest.approx(0.005) and 0.01 <= s.ttft <= 0.04
    assert "set-cookie" not in s.log.headers  # a credential header is never kept
    assert s.frame().nito.text().iloc[0] == "Hello wörld"
    loaded = nito_nb.load(s.save(tmp_path / "mine.jsonl"))
    assert (loaded.content, loaded.ttft, loaded.log.body) == (s.content, s.ttft, s.log.body)


def test_a_source_says_a_refusal_and_redacts_the_key_it_is_given() -> None:
    key = "sk-mine-0123456789"
    source = nito_nb.StreamSource(REQUEST, raise_errors=False)
    source.protect(key)
    error = source.fail_http(
        401,
        {"content-type": "application/json"},
        json.dumps({"error": {"message": f"bad key {key}"}}).encode(),
        time.perf_counter_ns(),
    )
    s = source.stream
    assert isinstance(error, nito_nb.AuthenticationError) and error.stream is s
    assert (
        s.status == "failed"
        and s.exception is error
        and key not in str(error)
        and key not in s.log.body.decode()
    )


def _open(base: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, int]:
    """The user's own client: a POST with http.client; (connection, response, send time)."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    sent = time.perf_counter_ns()
    conn.request(
        "POST",
        f"{url.path}/chat/completions",
        body=json.dumps({**REQUEST, "stream": True}),
        headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
    )
    return conn, conn.getresponse(), sent


def _live(
    response: http.client.HTTPResponse, conn: http.client.HTTPConnection, sent: int
) -> nito_nb.StreamSource:
    source = nito_nb.StreamSource(REQUEST)
    source.start(sent)
    source.set_response(response.status, response.getheaders(), time.perf_counter_ns())
    sock = conn.sock

    def abort() -> None:  # cut a read in progress, from the thread that closes the Stream
        sock.shutdown(socket.SHUT_RDWR)

    source.read_body(iter(lambda: response.read1(65536), b""), close=conn.close, abort=abort)
    return source


def test_a_live_body_from_a_users_client_is_iterated_as_it_arrives(
    scripted: ScriptedServer,
) -> None:
    base = scripted.add("mine", Script(parts=HELLO, delays=[0, 0, 0.4, 0, 0, 0]))
    conn, response, sent = _open(base)
    source = _live(response, conn, sent)
    s = source.stream
    seen: list[tuple[str, float]] = []
    for chunk in s:  # the Stream's own reader thread reads the body, whatever this loop does
        delta = chunk["choices"][0]["delta"] if chunk.get("choices") else {}
        seen.append((delta.get("content") or "", time.perf_counter()))
    assert [text for text, _ in seen if text] == ["Hel", "lo wörld"]
    assert seen[1][1] - seen[0][1] >= 0.35  # the first chunk came before the server paused: live
    assert (s.status, s.content, s.n_chunks) == ("done", "Hello wörld", 4)
    assert s.ttft is not None and s.ttft < 0.3 < s.elapsed and s.ttfb <= s.ttft
    assert conn.sock is None  # the reader released it (close) at the end


def test_closing_a_live_stream_of_a_users_source_cuts_its_read(scripted: ScriptedServer) -> None:
    parts = [
        chunk_line({"role": "assistant", "content": "before"}),
        chunk_line({"content": "never"}),
    ]
    base = scripted.add("mine-slow", Script(parts=parts, delays=[0, 30]))
    conn, response, sent = _open(base)
    s = _live(response, conn, sent).stream
    first = next(iter(s))
    assert first["choices"][0]["delta"]["content"] == "before"
    started = time.perf_counter()
    closer = threading.Thread(target=s.close)  # another thread: a Stop button
    closer.start()
    closer.join(5)
    assert time.perf_counter() - started < 2 and s.status == "stopped" and s.content == "before"
