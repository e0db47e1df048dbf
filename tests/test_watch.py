"""nito_nb.watch(): a Stream from the chunk objects a library yields (issue 15).

The sources are real: the openai SDK over loopback to the simulator (no capturing client, so the
Stream comes from the objects alone), and hand-built LangChain chunks for the mapping's edge cases
(LangChain and LiteLLM end to end are in test_capture_libraries.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from test_capture import MESSAGES, create, stable
from test_sim import QUICK, SEARCH, WEATHER

import nito_nb
from nito_nb import _watch


@pytest.fixture(scope="module")
def sdk() -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=nito_nb.sim.ensure_server(), api_key=nito_nb.sim.token(), max_retries=0
    ) as c:
        yield c


def reference(model: str, **params: Any) -> nito_nb.Stream:
    return nito_nb.stream(MESSAGES, model=model, sim=QUICK, **params).wait()


def assert_same_answer(ours: nito_nb.Stream, ref: nito_nb.Stream) -> None:
    assert ours.status == "done"
    assert ours.content == ref.content
    assert ours.reasoning == ref.reasoning and stable(ours.reasoning_details) == stable(
        ref.reasoning_details
    )
    assert [(c.name, c.arguments) for c in ours.tool_calls] == [
        (c.name, c.arguments) for c in ref.tool_calls
    ]
    assert all(c.id for c in ours.tool_calls)
    assert ours.finish_reason == ref.finish_reason and ours.usage == ref.usage
    assert ours.n_chunks == ref.n_chunks
    assert ours.anomalies == []
    assert ours.request["capture"] == "watch" and ours.request["reserialised"] is True


@pytest.mark.parametrize(
    ("model", "params"),
    [("sim/chat", {}), ("sim/reasoning", {}), ("sim/tools", {"tools": [WEATHER, SEARCH]})],
)
def test_openai_chunks_are_passed_on_unchanged_and_recorded(
    sdk: openai.OpenAI, model: str, params: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    source = create(sdk, model, **params)
    seen_by_source: list[Any] = []
    original = source._iterator
    source._iterator = (seen_by_source.append(item) or item for item in original)
    watched = nito_nb.watch(source)
    items = list(watched)
    assert len(items) == len(seen_by_source) and all(
        a is b for a, b in zip(items, seen_by_source, strict=True)
    )
    ours = watched.stream
    assert nito_nb.last() is ours and ours in nito_nb.streams()
    assert_same_answer(ours, reference(model, **params))
    assert ours.timed and ours.ttfb is None and 0 <= ours.ttft <= ours.elapsed  # type: ignore[operator]
    assert "✓ done" in capsys.readouterr().out  # shown live (plain text outside a notebook)


def test_async_sources_and_the_stream_helpers_events(
    sdk: openai.OpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    async def run() -> nito_nb.Stream:
        async with openai.AsyncOpenAI(
            base_url=nito_nb.sim.ensure_server(), api_key=nito_nb.sim.token(), max_retries=0
        ) as c:
            watched = nito_nb.watch(await create(c, "sim/reasoning"), show=False)
            async for _ in watched:
                pass
            return watched.stream

    assert_same_answer(asyncio.run(run()), reference("sim/reasoning"))
    with sdk.chat.completions.stream(
        model="sim/tools",
        messages=MESSAGES,
        tools=[WEATHER],
        stream_options={"include_usage": True},
        extra_body={"sim": QUICK},
    ) as events:
        watched = nito_nb.watch(events, show=False)
        kinds = {event.type for event in watched}
        completion = watched.get_final_completion()  # the source's own API, through the wrapper
    assert {
        "chunk",
        "tool_calls.function.arguments.delta",
    } <= kinds  # derived events: passed, not recorded
    assert_same_answer(watched.stream, reference("sim/tools", tools=[WEATHER]))
    assert (
        completion.choices[0].message.tool_calls[0].function.arguments
        == watched.stream.tool_calls[0].arguments
    )
    assert capsys.readouterr().out == ""


def test_a_failing_source_raises_its_own_error_and_the_partial_stream_is_kept(
    sdk: openai.OpenAI,
) -> None:
    watched = nito_nb.watch(create(sdk, "sim/drop"), show=False)
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in watched:
            seen.extend(c.delta.content or "" for c in chunk.choices)
    ours = nito_nb.last()
    assert ours is watched.stream and ours.status == "truncated"
    assert (
        ours.content == "".join(seen)
        and "APIConnectionError after 40 items" in ours.exception.message
    )


def test_breaking_out_stops_and_a_watch_is_iterated_once(sdk: openai.OpenAI) -> None:
    watched = nito_nb.watch(create(sdk, "sim/long", sim={"chunks": 3000}), show=False)
    iterator = iter(watched)
    for _ in range(5):
        next(iterator)
    iterator.close()  # type: ignore[attr-defined]
    assert watched.stream.status == "stopped" and watched.stream.n_chunks == 5
    with pytest.raises(RuntimeError, match="already iterated"):
        list(watched)
    with pytest.raises(TypeError, match="pass the result of a stream=True call"):
        nito_nb.watch(42)


def test_dicts_strings_and_unknown_items(tmp_path: Path) -> None:
    class Odd:
        def __repr__(self) -> str:
            return "<Odd>"

    items: list[Any] = [
        {
            "id": "g",
            "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}],
        },
        " there",
        Odd(),
    ]
    watched = nito_nb.watch(iter(items), show=False)
    assert list(watched) == items
    s = watched.stream
    assert s.content == "Hi there" and s.status == "done" and s.model == "m"
    assert [a.kind for a in s.anomalies] == ["watch-unmapped"] and "<Odd>" in str(s.anomalies[0])
    again = nito_nb.load(s.save(tmp_path / "watched.jsonl"))
    assert again.content == s.content and again.request["reserialised"] is True
    assert len(nito_nb.frame(s)) == len(s.log) + 1


def test_langchain_message_chunks_map_to_the_delta_format() -> None:
    messages = pytest.importorskip("langchain_core.messages")
    chunks = [
        messages.AIMessageChunk(
            content=[{"type": "reasoning", "reasoning": "Think. "}], id="run-1"
        ),
        messages.AIMessageChunk(
            content=[{"type": "text", "text": "Answer"}, {"type": "image", "url": "x"}], id="run-1"
        ),
        messages.AIMessageChunk(
            content="",
            id="run-1",
            tool_call_chunks=[{"name": "get_weather", "args": '{"ci', "id": "call_1", "index": 0}],
        ),
        messages.AIMessageChunk(
            content="",
            id="run-1",
            tool_call_chunks=[{"name": None, "args": 'ty": "Paris"}', "id": None, "index": 0}],
        ),
        messages.AIMessageChunk(
            content="",
            id="run-1",
            response_metadata={"finish_reason": "tool_calls", "model_name": "m-1"},
        ),
        messages.AIMessageChunk(
            content="",
            id="run-1",
            usage_metadata={
                "input_tokens": 3,
                "output_tokens": 7,
                "total_tokens": 10,
                "output_token_details": {"reasoning": 2},
                "input_token_details": {"cache_read": 1},
            },
        ),
    ]
    watched = nito_nb.watch(iter(chunks), show=False)
    assert list(watched) == chunks
    s = watched.stream
    assert s.content == "Answer" and s.reasoning == "Think. "
    assert [(c.id, c.name, c.parsed) for c in s.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"})
    ]
    assert s.finish_reason == "tool_calls" and s.model == "m-1"
    assert s.usage == {
        "prompt_tokens": 3,
        "completion_tokens": 7,
        "total_tokens": 10,
        "completion_tokens_details": {"reasoning_tokens": 2},
        "prompt_tokens_details": {"cached_tokens": 1},
    }
    assert [a.kind for a in s.anomalies] == ["watch-unmapped"] and "image" in str(s.anomalies[0])
    row = nito_nb.frame(s).nito.metrics().iloc[0]
    assert row["n_output_tokens"] == 7
    deepseek = messages.AIMessageChunk(content="", additional_kwargs={"reasoning_content": "deep"})
    assert _watch.to_chunk(deepseek)["choices"][0]["delta"] == {"reasoning_content": "deep"}  # type: ignore[index]


def test_inside_live_a_watch_uses_the_blocks_view(capsys: pytest.CaptureFixture[str]) -> None:
    items = [
        {
            "id": "g",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "Once only"}, "finish_reason": "stop"}],
        }
    ]
    with nito_nb.live():
        assert list(nito_nb.watch(iter(items))) == items
    assert capsys.readouterr().out.count("Once only") == 1
    assert list(nito_nb.watch(iter(items), show=False)) == items
    assert capsys.readouterr().out == ""
