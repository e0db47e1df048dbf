"""httpx2_client() / httpx_client(): streams made by the openai SDK, captured from their exact
bytes (issues 15 and 31).

Every test talks HTTP to the simulator (or the scripted server) on loopback through the real openai
SDK; the captured Stream is compared with nito_nb's own Stream of the same request, and the SDK's
results with those of a plain client. The SDK's own stack is httpx2; an httpx client puts it on its
legacy path: the main cases run on both (``stack``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from scripted_server import Script, ScriptedServer
from test_sim import QUICK, SEARCH, WEATHER
from test_sim_openai import accumulate

import nito_nb
from nito_nb import _capture
from nito_nb.sim import SimServer

KEY = "sk-test-SECRET123456789"
MESSAGES: list[Any] = [{"role": "user", "content": "Hello, simulator!"}]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    # A simulator that checks the key: it is really sent, so it really passes through the capture.
    with SimServer(api_key=KEY) as url:
        yield url


@pytest.fixture
def plain(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
        yield client


#: The capturing clients of each stack (sync, async), by the name the Stream's request gives.
CLIENTS: dict[str, tuple[Any, Any]] = {
    "httpx2": (nito_nb.httpx2_client, nito_nb.async_httpx2_client),  # the openai SDK's own stack
    "httpx": (nito_nb.httpx_client, nito_nb.async_httpx_client),  # its legacy path
}


@pytest.fixture(params=list(CLIENTS))
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def captured(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=base_url, api_key=KEY, max_retries=0, http_client=nito_nb.httpx_client()
    ) as client:
        yield client


@pytest.fixture
def on_stack(base_url: str, stack: str) -> Iterator[openai.OpenAI]:
    """An openai client that sends through the capturing client of ``stack``."""
    with openai.OpenAI(
        base_url=base_url, api_key=KEY, max_retries=0, http_client=CLIENTS[stack][0]()
    ) as client:
        yield client


def create(client: Any, model: str, **kwargs: Any) -> Any:
    return client.chat.completions.create(
        model=model,
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"sim": {**QUICK, **kwargs.pop("sim", {})}},
        **kwargs,
    )


def reference(base_url: str, model: str, **params: Any) -> nito_nb.Stream:
    """nito_nb's own Stream of the same request."""
    with nito_nb.Client(api_key=KEY, base_url=base_url) as client:
        return client.stream(MESSAGES, model=model, sim=QUICK, **params).wait()


#: What the simulator makes afresh for each request (like a real gateway): not compared across two.
PER_REQUEST = ("signature", "data", "id")


def stable(details: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reasoning details without their per-request signature, encrypted data and id."""
    return [{k: v for k, v in d.items() if k not in PER_REQUEST} for d in details]


def sdk_result(chunks: Any) -> dict[str, Any]:
    """The SDK's accumulated result, without what differs between two requests."""
    result = accumulate(chunks)
    return {**result, "reasoning_details": stable(result["reasoning_details"])}


def assert_same_stream(ours: nito_nb.Stream, ref: nito_nb.Stream) -> None:
    assert ours.status == ref.status
    assert ours.content == ref.content
    assert ours.reasoning == ref.reasoning
    assert stable(ours.reasoning_details) == stable(ref.reasoning_details)
    assert len(ours.reasoning_details) == len(ref.reasoning_details)
    assert [(c.name, c.arguments) for c in ours.tool_calls] == [
        (c.name, c.arguments) for c in ref.tool_calls
    ]
    assert ours.finish_reason == ref.finish_reason
    assert ours.usage == ref.usage
    assert ours.n_events == ref.n_events and ours.n_chunks == ref.n_chunks
    assert ours.timed and ours.ttft is not None and 0 <= ours.ttfb <= ours.ttft <= ours.elapsed  # type: ignore[operator]


def key_absent(stream: nito_nb.Stream, tmp_path: Path) -> None:
    path = stream.save(tmp_path / "captured.jsonl")
    texts = [
        repr(stream),
        json.dumps(stream.request),
        json.dumps(stream.log.headers),
        path.read_text(),
        nito_nb.frame(stream).to_csv(),
        str(stream.exception),
        json.dumps(stream._repr_mimebundle_()),
    ]
    for text in texts:
        assert KEY not in text


CASES = [("sim/chat", {}), ("sim/reasoning", {}), ("sim/tools", {"tools": [WEATHER, SEARCH]})]


@pytest.mark.parametrize(("model", "params"), CASES)
def test_sync_create_is_captured_exactly(
    plain: openai.OpenAI,
    on_stack: openai.OpenAI,
    stack: str,
    base_url: str,
    model: str,
    params: dict[str, Any],
    tmp_path: Path,
) -> None:
    before = len(nito_nb.streams())
    result = sdk_result(create(on_stack, model, **params))
    assert result == sdk_result(create(plain, model, **params))  # the SDK's own results: unchanged
    ours = nito_nb.last()
    assert isinstance(ours, nito_nb.Stream) and len(nito_nb.streams()) == before + 1
    assert_same_stream(ours, reference(base_url, model, **params))
    assert ours.content == result["content"] and ours.finish_reason == result["finish_reason"]
    assert ours.request["model"] == model and ours.request["capture"] == stack
    assert ours.request["params"]["sim"] == QUICK and ours.request["messages"] == MESSAGES
    key_absent(ours, tmp_path)


def test_the_httpx2_client_is_the_openai_sdks_own_stack(base_url: str) -> None:
    import httpx2

    with openai.OpenAI(
        base_url=base_url, api_key=KEY, http_client=nito_nb.httpx2_client()
    ) as client:
        assert isinstance(client._client, httpx2.Client)  # not the SDK's legacy httpx path
        assert isinstance(client._client._transport, nito_nb.Httpx2CaptureTransport)


@pytest.mark.parametrize(("model", "params"), CASES)
def test_async_create_is_captured_exactly(
    base_url: str, stack: str, model: str, params: dict[str, Any], tmp_path: Path
) -> None:
    async def run(http_client: Any) -> dict[str, Any]:
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key=KEY, max_retries=0, http_client=http_client
        ) as c:
            chunks = [chunk async for chunk in await create(c, model, **params)]
        return sdk_result(chunks)

    result = asyncio.run(run(CLIENTS[stack][1]()))
    ours = nito_nb.last()
    assert ours.request["capture"] == stack
    assert result == asyncio.run(run(None))
    assert_same_stream(ours, reference(base_url, model, **params))
    key_absent(ours, tmp_path)


def test_the_sdks_stream_helper_sync_and_async(
    on_stack: openai.OpenAI, stack: str, base_url: str
) -> None:
    tools: Any = [WEATHER, SEARCH]

    def sync() -> Any:
        with on_stack.chat.completions.stream(
            model="sim/tools",
            messages=MESSAGES,
            tools=tools,
            stream_options={"include_usage": True},
            extra_body={"sim": QUICK},
        ) as stream:
            for _ in stream:
                pass
            return stream.get_final_completion()

    async def run_async() -> Any:
        async with (
            openai.AsyncOpenAI(
                base_url=base_url, api_key=KEY, max_retries=0, http_client=CLIENTS[stack][1]()
            ) as c,
            c.chat.completions.stream(
                model="sim/reasoning",
                messages=MESSAGES,
                stream_options={"include_usage": True},
                extra_body={"sim": QUICK},
            ) as stream,
        ):
            async for _ in stream:
                pass
            return await stream.get_final_completion()

    completion = sync()
    ours = nito_nb.last()
    assert_same_stream(ours, reference(base_url, "sim/tools", tools=tools))
    calls = completion.choices[0].message.tool_calls or []
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        (c.name, c.arguments) for c in ours.tool_calls
    ]
    assert completion.usage.completion_tokens == ours.usage["completion_tokens"]

    completion = asyncio.run(run_async())
    ours = nito_nb.last()
    assert_same_stream(ours, reference(base_url, "sim/reasoning"))
    assert completion.choices[0].message.content == ours.content


def test_a_dropped_connection_is_the_sdks_error_and_nito_nb_keeps_the_partial_stream(
    on_stack: openai.OpenAI, stack: str, base_url: str, tmp_path: Path
) -> None:
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in create(on_stack, "sim/drop"):
            seen.extend(c.delta.content or "" for c in chunk.choices)
    ours = nito_nb.last()
    assert ours.status == "truncated" and isinstance(ours.exception, nito_nb.ConnectionLost)
    assert ours.content == "".join(seen) and len(seen) == 40
    key_absent(ours, tmp_path)

    async def run() -> list[str]:  # the async pump hands the SDK the transport's error the same way
        seen: list[str] = []
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key=KEY, max_retries=0, http_client=CLIENTS[stack][1]()
        ) as client:
            with pytest.raises(openai.APIConnectionError):
                async for chunk in await create(client, "sim/drop"):
                    seen.extend(choice.delta.content or "" for choice in chunk.choices)
        return seen

    seen = asyncio.run(run())
    ours = nito_nb.last()
    assert ours.status == "truncated" and isinstance(ours.exception, nito_nb.ConnectionLost)
    assert ours.content == "".join(seen) and len(seen) == 40


def test_a_midstream_error_is_the_sdks_error_and_nito_nb_keeps_it(captured: openai.OpenAI) -> None:
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="Upstream provider disconnected"):
        for chunk in create(captured, "sim/error-midstream"):
            seen.extend(c.delta.content or "" for c in chunk.choices)
    ours = nito_nb.last()
    assert ours.status == "error" and isinstance(ours.exception, nito_nb.MidStreamError)
    assert ours.content == "".join(seen) and ours.content.startswith("## Streaming")
    assert "Upstream provider disconnected" in ours.error["message"]


def test_breaking_out_early_stops_the_captured_stream(
    on_stack: openai.OpenAI, stack: str, base_url: str
) -> None:
    # 25 s of chunks: the pump that reads ahead is waiting for the next one when the SDK closes,
    # and closing cuts that read at once.
    response = create(on_stack, "sim/long", sim={"chunks": 5000, "tps": 200})
    for n, _ in enumerate(response):
        if n == 10:
            break
    started = time.perf_counter()
    response.close()
    assert time.perf_counter() - started < 1.0
    ours = nito_nb.last()
    assert ours.status == "stopped" and 0 < ours.n_chunks < 5000

    async def run() -> float:
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key=KEY, max_retries=0, http_client=CLIENTS[stack][1]()
        ) as c:
            response = await create(c, "sim/long", sim={"chunks": 5000, "tps": 200})
            n = 0
            async for _ in response:
                n += 1
                if n == 10:
                    break
            started = time.perf_counter()
            await response.close()
            return time.perf_counter() - started

    assert asyncio.run(run()) < 1.0
    ours = nito_nb.last()
    assert ours.status == "stopped" and 0 < ours.n_chunks < 5000


def test_non_streamed_and_other_requests_pass_through_unrecorded(captured: openai.OpenAI) -> None:
    before = nito_nb.streams()
    completion = captured.chat.completions.create(
        model="sim/echo", messages=MESSAGES, extra_body={"sim": QUICK}
    )
    assert completion.choices[0].message.content == "Hello, simulator!"
    assert "sim/chat" in {m.id for m in captured.models.list()}
    assert nito_nb.streams() == before


def test_an_http_error_is_the_sdks_and_its_body_is_kept_without_the_key(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    # Gateways quote the key they refused: the SDK's error is its business, the log is ours.
    body = json.dumps(
        {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": 401}}
    ).encode()
    url = scripted.add(
        "capture-401",
        Script(
            status=401,
            parts=[body],
            content_type="application/json",
            headers={"x-echo": f"Bearer {KEY}"},
        ),
    )
    with (
        openai.OpenAI(
            base_url=url, api_key=KEY, max_retries=0, http_client=nito_nb.httpx_client()
        ) as c,
        pytest.raises(openai.AuthenticationError),
    ):
        c.chat.completions.create(model="any", messages=MESSAGES, stream=True)
    ours = nito_nb.last()
    assert ours.status == "failed" and isinstance(ours.exception, nito_nb.AuthenticationError)
    assert "[redacted]" in ours.log[0].raw.decode() and "x-echo" not in ours.log.headers
    key_absent(ours, tmp_path)


def test_a_gzipped_stream_is_recorded_decoded(scripted: ScriptedServer) -> None:
    ref = nito_nb.read_sse(Path(__file__).parent / "data" / "real" / "azure-content-1.sse")
    url = scripted.add(
        "capture-gzip",
        Script(parts=[gzip.compress(ref.log.body)], headers={"content-encoding": "gzip"}),
    )
    with openai.OpenAI(
        base_url=url, api_key=KEY, max_retries=0, http_client=nito_nb.httpx_client()
    ) as c:
        text = "".join(ch.choices[0].delta.content or "" for ch in create(c, "any") if ch.choices)
    ours = nito_nb.last()
    assert ours.content == ref.content == text and ours.n_events == ref.n_events


def test_the_registry_is_bounded_by_nito_keep_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NITO_KEEP_STREAMS", "3")
    registry = _capture._Registry()
    made = [nito_nb.read_sse(b"data: [DONE]\n\n") for _ in range(5)]
    for s in made:
        registry.add(s)
    assert registry.items() == made[-3:]
    assert registry.latest(None) is made[-1]


def test_user_transports_and_env_proxies_are_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    client = nito_nb.httpx_client(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    assert isinstance(client._transport, nito_nb.CaptureTransport)
    assert client.get("http://example.invalid/x").status_code == 200  # a GET passes through
    env = nito_nb.httpx_client()
    assert env._mounts and all(
        isinstance(t, nito_nb.CaptureTransport) for t in env._mounts.values() if t
    )


def test_live_prints_captured_streams_outside_a_notebook(
    captured: openai.OpenAI, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with nito_nb.live():
        for _ in create(captured, "sim/tools", tools=[WEATHER]):
            pass
    shown = capsys.readouterr().out
    assert "tool call get_weather" in shown and "✓ done" in shown and "sim/tools" in shown
    for _ in create(captured, "sim/echo"):  # after the block: captured, not shown
        pass
    assert capsys.readouterr().out == "" and nito_nb.last().content == "Hello, simulator!"


def test_live_async_and_a_bad_format(base_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    async def run() -> None:
        async with (
            openai.AsyncOpenAI(
                base_url=base_url,
                api_key=KEY,
                max_retries=0,
                http_client=nito_nb.async_httpx_client(),
            ) as c,
            nito_nb.live(format="text"),
        ):
            async for _ in await create(c, "sim/echo"):
                pass

    asyncio.run(run())
    assert "Hello, simulator!" in capsys.readouterr().out
    with pytest.raises(ValueError, match="format must be one of"):
        nito_nb.live(format="html")


def test_last_is_the_latest_of_the_magics_result_and_the_captured_streams(
    captured: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nito_nb import _last as _magic  # the slot the magic and runs keep their result in

    earlier = nito_nb.read_sse(b"data: [DONE]\n\n")
    monkeypatch.setattr(_magic, "_last", earlier)  # a %%nito cell ran before
    for _ in create(captured, "sim/echo"):
        pass
    first = nito_nb.last()
    assert first is not earlier and first.request["capture"] == "httpx"
    later = [nito_nb.read_sse(b"data: [DONE]\n\n")]
    monkeypatch.setattr(_magic, "_last", later)  # then a %%nito -m a,b cell: its list is the latest
    assert nito_nb.last() is later
    for _ in create(captured, "sim/echo"):
        pass
    assert nito_nb.last() is nito_nb.streams()[-1] is not first


def test_a_failing_view_never_breaks_the_callers_stream(
    captured: openai.OpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from nito_nb._display import notebook as _display

    class Broken:
        def update(self) -> None:
            raise RuntimeError("display gone")

        def finish(self) -> None:
            raise RuntimeError("display gone")

    monkeypatch.setattr(_display, "live_display", lambda *a, **k: Broken())
    with nito_nb.live():
        result = accumulate(create(captured, "sim/chat"))
    ours = nito_nb.last()
    assert (
        ours.status == "done"
        and ours.content == result["content"]
        and result["finish_reason"] == "stop"
    )
    assert (
        capsys.readouterr().err.count("nito: the live view stopped (RuntimeError: display gone)")
        == 1
    )


def test_a_key_in_the_query_or_the_body_is_redacted(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    # Some providers take the key as ?key=...; a user may also put one in the body by mistake.
    body = json.dumps({"error": {"message": f"API key not valid: {KEY}", "code": 400}}).encode()
    url = scripted.add(
        "capture-query", Script(status=400, parts=[body], content_type="application/json")
    )
    with (
        openai.OpenAI(
            base_url=url,
            api_key="unused",
            max_retries=0,
            default_query={"key": KEY},
            http_client=nito_nb.httpx_client(),
        ) as c,
        pytest.raises(openai.BadRequestError),
    ):
        c.chat.completions.create(
            model="any", messages=MESSAGES, stream=True, extra_body={"note": f"x-{KEY}-x"}
        )
    ours = nito_nb.last()
    assert ours.request["base_url"] == url and ours.request["params"]["note"] == "x-[redacted]-x"
    key_absent(ours, tmp_path)


def test_a_key_echoed_in_the_body_reaches_the_sdk_but_not_the_log(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    # A gateway that quotes the key in a mid-stream error event.
    from conftest import chunk_line

    error = json.dumps({"error": {"message": f"key {KEY} revoked", "code": 401}}).encode()
    url = scripted.add(
        "capture-echo",
        Script(
            parts=[chunk_line({"role": "assistant", "content": "Hi"}), b"data: " + error + b"\n\n"]
        ),
    )
    with (
        openai.OpenAI(
            base_url=url, api_key=KEY, max_retries=0, http_client=nito_nb.httpx_client()
        ) as c,
        pytest.raises(openai.APIError, match=KEY),
    ):  # the SDK's bytes are untouched
        for _ in create(c, "any"):
            pass
    ours = nito_nb.last()
    assert (
        ours.status == "error"
        and ours.error["message"] == "key [redacted] revoked"
        and ours.content == "Hi"
    )
    key_absent(ours, tmp_path)
