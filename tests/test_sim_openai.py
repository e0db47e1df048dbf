"""The simulator seen by an independent peer: the openai SDK, over loopback.

If the SDK and nito_nb's accumulator agree on every scenario, the simulator speaks the OpenAI
wire format and not just nito_nb's reading of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from test_sim import FIXTURES, QUICK, SEARCH, STREAMING_MODELS, WEATHER

import nito_nb
from nito_nb import sim

MESSAGES: list[Any] = [{"role": "user", "content": "Hello, simulator!"}]


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=sim.ensure_server(), api_key=sim.token(), max_retries=0) as c:
        yield c


def create(client: openai.OpenAI, model: str, **kwargs: Any) -> Any:
    sim_options = {**QUICK, **kwargs.pop("sim", {})}
    return client.chat.completions.create(
        model=model,
        messages=kwargs.pop("messages", MESSAGES),
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"sim": sim_options},
        **kwargs,
    )


def accumulate(chunks: Any) -> dict[str, Any]:
    content, finish, usage = [], None, None
    calls: dict[int, dict[str, str]] = {}
    reasoning_details: list[dict[str, Any]] = []
    for chunk in chunks:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            parts: Any = delta.content or ""
            if isinstance(parts, list):  # sim/mistral: the SDK hands Mistral's parts over as sent
                content.extend(p["text"] for p in parts if p["type"] == "text")
            else:
                content.append(parts)
            reasoning_details.extend((delta.model_extra or {}).get("reasoning_details") or [])
            for fragment in delta.tool_calls or []:
                call = calls.setdefault(fragment.index, {"name": "", "arguments": ""})
                if fragment.function and fragment.function.name:
                    call["name"] = fragment.function.name
                if fragment.function and fragment.function.arguments:
                    call["arguments"] += fragment.function.arguments
            finish = choice.finish_reason or finish
    return {
        "content": "".join(content),
        "finish_reason": finish,
        "usage": usage,
        "tool_calls": [calls[i] for i in sorted(calls)],
        "reasoning_details": reasoning_details,
    }


@pytest.mark.parametrize("model", STREAMING_MODELS)
def test_every_scenario_through_the_openai_sdk(client: openai.OpenAI, model: str) -> None:
    tools: Any = [WEATHER, SEARCH] if model == "sim/tools" else openai.omit
    result = accumulate(create(client, model, tools=tools))
    ours = nito_nb.stream("Hello, simulator!", model=model, sim=QUICK, tools=tools or None)
    ours.wait()
    assert ours.usage is not None
    assert result["content"] == ours.content
    assert result["finish_reason"] == ours.finish_reason
    assert result["usage"].completion_tokens == ours.usage["completion_tokens"]
    assert result["usage"].total_tokens == ours.usage["total_tokens"]
    assert [c["arguments"] for c in result["tool_calls"]] == [c.arguments for c in ours.tool_calls]
    if model == "sim/reasoning":
        assert {d["type"] for d in result["reasoning_details"]} == {
            "reasoning.text",
            "reasoning.summary",
            "reasoning.encrypted",
        }
        assert result["usage"].completion_tokens_details.reasoning_tokens > 0


def test_the_sdks_stream_helper_accumulates_parallel_tool_calls(client: openai.OpenAI) -> None:
    tools: Any = [WEATHER, SEARCH]
    with client.chat.completions.stream(
        model="sim/tools",
        messages=MESSAGES,
        tools=tools,
        extra_body={"sim": {**QUICK, "interleave": True}},
    ) as stream:
        for _ in stream:
            pass
        completion = stream.get_final_completion()
    calls = completion.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather", "search"]
    assert all(json.loads(c.function.arguments) for c in calls)
    assert completion.choices[0].finish_reason == "tool_calls"


def test_non_streaming_mode(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="sim/echo", messages=MESSAGES, extra_body={"sim": QUICK}
    )
    assert completion.choices[0].message.content == "Hello, simulator!"
    assert completion.usage is not None and completion.usage.completion_tokens == 3


def test_models_list(client: openai.OpenAI) -> None:
    assert {m.id for m in client.models.list()} == set(sim.SIM_MODELS)


def test_error_midstream_raises_api_error(client: openai.OpenAI) -> None:
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="Upstream provider disconnected"):
        for chunk in create(client, "sim/error-midstream"):
            seen.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(seen).startswith("## Streaming")


def test_drop_raises_a_connection_error(client: openai.OpenAI) -> None:
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in create(client, "sim/drop"):
            seen.extend(c.delta.content or "" for c in chunk.choices)
    assert len(seen) == 40


def test_stall_raises_a_timeout(client: openai.OpenAI) -> None:
    stalled = client.with_options(timeout=openai.Timeout(5, read=0.3))
    with pytest.raises(openai.APITimeoutError):
        for _ in create(stalled, "sim/stall", sim={"stall_s": 30}):
            pass


def test_garbage_breaks_the_sdk_but_not_nito_nb(client: openai.OpenAI) -> None:
    # The SDK parses every data line as JSON and gives up; nito_nb notes an anomaly and goes on.
    with pytest.raises(json.JSONDecodeError):
        for _ in create(client, "sim/garbage"):
            pass


@pytest.mark.parametrize(
    ("model", "error"),
    [
        ("sim/http-401", openai.AuthenticationError),
        ("sim/http-402", openai.APIStatusError),
        ("sim/http-429", openai.RateLimitError),
        ("sim/http-500-html", openai.InternalServerError),
        ("sim/http-503", openai.InternalServerError),
        ("sim/unknown", openai.NotFoundError),
    ],
)
def test_http_errors(client: openai.OpenAI, model: str, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        create(client, model)
    assert isinstance(caught.value, openai.APIStatusError)
    assert caught.value.status_code == int(model[9:12]) if model[9:12].isdigit() else 404


def test_bad_request_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"sim\.tps"):
        create(client, "sim/chat", sim={"tps": "fast"})


def test_replay_through_the_sdk(client: openai.OpenAI) -> None:
    path: Path = FIXTURES / "openrouter-tools-parallel-1.sse"
    result = accumulate(create(client, "sim/replay", sim={"replay": str(path), "speed": 0}))
    expected = nito_nb.read_sse(path)
    assert [c["arguments"] for c in result["tool_calls"]] == [
        c.arguments for c in expected.tool_calls
    ]
    assert result["content"] == expected.content


def test_n_choices_reach_the_sdk_interleaved(client: openai.OpenAI) -> None:
    chunks = list(create(client, "sim/echo", n=2))
    indexes = [c.choices[0].index for c in chunks if c.choices]
    assert indexes[:4] == [0, 1, 0, 1]
    texts = {
        i: "".join(
            c.choices[0].delta.content or ""
            for c in chunks
            if c.choices and c.choices[0].index == i
        )
        for i in (0, 1)
    }
    assert texts == {0: "Hello, simulator!", 1: "Hello, simulator!"}
    assert len({c.id for c in chunks}) == 1


def test_mistral_parts_through_the_sdk(client: openai.OpenAI) -> None:
    chunks = list(create(client, "sim/mistral"))
    kinds = [
        p["type"]
        for c in chunks
        if c.choices and isinstance(c.choices[0].delta.content, list)
        for p in c.choices[0].delta.content
    ]
    assert kinds[0] == "thinking" and kinds[-1] == "text" and set(kinds) == {"thinking", "text"}
    ours = nito_nb.stream("Hello, simulator!", model="sim/mistral", sim=QUICK)
    assert accumulate(chunks)["content"] == ours.content and ours.reasoning


def test_parallel_tool_calls_false_and_fresh_ids_through_the_sdk(client: openai.OpenAI) -> None:
    tools: Any = [WEATHER, SEARCH]
    one = accumulate(create(client, "sim/tools", tools=tools, parallel_tool_calls=False))
    assert [c["name"] for c in one["tool_calls"]] == ["get_weather"]
    ids = set()
    for _ in range(3):
        with create(client, "sim/chat", seed=1) as stream:
            ids.add(next(iter(stream)).id)
    assert len(ids) == 3
