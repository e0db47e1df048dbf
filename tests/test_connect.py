"""``connect``: how long the attempt that got the response spent opening its connection
(docs/METRICS.md), over a real loopback server: both clients, httpx's own pooled transport (a
reused connection has none), a saved log, a frame; the trace rule itself on httpcore's event
sequences (TCP, TLS, a proxy's tunnel, a failed connect)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest

import nito_nb
from nito_nb._client.connecting import _ConnectTimer, trace_connect

SIM = {"tps": 0, "ttft_ms": 0}


def _check(stream: Any) -> None:
    assert isinstance(stream.log.connect_ns, int) and stream.log.connect_ns > 0
    assert stream.connect == stream.log.connect_ns / 1e9
    assert stream.connect < stream.ttfb <= stream.ttft  # part of both: t0 is before the connection


def test_an_async_stream_records_its_connection_and_it_survives_a_saved_log_and_a_frame(
    tmp_path: Path,
) -> None:
    async def main() -> Any:
        async with nito_nb.AsyncClient() as client:
            stream = client.stream("hi", model="sim/chat", sim=SIM)
            await stream.wait()
            return stream

    stream = asyncio.run(main())
    _check(stream)
    assert stream.snapshot().connect == stream.connect
    path = tmp_path / "one.jsonl"
    stream.save(path)
    loaded = nito_nb.load(path)
    assert loaded.connect == stream.connect and loaded.ttft == stream.ttft
    metrics = nito_nb.frame({"live": stream, "loaded": loaded}).nito.metrics()
    assert metrics["connect"].tolist() == [stream.connect] * 2
    # A log saved before the field existed has none, and says so with None / NaN, not 0.
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace(f'"connect_ns": {stream.log.connect_ns}, ', "")
    assert "connect_ns" not in lines[0]
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert nito_nb.load(old).connect is None
    assert pd.isna(nito_nb.frame({"old": nito_nb.load(old)}).nito.metrics().loc["old", "connect"])


def test_connect_survives_a_csv_and_a_parquet_round_trip(tmp_path: Path) -> None:
    # It lived only in df.attrs, which CSV drops: 0.00013 came back NaN (issue 30, item 7).
    # its own pool: the shared client's may hold a connection already
    with nito_nb.Client() as client:
        stream = client.stream("hi", model="sim/chat", sim=SIM)
        stream.wait()
    _check(stream)
    df = stream.frame()
    df.to_csv(tmp_path / "f.csv", index=False)
    df.to_parquet(tmp_path / "f.parquet")
    for back in (pd.read_csv(tmp_path / "f.csv"), pd.read_parquet(tmp_path / "f.parquet")):
        back.attrs.clear()  # whatever the format keeps of attrs, the rows alone carry it
        assert nito_nb.frame(back).nito.metrics()["connect"].tolist() == [stream.connect]
    # A frame saved before the column reads it from its attrs when it still has them, else NaN.
    old = df.drop(columns="connect")
    assert nito_nb.frame(old).nito.metrics()["connect"].tolist() == [stream.connect]
    old.attrs.clear()
    assert nito_nb.frame(old).nito.metrics()["connect"].isna().all()


@pytest.mark.spawns  # a store's events are written by a helper process
def test_a_run_stores_connect_in_its_events(tmp_path: Path) -> None:
    run = nito_nb.run(
        ["a", "b"], model="sim/chat", store=str(tmp_path / "runs"), progress=False, sim=SIM
    ).wait()
    connect = run.results().set_index("key")["connect"]
    with nito_nb.open_store(tmp_path / "runs") as store:
        rows = store.sql("SELECT stream, connect FROM events WHERE kind = 'response'").set_index(
            "stream"
        )["connect"]
    # NaN where a request reused a connection, which == never matches: compared as arrays
    np.testing.assert_array_equal(
        rows.sort_index().to_numpy(float), connect.sort_index().to_numpy(float)
    )


def test_a_request_on_a_pooled_connection_opened_none() -> None:
    # The sync client keeps httpx's pool: its second request reuses the first one's connection.
    with nito_nb.Client() as client:
        first = client.stream("one", model="sim/chat", sim=SIM)
        first.wait()
        second = client.stream("two", model="sim/chat", sim=SIM)
        second.wait()
    _check(first)
    assert second.status == "done" and second.connect is None and second.log.connect_ns is None

    async def main() -> tuple[Any, Any]:  # the same with a user's own httpx.AsyncClient
        async with httpx.AsyncClient() as http, nito_nb.AsyncClient(http_client=http) as client:
            a = client.stream("one", model="sim/chat", sim=SIM)
            await a.wait()
            b = client.stream("two", model="sim/chat", sim=SIM)
            await b.wait()
            return a, b

    a, b = asyncio.run(main())
    _check(a)
    assert b.status == "done" and b.connect is None


@pytest.mark.spawns
def test_a_run_has_a_connect_column_on_each_engine() -> None:
    for engine in ("asyncio", "processes"):
        extra = {"engine": "processes", "workers": 1} if engine == "processes" else {}
        run = nito_nb.run(["a", "b", "c"], model="sim/chat", progress=False, sim=SIM, **extra)
        run.wait(timeout=120)
        assert run.error is None
        r = run.results()
        assert r["connect"].dtype == "float64", engine
        assert ((r["connect"] > 0) & (r["connect"] < r["ttfb"])).all(), (
            engine,
            r[["connect", "ttfb"]],
        )


class _Stream:
    def __init__(self) -> None:
        self.set: list[int] = []

    def set_connect(self, duration_ns: int) -> None:
        self.set.append(duration_ns)


def _replay(names: list[str], pause: float = 0.002) -> list[int]:
    stream = _Stream()
    timer = _ConnectTimer(stream)
    for name in names:
        timer(name, {})
        time.sleep(pause)
    return stream.set


def test_the_span_runs_from_the_first_connect_to_the_last_tcp_or_tls_completed() -> None:
    # Plain TCP: one span, set when the connection is made.
    assert (
        len(
            _replay(
                [
                    "connection.connect_tcp.started",
                    "connection.connect_tcp.complete",
                    "http11.send_request_headers.started",
                    "http11.send_request_headers.complete",
                ]
            )
        )
        == 1
    )
    # TLS: the span is extended to the handshake's end (the last value set wins).
    tls = _replay(
        [
            "connection.connect_tcp.started",
            "connection.connect_tcp.complete",
            "connection.start_tls.started",
            "connection.start_tls.complete",
            "http11.send_request_headers.started",
        ]
    )
    assert len(tls) == 2 and tls[1] > tls[0] >= 2_000_000
    # Through a proxy's tunnel: TCP to the proxy, its CONNECT, then TLS to the origin, one span.
    tunnel = _replay(
        [
            "connection.connect_tcp.started",
            "connection.connect_tcp.complete",
            "http11.send_request_headers.started",
            "http11.receive_response_headers.complete",
            "proxy.start_tls.started",
            "proxy.start_tls.complete",
        ]
    )
    assert len(tunnel) == 2 and tunnel[1] >= 5 * 2_000_000
    # A connect that failed sets nothing; nor does a request that opened no connection.
    assert _replay(["connection.connect_tcp.started", "connection.connect_tcp.failed"]) == []
    assert (
        _replay(["http11.send_request_headers.started", "http11.receive_response_body.complete"])
        == []
    )


def test_the_async_callback_and_a_users_own_trace() -> None:
    stream = _Stream()
    request = httpx.Request("POST", "http://127.0.0.1:1/")
    trace_connect(request, stream, asynchronous=True)
    callback = request.extensions["trace"]

    async def main() -> None:
        await callback("connection.connect_tcp.started", {})
        await callback("connection.connect_tcp.complete", {})

    asyncio.run(main())
    assert len(stream.set) == 1
    mine = object()
    request = httpx.Request("POST", "http://127.0.0.1:1/", extensions={"trace": mine})
    trace_connect(request, stream, asynchronous=False)
    assert request.extensions["trace"] is mine


def test_a_refused_connection_has_no_connect() -> None:
    with nito_nb.Client(
        api_key="sk-test-not-a-secret", base_url="http://127.0.0.1:9/v1", max_retries=0
    ) as client:
        with pytest.raises(nito_nb.NitoError) as caught:
            client.stream("hi", model="m")
    assert caught.value.stream is not None and caught.value.stream.connect is None
