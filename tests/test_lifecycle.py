"""A Stream's life: arrival times that never depend on the reader, retries on one clock, closing
(also by the garbage collector), wait(timeout=...), on_done callbacks, models() errors and the
rate-limit headers. Over loopback, against the simulator and the scripted server."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import KEY, chunk_line, sigint_after
from conftest import open_client as client
from scripted_server import Script, ScriptedServer

import nito_nb

HELLO = [
    chunk_line({"role": "assistant", "content": "Hel"}),
    chunk_line({"content": "lo"}),
    chunk_line({}, finish="stop"),
    b"data: [DONE]\n\n",
]

# A paced simulator stream: 12 content chunks, 50 ms apart (no jitter), 100 ms to the first.
PACE = 0.05
PACED = {"chunks": 12, "tps": 1 / PACE, "ttft_ms": 100, "jitter": 0}


def token_times(s: nito_nb.Stream) -> list[float]:
    """Arrival times (seconds since t0) of the chunks that carried text."""
    return [
        e.t
        for e in s.log
        if e.kind == "chunk"
        and (e.chunk or {}).get("choices")
        and (e.chunk["choices"][0].get("delta") or {}).get("content")
    ]


def reader_of(s: nito_nb.Stream) -> threading.Thread:
    """The thread that reads the stream's body (an implementation detail the tests check)."""
    reader = s._reader
    assert reader is not None and reader.name == "nito_nb-stream-reader"
    return reader


def wait_until(condition, seconds: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


# -- item 7: arrival times are the moment the bytes came, whatever the caller does ---------------


def test_a_consumer_that_sleeps_first_does_not_change_the_times() -> None:
    sleep = 1.5  # longer than the whole paced answer (about 0.65 s)
    s = nito_nb.stream("hi", model="sim/long", sim=PACED)
    time.sleep(sleep)
    s.wait()
    times = token_times(s)
    assert s.status == "done" and len(times) == PACED["chunks"]
    assert s.ttft is not None and s.ttft < sleep / 2  # the server's pace, not the sleep
    # Spread like the server sent them (11 gaps of 50 ms), not all at the moment of wait().
    assert times[-1] - times[0] > 0.5 * (len(times) - 1) * PACE


def test_a_consumer_that_sleeps_between_chunks_does_not_change_the_times() -> None:
    pause = 0.25  # five times the server's gap
    s = nito_nb.stream("hi", model="sim/long", sim=PACED)
    n = 0
    for _ in s:
        n += 1
        time.sleep(pause)
    times = token_times(s)
    assert s.status == "done" and len(times) == PACED["chunks"]
    assert s.elapsed is not None and s.elapsed < 0.5 * n * pause  # the server's e2e, not the loop's
    assert statistics.median(b - a for a, b in itertools.pairwise(times)) < pause / 2


def test_streams_waited_in_turn_keep_their_own_times() -> None:
    # The case: several sync streams started together, then waited one after the other.
    streams = [nito_nb.stream("hi", model="sim/long", sim=PACED) for _ in range(3)]
    for s in streams:
        s.wait()
    metrics = nito_nb.frame(streams).nito.metrics()
    assert (metrics["status"] == "done").all()
    # Each at the server's pace (about 20 tokens/s), not all at once for the later ones.
    assert (metrics["output_tps"] < 3 / PACE).all(), metrics["output_tps"]
    assert (metrics["ttft"] < metrics["e2e"] / 2).all()


def test_async_consumers_that_await_other_things_do_not_change_the_times() -> None:
    sleep = 1.5

    async def main() -> tuple[nito_nb.AsyncStream, nito_nb.AsyncStream, int]:
        first = nito_nb.astream("hi", model="sim/long", sim=PACED)
        async with first:  # connected: the body is read from now on
            await asyncio.sleep(sleep)
            await first.wait()
        second = nito_nb.astream("hi", model="sim/long", sim=PACED)
        n = 0
        async for _ in second:
            n += 1
            await asyncio.sleep(0.25)
        return first, second, n

    first, second, n = asyncio.run(main())
    times = token_times(first)
    assert first.status == "done" and len(times) == PACED["chunks"]
    assert first.ttft is not None and first.ttft < sleep / 2
    assert times[-1] - times[0] > 0.5 * (len(times) - 1) * PACE
    assert (
        second.status == "done" and second.elapsed is not None and second.elapsed < 0.5 * n * 0.25
    )


def test_keyboard_interrupt_while_waiting_stops_and_keeps(scripted: ScriptedServer) -> None:
    base = scripted.add("wait-interrupt", Script(parts=HELLO, delays=[0, 5]))
    s = client(base).stream("hi", model="m")
    reader = reader_of(s)
    start = time.perf_counter()
    with sigint_after(0.3), pytest.raises(KeyboardInterrupt):
        s.wait()  # nobody iterates: blocked until the end
    assert time.perf_counter() - start < 3
    assert s.status == "stopped" and s.content == "Hel"
    assert wait_until(lambda: not reader.is_alive(), 3)


def test_close_after_a_break_stops_the_reader_at_once(scripted: ScriptedServer) -> None:
    script = Script(parts=HELLO, delays=[0, 5])
    base = scripted.add("break-close", script)
    s = client(base).stream("hi", model="m")
    reader = reader_of(s)
    for _ in s:
        break
    start = time.perf_counter()
    s.close()
    assert s.status == "stopped" and s.content == "Hel"
    assert wait_until(lambda: not reader.is_alive(), 3) and time.perf_counter() - start < 3


# -- item 8: retries on one clock -------------------------------------------------------------


def test_a_retried_stream_keeps_one_clock_and_counts_its_attempts(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    limited = Script(
        status=429,
        parts=[b'{"error": {"code": 429, "message": "slow down"}}'],
        content_type="application/json",
        headers={"Retry-After": "0.2"},
    )
    base = scripted.add("retry-clock", limited, Script(parts=HELLO))
    s = client(base).stream("hi", model="m")
    s.wait()
    # The first attempt's error is forgotten: the answer that came is whole.
    assert s.status == "done" and s.exception is None and s.error is None and s.content == "Hello"
    assert s.attempts == 2 and [e.kind for e in s.log] == ["chunk"] * 3 + ["done"]
    assert s.ttfb is not None and s.ttft is not None and s.elapsed is not None
    assert 0.2 <= s.ttfb <= s.ttft <= s.elapsed  # t0 is the first send: the wait counts
    df = s.frame()
    assert (df["t"] >= 0).all()
    metrics = df.nito.metrics().iloc[0]
    assert metrics["attempts"] == 2 and metrics["status"] == "done"
    assert 0 < metrics["ttfb"] <= metrics["ttft"] <= metrics["e2e"]
    again = nito_nb.load(s.save(tmp_path / "retried.jsonl"))
    assert again.attempts == 2 and again.frame().nito.metrics().iloc[0]["attempts"] == 2


def test_an_async_retried_stream_keeps_one_clock(scripted: ScriptedServer) -> None:
    limited = Script(
        status=503, parts=[b"busy"], content_type="text/plain", headers={"Retry-After": "0.2"}
    )
    base = scripted.add("async-retry-clock", limited, Script(parts=HELLO))

    async def main() -> nito_nb.AsyncStream:
        return await nito_nb.AsyncClient(api_key=KEY, base_url=base).stream("hi", model="m").wait()

    s = asyncio.run(main())
    assert s.status == "done" and s.exception is None and s.content == "Hello" and s.attempts == 2
    assert s.ttfb is not None and s.ttft is not None and s.elapsed is not None
    assert 0.2 <= s.ttfb <= s.ttft <= s.elapsed


def test_a_stream_that_failed_every_attempt_has_no_negative_time() -> None:
    with pytest.raises(nito_nb.RateLimitError) as info:
        nito_nb.stream("hi", model="sim/http-429", sim={"retry_after": 0.1})
    s = info.value.stream
    assert s is not None and s.status == "failed" and s.attempts == 3
    assert s.ttfb is not None and s.elapsed is not None and 0.2 <= s.ttfb <= s.elapsed
    assert [e.kind for e in s.log] == ["http-error"] and s.log[0].t >= 0.2
    metrics = s.frame().nito.metrics().iloc[0]
    assert metrics["attempts"] == 3 and 0 < metrics["ttfb"] <= metrics["e2e"]


def test_an_unretried_stream_says_one_attempt() -> None:
    s = nito_nb.stream("hi", model="sim/echo")
    assert s.content == "hi" and s.attempts == 1
    assert s.frame().nito.metrics().iloc[0]["attempts"] == 1


# -- item 16: closing, also by the garbage collector; wait(timeout); callbacks ----------------


def test_a_break_without_with_does_not_leave_the_stream_streaming(scripted: ScriptedServer) -> None:
    base = scripted.add("break-held", Script(parts=HELLO, delays=[0, 0.2, 0.2]))
    s = client(base).stream("hi", model="m")
    for _ in s:
        break
    # The reader goes on in the background: the status settles by itself.
    assert wait_until(lambda: s.finished) and s.status == "done" and s.content == "Hello"
    assert [c for c in s] == [e.chunk for e in s.log if e.kind == "chunk"][1:]  # the rest, once


def test_a_dropped_stream_is_closed_and_says_stopped(scripted: ScriptedServer) -> None:
    base = scripted.add("break-dropped", Script(parts=HELLO, delays=[0, 5]))
    s = client(base).stream("hi", model="m")
    seen: list[str] = []
    s.on_done(lambda stream: seen.append(stream.status))
    for _ in s:
        break
    log, reader = s.log, reader_of(s)
    del s
    gc.collect()
    assert seen == ["stopped"] and log.end == {"status": "stopped"}
    assert wait_until(lambda: not reader.is_alive(), 3)


DROPPED = """
import asyncio, gc, nito_nb

s = nito_nb.stream("hi", model="sim/long", sim={"chunks": 400, "tps": 100, "ttft_ms": 0})
for _ in s:
    break
del s
gc.collect()

async def main():
    s = nito_nb.astream("hi", model="sim/long", sim={"chunks": 400, "tps": 100, "ttft_ms": 0})
    async for _ in s:
        break
    del s
    gc.collect()
    await asyncio.sleep(0.3)

asyncio.run(main())
gc.collect()
print("ok")
"""


@pytest.mark.spawns
def test_dropped_streams_leave_no_unclosed_transport(tmp_path: Path) -> None:
    script = tmp_path / "dropped.py"
    script.write_text(DROPPED)
    run = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.stdout.strip() == "ok", run.stderr
    assert "ResourceWarning" not in run.stderr and "unclosed" not in run.stderr, run.stderr


def test_wait_with_a_timeout_returns_with_the_status_unchanged(scripted: ScriptedServer) -> None:
    base = scripted.add("wait-timeout", Script(parts=HELLO, delays=[0, 5]))
    s = client(base).stream("hi", model="m")
    start = time.perf_counter()
    assert s.wait(timeout=0.3) is s
    assert time.perf_counter() - start < 3
    assert s.status == "streaming" and not s.finished
    s.close()
    assert s.status == "stopped" and s.content == "Hel"


def test_async_wait_with_a_timeout(scripted: ScriptedServer) -> None:
    base = scripted.add("async-wait-timeout", Script(parts=HELLO, delays=[0, 5]))

    async def main() -> nito_nb.AsyncStream:
        s = nito_nb.AsyncClient(api_key=KEY, base_url=base).stream("hi", model="m")
        assert await s.wait(timeout=0.5) is s
        assert not s.finished
        await s.aclose()
        return s

    s = asyncio.run(main())
    assert s.status == "stopped" and s.content == "Hel"


def test_on_done_runs_when_an_async_stream_fails_to_connect_after_its_retries(
    scripted: ScriptedServer,
) -> None:
    # Registered before the AsyncStream connects: its failure (a 503, retried once, then given up)
    # ends it, and the callback runs once, then, with the final status. It never ran before.
    down = Script(status=503, parts=[b"down"], content_type="text/plain")
    base = scripted.add("on-done-refused", down)
    seen: list[tuple[str, int]] = []

    async def main() -> None:
        async with nito_nb.AsyncClient(
            api_key=KEY, base_url=base, max_retries=1, max_retry_wait=0.01
        ) as c:
            s = c.stream("hi", model="m", raise_errors=False)
            s.on_done(lambda stream: seen.append((stream.status, stream.attempts)))
            with pytest.raises(nito_nb.ServerError):
                await s.wait()

    asyncio.run(main())
    assert seen == [("failed", 2)] and down.times == 2


def test_an_on_done_callback_that_raises_is_reported_not_raised(
    scripted: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    base = scripted.add("callback", Script(parts=HELLO, delays=[0.2]))
    s = client(base).stream("hi", model="m")
    seen: list[str] = []

    def broken(stream: nito_nb.Stream) -> None:
        raise ValueError("callback bug")

    s.on_done(broken)
    s.on_done(lambda stream: seen.append(stream.status))
    assert s.wait() is s and s.status == "done" and seen == ["done"]
    s.on_done(broken)  # already finished: called at once, reported the same way
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(
        "on_done" in line and "ValueError: callback bug" in line for line in lines
    )


# -- item 14: models() failures are typed -----------------------------------------------------


def test_models_failures_are_typed(scripted: ScriptedServer) -> None:
    with pytest.raises(nito_nb.ConnectionFailed, match="Could not reach"):
        client("http://127.0.0.1:9").models()
    html = scripted.add(
        "models-html", Script(parts=[b"<html>login</html>"], content_type="text/html")
    )
    with pytest.raises(nito_nb.TransportError, match="not a JSON list of models") as info:
        client(html).models()
    assert "text/html" in str(info.value)
    ok = scripted.add(
        "models-ok",
        Script(
            parts=[json.dumps({"data": [{"id": "a"}]}).encode()], content_type="application/json"
        ),
    )
    assert client(ok).models() == [{"id": "a"}]

    async def main() -> None:
        with pytest.raises(nito_nb.ConnectionFailed):
            await nito_nb.AsyncClient(api_key=KEY, base_url="http://127.0.0.1:9").models()
        with pytest.raises(nito_nb.TransportError, match="not a JSON list"):
            await nito_nb.AsyncClient(api_key=KEY, base_url=html).models()

    asyncio.run(main())


# -- rate limits behind LiteLLM ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "Retry-After": "2"}, 0.25),  # the precise one wins
        ({"llm_provider-retry-after": "3"}, 3.0),
        ({"Retry-After": "soon", "llm_provider-retry-after": "3"}, 3.0),
        ({"retry-after-ms": "nan", "Retry-After": "1"}, 1.0),
        ({}, None),
    ],
)
def test_retry_after_of_headers(headers: dict[str, str], seconds: float | None) -> None:
    from nito_nb._core.http_errors import retry_after_of

    assert retry_after_of(headers) == seconds


def test_rate_limit_behind_litellm_is_retried_after_its_header(scripted: ScriptedServer) -> None:
    limited = Script(
        status=429,
        parts=[b'{"error": {"message": "litellm.RateLimitError: slow down"}}'],
        content_type="application/json",
        headers={"llm_provider-retry-after": "3600"},
    )
    base = scripted.add("litellm-429", limited)
    with pytest.raises(nito_nb.RateLimitError) as info:
        client(base).stream("hi", model="m")
    # Too long to wait: not retried, and the error says when.
    assert info.value.retry_after == 3600 and limited.times == 1
    ms = Script(
        status=429, parts=[b"slow"], content_type="text/plain", headers={"retry-after-ms": "150"}
    )
    base = scripted.add("ms-429", ms, Script(parts=HELLO))
    s = client(base).stream("hi", model="m")
    assert s.content == "Hello" and s.attempts == 2 and s.ttfb is not None and s.ttfb >= 0.15
