"""The embedded simulator: pure scenarios, the ASGI app over loopback, and nito_nb's client on it.

Every stream is checked twice: by a small docs/PROTOCOL.md checker written here, and by nito_nb's own
accumulator (no anomalies, the expected content). `tests/test_sim_openai.py` checks the same
scenarios with the openai SDK as an independent peer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb
from nito_nb import sim
from nito_nb._core.sse import SSEDecoder
from nito_nb.sim import _options, _pacing, _reply, _request, _scenarios, _texts, _writer
from nito_nb.sim import _recordings as _replay

# The real recordings (tests/data/real, with their sources).
FIXTURES = Path(__file__).parent / "data" / "real"
FAST: dict[str, Any] = {"tps": 0}
STREAMING_MODELS = [
    "sim/echo",
    "sim/chat",
    "sim/reasoning",
    "sim/mistral",
    "sim/tools",
    "sim/websearch",
    "sim/free",
    "sim/slow",
    "sim/bigchunk",
    "sim/long",
]
FAULT_MODELS = ["sim/error-midstream", "sim/drop", "sim/stall", "sim/garbage"]
HTTP_MODELS = {
    "sim/http-401": 401,
    "sim/http-402": 402,
    "sim/http-429": 429,
    "sim/http-500-html": 500,
    "sim/http-503": 503,
}
# The engine retries 429 and 5xx by default; the error tests want the first answer.
NO_RETRY = nito_nb.Client(max_retries=0)


@pytest.fixture(scope="module", autouse=True)
def _close_no_retry() -> Iterator[None]:
    # A client left open until exit is closed by the garbage collector, with an unclosed-socket
    # ResourceWarning after pytest has finished.
    yield
    NO_RETRY.close()


# Options that keep every scenario quick in tests.
QUICK: dict[str, Any] = {
    "tps": 0,
    "think_s": 0.05,
    "keepalive_s": 0.01,
    "stall_s": 0.05,
    "chunks": 2000,
    "retry_after": 0,
}


def body_for(model: str, prompt: str = "Hello, simulator!", **extra: Any) -> dict[str, Any]:
    sim_options = {**QUICK, **extra.pop("sim", {})}
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "sim": sim_options,
        **extra,
    }


# --------------------------------------------------------------------------------------------
# A docs/PROTOCOL.md checker, independent of nito_nb's accumulator


def sse_data(body: bytes) -> list[str]:
    """The data fields of an SSE body (the simulator sends one `data:` line per event)."""
    decoder = SSEDecoder()
    return [event.data for event in decoder.decode(body) + decoder.flush() if not event.is_comment]


def check_protocol(body: bytes, *, allow_garbage: bool = False) -> dict[str, Any]:
    """Assert the stream follows docs/PROTOCOL.md; return what it says (content, usage, ...)."""
    data = sse_data(body)
    assert data[-1] == "[DONE]", "a complete stream ends with data: [DONE]"
    chunks = []
    for text in data[:-1]:
        try:
            chunks.append(json.loads(text))
        except ValueError:
            assert allow_garbage, f"not JSON: {text[:80]!r}"
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1 and ids.pop().startswith("gen-sim-")
    result: dict[str, Any] = {"content": "", "reasoning": "", "tool_calls": {}, "usage": None}
    finished = False
    roles = 0
    for i, chunk in enumerate(chunks):
        assert chunk["object"] == "chat.completion.chunk"
        assert isinstance(chunk["created"], int) and isinstance(chunk["model"], str)
        if "usage" in chunk:
            assert chunk["choices"] == [] and finished and i == len(chunks) - 1
            result["usage"] = chunk["usage"]
            continue
        (choice,) = chunk["choices"]
        assert choice["index"] == 0 and "finish_reason" in choice
        delta = choice["delta"]
        if "role" in delta:
            roles += 1
            assert i == 0 and delta["role"] == "assistant"
        assert not finished, "nothing comes after the terminal chunk but the usage chunk"
        content = delta.get("content") or ""
        if isinstance(content, list):  # sim/mistral: Mistral's parts, one per chunk
            (part,) = content
            if part["type"] == "thinking":
                result["reasoning"] += "".join(t["text"] for t in part["thinking"])
            else:
                result["content"] += part["text"]
        else:
            result["content"] += content
        for detail in delta.get("reasoning_details") or []:
            text = detail.get("text") or detail.get("summary") or ""
            result["reasoning"] += text
            # As real gateways send it: the readable text also in `reasoning` (a proxy such as
            # LiteLLM drops a chunk whose delta has only reasoning_details).
            assert delta.get("reasoning") == (text or None), delta
        for fragment in delta.get("tool_calls") or []:
            call = result["tool_calls"].setdefault(fragment["index"], {"arguments": ""})
            if "id" in fragment:
                call.update(id=fragment["id"], name=fragment["function"]["name"])
            call["arguments"] += fragment["function"].get("arguments") or ""
        for key in ("web_search", "free_tier", "error"):
            if key in chunk:
                result[key] = chunk[key]
        if choice["finish_reason"] is not None:
            finished = True
            result["finish_reason"] = choice["finish_reason"]
    assert roles == 1 and finished
    usage = result["usage"]
    if usage is not None:
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert usage["completion_tokens_details"]["reasoning_tokens"] <= usage["completion_tokens"]
        assert usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"]
        assert usage["cost"] > 0
    return result


def events_of(body: dict[str, Any], env: dict[str, str] | None = None) -> list[_reply.Event]:
    request = _request.parse_request(body, env or {})
    assert isinstance(request, _request.SimRequest)
    reply = _scenarios.scenario(request, created=1_751_299_200)
    assert isinstance(reply, _reply.StreamReply)
    return list(reply.events)


def bytes_of(events: list[_reply.Event]) -> bytes:
    return b"".join(e.data for e in events)


# --------------------------------------------------------------------------------------------
# Pure scenarios (no server)


@settings(deadline=None)
@given(st.text())
def test_tokenize_concatenates_back_to_the_text(text: str) -> None:
    assert "".join(_writer.tokenize(text)) == text


@pytest.mark.parametrize("model", [*STREAMING_MODELS, "sim/stall", "sim/garbage"])
def test_every_streaming_scenario_follows_the_protocol(model: str) -> None:
    events = events_of(body_for(model))
    result = check_protocol(bytes_of(events), allow_garbage=model == "sim/garbage")
    usage = result["usage"]
    tokens = [e for e in events if e.kind == "token"]
    assert result["finish_reason"] == ("tool_calls" if model == "sim/tools" else "stop")
    if model not in ("sim/bigchunk", "sim/tools"):
        # One token per token-bearing chunk (tool-call starts carry none).
        assert usage["completion_tokens"] == len(tokens)
    if model == "sim/echo":
        assert result["content"] == "Hello, simulator!"


def test_the_same_seed_gives_the_same_bytes_and_another_seed_other_content() -> None:
    one = bytes_of(events_of(body_for("sim/chat", seed=7)))
    assert one == bytes_of(events_of(body_for("sim/chat", seed=7)))
    other = check_protocol(bytes_of(events_of(body_for("sim/chat", seed=8))))
    assert other["content"] != check_protocol(one)["content"]


def test_chat_has_markdown_lists_code_a_table_and_non_ascii() -> None:
    for seed in (0, 1):
        content = check_protocol(bytes_of(events_of(body_for("sim/chat", seed=seed))))["content"]
        assert "\n- " in content and "\n1. " in content and "```python\n" in content
        assert "| --- |" in content and any(ord(ch) > 0x2000 for ch in content)


def test_reasoning_has_text_summary_and_encrypted_details_before_the_content() -> None:
    chunks = [json.loads(d) for d in sse_data(bytes_of(events_of(body_for("sim/reasoning"))))[:-1]]
    kinds = []
    for chunk in chunks:
        for choice in chunk["choices"]:
            for detail in choice["delta"].get("reasoning_details") or []:
                kinds.append(detail["type"])
            if choice["delta"].get("content"):
                kinds.append("content")
    order = list(dict.fromkeys(kinds))
    assert order == ["reasoning.text", "reasoning.summary", "reasoning.encrypted", "content"]
    assert kinds.count("reasoning.encrypted") == 1


def test_reasoning_exclude_sends_no_reasoning() -> None:
    body = body_for("sim/reasoning", reasoning={"exclude": True})
    result = check_protocol(bytes_of(events_of(body)))
    assert result["reasoning"] == "" and result["content"]
    assert result["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0


WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
SEARCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={"content": JSON, "tool_call_id": JSON, "tool_calls": JSON},
)
BODY = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(list(sim.SIM_MODELS)) | JSON,
        "messages": st.lists(MESSAGE, max_size=3) | JSON,
        "stream": st.booleans(),
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}) | JSON,
        "max_tokens": st.integers(-1, 50) | JSON,
        "stop": st.lists(st.text(max_size=3), max_size=2) | JSON,
        "tools": st.lists(JSON, max_size=2) | st.just([WEATHER]),
        "tool_choice": JSON,
        "reasoning": JSON,
        "seed": st.integers(0, 5) | JSON,
        "sim": st.fixed_dictionaries({}, optional={"chunks": st.integers(0, 50), "tps": JSON}),
        "response_format": JSON
        | st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "json_object", "json_schema"])},
            optional={
                "json_schema": st.fixed_dictionaries(
                    {"name": st.sampled_from(["answer", "bad name", ""]) | JSON},
                    optional={
                        "schema": JSON | st.just(WEATHER["function"]["parameters"]),
                        "strict": JSON,
                    },
                )
                | JSON
            },
        ),
    },
)


@settings(max_examples=60, deadline=None)
@given(BODY)
def test_any_body_gets_a_reply_and_never_an_exception(body: dict[str, Any]) -> None:
    request = _request.parse_request(body, {})
    if isinstance(request, _reply.ErrorReply):
        assert 400 <= request.status < 500 and json.loads(request.body)["error"]["message"]
        return
    reply = _scenarios.scenario(request, created=0)
    if isinstance(reply, _reply.StreamReply):
        events = list(itertools.islice(reply.events, 400))
        times = [t for t, _ in _pacing.schedule(events, _pacing.Pacing(0.1, 50, 0.5, 0))]
        assert times == sorted(times)


def test_tools_one_call_from_one_tool_with_arguments_in_many_fragments() -> None:
    events = events_of(body_for("sim/tools", tools=[WEATHER]))
    result = check_protocol(bytes_of(events))
    (call,) = result["tool_calls"].values()
    assert call["name"] == "get_weather" and set(json.loads(call["arguments"])) == {"city", "days"}
    assert len([e for e in events if e.kind == "token"]) > 5


def test_tools_parallel_calls_interleaved_on_request() -> None:
    body = body_for("sim/tools", tools=[WEATHER, SEARCH], sim={"interleave": True})
    data = sse_data(bytes_of(events_of(body)))
    indexes = [
        fragment["index"]
        for chunk in map(json.loads, data[:-1])
        for choice in chunk["choices"]
        for fragment in choice["delta"].get("tool_calls") or []
    ]
    assert indexes[:2] == [0, 1] and indexes != sorted(indexes)
    result = check_protocol(bytes_of(events_of(body)))
    assert [c["name"] for c in result["tool_calls"].values()] == ["get_weather", "search"]
    assert all(json.loads(c["arguments"]) for c in result["tool_calls"].values())


def test_tools_answers_with_content_after_a_tool_message() -> None:
    body = body_for("sim/tools", tools=[WEATHER])
    body["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 °C, sunny"},
    ]  # fmt: skip
    result = check_protocol(bytes_of(events_of(body)))
    assert result["finish_reason"] == "stop" and "18 °C, sunny" in result["content"]
    assert result["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_max_tokens_cuts_with_finish_reason_length_and_stop_cuts_the_content() -> None:
    result = check_protocol(bytes_of(events_of(body_for("sim/chat", max_tokens=10))))
    assert result["finish_reason"] == "length" and result["usage"]["completion_tokens"] == 10
    result = check_protocol(bytes_of(events_of(body_for("sim/echo", "one two STOP three",
                                                        stop=["STOP"]))))  # fmt: skip
    assert result["content"] == "one two " and result["finish_reason"] == "stop"
    result = check_protocol(bytes_of(events_of(body_for("sim/long", max_tokens=100))))
    assert result["finish_reason"] == "length" and result["usage"]["completion_tokens"] == 100


def test_usage_only_when_asked_for() -> None:
    body = body_for("sim/echo")
    del body["stream_options"]
    assert check_protocol(bytes_of(events_of(body)))["usage"] is None


def test_long_is_about_four_bytes_a_chunk_and_settable() -> None:
    events = events_of(body_for("sim/long", sim={"chunks": 50_000}))
    tokens = [e for e in events if e.kind == "token"]
    assert len(tokens) == 50_000
    content = check_protocol(bytes_of(events))["content"]
    assert 180_000 < len(content.encode()) < 230_000 and "\n\n**Part" in content


def test_bigchunk_sends_one_mebibyte_delta() -> None:
    events = events_of(body_for("sim/bigchunk"))
    biggest = max(len(e.data) for e in events)
    assert biggest > 1 << 20
    assert len(check_protocol(bytes_of(events))["content"]) > 1 << 20


def test_fault_scenarios_shape() -> None:
    error = events_of(body_for("sim/error-midstream"))
    result = check_protocol(bytes_of(error))
    assert result["finish_reason"] == "error" and result["error"]["code"] == 502
    assert result["content"]
    drop = events_of(body_for("sim/drop"))
    assert drop[-1].kind == "drop" and b"[DONE]" not in bytes_of(drop)
    stall = events_of(body_for("sim/stall", sim={"stall_s": 12.5}))
    assert [e.seconds for e in stall if e.kind == "pause"] == [12.5]


def test_options_validation_and_environment() -> None:
    request = _request.parse_request(body_for("sim/chat", sim={}), {"NITO_SIM_TPS": "5"})
    assert isinstance(request, _request.SimRequest) and request.options.tps == 0  # the body wins
    body = body_for("sim/chat")
    del body["sim"]
    request = _request.parse_request(body, {"NITO_SIM_TPS": "0"})
    assert isinstance(request, _request.SimRequest)
    assert request.options.tps == 0 and request.options.ttft_ms == 0
    request = _request.parse_request(body, {"NITO_SIM_TPS": "0", "NITO_SIM_TTFT_MS": "50"})
    assert isinstance(request, _request.SimRequest) and request.options.ttft_ms == 50
    assert request.options.think_s == 0 and request.options.stall_s == 60
    request = _request.parse_request(body, {})
    assert isinstance(request, _request.SimRequest) and request.options.tps == _options.DEFAULT_TPS
    assert request.options.think_s > 1
    for bad in ({"tps": "fast"}, {"tps": -1}, {"nope": 1}, {"chunks": 1.5}):
        reply = _request.parse_request(body_for("sim/chat", sim=bad), {})
        assert isinstance(reply, _reply.ErrorReply) and reply.status == 400
    reply = _request.parse_request(body, {"NITO_SIM_TPS": "fast"})
    assert isinstance(reply, _reply.ErrorReply) and b"NITO_SIM_TPS" in reply.body


def test_schedule_paces_tokens_after_the_time_to_first_token() -> None:
    events = events_of(
        body_for("sim/echo", "a b c d e f g h i j", sim={"tps": 10, "ttft_ms": 2500})
    )
    pieces = list(_pacing.schedule(events, _pacing.Pacing(2.5, 10, 0.5, 0), keepalive_s=1.0))
    keepalives = [t for t, data in pieces if data == _reply.KEEPALIVE]
    assert keepalives == [0.0, 1.0, 2.0]
    token_times = [t for (t, data), e in zip(pieces[3:], events, strict=False) if e.kind == "token"]
    assert token_times[0] == 2.5
    gaps = [b - a for a, b in itertools.pairwise(token_times)]
    assert all(0.05 - 1e-9 <= g <= 0.15 + 1e-9 for g in gaps)
    assert all(t == 0 for t, _ in _pacing.schedule(events, _pacing.Pacing(0, 0, 0.5, 0)))


def test_the_time_to_first_token_comes_before_any_chunk() -> None:
    events = events_of(body_for("sim/websearch"))  # its first chunk carries no token
    pieces = list(_pacing.schedule(events, _pacing.Pacing(0.5, 0, 0, 0)))
    first_data = next(t for t, data in pieces if data and data.startswith(b"data:"))
    assert pieces[0] == (0.0, _reply.KEEPALIVE) and first_data == 0.5


def test_long_with_a_stop_sequence_cuts_exactly_there() -> None:
    result = check_protocol(bytes_of(events_of(body_for("sim/long", stop=["**Part 3."]))))
    assert "**Part 2.**" in result["content"] and "Part 3" not in result["content"]
    assert result["content"].endswith("\n\n") and result["finish_reason"] == "stop"


def test_sse_events_round_trip_and_replay_keeps_the_bytes() -> None:
    for path in sorted(FIXTURES.glob("*.sse")):
        body = path.read_bytes()
        assert b"".join(e.data for e in _replay.sse_events(body)) == body
    sources = (FIXTURES / "SOURCES.tsv").read_text("utf-8")
    assert _replay.recorded_status(sources, "openrouter-http-error-1.sse") == (
        429,
        "application/json",
    )
    assert _replay.recorded_status(sources, "openai-content-1.sse") == (
        200,
        "text/event-stream; charset=utf-8",
    )
    assert _replay.recorded_status(sources, "nope.sse") is None


# --------------------------------------------------------------------------------------------
# The app over loopback


@pytest.fixture(scope="session")
def sim_url() -> str:
    return sim.ensure_server()


def with_token() -> dict[str, str]:
    """The header another client sends to the simulator nito_nb started: its process's token."""
    return {"Authorization": f"Bearer {sim.token()}"}


@pytest.fixture(scope="session")
def http(sim_url: str):
    with httpx.Client(base_url=sim_url, timeout=30, headers=with_token()) as client:
        yield client


def post(http: httpx.Client, body: Any) -> httpx.Response:
    return http.post("/chat/completions", json=body)


def test_ensure_server_starts_once_on_loopback(sim_url: str) -> None:
    assert sim_url.startswith("http://127.0.0.1:") and sim_url.endswith("/v1")
    assert sim.ensure_server() == sim_url


def test_public_names() -> None:
    assert sim.__all__ == sorted(sim.__all__)
    assert sim.__all__ == [
        "SIM_MODELS",
        "SimServer",
        "app",
        "create_app",
        "ensure_process",
        "ensure_server",
        "serve",
        "token",
    ]
    assert all(hasattr(sim, name) and name in dir(sim) for name in sim.__all__)


def test_app_is_the_asgi_app_even_after_the_server_started() -> None:
    # `nito_nb.sim._app` is also the name of a submodule: importing it (create_app,
    # ensure_server) must not turn `sim.app` into that module.
    from starlette.applications import Starlette

    sim.create_app()
    assert isinstance(sim.app, Starlette)
    assert sim.app is sim.app


@pytest.mark.spawns
def test_import_is_cheap() -> None:
    code = "import sys, nito_nb.sim; print('uvicorn' in sys.modules, 'starlette' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_models_lists_the_scenarios(http: httpx.Client) -> None:
    listing = http.get("/models").json()
    assert listing["object"] == "list"
    assert {m["id"] for m in listing["data"]} == set(sim.SIM_MODELS)
    assert all(m["object"] == "model" and m["description"] for m in listing["data"])
    assert http.get("/models/sim/chat").json()["id"] == "sim/chat"
    assert http.get("/models/sim/nope").status_code == 404


def test_the_simulator_page_lists_every_model_and_option() -> None:
    # docs/SIMULATOR.md's tables: each model in the first column of the models' table, each
    # `sim` option in the options' table (a new one is documented, a gone one leaves).
    page = (Path(__file__).parents[1] / "docs" / "SIMULATOR.md").read_text(encoding="utf-8")
    tables = [[line.split(" | ")[0] for line in block.splitlines() if line.startswith("| `")]
              for block in page.split("\n## ")]  # fmt: skip
    (models,) = [t for t in tables if any("sim/echo" in cell for cell in t)]
    (options,) = [t for t in tables if any("ttft_ms" in cell for cell in t)]

    def named(cells: list[str]) -> set[str]:
        return {name for cell in cells for name in re.findall(r"`([^`]+)`", cell)}

    assert named(models) == set(sim.SIM_MODELS)
    assert named(options) == {f.name for f in dataclasses.fields(_options.SimOptions)}


@pytest.mark.parametrize("model", [*STREAMING_MODELS, "sim/stall", "sim/garbage"])
def test_streams_over_http_follow_the_protocol(http: httpx.Client, model: str) -> None:
    with http.stream("POST", "/chat/completions", json=body_for(model)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        body = response.read()
    check_protocol(body, allow_garbage=model == "sim/garbage")


CHAT = {"model": "sim/chat", "messages": [{"role": "user"}]}


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[]", 400, "JSON object"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), 400, "`model`"),
        (json.dumps({"model": "sim/chat"}).encode(), 400, "`messages`"),
        (json.dumps({"model": "sim/chat", "messages": ["x"]}).encode(), 400, "messages[0]"),
        (json.dumps({**CHAT, "max_tokens": 0}).encode(), 400, "max_tokens"),
        (json.dumps({"model": "sim/zzz", "messages": [{"role": "user"}]}).encode(), 404, "zzz"),
        (json.dumps({"model": "gpt-4o", "messages": [{"role": "user"}]}).encode(), 404, "gpt-4o"),
    ],
)
def test_bad_requests_get_a_json_4xx(http: httpx.Client, body: bytes, status: int, words: str):
    response = http.post(
        "/chat/completions", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == status and words in error["message"]


def test_unknown_routes_and_methods_get_json_errors(http: httpx.Client) -> None:
    assert http.get("/nothing").json()["error"]["code"] == 404
    response = http.get("/chat/completions")
    assert response.status_code == 405 and response.json()["error"]["code"] == 405


def test_a_required_key_is_checked() -> None:
    with sim.SimServer(api_key="sekrit") as url:
        with httpx.Client(base_url=url) as client:
            body = body_for("sim/echo")
            missing = client.post("/chat/completions", json=body)
            assert (
                missing.status_code == 401 and "Authorization" in missing.json()["error"]["message"]
            )
            wrong = client.post(
                "/chat/completions", json=body, headers={"Authorization": "Bearer x"}
            )
            assert wrong.status_code == 401 and wrong.json()["error"]["code"] == 401
            assert client.get("/models").status_code == 401
            ok = client.post(
                "/chat/completions", json=body, headers={"Authorization": "Bearer sekrit"}
            )
            assert ok.status_code == 200 and check_protocol(ok.content)["content"]
        # nito_nb with an explicit base_url sends the key
        s = nito_nb.stream("hi there", model="sim/echo", base_url=url, api_key="sekrit", sim=FAST)
        assert s.content == "hi there"
        with pytest.raises(nito_nb.AuthenticationError):
            nito_nb.stream("hi", model="sim/echo", base_url=url, api_key="wrong", sim=FAST)


@pytest.mark.parametrize(("model", "status"), HTTP_MODELS.items())
def test_http_error_scenarios(http: httpx.Client, model: str, status: int) -> None:
    response = post(http, body_for(model, sim={"retry_after": 3}))
    assert response.status_code == status
    if model == "sim/http-500-html":
        assert response.headers["content-type"] == "text/html"
        assert b"\r\n" in response.content and b"<html>" in response.content
        return
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == status and "simulated" in error["message"]
    if status == 429:
        assert response.headers["retry-after"] == "3"
        assert error["metadata"]["retry_after_seconds"] == 3


def test_drop_is_an_incomplete_body_not_a_clean_end(http: httpx.Client) -> None:
    received = b""
    with pytest.raises(httpx.RemoteProtocolError):
        with http.stream("POST", "/chat/completions", json=body_for("sim/drop")) as response:
            for data in response.iter_bytes():
                received += data
    assert b"content" in received and b"[DONE]" not in received


def test_non_streaming_requests_get_a_chat_completion(http: httpx.Client) -> None:
    body = body_for("sim/tools", tools=[WEATHER, SEARCH])
    body["stream"] = False
    completion = post(http, body).json()
    assert completion["object"] == "chat.completion"
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and len(choice["message"]["tool_calls"]) == 2
    assert completion["usage"]["completion_tokens"] > 0
    body = body_for("sim/error-midstream")
    del body["stream"]
    response = post(http, body)
    assert response.status_code == 502 and response.json()["error"]["code"] == 502


# --------------------------------------------------------------------------------------------
# Pacing over the wire (relative times only)


def test_time_to_first_token_and_keepalives(http: httpx.Client) -> None:
    t0 = time.perf_counter()
    first_content = None
    comments = 0
    body = body_for("sim/echo", "one two three", sim={"tps": 0, "ttft_ms": 300})
    with http.stream("POST", "/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if line.startswith(":"):
                comments += 1
            elif "content" in line and first_content is None:
                first_content = time.perf_counter() - t0
    assert first_content is not None and first_content >= 0.25 and comments >= 1


def test_tokens_per_second_spreads_the_stream(http: httpx.Client) -> None:
    prompt = " ".join(["word"] * 20)
    t0 = time.perf_counter()
    post(http, body_for("sim/echo", prompt, sim={"tps": 100, "ttft_ms": 0, "jitter": 0}))
    assert time.perf_counter() - t0 >= 0.15  # 19 gaps of 10 ms


def test_environment_sets_the_default_pacing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    t0 = time.perf_counter()
    s = nito_nb.stream("hi", model="sim/chat")  # no sim options: the environment's pacing
    s.wait()
    assert s.status == "done" and time.perf_counter() - t0 < 2.0  # ~4 s when paced by default


def test_slow_thinks_with_keepalive_comments() -> None:
    s = nito_nb.stream("hi", model="sim/slow", sim={**FAST, "think_s": 0.3, "keepalive_s": 0.05})
    s.wait()
    comments = [e for e in s.log if e.kind == "comment"]
    assert len(comments) >= 5 and s.status == "done" and "42" in s.content
    assert s.ttft is not None and s.ttft >= 0.25


# --------------------------------------------------------------------------------------------
# nito_nb's client over the simulator


@pytest.mark.parametrize("model", STREAMING_MODELS)
def test_every_scenario_through_nito_nb(model: str) -> None:
    kwargs: dict[str, Any] = {"sim": QUICK}
    if model == "sim/tools":
        kwargs["tools"] = [WEATHER, SEARCH]
    s = nito_nb.stream("Hello, simulator!", model=model, **kwargs)
    s.wait()
    assert s.status == "done" and s.done and s.anomalies == []
    assert s.role == "assistant" and (s.id or "").startswith("gen-sim-")
    assert s.usage is not None and s.usage["completion_tokens"] > 0
    if model == "sim/tools":
        assert s.finish_reason == "tool_calls"
        assert [c.name for c in s.tool_calls] == ["get_weather", "search"]
        assert all(c.valid_json for c in s.tool_calls)
    else:
        assert s.finish_reason == "stop" and s.content
    if model == "sim/echo":
        assert s.content == "Hello, simulator!"
    if model == "sim/reasoning":
        assert "step by step" in s.reasoning or "restate" in s.reasoning
        types = {d.get("type") for d in s.reasoning_details}
        assert types == {"reasoning.text", "reasoning.summary", "reasoning.encrypted"}
        assert s.usage["completion_tokens_details"]["reasoning_tokens"] > 0
    if model == "sim/websearch":
        assert s.web_search is not None and s.web_search["results"]
    if model == "sim/free":
        assert s.free_tier is not None and s.free_tier["eligible"] is True


def test_a_tool_round_trip_through_nito_nb() -> None:
    first = nito_nb.stream("Weather in Paris?", model="sim/tools", tools=[WEATHER], sim=FAST)
    first.wait()
    (call,) = first.tool_calls
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        first.message,
        {"role": "tool", "tool_call_id": call.id, "content": "18 °C"},
    ]
    second = nito_nb.stream(messages, model="sim/tools", tools=[WEATHER], sim=FAST)
    assert "18 °C" in second.content and second.finish_reason == "stop"


def test_error_midstream_raises_and_keeps_what_arrived() -> None:
    s = nito_nb.stream("hi", model="sim/error-midstream", sim=FAST)
    with pytest.raises(nito_nb.MidStreamError) as caught:
        for _ in s:
            pass
    assert caught.value.stream is s and s.status == "error"
    assert s.content.startswith("## Streaming")
    assert s.error is not None and s.error["code"] == 502
    assert "disconnected" in str(caught.value)


def test_drop_raises_truncated_and_keeps_what_arrived() -> None:
    s = nito_nb.stream("hi", model="sim/drop", sim=FAST)
    with pytest.raises(nito_nb.StreamTruncatedError) as caught:
        for _ in s:
            pass
    assert caught.value.stream is s and s.status == "truncated" and not s.done
    assert s.content.startswith("## Streaming") and s.n_chunks == 40


def test_stall_times_out_and_keeps_what_arrived() -> None:
    s = nito_nb.stream(
        "hi", model="sim/stall", sim={**FAST, "stall_s": 30}, timeout={"between_chunks": 0.3}
    )
    t0 = time.perf_counter()
    with pytest.raises(nito_nb.StreamTimeoutError) as caught:
        for _ in s:
            pass
    assert time.perf_counter() - t0 < 10
    assert caught.value.stream is s and s.content.startswith("## Streaming") and s.n_chunks == 30


def test_garbage_is_noted_and_the_stream_carries_on() -> None:
    s = nito_nb.stream("hi", model="sim/garbage", sim=FAST)
    s.wait()
    assert s.status == "done" and [a.kind for a in s.anomalies] == ["bad-data"]
    clean = nito_nb.stream("hi", model="sim/chat", sim=FAST)
    assert s.content == clean.content


@pytest.mark.parametrize(
    ("model", "error"),
    [
        ("sim/http-401", nito_nb.AuthenticationError),
        ("sim/http-402", nito_nb.PaymentRequiredError),
        ("sim/http-429", nito_nb.RateLimitError),
        ("sim/http-500-html", nito_nb.ServerError),
        ("sim/http-503", nito_nb.ServerError),
        ("sim/unknown", nito_nb.NotFoundError),
    ],
)
def test_http_errors_through_nito_nb(model: str, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        NO_RETRY.stream("hi", model=model, sim={"retry_after": 0})
    assert "simulated" in str(caught.value) or model in ("sim/http-500-html", "sim/unknown")
    if model == "sim/http-429":
        assert isinstance(caught.value, nito_nb.RateLimitError)
        assert caught.value.retry_after == 0


# --------------------------------------------------------------------------------------------
# Replay


def test_replay_of_a_recording_reproduces_its_content(http: httpx.Client) -> None:
    for name in ("openrouter-reasoning-tools-parallel-1.sse", "openai-content-1.sse"):
        path = FIXTURES / name
        body = {**body_for("sim/replay"), "sim": {"replay": str(path), "speed": 0}}
        with http.stream("POST", "/chat/completions", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == (
                "text/event-stream; charset=utf-8"
                if name.startswith("openai")
                else "text/event-stream"
            )
            replayed = response.read()
        assert replayed == path.read_bytes()
        s = nito_nb.stream("x", model="sim/replay", sim={"replay": str(path), "speed": 0})
        expected = nito_nb.read_sse(path)
        assert s.content == expected.content and s.reasoning == expected.reasoning
        assert [c.arguments for c in s.tool_calls] == [c.arguments for c in expected.tool_calls]


def test_replay_of_a_recorded_http_error(http: httpx.Client) -> None:
    path = FIXTURES / "openrouter-http-error-1.sse"
    response = post(http, {**body_for("sim/replay"), "sim": {"replay": str(path)}})
    assert response.status_code == 429 and response.headers["content-type"] == "application/json"
    assert response.content == path.read_bytes()
    override = {"replay": str(FIXTURES / "openai-content-1.sse"), "status": 503,
                "content_type": "text/plain"}  # fmt: skip
    response = post(http, {**body_for("sim/replay"), "sim": override})
    assert response.status_code == 503 and response.headers["content-type"] == "text/plain"
    with pytest.raises(nito_nb.RateLimitError):
        NO_RETRY.stream("x", model="sim/replay", sim={"replay": str(path)})


def test_replay_refuses_what_is_not_a_recording(http: httpx.Client, replay_dir: Path) -> None:
    for replay, status in [
        (None, 400),
        (str(replay_dir / "missing.sse"), 404),
        (str(replay_dir), 400),
        (__file__, 400),
        (str(replay_dir / "dir.sse"), 404),
    ]:
        if replay and replay.endswith("dir.sse"):
            Path(replay).mkdir()
        options = {} if replay is None else {"replay": replay}
        response = post(http, {**body_for("sim/replay"), "sim": options})
        assert response.status_code == status, replay
        assert response.json()["error"]["code"] == status


def test_replay_of_a_log_reproduces_content_and_timing(replay_dir: Path) -> None:
    prompt = " ".join(f"w{i}" for i in range(12))
    original = nito_nb.stream(
        prompt, model="sim/echo", sim={"tps": 20, "ttft_ms": 100, "jitter": 0}
    )
    original.wait()
    path = replay_dir / "echo.jsonl"
    original.save(path)

    def gaps(s: nito_nb.Stream) -> list[float]:
        times = [e.t for e in s.log if e.kind == "chunk"]
        return [b - a for a, b in itertools.pairwise(times)]

    replayed = nito_nb.stream("x", model="sim/replay", sim={"replay": str(path), "speed": 1.0})
    replayed.wait()
    assert replayed.content == original.content == prompt
    assert replayed.status == "done" and replayed.usage == original.usage
    want, got = gaps(original), gaps(replayed)
    # Relative checks only (the machine may be busy): the same number of gaps, the same median
    # gap and the same total within a tolerance.
    assert len(want) == len(got)
    assert abs(statistics.median(got) - statistics.median(want)) < 0.5 * statistics.median(want)
    assert 0.7 * sum(want) <= sum(got) <= 1.5 * sum(want) + 0.05

    fast = nito_nb.stream("x", model="sim/replay", sim={"replay": str(path), "speed": 0})
    fast.wait()
    assert fast.content == prompt and fast.elapsed < original.elapsed
    double = nito_nb.stream("x", model="sim/replay", sim={"replay": str(path), "speed": 2.0})
    double.wait()
    assert sum(gaps(double)) < 0.75 * sum(want)


def test_replay_of_a_logged_http_error_keeps_status_type_and_retry_after(replay_dir: Path) -> None:
    with pytest.raises(nito_nb.RateLimitError) as caught:
        NO_RETRY.stream("hi", model="sim/http-429", sim={"retry_after": 0})
    assert caught.value.stream is not None
    path = replay_dir / "429.jsonl"
    caught.value.stream.save(path)
    with pytest.raises(nito_nb.RateLimitError) as replayed:
        NO_RETRY.stream("x", model="sim/replay", sim={"replay": str(path), "speed": 0})
    assert replayed.value.retry_after == 0 and replayed.value.status_code == 429
    assert replayed.value.message == caught.value.message


def test_replay_of_a_truncated_log_cuts_the_connection(replay_dir: Path) -> None:
    s = nito_nb.stream("hi", model="sim/drop", sim=FAST, raise_errors=False)
    s.wait()
    path = replay_dir / "drop.jsonl"
    s.save(path)
    replayed = nito_nb.stream("x", model="sim/replay", sim={"replay": str(path), "speed": 0},
                              raise_errors=False)  # fmt: skip
    replayed.wait()
    assert replayed.status == "truncated" and replayed.content == s.content


# --------------------------------------------------------------------------------------------
# Load


def test_fifty_concurrent_streams(sim_url: str) -> None:
    async def one(client: httpx.AsyncClient, i: int) -> str:
        body = body_for("sim/echo", f"stream {i}: " + "lorem ipsum " * 50, sim={"tps": 2000})
        async with client.stream("POST", "/chat/completions", json=body) as response:
            return check_protocol(await response.aread())["content"]

    async def main() -> list[str]:
        limits = httpx.Limits(max_connections=50)
        async with httpx.AsyncClient(
            base_url=sim_url, timeout=30, limits=limits, headers=with_token()
        ) as client:
            return await asyncio.gather(*(one(client, i) for i in range(50)))

    contents = asyncio.run(main())
    assert contents == [f"stream {i}: " + "lorem ipsum " * 50 for i in range(50)]


def test_fifty_concurrent_nito_nb_streams() -> None:
    async def one(i: int) -> nito_nb.AsyncStream:
        s = nito_nb.astream(f"hello {i}", model="sim/long", sim={"tps": 0, "chunks": 500})
        await s.wait()
        return s

    async def main() -> list[nito_nb.AsyncStream]:
        return await asyncio.gather(*(one(i) for i in range(50)))

    streams = asyncio.run(main())
    assert all(s.status == "done" and s.n_chunks >= 500 for s in streams)
    assert len({s.content for s in streams}) == 1


def test_long_at_full_speed(http: httpx.Client) -> None:
    body = body_for("sim/long", sim={"chunks": 50_000})
    t0 = time.perf_counter()
    with http.stream("POST", "/chat/completions", json=body) as response:
        size = sum(len(b) for b in response.iter_bytes())
    elapsed = time.perf_counter() - t0
    assert size > 50_000 * 100
    # A generous bound: the point is that nothing sleeps per chunk.
    assert elapsed < 10, elapsed


@pytest.mark.spawns
def test_cli_serves_standalone(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "NITO_SIM_TPS": "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "nito_nb.sim", "--port", str(port), "--api-key", "k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 15
        while True:
            try:
                response = httpx.get(url + "/models", headers={"Authorization": "Bearer k"})
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
        assert response.status_code == 200
        s = nito_nb.stream("over the CLI", model="sim/echo", base_url=url, api_key="k")
        assert s.content == "over the CLI"
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert f"http://127.0.0.1:{port}/v1" in output.decode()


def test_stopping_a_server_cuts_its_open_streams_at_once() -> None:
    server = sim.SimServer()
    url = server.start()
    s = nito_nb.stream(
        "hi",
        model="sim/stall",
        base_url=url,
        api_key=server.api_key,  # a key of its own, made for it
        sim={"tps": 0, "stall_s": 60},
        raise_errors=False,
    )
    chunks = iter(s)
    for _ in range(30):
        next(chunks)
    t0 = time.perf_counter()
    server.stop()
    assert time.perf_counter() - t0 < 3 and not server.running
    s.wait()
    assert s.status == "truncated" and s.n_chunks == 30
    assert repr(server).startswith("<SimServer stopped")


# --------------------------------------------------------------------------------------------
# Like a real gateway: fresh ids, reasoning text beside its details, parallel_tool_calls, n


def test_each_request_gets_its_own_id_and_the_seed_keeps_the_content() -> None:
    streams = [nito_nb.stream("hi", model="sim/chat", sim=FAST, seed=3) for _ in range(3)]
    for s in streams:
        s.wait()  # Stream.id does not read a lazy stream by itself
    assert len({s.id for s in streams}) == 3 and all(
        (s.id or "").startswith("gen-sim-") for s in streams
    )
    assert len({s.content for s in streams}) == 1 and streams[0].content


def test_reasoning_survives_a_proxy_that_drops_details_only_chunks() -> None:
    # LiteLLM knows no reasoning_details: it drops a chunk whose delta carries nothing else (but
    # the role), and passes the others on without them. The readable text must survive that.
    body = bytes_of(events_of(body_for("sim/reasoning")))
    kept = []
    for piece in (e.data for e in _replay.sse_events(body)):
        if piece.startswith(b"data: {"):
            chunk = json.loads(piece[6:])
            for choice in chunk["choices"]:
                delta = choice["delta"]
                delta.pop("reasoning_details", None)
                if not any(v is not None for k, v in delta.items() if k != "role"):
                    delta.clear()
            if (
                chunk["choices"]
                and not chunk["choices"][0]["delta"]
                and not chunk["choices"][0]["finish_reason"]
            ):
                continue
            piece = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        kept.append(piece)
    proxied = nito_nb.read_sse(b"".join(kept))
    assert proxied.reasoning == _texts.REASONING_TEXT + _texts.REASONING_SUMMARY
    assert proxied.content == nito_nb.read_sse(body).content == _texts.REASONING_ANSWER


def test_parallel_tool_calls_false_gives_one_call() -> None:
    both = check_protocol(bytes_of(events_of(body_for("sim/tools", tools=[WEATHER, SEARCH]))))
    one = check_protocol(
        bytes_of(
            events_of(body_for("sim/tools", tools=[WEATHER, SEARCH], parallel_tool_calls=False))
        )
    )
    assert len(both["tool_calls"]) == 2 and len(one["tool_calls"]) == 1
    s = nito_nb.stream(
        "hi", model="sim/tools", sim=FAST, tools=[WEATHER, SEARCH], parallel_tool_calls=False
    )
    assert [c.name for c in s.tool_calls] == ["get_weather"] and s.finish_reason == "tool_calls"


def test_n_choices_are_interleaved_and_only_choice_0_is_the_answer() -> None:
    data = sse_data(bytes_of(events_of(body_for("sim/echo", prompt="a b c", n=3))))
    chunks = [json.loads(d) for d in data[:-1]]
    indexes = [c["choices"][0]["index"] for c in chunks if c["choices"]]
    assert indexes[:6] == [0, 1, 2, 0, 1, 2] and sorted(set(indexes)) == [0, 1, 2]
    assert all(len(c["choices"]) == 1 for c in chunks if c["choices"])  # one choice per chunk
    roles = [
        c["choices"][0]["index"]
        for c in chunks
        if c["choices"] and "role" in c["choices"][0]["delta"]
    ]
    assert roles == [0, 1, 2]
    (usage,) = [c["usage"] for c in chunks if "usage" in c]
    assert usage["completion_tokens"] == 3 * 3 and data[-1] == "[DONE]"
    s = nito_nb.stream("a b c", model="sim/chat", sim=FAST, n=2)
    alone = nito_nb.stream("a b c", model="sim/chat", sim=FAST)
    # choice 0, nothing of choice 1 mixed in
    assert s.content == alone.content and s.status == "done"
    assert [a.kind for a in s.anomalies] == ["other-choices"]


def test_n_choices_without_streaming() -> None:
    response = httpx.post(
        sim.ensure_server() + "/chat/completions",
        headers=with_token(),
        json={**body_for("sim/echo", prompt="x y", n=2), "stream": False},
        timeout=30,
    )
    choices = response.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1]
    assert [c["message"]["content"] for c in choices] == ["x y", "x y"]


@pytest.mark.parametrize(
    ("field", "value"), [("n", 0), ("n", 99), ("n", "2"), ("parallel_tool_calls", "no")]
)
def test_bad_n_or_parallel_tool_calls_is_a_400(field: str, value: Any) -> None:
    reply = _request.parse_request(body_for("sim/echo", **{field: value}), {})
    assert isinstance(reply, _reply.ErrorReply) and reply.status == 400
    assert field in json.loads(reply.body)["error"]["message"]


def test_mistral_streams_content_as_parts() -> None:
    s = nito_nb.stream("hi", model="sim/mistral", sim=FAST)
    assert s.content == _texts.REASONING_ANSWER and s.reasoning == _texts.REASONING_TEXT
    assert s.anomalies == [] and s.usage["completion_tokens_details"]["reasoning_tokens"] > 0
    chunks = [json.loads(e.data) for e in s.log if e.kind == "chunk"]
    assert all(isinstance(c["choices"][0]["delta"]["content"], list) for c in chunks[1:-2])
    df = s.frame()
    assert df.nito.text().iloc[0] == s.content and df.nito.reasoning().iloc[0] == s.reasoning


def test_mistral_without_streaming_keeps_the_parts() -> None:
    response = httpx.post(
        sim.ensure_server() + "/chat/completions",
        headers=with_token(),
        json={**body_for("sim/mistral"), "stream": False},
        timeout=30,
    )
    (choice,) = response.json()["choices"]
    parts = choice["message"]["content"]
    assert {p["type"] for p in parts} == {"thinking", "text"}
    assert "".join(p["text"] for p in parts if p["type"] == "text") == _texts.REASONING_ANSWER


def test_every_choice_of_n_gets_its_own_answer() -> None:
    # sim/chat had two answer texts: the third choice of n=3 repeated the first (issue 33).
    import nito_nb

    s = nito_nb.stream("hi", model="sim/chat", n=4, sim={"tps": 0, "ttft_ms": 0})
    s.wait()
    texts = [choice.content for choice in s.choices]
    assert len(texts) == 4 and all(texts) and len(set(texts)) == 4
