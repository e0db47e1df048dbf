"""LangChain, LiteLLM and pydantic-ai against the simulator as an OpenAI-compatible endpoint
(issues 15 and 31).

Each sends through a capturing client of the stack it uses (the lines docs/CAPTURE.md gives):
LangChain and LiteLLM an httpx one, pydantic-ai an httpx2 one. The captured Stream must equal
nito_nb's own Stream of the very request the library sent, and the library's results must be what
the bytes said. LiteLLM runs in a child process: it keeps module-wide clients, event loops and
logging threads that would outlive the test and leak into later ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_capture import KEY, key_absent
from test_sim import WEATHER

import nito_nb
from nito_nb.sim import SimServer


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with SimServer(api_key=KEY) as url:
        yield url


def same_request_again(captured: nito_nb.Stream) -> nito_nb.Stream:
    """nito_nb's own Stream of the request the library sent (as the capture stored it)."""
    request = captured.request
    with nito_nb.Client(api_key=KEY, base_url=request["base_url"]) as client:
        return client.stream(
            request["messages"], model=request["model"], **request["params"]
        ).wait()


def assert_same(captured: nito_nb.Stream, ref: nito_nb.Stream) -> None:
    assert (captured.status, captured.content, captured.reasoning) == (
        ref.status,
        ref.content,
        ref.reasoning,
    )
    assert [(c.name, c.arguments) for c in captured.tool_calls] == [
        (c.name, c.arguments) for c in ref.tool_calls
    ]
    assert (captured.finish_reason, captured.usage, captured.n_events) == (
        ref.finish_reason,
        ref.usage,
        ref.n_events,
    )


def test_langchain_chat_openai_streaming_with_tools(base_url: str, tmp_path: Path) -> None:
    langchain_openai = pytest.importorskip(
        "langchain_openai", reason="langchain-openai is in the test extras"
    )

    def model(**clients: Any) -> Any:
        llm = langchain_openai.ChatOpenAI(
            model="sim/tools",
            base_url=base_url,
            api_key=KEY,
            streaming=True,
            stream_usage=True,
            **clients,
        )
        return llm.bind_tools([WEATHER])

    # Closed: the pump reads each body to its end, so its connection goes back to the pool (without
    # capture the SDK's early close after [DONE] closed it), where an unclosed client leaves it.
    with nito_nb.httpx_client() as http:
        message = model(http_client=http).invoke("Weather in Paris?")
    captured = nito_nb.last()
    assert captured.request["params"]["tools"] == [WEATHER]
    assert_same(captured, same_request_again(captured))
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [
        (c.name, c.parsed) for c in captured.tool_calls
    ]
    assert message.usage_metadata["output_tokens"] == captured.usage["completion_tokens"]
    key_absent(captured, tmp_path)

    # watch() over the same library's chunks, with the async client: two views of one stream.
    async def run() -> tuple[Any, nito_nb.Stream]:
        http = nito_nb.async_httpx_client()
        try:
            watched = nito_nb.watch(
                model(http_async_client=http).astream("Weather in Lyon?"), show=False
            )
            merged = None
            async for chunk in watched:
                merged = chunk if merged is None else merged + chunk
            return merged, watched.stream
        finally:
            await http.aclose()

    merged, watched = asyncio.run(run())
    # LangChain sends the request when the first item is asked for: the watch began first.
    watch_then_capture = nito_nb.streams()[-2:]
    assert watch_then_capture[0] is watched and nito_nb.last() is watch_then_capture[1]
    captured = watch_then_capture[1]
    assert captured.request["capture"] == "httpx"
    assert_same(captured, same_request_again(captured))
    assert [(c.name, c.arguments) for c in watched.tool_calls] == [
        (c.name, c.arguments) for c in captured.tool_calls
    ]
    assert watched.finish_reason == captured.finish_reason == "tool_calls"
    assert {
        k: watched.usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")
    } == {  # type: ignore[index]
        k: captured.usage[k]
        for k in ("prompt_tokens", "completion_tokens", "total_tokens")  # type: ignore[index]
    }
    assert [c["args"] for c in merged.tool_calls] == [c.parsed for c in watched.tool_calls]


LITELLM_SCRIPT = """
import json, os, sys
import litellm, nito_nb

base, key = sys.argv[1], os.environ["SIM_KEY"]
weather = json.loads(sys.argv[2])
litellm.client_session = nito_nb.httpx_client()       # the documented line
response = litellm.completion(
    model="openai/sim/tools", api_base=base, api_key=key, stream=True,
    messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[weather],
    stream_options={"include_usage": True},
)
chunks = list(response)
captured = nito_nb.last()
arguments = "".join(
    call.function.arguments or ""
    for chunk in chunks for choice in chunk.choices for call in (choice.delta.tool_calls or [])
)
watched = nito_nb.watch(litellm.completion(
    model="openai/sim/chat", api_base=base, api_key=key, stream=True,
    messages=[{"role": "user", "content": "Explain SSE"}],
), show=False)
text = "".join(c.choices[0].delta.content or "" for c in watched if c.choices)
chat = [s for s in nito_nb.streams() if s.request["capture"] == "httpx"][-1]
again = nito_nb.Client(api_key=key, base_url=captured.request["base_url"])
ref = again.stream(captured.request["messages"], model=captured.request["model"], **captured.request["params"]).wait()
captured.save("captured.jsonl")

async def async_text():
    litellm.aclient_session = nito_nb.async_httpx_client()   # the documented async line
    try:
        response = await litellm.acompletion(
            model="openai/sim/reasoning", api_base=base, api_key=key, stream=True,
            messages=[{"role": "user", "content": "Think"}],
        )
        return "".join([c.choices[0].delta.content or "" async for c in response if c.choices])
    finally:
        await litellm.aclient_session.aclose()

import asyncio
async_answer = asyncio.run(async_text())
async_captured = nito_nb.last()
print(json.dumps({
    "async": [async_answer, async_captured.content, async_captured.status, async_captured.request["model"]],
    "status": captured.status, "capture": captured.request["capture"], "arguments": arguments,
    "tool_calls": [[c.name, c.arguments] for c in captured.tool_calls],
    "ref_tool_calls": [[c.name, c.arguments] for c in ref.tool_calls],
    "usage": captured.usage, "ref_usage": ref.usage, "events": [captured.n_events, ref.n_events],
    "text": text, "chat_content": chat.content, "chat_capture": chat.request["capture"],
    "watched": [watched.stream.content, watched.stream.status, watched.stream.request["capture"]],
    "repr": repr(captured) + repr(chat) + json.dumps(captured.request) + json.dumps(captured.log.headers),
}))
"""


@pytest.mark.spawns
@pytest.mark.slow  # importing LiteLLM alone takes seconds
def test_litellm_completion_streaming_through_a_capturing_client(
    base_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("litellm", reason="litellm is in the test extras")
    script = tmp_path / "litellm_capture.py"
    script.write_text(textwrap.dedent(LITELLM_SCRIPT))
    env = {
        **os.environ,
        "SIM_KEY": KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else LiteLLM downloads its price list at import
        "PYTHONWARNINGS": "ignore",  # LiteLLM's own deprecation and resource warnings: not ours
    }
    run = subprocess.run(
        [sys.executable, str(script), base_url, json.dumps(WEATHER)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["status"] == "done" and result["capture"] == "httpx"
    assert (
        result["tool_calls"] == result["ref_tool_calls"]
        and result["tool_calls"][0][0] == "get_weather"
    )
    # what LiteLLM yielded is what the bytes said
    assert result["arguments"] == result["tool_calls"][0][1]
    assert result["usage"] == result["ref_usage"] and result["events"][0] == result["events"][1]
    assert result["text"] == result["chat_content"] == result["watched"][0] and result["text"]
    assert result["chat_capture"] == "httpx" and result["watched"][1:] == ["done", "watch"]
    answer, content, status, model = result["async"]
    assert answer == content and status == "done" and model == "sim/reasoning" and answer
    assert KEY not in result["repr"] and KEY not in (tmp_path / "captured.jsonl").read_text()
    assert KEY not in run.stdout


def test_pydantic_ai_agent_streaming_with_a_tool_and_a_retry_on_httpx2(
    base_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim[openai] is in the test extras")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    calls: list[dict[str, Any]] = []

    def agent(model: str, http: Any) -> Any:
        provider = OpenAIProvider(base_url=base_url, api_key=KEY, http_client=http)
        made = Agent(OpenAIChatModel(model, provider=provider))

        @made.tool_plain
        def get_weather(city: str, days: int = 1) -> str:
            calls.append({"city": city, "days": days})
            return f"Sunny in {city} for {days} days."

        return made

    async def run(model: str, prompt: str, **sim: Any) -> str:
        settings: Any = {"extra_body": {"sim": {"tps": 0, **sim}}}
        async with (
            nito_nb.async_httpx2_client() as http,
            agent(model, http).run_stream(prompt, model_settings=settings) as result,
        ):
            return "".join([text async for text in result.stream_text(delta=True)])

    # A tool call, which pydantic-ai runs, then the answer: two requests, two Streams.
    before = {id(s) for s in nito_nb.streams()}
    answer = asyncio.run(run("sim/tools", "Weather in Paris?"))
    called, answered = [s for s in nito_nb.streams() if id(s) not in before]
    assert called.request["capture"] == answered.request["capture"] == "httpx2"
    assert called.finish_reason == "tool_calls" and [c.name for c in called.tool_calls] == [
        "get_weather"
    ]
    # what the tool got is what the bytes said
    assert calls == [{"days": 1, **called.tool_calls[0].parsed}]
    assert_same(called, same_request_again(called))
    assert answered.status == "done" and answered.content == answer and answer
    assert answered.request["messages"][-1]["role"] == "tool"
    key_absent(answered, tmp_path)

    # A 429 the SDK under pydantic-ai retries: the refused attempt, closed unread, then the answer.
    before = {id(s) for s in nito_nb.streams()}
    answer = asyncio.run(
        run("sim/echo", "retried once", fail_rate=1, fail_status=429, retry_after=0.05)
    )
    refused, answered = [s for s in nito_nb.streams() if id(s) not in before]
    assert refused.status == "failed" and isinstance(refused.exception, nito_nb.RateLimitError)
    assert "closed the body before reading it" in refused.exception.message
    assert answered.status == "done" and answered.content == answer == "retried once"
