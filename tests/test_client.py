"""The clients over a real loopback HTTP server: requests, timing, errors, timeouts, cancel, secrets."""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import threading
import time
from typing import Any

import pytest
from conftest import HELLO, KEY, chunk_line, close_clients, sigint_after
from conftest import open_client as client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted_server import Script, ScriptedServer

import nito_nb
from nito_nb._stream_source import source_of


def test_stream_sends_the_request_and_accumulates(scripted: ScriptedServer) -> None:
    script = Script(parts=HELLO)
    base = scripted.add("hello", script)
    with client(base) as c:
        s = c.stream("Say hello", model="test/model", temperature=0.2, seed=7, max_tokens=None)
        chunks = list(s)
    assert (
        s.content == "Hello wörld" and s.finish_reason == "stop" and s.done and s.status == "done"
    )
    assert s.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert len(chunks) == 4 and s.n_chunks == 4 and s.n_events == 6
    sent = json.loads(script.requests[-1]["body"])
    assert sent == {
        "model": "test/model",
        "messages": [{"role": "user", "content": "Say hello"}],
        "temperature": 0.2,
        "seed": 7,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = script.requests[-1]["headers"]
    assert headers["authorization"] == f"Bearer {KEY}" and headers["accept"] == "text/event-stream"
    assert s.request["params"] == {"temperature": 0.2, "seed": 7}
    assert s.ttfb is not None and s.ttft is not None and s.ttfb <= s.ttft <= s.elapsed
    assert s.messages[-1] == {"role": "assistant", "content": "Hello wörld"}


def test_results_read_the_stream_when_nobody_iterates(scripted: ScriptedServer) -> None:
    base = scripted.add("lazy", Script(parts=HELLO))
    s = client(base).stream("hi", model="m")
    # The body is read in the background from the start: it may already have ended.
    assert s.status in ("waiting", "streaming", "done")
    assert s.content == "Hello wörld" and s.status == "done"
    # a finished Stream replays
    assert list(s) and [c.get("usage") for c in s][-1]["total_tokens"] == 5


def test_awkward_splits_and_arrival_times(scripted: ScriptedServer) -> None:
    body = b"".join(HELLO).replace(b"\n", b"\r\n")
    cut = body.index("ö".encode()) + 1  # inside the two bytes of ö
    crlf = body.index(b"\r\n\r\n") + 1  # between CR and LF
    parts = [body[:crlf], body[crlf:cut], body[cut:]]
    base = scripted.add("split", Script(parts=parts, delays=[0, 0.25, 0.25]))
    s = client(base).stream("hi", model="m")
    s.wait()
    assert s.content == "Hello wörld" and s.status == "done"
    times = [e.t for e in s.log]
    assert times == sorted(times)
    # The comment is only complete once the LF after its CR came, with the second read; the
    # chunk holding the rest of "ö" came with the third, after both pauses.
    assert times[0] >= 0.2 and times[-1] >= 0.45 and times[-1] - times[0] >= 0.2
    assert [e.kind for e in s.log] == ["comment", "chunk", "chunk", "chunk", "chunk", "done"]


def test_on_done_and_repr(scripted: ScriptedServer) -> None:
    base = scripted.add("done", Script(parts=HELLO, delays=[0.5]))  # read in the background
    s = client(base).stream("hi", model="m")
    seen: list[str] = []
    s.on_done(lambda stream: seen.append(stream.status))
    assert "waiting" in repr(s)
    s.wait()
    assert seen == ["done"] and "done" in repr(s) and "11 chars" in repr(s)
    s.on_done(lambda stream: seen.append("again"))  # already finished: called at once
    assert seen == ["done", "again"]


# -- errors before the stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "content_type", "cls", "message", "code"),
    [
        (
            401,
            b'{"error": {"code": 401, "message": "No auth credentials found"}}',
            "application/json",
            nito_nb.AuthenticationError,
            "No auth credentials found",
            401,
        ),
        (
            402,
            b'{\n  "error": {\n    "code": 402,\n    "message": "Insufficient credits"\n  }\n}',
            "application/json",
            nito_nb.PaymentRequiredError,
            "Insufficient credits",
            402,
        ),
        (
            404,
            b'{"error": {"code": "model_not_found", "message": "No such model"}}',
            "application/json",
            nito_nb.NotFoundError,
            "No such model",
            "model_not_found",
        ),
        (
            400,
            b'{"error": "bad things"}',
            "application/json",
            nito_nb.BadRequestError,
            "bad things",
            None,
        ),
        (
            500,
            b"<!DOCTYPE html>\r\n<html><head><title>500 Internal Server "
            b"Error</title></head>\r\n<body>oops</body></html>",
            "text/html",
            nito_nb.ServerError,
            "an HTML page (500 Internal Server Error)",
            None,
        ),
        (
            503,
            b"upstream connect error",
            "text/plain",
            nito_nb.ServerError,
            "upstream connect error",
            None,
        ),
        (502, b"", "text/plain", nito_nb.ServerError, "an empty body", None),
    ],
)
def test_http_errors_are_typed(
    scripted: ScriptedServer,
    status: int,
    body: bytes,
    content_type: str,
    cls: type,
    message: str,
    code: object,
) -> None:
    base = scripted.add(
        f"err{status}", Script(status=status, parts=[body], content_type=content_type)
    )
    with pytest.raises(cls) as info:
        client(base, max_retries=0).stream("hi", model="m")
    error = info.value
    assert error.status_code == status and error.message == message and error.code == code
    assert str(error).startswith(f"HTTP {status}: {message}") and error.hint in str(error)
    assert error.stream is not None and error.stream.status == "failed"
    assert error.stream.log[0].kind == "http-error" and error.stream.log[0].raw == body
    assert error.stream.log.status_code == status


def test_rate_limit_is_retried_with_retry_after(scripted: ScriptedServer) -> None:
    limited = Script(
        status=429,
        parts=[b'{"error": {"code": 429, "message": "slow down"}}'],
        content_type="application/json",
        headers={"Retry-After": "0.2"},
    )
    ok = Script(parts=HELLO)
    base = scripted.add("retry", limited, ok)
    start = time.perf_counter()
    s = client(base).stream("hi", model="m")
    assert time.perf_counter() - start >= 0.2
    assert s.content == "Hello wörld" and s.attempts == 2 and limited.times == 1


def test_rate_limit_with_an_http_date(scripted: ScriptedServer) -> None:
    # Retry-After may be a date (RFC 9110): an hour away is too long to wait, so the error says
    # when; a date already past is retried at once.
    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)
    limited = Script(
        status=429,
        parts=[b"slow down"],
        content_type="text/plain",
        headers={"Retry-After": in_an_hour},
    )
    base = scripted.add("retry-date", limited)
    with pytest.raises(nito_nb.RateLimitError) as info:
        client(base).stream("hi", model="m")
    assert info.value.retry_after is not None and 3590 <= info.value.retry_after <= 3601
    past = Script(
        status=429,
        parts=[b"slow down"],
        content_type="text/plain",
        headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
    )
    base = scripted.add("retry-past", past, Script(parts=HELLO))
    s = client(base).stream("hi", model="m")
    assert s.content == "Hello wörld" and s.attempts == 2


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0),  # now = one minute before it
        ("Wednesday, 21-Oct-15 07:28:00 GMT", 60.0),  # the obsolete RFC 850 form
        ("Wed, 21 Oct 2015 07:26:00 GMT", 0.0),  # already past
        ("soon", None),
        ("nan", None),
        ("inf", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_seconds(value: str | None, seconds: float | None) -> None:
    from nito_nb._core.http_errors import retry_after_seconds

    now = datetime.datetime(2015, 10, 21, 7, 27, tzinfo=datetime.timezone.utc).timestamp()
    assert retry_after_seconds(value, now=now) == seconds


def test_rate_limit_gives_up_with_retry_after(scripted: ScriptedServer) -> None:
    limited = Script(
        status=429,
        parts=[b'{"error": {"code": 429, "message": "slow down"}}'],
        content_type="application/json",
        headers={"Retry-After": "3600"},
    )
    base = scripted.add("retry-long", limited)
    with pytest.raises(nito_nb.RateLimitError) as info:
        client(base).stream("hi", model="m")
    assert (
        info.value.retry_after == 3600
        and "retry after 3600 s" in str(info.value)
        and limited.times == 1
    )


def test_retries_are_bounded(scripted: ScriptedServer) -> None:
    down = Script(status=503, parts=[b"down"], content_type="text/plain")
    base = scripted.add("down", down)
    with pytest.raises(nito_nb.ServerError):
        client(base, max_retries=2).stream("hi", model="m")
    assert down.times == 3


def test_not_an_event_stream(scripted: ScriptedServer) -> None:
    base = scripted.add("json", Script(parts=[b'{"choices": []}'], content_type="application/json"))
    with pytest.raises(
        nito_nb.NotEventStreamError, match="application/json instead of an event stream"
    ):
        client(base).stream("hi", model="m")


def test_connection_refused() -> None:
    with pytest.raises(nito_nb.ConnectionFailed, match="Could not reach"):
        client("http://127.0.0.1:9", max_retries=0).stream("hi", model="m")


def test_missing_key_and_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NITO_API_KEY", raising=False)
    monkeypatch.delenv("NITO_BASE_URL", raising=False)
    # Only Nito's own gateway needs a key (a keyless server of one's own: tests/test_security.py).
    with pytest.raises(nito_nb.ConfigurationError, match="NITO_API_KEY"):
        nito_nb.Client().stream("hi", model="m")
    with pytest.raises(nito_nb.ConfigurationError, match="NITO_API_KEY"):
        nito_nb.Client(base_url="https://api.trynito.ai/v1/").stream("hi", model="m")
    with pytest.raises(nito_nb.ConfigurationError, match="model is required"):
        nito_nb.Client(api_key=KEY).stream("hi", model="")
    with pytest.raises(nito_nb.ConfigurationError, match="list of messages"):
        nito_nb.Client(api_key=KEY).stream(42, model="m")
    with pytest.raises(nito_nb.ConfigurationError, match="http"):
        nito_nb.Client(api_key=KEY, base_url="ftp://x").stream("hi", model="m")


@pytest.mark.parametrize(
    ("options", "says"),
    [  # each of these was taken: every request then failed on a timeout of its own, or never timed
        # out (NaN), or raised OverflowError from the socket (inf), or a TypeError (an unknown key)
        ({"timeout": -1}, "timeout is seconds, a finite number > 0, not -1"),
        ({"timeout": 0}, "timeout is seconds, a finite number > 0, not 0"),
        ({"timeout": float("nan")}, "timeout is seconds, a finite number > 0, not nan"),
        ({"timeout": float("inf")}, "timeout is seconds, a finite number > 0, not inf"),
        ({"timeout": True}, "timeout must be seconds, a dict or nito_nb.Timeout, not bool"),
        (
            {"timeout": {"read": 3}},
            "timeout=[{][.][.][.][}] takes connect, first_byte, between_chunks, write and total, not 'read'",
        ),
        ({"timeout": {"connect": -2}}, "timeout connect is seconds, a finite number > 0, not -2"),
        ({"max_retries": -1}, "max_retries must be a whole number >= 0, not -1"),
        ({"max_retries": "3"}, "max_retries must be a whole number >= 0, not '3'"),
        ({"max_retry_wait": float("nan")}, "max_retry_wait is seconds, a number >= 0, not nan"),
    ],
)
def test_bad_client_options_are_one_clear_error(options: dict[str, Any], says: str) -> None:
    for make in (nito_nb.Client, nito_nb.AsyncClient):
        with pytest.raises(nito_nb.ConfigurationError, match=says):
            make(api_key=KEY, **options)
    if "timeout" in options:  # the one-call API and a run take it too
        with pytest.raises(nito_nb.ConfigurationError, match=says):
            nito_nb.stream("hi", model="sim/chat", **options)
    if "max_retries" in options or "timeout" in options:
        with pytest.raises(nito_nb.ConfigurationError, match=says):
            nito_nb.run(["hi"], model="sim/chat", progress=False, **options)


# -- errors during the stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "params", "says"),
    [
        ("hi", {"temperature": "hot"}, "temperature must be a number, not 'hot'"),
        ("hi", {"temperature": float("nan")}, "temperature must be a number from 0, not nan"),
        ("hi", {"top_p": 2}, "top_p must be a number from 0 to 1"),
        ("hi", {"max_tokens": 2.5}, "max_tokens must be a whole number"),
        ("hi", {"sim": '{"tps": 20'}, "sim must be an object"),
        ("hi", {"seed": float("inf")}, "seed is inf: JSON carries only finite numbers"),
        ("hi", {"messages": []}, "the messages are the prompt"),
        ("hi", {"stream": False}, "nito_nb always streams"),
        ("hi", {"metadata": {"when": datetime.date(2026, 1, 1)}}, "metadata.when is a date"),
        (
            "bad \udcff byte",
            {},
            r"messages[0].content holds a lone surrogate '\udcff' at character 4",
        ),
    ],
)
def test_bad_request_is_refused_before_anything_is_sent(
    scripted: ScriptedServer, prompt: str, params: dict, says: str
) -> None:
    script = Script(parts=HELLO)
    base = scripted.add("never-called", script)
    for make in (client, lambda base: nito_nb.AsyncClient(api_key=KEY, base_url=base)):
        with pytest.raises(nito_nb.ConfigurationError) as info:
            make(base).stream(prompt, model="test/model", **params)
        assert says in str(info.value) and "\n" not in str(info.value)
    assert script.times == 0


def test_mid_stream_error_raises_after_keeping_everything(scripted: ScriptedServer) -> None:
    parts = [
        chunk_line({"role": "assistant", "content": "partial "}),
        chunk_line(
            {"content": ""},
            finish="error",
            error={"code": 502, "message": "Upstream provider disconnected"},
        ),
        b"data: [DONE]\n\n",
    ]
    base = scripted.add("midstream", Script(parts=parts))
    s = client(base).stream("hi", model="m")
    got = []
    with pytest.raises(nito_nb.MidStreamError, match="Upstream provider disconnected") as info:
        for c in s:
            got.append(c)
    assert info.value.stream is s and info.value.code == 502
    assert s.content == "partial " and s.status == "error" and s.done and len(got) == 2
    quiet = client(base).stream("hi", model="m", raise_errors=False)
    assert len(list(quiet)) == 2 and quiet.error["code"] == 502


def test_cut_connection_is_connection_lost(scripted: ScriptedServer) -> None:
    base = scripted.add("drop", Script(parts=HELLO[:3], drop=True))
    s = client(base).stream("hi", model="m")
    with pytest.raises(nito_nb.ConnectionLost, match="connection broke") as info:
        s.wait()
    assert isinstance(info.value, nito_nb.StreamTruncatedError)
    assert s.content == "Hello wörld" and s.status == "truncated" and not s.done


def test_clean_end_without_done_is_truncated(scripted: ScriptedServer) -> None:
    base = scripted.add("nodone", Script(parts=HELLO[:4]))
    s = client(base).stream("hi", model="m")
    with pytest.raises(nito_nb.StreamTruncatedError, match="without \\[DONE\\]"):
        list(s)
    assert s.content == "Hello wörld" and s.status == "truncated"


def test_between_chunks_timeout(scripted: ScriptedServer) -> None:
    base = scripted.add("stall", Script(parts=[HELLO[1], HELLO[2]], delays=[0, 3]))
    s = client(base, timeout={"first_byte": 30, "between_chunks": 0.3}).stream("hi", model="m")
    start = time.perf_counter()
    with pytest.raises(nito_nb.StreamTimeoutError, match=r"between_chunks deadline \(0.3 s\)"):
        s.wait()
    assert time.perf_counter() - start < 2.5  # the deadline, not the server's pause, ended it
    assert s.content == "Hel" and s.status == "truncated"


def test_first_byte_timeout_is_separate(scripted: ScriptedServer) -> None:
    base = scripted.add("slow-headers", Script(parts=HELLO, header_delay=0.6))
    # Headers take longer than between_chunks: fine, first_byte covers them.
    s = client(base, timeout={"first_byte": 5, "between_chunks": 0.3}).stream("hi", model="m")
    assert s.content == "Hello wörld"
    with pytest.raises(nito_nb.FirstByteTimeout, match=r"first_byte deadline \(0.2 s"):
        client(base, timeout={"first_byte": 0.2}, max_retries=0).stream("hi", model="m")


# -- cancel --------------------------------------------------------------------------------------


def test_close_mid_stream_keeps_what_arrived(scripted: ScriptedServer) -> None:
    base = scripted.add("slow", Script(parts=HELLO, delays=[0, 0, 5, 0, 0, 0]))
    with client(base).stream("hi", model="m") as s:
        for _ in s:
            if s.content:
                break
    assert s.status == "stopped" and s.content == "Hel" and s.exception is None
    assert s.log.end == {"status": "stopped"}


def test_keyboard_interrupt_closes_and_keeps(scripted: ScriptedServer) -> None:
    base = scripted.add("interrupt", Script(parts=HELLO, delays=[0, 0, 5, 0, 0, 0]))
    s = client(base).stream("hi", model="m")
    start = time.perf_counter()
    with sigint_after(0.3), pytest.raises(KeyboardInterrupt):  # blocked in the socket read
        for _ in s:
            pass
    assert time.perf_counter() - start < 3
    assert s.status == "stopped" and s.content == "Hel"


def test_keyboard_interrupt_before_the_headers_carries_the_stopped_stream(
    scripted: ScriptedServer,
) -> None:
    base = scripted.add("slow-headers", Script(parts=HELLO, header_delay=5))
    start = time.perf_counter()
    with sigint_after(0.3), pytest.raises(KeyboardInterrupt) as info:
        client(base).stream("hi", model="m")
    assert time.perf_counter() - start < 3
    stream = info.value.stream  # type: ignore[attr-defined]
    assert stream.status == "stopped" and stream.finished and stream.content == ""
    assert stream.attempts == 1 and stream.log.status_code is None


# -- secrets -----------------------------------------------------------------------------------


def test_the_key_never_reaches_logs_reprs_or_errors(scripted: ScriptedServer, tmp_path) -> None:
    echoing = Script(
        status=401,
        parts=[f'{{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}'.encode()],
        content_type="application/json",
        headers={"Set-Cookie": "session=abc"},
    )
    base = scripted.add("echo-key", echoing)
    c = client(base)
    with pytest.raises(nito_nb.AuthenticationError) as info:
        c.stream("hi", model="m")
    error = info.value
    texts = [
        str(error),
        repr(error),
        error.body,
        repr(error.stream),
        repr(c),
        "".join(error.stream.log.to_lines()),
    ]
    assert all(KEY not in t for t in texts) and "[redacted]" in str(error)
    assert "set-cookie" not in error.stream.log.headers
    ok = scripted.add("ok-key", Script(parts=HELLO, headers={"Set-Cookie": "s=1"}))
    s = client(ok).stream("hi", model="m")
    s.wait()
    path = s.save(tmp_path / "run.jsonl")
    assert KEY not in path.read_text() and "authorization" not in path.read_text().lower()
    assert "set-cookie" not in s.log.headers


# -- the simulator is the default for sim/ models ------------------------------------------------


def test_sim_models_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NITO_API_KEY", raising=False)
    s = nito_nb.stream("round trip", model="sim/echo")
    assert s.content == "round trip" and s.status == "done" and s.usage["completion_tokens"] > 0
    assert s.request["base_url"].startswith("http://127.0.0.1:")


def test_reply_continues_the_conversation() -> None:
    first = nito_nb.stream("first", model="sim/echo")
    second = first.reply("second")
    assert second.content == "second"
    assert [m["role"] for m in second.request["messages"]] == ["user", "assistant", "user"]


# -- the async twin ----------------------------------------------------------------------------


def test_async_stream(scripted: ScriptedServer) -> None:
    base = scripted.add("async", Script(parts=HELLO))

    async def main() -> nito_nb.AsyncStream:
        async with nito_nb.AsyncClient(api_key=KEY, base_url=base) as c:
            s = c.stream("hi", model="m")
            assert s.status == "waiting"
            chunks = [chunk async for chunk in s]
            assert len(chunks) == 4
            return s

    s = asyncio.run(main())
    assert s.content == "Hello wörld" and s.status == "done" and s.usage["total_tokens"] == 5


def test_async_errors_and_close(scripted: ScriptedServer) -> None:
    err = scripted.add(
        "async-401",
        Script(
            status=401, parts=[b'{"error": {"message": "nope"}}'], content_type="application/json"
        ),
    )
    slow = scripted.add("async-slow", Script(parts=HELLO, delays=[0, 0, 5, 0, 0, 0]))

    async def main() -> None:
        c = nito_nb.AsyncClient(api_key=KEY, base_url=err)
        with pytest.raises(nito_nb.AuthenticationError):
            await c.stream("hi", model="m").wait()
        d = nito_nb.AsyncClient(api_key=KEY, base_url=slow)
        s = d.stream("hi", model="m")
        async for _ in s:
            if s.content:
                break
        await s.aclose()
        assert s.status == "stopped" and s.content == "Hel"
        t = d.stream("hi", model="m")
        task = asyncio.ensure_future(t.wait())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert t.status == "stopped" and t.content == "Hel"
        await c.aclose()
        await d.aclose()

    asyncio.run(main())


def test_module_level_astream_on_the_simulator() -> None:
    async def main() -> nito_nb.AsyncStream:
        s = nito_nb.astream("async echo", model="sim/echo")
        await s
        return s

    assert asyncio.run(main()).content == "async echo"


def test_close_from_another_thread_stops_the_reader(scripted: ScriptedServer) -> None:
    # A Stop button: one thread iterates, another closes.
    base = scripted.add("thread-close", Script(parts=HELLO, delays=[0, 0, 5, 0, 0, 0]))
    s = client(base).stream("hi", model="m")
    reader = threading.Thread(target=s.wait)
    reader.start()
    deadline = time.monotonic() + 5
    while not s.content and time.monotonic() < deadline:
        time.sleep(0.01)
    start = time.perf_counter()
    s.close()
    reader.join(timeout=3)
    assert not reader.is_alive() and time.perf_counter() - start < 2
    assert s.status == "stopped" and s.content == "Hel" and s.exception is None


@given(
    body=st.binary(max_size=300),
    status=st.sampled_from([200, 200, 200, 400, 401, 429, 500, 503]),
    content_type=st.sampled_from(["text/event-stream", "application/json", "text/html", ""]),
    drop=st.booleans(),
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_garbage_from_the_server_gives_only_typed_errors(
    scripted: ScriptedServer, body: bytes, status: int, content_type: str, drop: bool
) -> None:
    base = scripted.add(
        "garbage", Script(status=status, parts=[body], content_type=content_type, drop=drop)
    )
    try:
        s = client(base, max_retries=0).stream("hi", model="m")
        s.wait()
    except nito_nb.NitoError as error:
        assert error.stream is not None  # what arrived is kept, whatever happened
    finally:
        close_clients()


def test_async_cancel_while_connecting_is_stopped(scripted: ScriptedServer) -> None:
    base = scripted.add("async-slow-headers", Script(parts=HELLO, header_delay=5))

    async def main() -> nito_nb.AsyncStream:
        s = nito_nb.AsyncClient(api_key=KEY, base_url=base).stream("hi", model="m")
        task = asyncio.ensure_future(s.wait())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return s

    s = asyncio.run(main())
    assert s.status == "stopped" and s.content == "" and s.n_events == 0


def test_break_after_done_arrived_is_done_not_stopped(scripted: ScriptedServer) -> None:
    base = scripted.add("one-read", Script(parts=[b"".join(HELLO)]))
    s = client(base).stream("hi", model="m")
    for _ in s:
        break  # [DONE] came in the same read: the answer is whole
    s.close()
    assert s.status == "done" and s.content == "Hello wörld" and s.done


def test_an_async_streams_clock_starts_when_it_is_sent_not_when_it_is_made() -> None:
    # An AsyncStream is made when asked for and sent when first awaited: its t0 (both clocks,
    # the wall time being started_at in runs and the store) is the send.
    from datetime import datetime, timezone

    async def main() -> tuple[Any, datetime]:
        stream = nito_nb.astream("later", model="sim/echo", sim={"tps": 0, "ttft_ms": 0})
        made = datetime.now(timezone.utc)
        await asyncio.sleep(0.3)
        return await stream.wait(), made

    stream, made = asyncio.run(main())
    assert (stream.t0_wall - made).total_seconds() >= 0.25


def test_an_async_stream_given_a_send_time_is_made_ready_at_once_and_sent_no_earlier() -> None:
    # A run's open-loop schedule starts its streams a little ahead (_runs/runner.py SEND_LEAD):
    # the stream waits only for its send; its clock (t0) is the send, not the start.
    async def main() -> tuple[Any, float, bool]:
        stream = nito_nb.astream("on time", model="sim/echo", sim={"tps": 0, "ttft_ms": 0})
        started = time.perf_counter()
        source_of(stream).send_at(asyncio.get_running_loop().time() + 0.3)
        task = asyncio.ensure_future(stream.wait())
        await asyncio.sleep(0.1)
        waiting = source_of(stream).waiting_to_send and stream.log.status_code is None
        return await task, started, waiting

    stream, started, waiting = asyncio.run(main())
    assert waiting
    assert (
        stream.status == "done"
        and stream.content == "on time"
        and not source_of(stream).waiting_to_send
    )
    assert stream.log.t0_ns / 1e9 - started >= 0.3 - 0.002  # the loop's timers never fire early


def test_an_async_stream_cancelled_before_its_send_time_sent_nothing() -> None:
    async def main() -> Any:
        stream = nito_nb.astream("never", model="sim/echo", sim={"tps": 0, "ttft_ms": 0})
        source_of(stream).send_at(asyncio.get_running_loop().time() + 5)
        task = asyncio.ensure_future(stream.wait())
        await asyncio.sleep(0.1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await stream.aclose()
        return stream

    stream = asyncio.run(main())
    assert (
        source_of(stream).waiting_to_send
        and stream.status == "stopped"
        and stream.log.status_code is None
    )
