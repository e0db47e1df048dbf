"""Captured streams are timed when their bytes arrive, not when the library reads them (issue 31).

The simulator sends a chunk every 50 ms (``tps`` 20, no jitter); the application spends 200 ms on
each chunk. A pump reads the body as it arrives (``nito_nb/_capture_pump.py``), so the captured
Stream's ``itl`` is the wire's 50 ms, as ``nito_nb.stream()``'s is, on both stacks, sync and async,
while the SDK still gets exactly its bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from test_capture import CLIENTS, KEY

import nito_nb
from nito_nb import _capture_pump
from nito_nb.sim import SimServer

PACED = {"tps": 20, "ttft_ms": 100, "jitter": 0}
PROMPT = "one two three four five six seven eight nine ten"
MESSAGES: list[Any] = [{"role": "user", "content": PROMPT}]
SLOW_READER = 0.2  # seconds the application spends on each chunk


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with SimServer(api_key=KEY) as url:
        yield url


def create(client: Any, **sim: Any) -> Any:
    return client.chat.completions.create(
        model="sim/echo", messages=MESSAGES, stream=True, extra_body={"sim": {**PACED, **sim}}
    )


def new_streams(before: list[nito_nb.Stream]) -> list[nito_nb.Stream]:
    """The Streams captured since ``before`` was listed (the registry is bounded: not by count)."""
    seen = {id(s) for s in before}
    return [s for s in nito_nb.streams() if id(s) not in seen]


def itl(stream: nito_nb.Stream) -> float:
    return float(stream.frame().nito.metrics().iloc[0]["itl"])


@pytest.mark.parametrize("stack", list(CLIENTS))
def test_a_slow_sync_reader_does_not_change_the_arrival_times(base_url: str, stack: str) -> None:
    with openai.OpenAI(
        base_url=base_url, api_key=KEY, max_retries=0, http_client=CLIENTS[stack][0]()
    ) as client:
        words = []
        for chunk in create(client):
            words.extend(c.delta.content or "" for c in chunk.choices)
            time.sleep(SLOW_READER)
    ours = nito_nb.last()
    assert ours.request["capture"] == stack and ours.status == "done"
    assert "".join(words) == ours.content == PROMPT
    assert itl(ours) == pytest.approx(0.050, abs=0.005)
    assert ours.elapsed < 1.5  # the wire's ~0.65 s, not the reader's ~3 s


@pytest.mark.parametrize("stack", list(CLIENTS))
def test_a_slow_async_reader_does_not_change_the_arrival_times(base_url: str, stack: str) -> None:
    async def run() -> str:
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key=KEY, max_retries=0, http_client=CLIENTS[stack][1]()
        ) as client:
            words = []
            async for chunk in await create(client):
                words.extend(c.delta.content or "" for c in chunk.choices)
                await asyncio.sleep(SLOW_READER)
            return "".join(words)

    text = asyncio.run(run())
    ours = nito_nb.last()
    assert ours.request["capture"] == stack and ours.status == "done"
    assert text == ours.content == PROMPT
    assert itl(ours) == pytest.approx(0.050, abs=0.005)
    assert ours.elapsed < 1.5


@pytest.mark.parametrize("stack", list(CLIENTS))
def test_the_library_gets_exactly_the_bytes_as_they_came_off_the_transport(
    base_url: str, stack: str
) -> None:
    sync_client, _ = CLIENTS[stack]
    body = {"model": "sim/chat", "messages": MESSAGES, "stream": True, "sim": {"tps": 400}}
    with (
        sync_client() as client,
        client.stream(
            "POST",
            f"{base_url}/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {KEY}"},
        ) as response,
    ):
        reads = list(response.iter_raw())
    ours = nito_nb.last()
    assert ours.status == "done" and len(reads) > 10
    assert b"".join(reads) == ours.log.body  # every byte, in order, none added
    assert [e.raw for e in ours.log if e.kind != "meta"] == [  # and the events are the wire's
        e.raw for e in nito_nb.read_sse(b"".join(reads)).log if e.kind != "meta"
    ]


@pytest.mark.parametrize("stack", list(CLIENTS))
def test_a_reader_that_stops_reading_holds_the_pump_at_the_read_ahead_limit(
    base_url: str, stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_capture_pump, "READ_AHEAD", 64 * 1024)  # a ~1 MB stream is past it
    sync_client, _ = CLIENTS[stack]
    body = {
        "model": "sim/long",
        "messages": MESSAGES,
        "stream": True,
        "sim": {"chunks": 8000, "tps": 0},
    }
    with (
        sync_client() as client,
        client.stream(
            "POST",
            f"{base_url}/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {KEY}"},
        ) as response,
    ):
        reads = response.iter_raw()
        first = next(reads)
        pump = response.stream._stream._pump  # under the client's own wrapper
        # The server could send it all meanwhile; the pump stops at the limit. Wait until it got
        # there (a loaded machine's server takes its time), then a while longer: it stays there.
        deadline = time.monotonic() + 30
        while pump._put - pump._taken <= 64 * 1024 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        waiting = pump._put - pump._taken
        # the limit and one read of the transport
        assert 64 * 1024 < waiting < 64 * 1024 + 256 * 1024
        rest = b"".join(reads)
    ours = nito_nb.last()
    assert ours.status == "done" and first + rest == ours.log.body
    assert "capture-read-ahead" in [a.kind for a in ours.anomalies]


@pytest.mark.parametrize("stack", list(CLIENTS))
def test_a_retried_error_closed_unread_is_recorded_as_such(
    base_url: str, stack: str, tmp_path: Path
) -> None:
    # On a 429 or 5xx the SDK closes the response unread, then tries again: that attempt's Stream
    # keeps the status and headers and says its body was not read (the server sent one).
    # (The simulator fails a request its first time only: each stack sends one of its own, by seed.)
    flaky = {
        "tps": 0,
        "fail_rate": 1,
        "fail_status": 429,
        "fail_attempts": 1,
        "retry_after": 0.05,
        "seed": list(CLIENTS).index(stack) + 100,
    }
    before = nito_nb.streams()
    with openai.OpenAI(
        base_url=base_url, api_key=KEY, max_retries=1, http_client=CLIENTS[stack][0]()
    ) as client:
        text = "".join(
            c.choices[0].delta.content or "" for c in create(client, **flaky) if c.choices
        )
    refused, answered = new_streams(before)
    assert refused.status == "failed" and isinstance(refused.exception, nito_nb.RateLimitError)
    assert refused.exception.status_code == 429 and refused.log.status_code == 429
    assert "closed the body before reading it" in refused.exception.message
    assert "empty body" not in str(refused.exception)
    assert (
        refused.log.headers["retry-after"] == "0.05"
        and int(refused.log.headers["content-length"]) > 0
    )
    assert "body-unread" in [a.kind for a in refused.anomalies]
    metrics = nito_nb.load(refused.save(tmp_path / "refused.jsonl")).frame().nito.metrics().iloc[0]
    assert metrics["http_status"] == 429 and "closed the body before reading it" in metrics["error"]
    assert answered.status == "done" and answered.content == text == PROMPT

    # A 500 retried once: the first attempt closed unread, the last one read by the SDK to raise.
    before = nito_nb.streams()
    with (
        openai.OpenAI(
            base_url=base_url, api_key=KEY, max_retries=1, http_client=CLIENTS[stack][0]()
        ) as client,
        pytest.raises(openai.InternalServerError),
    ):
        client.chat.completions.create(model="sim/http-500-html", messages=MESSAGES, stream=True)
    first, last = new_streams(before)
    assert isinstance(first.exception, nito_nb.ServerError) and first.log.status_code == 500
    assert "closed the body before reading it" in first.exception.message
    assert (
        isinstance(last.exception, nito_nb.ServerError) and "an HTML page" in last.exception.message
    )
