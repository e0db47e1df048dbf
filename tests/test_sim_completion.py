"""The simulator's non-streaming answers and its replay, over loopback, against nito_nb's reading.

A non-streaming answer is the merge of what the stream would send (issue 30, item 8): for every
`sim/` model, the `chat.completion` says what nito_nb shows for the same request streamed
(content, reasoning, reasoning details merged per detail, refusal, tool calls, usage, finish
reason), shaped as the provider of that format shapes it, and the openai SDK's non-streaming
client reads it. A recording replayed is cut into events by nito_nb's own SSE decoder, whatever
its line endings (issue 29, item 4).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from test_sim import FIXTURES, HTTP_MODELS, QUICK, SEARCH, WEATHER, with_token

import nito_nb
from nito_nb import sim

PROMPT = "Hello, simulator!"
REPLAYED = FIXTURES / "openrouter-reasoning-tools-parallel-1.sse"
#: Quick, and a small big chunk: the comparison is the point here, not the size.
OPTIONS: dict[str, Any] = {**QUICK, "size": 4096}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.ensure_server(), timeout=60, headers=with_token()) as client:
        yield client


@pytest.fixture(scope="module")
def sdk() -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=sim.ensure_server(), api_key=sim.token(), max_retries=0) as client:
        yield client


def options_for(model: str) -> dict[str, Any]:
    return {**OPTIONS, "replay": str(REPLAYED), "speed": 0} if model == "sim/replay" else OPTIONS


def request_for(model: str, *, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": stream,
        "sim": options_for(model),
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if model == "sim/tools":
        body["tools"] = [WEATHER, SEARCH]
    return body


def as_stream(completion: dict[str, Any]) -> nito_nb.Stream:
    """A non-streaming answer read by nito_nb as a stream of one chunk: its message as the delta
    (the message's fields are the delta's), then its usage. What nito_nb shows for it."""
    (choice,) = completion["choices"]
    delta = dict(choice["message"])
    if delta.get("tool_calls"):
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(delta["tool_calls"])]
    chunk = {key: completion[key] for key in ("id", "created", "model")}
    events = [
        {**chunk, "object": "chat.completion.chunk",
         "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}]},
        {**chunk, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]},
    ]  # fmt: skip
    body = (
        b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    )
    return nito_nb.read_sse(body)


def merged(s: nito_nb.Stream) -> dict[str, Any]:
    # A signature and a tool call's id are made from the completion's id, which is new for each
    # request: they are there or not, the same for both.
    details = [{**d, "signature": "signed"} if "signature" in d else d for d in s.reasoning_details]
    calls = [{**call.to_message(), "id": "call"} for call in s.tool_calls if call.id]
    return {
        "content": s.content,
        "reasoning": s.reasoning,
        "reasoning_details": details,
        "refusal": s.refusal,
        "tool_calls": calls,
        "usage": s.usage,
        "finish_reason": s.finish_reason,
    }


ANSWERING = sorted(
    m
    for m in sim.SIM_MODELS
    if m not in HTTP_MODELS and m not in ("sim/error-midstream", "sim/drop")
)


@pytest.mark.parametrize("model", ANSWERING)
def test_the_non_streaming_answer_is_the_merged_stream(
    http: httpx.Client, sdk: openai.OpenAI, model: str
) -> None:
    streamed = nito_nb.read_sse(
        http.post("/chat/completions", json=request_for(model, stream=True)).content
    )
    response = http.post("/chat/completions", json=request_for(model, stream=False))
    assert response.status_code == 200, response.text
    completion = response.json()
    assert completion["object"] == "chat.completion"
    assert (
        completion["id"] == streamed.id
        if model == "sim/replay"
        else completion["id"].startswith("gen-sim-")
    )
    assert merged(as_stream(completion)) == merged(streamed)
    (choice,) = completion["choices"]
    message = choice["message"]
    assert choice["finish_reason"] == streamed.finish_reason and choice["logprobs"] is None
    assert completion["usage"] == streamed.usage and message["refusal"] is None
    if model == "sim/mistral":
        # Mistral's non-streaming shape: one thinking part, then one text part, each merged.
        assert message["content"] == [
            {"type": "thinking", "thinking": [{"type": "text", "text": streamed.reasoning}]},
            {"type": "text", "text": streamed.content},
        ]
        assert "reasoning" not in message and "reasoning_details" not in message
    else:
        assert message["content"] == (streamed.content or None)
    if streamed.reasoning_details:
        # OpenRouter's: the reasoning as one string, and one detail per (index, type), merged.
        assert message["reasoning"] == streamed.reasoning
        assert len(message["reasoning_details"]) == len(streamed.reasoning_details)
        assert len(message["reasoning_details"]) == len(
            {(d["index"], d["type"]) for d in message["reasoning_details"]}
        )
    if model == "sim/reasoning":
        assert [d["type"] for d in message["reasoning_details"]] == [
            "reasoning.text",
            "reasoning.summary",
            "reasoning.encrypted",
        ]
    carried = {"sim/websearch": "web_search", "sim/free": "free_tier"}.get(model)
    for name in ("web_search", "free_tier"):
        assert (name in completion) == (name == carried)
        if name == carried:
            assert completion[name] == getattr(streamed, name)

    # The openai SDK's non-streaming client reads it.
    body = request_for(model, stream=False)
    read = sdk.chat.completions.create(
        model=model,
        messages=body["messages"],
        tools=body.get("tools", openai.omit),
        extra_body={"sim": body["sim"]},
    )
    (sdk_choice,) = read.choices
    assert read.object == "chat.completion" and sdk_choice.finish_reason == streamed.finish_reason
    assert sdk_choice.message.content == message["content"]
    assert [
        (c.function.name, c.function.arguments) for c in sdk_choice.message.tool_calls or []
    ] == [(c.name, c.arguments) for c in streamed.tool_calls]
    assert (
        read.usage is not None
        and read.usage.completion_tokens == streamed.usage["completion_tokens"]
    )
    extra = sdk_choice.message.model_extra or {}
    assert [(d["type"], d["index"]) for d in extra.get("reasoning_details") or []] == [
        (d["type"], d["index"]) for d in message.get("reasoning_details") or []
    ]
    assert extra.get("reasoning") == message.get("reasoning")


@pytest.mark.parametrize("model", ["sim/error-midstream", "sim/drop"])
def test_a_broken_stream_is_a_502_without_streaming(
    http: httpx.Client, sdk: openai.OpenAI, model: str
) -> None:
    response = http.post("/chat/completions", json=request_for(model, stream=False))
    assert response.status_code == 502 and response.json()["error"]["code"] == 502
    with pytest.raises(openai.InternalServerError):
        sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}],
                                    extra_body={"sim": OPTIONS})  # fmt: skip


@pytest.mark.parametrize("model", sorted(HTTP_MODELS))
def test_an_http_error_is_the_same_without_streaming(http: httpx.Client, model: str) -> None:
    streamed = http.post("/chat/completions", json=request_for(model, stream=True))
    whole = http.post("/chat/completions", json=request_for(model, stream=False))
    assert whole.status_code == streamed.status_code == HTTP_MODELS[model]
    assert whole.content == streamed.content


def test_every_choice_is_merged_on_its_own(http: httpx.Client) -> None:
    body = {**request_for("sim/reasoning", stream=False), "n": 3}
    completion = http.post("/chat/completions", json=body).json()
    assert [c["index"] for c in completion["choices"]] == [0, 1, 2]
    for choice in completion["choices"]:
        message = choice["message"]
        assert [d["type"] for d in message["reasoning_details"]] == [
            "reasoning.text",
            "reasoning.summary",
            "reasoning.encrypted",
        ]
        assert message["content"] and choice["finish_reason"] == "stop"
    streamed = nito_nb.read_sse(
        http.post(
            "/chat/completions", json={**request_for("sim/reasoning", stream=True), "n": 3}
        ).content
    )
    assert completion["usage"] == streamed.usage
    assert completion["choices"][0]["message"]["content"] == streamed.content


# --------------------------------------------------------------------------------------------
# Replay of a recording whose events end with mixed line endings


#: Every blank line a server may send after an event's last line, mixed in one body: `\r\n\n`
#: (a CRLF line, then an LF blank line), `\n\r\n`, `\r\r\n`, `\r\n\r`.
ENDINGS = (b"\r\n\n", b"\n\r\n", b"\r\r\n", b"\r\n\r")
#: Those whose last byte says the event is complete: a blank line ended by a lone CR may still
#: be the first half of a CRLF, so a reader dispatches its event with the next byte (sent with
#: the next event, whatever the server does).
COMPLETE_ENDINGS = ENDINGS[:3]
WORDS = ["Mixed", " line", " endings", " are", " one", " stream", " of", " events,", " each",
         " paced", " on", " its", " own", " and", " merged", " whole."]  # fmt: skip


def mixed_recording(endings: tuple[bytes, ...] = ENDINGS) -> bytes:
    head = {
        "id": "gen-mixed",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test/mixed",
    }
    chunks: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": word} if i == 0
                              else {"content": word}, "finish_reason": None}]}
        for i, word in enumerate(WORDS)
    ]  # fmt: skip
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({**head, "choices": [],
                   "usage": {"prompt_tokens": 4, "completion_tokens": 16, "total_tokens": 20}})  # fmt: skip
    body = [b": OPENROUTER PROCESSING\r\n\n"]
    body += [
        b"data: " + json.dumps(c).encode() + endings[i % len(endings)] for i, c in enumerate(chunks)
    ]
    return b"".join([*body, b"data: [DONE]\n\r\n"])


@pytest.fixture
def mixed(replay_dir: Path) -> Path:
    path = replay_dir / "mixed-endings.sse"
    path.write_bytes(mixed_recording())
    return path


def test_a_replay_with_mixed_line_endings_sends_each_event_on_its_own(
    replay_dir: Path, http: httpx.Client
) -> None:
    mixed = replay_dir / "mixed-complete-endings.sse"
    mixed.write_bytes(mixed_recording(COMPLETE_ENDINGS))
    options = {"replay": str(mixed), "tps": 20, "ttft_ms": 0, "jitter": 0}
    with http.stream(
        "POST",
        "/chat/completions",
        json={**request_for("sim/echo", stream=True), "model": "sim/replay", "sim": options},
    ) as response:
        assert response.read() == mixed.read_bytes()  # byte for byte
    s = nito_nb.stream("x", model="sim/replay", sim=options)
    s.wait()
    expected = nito_nb.read_sse(mixed)
    assert s.status == "done" and s.anomalies == []
    assert s.content == expected.content == "".join(WORDS) and s.usage == expected.usage
    # Each event is one token of the pacing, 50 ms after the one before: a read of its own (an
    # event left joined to the next one arrived with it, at the same time).
    times = [e.t_ns for e in s.log if e.kind in ("chunk", "done")]
    assert len(times) == len(WORDS) + 3
    assert len(set(times)) >= len(times) - 2


def test_a_replay_with_mixed_line_endings_without_streaming(
    mixed: Path, http: httpx.Client, sdk: openai.OpenAI
) -> None:
    body = {**request_for("sim/replay", stream=False), "sim": {"replay": str(mixed), "speed": 0}}
    completion = http.post("/chat/completions", json=body).json()
    (choice,) = completion["choices"]
    assert choice["message"]["content"] == "".join(WORDS) and choice["finish_reason"] == "stop"
    assert completion["usage"]["completion_tokens"] == 16 and completion["model"] == "test/mixed"
    read = sdk.chat.completions.create(model="sim/replay", messages=body["messages"],
                                       extra_body={"sim": body["sim"]})  # fmt: skip
    assert read.choices[0].message.content == "".join(WORDS)
