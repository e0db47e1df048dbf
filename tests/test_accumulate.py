"""Accumulation: docs/PROTOCOL.md's rules one by one, its quirks, and "never raises"."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from nito_nb._core.accumulate import Accumulator


def chunk(delta: dict | None = None, finish: str | None = None, **top: object) -> dict:
    return {
        "id": "gen-1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **top,
    }


def fold(*chunks: dict) -> Accumulator:
    acc = Accumulator()
    for seq, c in enumerate(chunks):
        acc.add(c, seq)
    return acc


def kinds(acc: Accumulator) -> list[str]:
    return [a.kind for a in acc.anomalies]


def test_protocol_example_stream() -> None:
    acc = fold(
        chunk({"role": "assistant", "content": "A gateway"}),
        chunk({"content": " is a single entry point."}),
        chunk({}, "stop"),
        {
            "id": "gen-1",
            "choices": [],
            "usage": {"prompt_tokens": 14, "completion_tokens": 9, "total_tokens": 23},
        },
    )
    acc.finish()
    assert (acc.role, acc.content, acc.finish_reason) == (
        "assistant",
        "A gateway is a single entry point.",
        "stop",
    )
    assert acc.usage == {"prompt_tokens": 14, "completion_tokens": 9, "total_tokens": 23}
    assert acc.done and acc.error is None and acc.anomalies == []


def test_tool_calls_merge_by_index_and_interleave() -> None:
    acc = fold(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a"'},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "function": {"arguments": '{"city": "Par'}},
                    {"index": 1, "function": {"arguments": ": 1}"}},
                ]
            }
        ),
        chunk(
            {"tool_calls": [{"index": 0, "type": "function", "function": {"arguments": 'is"}'}}]}
        ),
        chunk({}, "tool_calls"),
    )
    first, second = acc.tool_calls
    assert (first.id, first.name, first.arguments, first.parsed) == (
        "call_1",
        "get_weather",
        '{"city": "Paris"}',
        {"city": "Paris"},
    )
    assert (second.id, second.name, second.parsed, second.n_fragments) == (
        "call_2",
        "add",
        {"a": 1},
        2,
    )
    assert acc.finish_reason == "tool_calls"


def test_invalid_tool_arguments_are_kept_and_flagged() -> None:
    acc = fold(
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"x": '}}
                ]
            }
        )
    )
    call = acc.tool_calls[0]
    assert (
        call.arguments == '{"x": '
        and not call.valid_json
        and call.parsed is None
        and call.json_error
    )
    assert "invalid JSON" in repr(call)


def test_empty_arguments_parse_as_an_empty_object() -> None:
    call = fold(
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "now"}}]})
    ).tool_calls[0]
    assert call.valid_json and call.parsed == {}


def test_reasoning_details_merge_by_index_and_type() -> None:
    acc = fold(
        chunk(
            {
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "Think", "index": 0, "format": "f"}
                ]
            }
        ),
        chunk(
            {
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "ing.", "index": 0, "signature": "s1"}
                ]
            }
        ),
        chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": "Sum", "index": 1}]}),
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "QUJD", "index": 2}]}),
        chunk({"reasoning_details": [{"type": "reasoning.text", "signature": "s2", "index": 0}]}),
        chunk({"reasoning": "Thinking.", "content": "Answer"}),  # a duplicate of the details
    )
    assert acc.reasoning == "Thinking.\n\nSum"
    details = acc.reasoning_details
    assert details[0] == {
        "type": "reasoning.text",
        "index": 0,
        "text": "Thinking.",
        "signature": "s2",
        "format": "f",
    }
    assert details[2] == {"type": "reasoning.encrypted", "index": 2, "data": "QUJD"}
    assert "QUJD" not in acc.reasoning  # encrypted reasoning is never shown as text


def test_plain_reasoning_strings_when_no_details() -> None:
    assert fold(chunk({"reasoning": "a"}), chunk({"reasoning": "b"})).reasoning == "ab"
    assert (
        fold(chunk({"reasoning_content": "x"}), chunk({"reasoning_content": "y"})).reasoning == "xy"
    )
    # Both strings duplicate each other: counted once.
    assert fold(chunk({"reasoning": "a", "reasoning_content": "a"})).reasoning == "a"


def test_encrypted_only_reasoning_falls_back_to_strings() -> None:
    acc = fold(
        chunk(
            {
                "reasoning_details": [{"type": "reasoning.encrypted", "data": "zz"}],
                "reasoning": "visible",
            }
        )
    )
    assert acc.reasoning == "visible"


def test_mid_stream_error_keeps_what_came_before() -> None:
    acc = fold(
        chunk({"content": "partial"}),
        {
            **chunk({"content": ""}, "error"),
            "error": {"code": 502, "message": "Upstream provider disconnected"},
        },
    )
    assert acc.content == "partial" and acc.error == {
        "code": 502,
        "message": "Upstream provider disconnected",
    }
    assert acc.finish_reason == "error"


def test_usage_take_the_last_never_add() -> None:
    acc = fold(
        chunk({"content": "a"}, usage={"completion_tokens": 1}),
        chunk({"content": "b"}, usage={"completion_tokens": 2}),
        chunk({}, "stop", usage={"completion_tokens": 2, "total_tokens": 5}),
    )
    assert acc.usage == {"completion_tokens": 2, "total_tokens": 5}


def test_vendor_usage_under_x_groq() -> None:
    acc = fold({"id": "g", "choices": [], "x_groq": {"usage": {"completion_tokens": 7}}})
    assert acc.usage == {"completion_tokens": 7}


def test_web_search_and_free_tier_keep_the_last() -> None:
    acc = fold(
        chunk({"content": "x"}, web_search={"q": 1}),
        chunk({}, web_search={"q": 2}, free_tier={"eligible": True}),
    )
    assert acc.web_search == {"q": 2} and acc.free_tier == {"eligible": True}


def test_after_done_ignored_and_noted() -> None:
    acc = fold(chunk({"content": "a"}))
    acc.finish()
    acc.add(chunk({"content": "late"}), 5)
    assert acc.content == "a" and kinds(acc) == ["after-done"] and acc.anomalies[0].seq == 5


def test_quirks_are_absorbed_and_noted_once() -> None:
    acc = fold(
        {"id": "", "object": "", "choices": []},  # Azure's first chunk
        chunk({"role": "assistant", "content": "a"}),
        chunk({"role": "assistant", "content": "b"}),
        chunk({"role": "assistant", "content": "c"}, "stop"),  # finish chunk with content
        {
            **chunk({"content": ""}, "stop"),
            "id": "gen-2",
            "usage": {"total_tokens": 3},
        },  # finish twice, id changes
        chunk({"content": "d"}),  # content after the terminal chunk
    )
    assert acc.content == "abcd" and acc.role == "assistant" and acc.finish_reason == "stop"
    assert kinds(acc) == [
        "id-empty",
        "role-repeated",
        "id-changed",
        "finish-repeated",
        "content-after-finish",
    ]
    assert acc.anomalies[1].count == 2
    assert "2x" in str(acc.anomalies[1])


def test_other_choices_stay_out_of_the_answer() -> None:
    acc = fold(
        {
            "id": "g",
            "choices": [
                {"index": 1, "delta": {"content": "other"}},
                {"index": 0, "delta": {"content": "main"}},
            ],
        },
        {"id": "g", "choices": [{"index": 2, "delta": {"content": "third"}}]},
    )
    assert acc.content == "main"
    # Not mixed in, and not silently dropped either: the view says other choices came.
    assert kinds(acc) == ["other-choices"] and acc.anomalies[0].count == 2


def test_missing_finish_reason_key_and_null_delta() -> None:
    acc = fold(
        {"id": "g", "choices": [{"index": 0, "delta": {"content": "x"}}]},
        {"id": "g", "choices": [{"index": 0, "delta": None}]},
    )
    assert acc.content == "x" and acc.finish_reason is None


def test_tool_calls_without_index() -> None:
    acc = fold(
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": '{"x":'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "1}"}}]}),
    )
    assert [(c.index, c.name, c.arguments) for c in acc.tool_calls] == [
        (0, "f", "{}"),
        (1, "g", '{"x":1}'),
    ]
    assert "tool-no-index" in kinds(acc)


def test_arguments_sent_as_an_object() -> None:
    acc = fold(
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": 1}}}
                ]
            }
        )
    )
    assert acc.tool_calls[0].parsed == {"x": 1} and "bad-field" in kinds(acc)


def test_error_as_a_string() -> None:
    assert fold({"error": "boom"}).error == {"message": "boom"}


def test_add_reports_token_bearing_chunks() -> None:
    acc = Accumulator()
    assert acc.add(chunk({"role": "assistant"})) is False
    assert acc.add(chunk({"content": "x"})) is True
    assert (
        acc.add(chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "z"}]}))
        is False
    )
    assert acc.add(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]})) is True
    assert acc.add({"choices": [], "usage": {}}) is False


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "model",
                    "choices",
                    "index",
                    "delta",
                    "content",
                    "role",
                    "tool_calls",
                    "function",
                    "arguments",
                    "name",
                    "reasoning_details",
                    "type",
                    "text",
                    "summary",
                    "data",
                    "usage",
                    "error",
                    "finish_reason",
                    "reasoning",
                    "x_groq",
                    "signature",
                    "web_search",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=25,
)


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["id", "choices", "usage", "error", "model", "x_groq"]),
            json_values,
            max_size=4,
        ),
        max_size=8,
    )
)
@settings(max_examples=400, deadline=None)
def test_odd_chunks_never_raise(chunks: list[dict]) -> None:
    acc = fold(*chunks)
    # Every result can be read and serialised.
    json.dumps(
        [
            acc.content,
            acc.reasoning,
            acc.reasoning_details,
            acc.finish_reason,
            acc.error,
            acc.usage,
        ],
        default=str,
    )
    for call in acc.tool_calls:
        call.arguments, call.parsed, call.valid_json, repr(call)


# -- content as a list of parts (Mistral), refusal (OpenAI) ---------------------------------------


def test_content_parts_text_is_the_answer_thinking_the_reasoning() -> None:
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "17 x 23 = "}]}
    acc = fold(
        chunk({"role": "assistant", "content": [thinking]}),
        chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "391"}]}]}),
        chunk({"content": [{"type": "text", "text": "3"}]}),
        chunk({"content": "91"}),  # text parts and plain strings mix in one stream
        chunk({"content": ""}, "stop"),
    )
    assert acc.content == "391"
    assert acc.reasoning == "17 x 23 = 391"
    assert acc.anomalies == []


def test_content_parts_of_other_types_are_kept_and_noted() -> None:
    image = {"type": "image_url", "image_url": "https://example.com/x.png"}
    reference = {"type": "reference", "reference_ids": [1]}
    acc = fold(
        chunk({"content": [{"type": "text", "text": "a"}, image]}),
        chunk(
            {
                "content": [
                    {"type": "thinking", "thinking": [reference, {"type": "text", "text": "t"}]}
                ]
            }
        ),
        chunk({"content": ["bare", {"type": "text", "text": 5}]}),  # odd shapes
    )
    assert (acc.content, acc.reasoning) == ("a", "t")
    assert acc.unread_parts == [image, reference, "bare", {"type": "text", "text": 5}]
    assert kinds(acc) == ["content-part"] and acc.anomalies[0].count == 3
    assert "image_url" in acc.anomalies[0].message


def test_content_neither_string_nor_list_is_noted() -> None:
    acc = fold(chunk({"content": {"text": "x"}}))
    assert acc.content == "" and kinds(acc) == ["bad-field"]


def test_thinking_parts_are_token_bearing() -> None:
    acc = Accumulator()
    part = {"type": "thinking", "thinking": [{"type": "text", "text": "hm"}]}
    assert acc.add(chunk({"content": [part]}))
    assert not acc.add(chunk({"content": [{"type": "thinking", "thinking": []}]}))


def test_refusal_accumulates_apart_from_the_answer() -> None:
    acc = fold(
        chunk({"role": "assistant", "content": None, "refusal": None}),
        chunk({"refusal": "I can't"}),
        chunk({"refusal": " help with that."}),
        chunk({}, "stop"),
    )
    assert acc.refusal == "I can't help with that." and acc.content == ""
    assert fold(chunk({"content": "x", "refusal": None})).refusal is None
    assert Accumulator().add(chunk({"refusal": "no"}))  # token-bearing
    assert kinds(fold(chunk({"refusal": ["no"]}))) == ["bad-field"]


def test_a_long_streams_text_is_kept_in_few_pieces() -> None:
    # A list of a million pieces made every full pass of the garbage collector visit each of them:
    # the pieces are joined as they come, the text is the same.
    from nito_nb._core.accumulate import JOIN_AT

    acc = Accumulator()
    base = {"id": "g", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
    acc.add(base, 0)
    n = 2 * JOIN_AT + 5
    for i in range(n):
        acc.add(
            {"id": "g", "model": "m", "choices": [{"index": 0, "delta": {"content": f"{i % 10}"}}]},
            i + 1,
        )
        acc.add(
            {
                "id": "g",
                "model": "m",
                "choices": [{"index": 0, "delta": {"reasoning_content": "r"}}],
            },
            i + 1,
        )
        acc.add(
            {
                "id": "g",
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "a"}}]},
                    }
                ],
            },
            i + 1,
        )
    assert (
        len(acc._content) <= JOIN_AT and len(acc._reasoning_strings["reasoning_content"]) <= JOIN_AT
    )
    assert len(acc.tool_calls[0]._parts) <= JOIN_AT
    assert acc.content == "".join(f"{i % 10}" for i in range(n))
    assert acc.reasoning == "r" * n and acc.tool_calls[0].arguments == "a" * n
