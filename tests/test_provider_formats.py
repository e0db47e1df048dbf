"""Provider formats read from the providers' documentation, with no recording here: the minimal
body of each (its source in a comment), read as a Stream and as a frame, and the two compared.
docs/PROTOCOL.md, "What real providers send", points here for each."""

from __future__ import annotations

import json

import pandas as pd

import nito_nb


def body(*chunks: dict) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


def chunk(
    delta: dict | None = None, *, finish: str | None = None, model: str = "m", **extra: object
) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": choices,
        **extra,
    }


def extras(df: pd.DataFrame) -> list[dict]:
    return [json.loads(x) for x in df.extras.dropna()]


def assert_frame_agrees(s: nito_nb.Stream, df: pd.DataFrame) -> None:
    """The frame says what the Stream says (as tests/test_frame.py checks on every recording)."""
    assert df.nito.text().iloc[0] == s.content
    assert df.nito.reasoning().iloc[0] == s.reasoning
    calls = df.nito.tool_calls()
    assert [
        (
            r.index,
            None if pd.isna(r.id) else r.id,
            r.name,
            None if pd.isna(r.type) else r.type,
            r.arguments,
            r.n_fragments,
            r.valid_json,
            r.parsed,
        )
        for r in calls.itertuples()
    ] == [
        (c.index, c.id, c.name, c.type, c.arguments, c.n_fragments, c.valid_json, c.parsed)
        for c in s.tool_calls
    ]
    m = df.nito.metrics().iloc[0]
    assert (m["n_events"], m["n_chunks"], m["status"]) == (s.n_events, s.n_chunks, s.status)
    assert m["n_token_chunks"] == s.snapshot().n_token_chunks
    assert (None if pd.isna(m["finish_reason"]) else m["finish_reason"]) == s.finish_reason
    usage = df.nito.usage().iloc[0]
    if s.usage is None:
        assert usage.isna().all()
    else:
        assert usage["completion_tokens"] == s.usage["completion_tokens"]


# -- 1. Gemini's thought signature on a tool call ------------------------------------------------
# https://ai.google.dev/gemini-api/docs/thought-signatures (OpenAI compatibility): the signature
# comes in the tool call's extra_content.google.thought_signature and must be sent back with the
# call, or Gemini 3 answers 400. The body is the documented streaming example's shape.

GEMINI_SIGNATURE = {"google": {"thought_signature": "EjQKMgEMsigA"}}
GEMINI = body(
    chunk(
        {
            "role": "assistant",
            "content": "I will check the weather.",
            "extra_content": {"google": {"thought_signature": "CrIC"}},
        },
        model="gemini-3-pro-preview",
    ),
    chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "extra_content": GEMINI_SIGNATURE,
                    "function": {"arguments": '{"location":"Paris"}', "name": "get_weather"},
                    "id": "function-call-1",
                    "index": 0,
                    "type": "function",
                }
            ],
        },
        finish="tool_calls",
        model="gemini-3-pro-preview",
        usage={"completion_tokens": 20, "prompt_tokens": 30, "total_tokens": 150},
    ),
)


def test_gemini_thought_signature_on_a_tool_call_is_kept_and_sent_back() -> None:
    s = nito_nb.read_sse(GEMINI)
    (call,) = s.tool_calls
    assert call.name == "get_weather" and call.parsed == {"location": "Paris"}
    assert call.extra == {"extra_content": GEMINI_SIGNATURE}
    assert s.message["tool_calls"] == [
        {
            "extra_content": GEMINI_SIGNATURE,
            "id": "function-call-1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'},
        }
    ]
    # The delta-level signature beside the text stays a vendor field, and is not in the message.
    assert "extra_content" not in s.message
    df = s.frame()
    assert {
        "delta.tool_calls": [
            {"index": 0, "id": "function-call-1", "extra_content": GEMINI_SIGNATURE}
        ]
    } in extras(df)
    assert {"delta.extra_content": {"google": {"thought_signature": "CrIC"}}} in extras(df)
    assert_frame_agrees(s, df)


def test_tool_call_extra_keys_merge_across_fragments_last_wins() -> None:
    s = nito_nb.read_sse(
        body(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "a",
                            "function": {"name": "f", "arguments": ""},
                            "x": 1,
                            "y": 1,
                        }
                    ]
                }
            ),
            chunk(
                {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}, "y": 2}]},
                finish="tool_calls",
            ),
        )
    )
    assert s.tool_calls[0].extra == {"x": 1, "y": 2}
    assert s.message["tool_calls"][0]["y"] == 2


# -- 2. Moonshot/Kimi: usage inside the choice ---------------------------------------------------
# https://platform.moonshot.ai/docs/api/chat (streaming: the last chunk's choice carries "usage",
# and the chunk has no top-level usage).

MOONSHOT_USAGE = {
    "prompt_tokens": 39,
    "completion_tokens": 211,
    "total_tokens": 250,
    "cached_tokens": 7,
}


def moonshot(*chunks: dict) -> bytes:
    return body(*({**c, "system_fingerprint": "fpv0_ca1d2527"} for c in chunks))


def test_moonshot_usage_in_the_choice_is_taken() -> None:
    last = chunk({}, finish="stop", model="moonshot-v1-8k")
    last["choices"][0]["usage"] = MOONSHOT_USAGE
    stream_body = moonshot(
        chunk({"role": "assistant", "content": ""}, model="moonshot-v1-8k"),
        chunk({"content": "你好"}, model="moonshot-v1-8k"),
        chunk({"content": "。"}, model="moonshot-v1-8k"),
        last,
    )
    s = nito_nb.read_sse(stream_body)
    assert s.usage == MOONSHOT_USAGE and s.content == "你好。" and not s.anomalies
    assert s.snapshot().n_output_tokens == 211
    df = s.frame()
    usage = df.nito.usage().iloc[0]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["cached_tokens"]) == (
        39,
        211,
        7,
    )
    assert df.nito.metrics().iloc[0]["n_output_tokens"] == 211
    assert all("choice.usage" not in x for x in extras(df))  # read, so not a vendor field
    assert_frame_agrees(s, df)
    # Timed, tpot is defined from that usage (docs/METRICS.md).
    timed_source = nito_nb.StreamSource({"model": "moonshot-v1-8k", "messages": []})
    timed = timed_source.stream
    timed.log.t0_ns = 0
    for i, line in enumerate(stream_body.split(b"\n\n")[:-1]):
        timed_source.feed(line + b"\n\n", (i + 1) * 100_000_000)
    timed_source.end(500_000_000)
    m = timed.frame().nito.metrics().iloc[0]
    assert m["n_output_tokens"] == 211 and not pd.isna(m["tpot"]) and not pd.isna(m["output_tps"])


def test_a_top_level_usage_wins_over_the_choice_usage() -> None:
    last = chunk(
        {}, finish="stop", usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    )
    last["choices"][0]["usage"] = MOONSHOT_USAGE
    s = nito_nb.read_sse(body(chunk({"content": "a"}), last))
    assert s.usage["completion_tokens"] == 2
    df = s.frame()
    assert {"choice.usage": MOONSHOT_USAGE} in extras(df)  # not read: kept
    assert_frame_agrees(s, df)


def test_usage_in_a_content_chunks_choice_is_not_lost_to_the_shortcut() -> None:
    first = chunk({"content": "a"})
    first["choices"][0]["usage"] = MOONSHOT_USAGE
    s = nito_nb.read_sse(body(chunk({"content": "x"}), first))
    assert s.usage == MOONSHOT_USAGE and s.content == "xa"
    assert_frame_agrees(s, s.frame())


# -- 3. OpenAI custom (freeform) tools ------------------------------------------------------------
# openai-python, types/chat/chat_completion_chunk.py: ChoiceDeltaToolCall.type is "function" or
# "custom"; a custom call streams {"custom": {"name", "input"}}, its input free text (not JSON).

CUSTOM = body(
    chunk(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_abc",
                    "type": "custom",
                    "custom": {"name": "code_exec", "input": ""},
                }
            ],
        },
        model="gpt-5",
    ),
    chunk({"tool_calls": [{"index": 0, "custom": {"input": "print("}}]}, model="gpt-5"),
    chunk({"tool_calls": [{"index": 0, "custom": {"input": "'<b>hi</b>')"}}]}, model="gpt-5"),
    chunk({}, finish="tool_calls", model="gpt-5"),
    chunk(model="gpt-5", usage={"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80}),
)


def test_openai_custom_tool_call_is_read() -> None:
    s = nito_nb.read_sse(CUSTOM)
    (call,) = s.tool_calls
    assert (call.id, call.type, call.name, call.arguments) == (
        "call_abc",
        "custom",
        "code_exec",
        "print('<b>hi</b>')",
    )
    assert call.valid_json and call.json_error is None and call.parsed == "print('<b>hi</b>')"
    assert not s.anomalies
    assert s.snapshot().n_token_chunks == 2  # the input pieces are token-bearing
    assert s.message["tool_calls"] == [
        {
            "id": "call_abc",
            "type": "custom",
            "custom": {"name": "code_exec", "input": "print('<b>hi</b>')"},
        }
    ]
    df = s.frame()
    assert df.token.sum() == 2
    assert df.tool_name.dropna().tolist() == ["code_exec"]
    assert "".join(df.tool_args.dropna()) == call.arguments
    # the frame's tool_type column: the same rule as ToolCall.custom
    (row,) = df.nito.tool_calls().itertuples()
    assert (row.type, row.valid_json, row.parsed) == (
        "custom",
        True,
        "print('<b>hi</b>')",
    )  # was False, None
    assert_frame_agrees(s, df)


def test_custom_tool_call_view_shows_name_and_input_escaped() -> None:
    from nito_nb._render import final_bundle

    shown = final_bundle(nito_nb.read_sse(CUSTOM))
    assert (
        "code_exec" in shown["text/html"]
        and "print(&#x27;&lt;b&gt;hi&lt;/b&gt;&#x27;)" in shown["text/html"]
    )
    assert "<b>hi</b>" not in shown["text/html"] and "not valid JSON" not in shown["text/plain"]
    assert "print('<b>hi</b>')" in shown["text/plain"]


# -- 4. The deprecated delta.function_call --------------------------------------------------------
# openai-python, types/chat/chat_completion_chunk.py: ChoiceDelta.function_call ({name, arguments},
# "Deprecated and replaced by tool_calls"), finish_reason "function_call".

FUNCTION_CALL = body(
    chunk(
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": ""},
        },
        model="gpt-4o",
    ),
    chunk({"function_call": {"arguments": '{"city":'}}, model="gpt-4o"),
    chunk({"function_call": {"arguments": '"Paris"}'}}, model="gpt-4o"),
    chunk({}, finish="function_call", model="gpt-4o"),
    chunk(model="gpt-4o", usage={"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62}),
)


def test_deprecated_function_call_is_read_as_one_tool_call() -> None:
    s = nito_nb.read_sse(FUNCTION_CALL)
    (call,) = s.tool_calls
    assert (call.index, call.id, call.type, call.name) == (0, None, "function", "get_weather")
    assert call.parsed == {"city": "Paris"} and call.function_call
    assert s.finish_reason == "function_call"
    assert [a.kind for a in s.anomalies] == ["function-call"]
    assert s.snapshot().n_token_chunks == 2
    # Sent back as the deprecated API expects it: function_call, with no tool_calls and no id.
    assert s.message == {
        "role": "assistant",
        "content": "",
        "function_call": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    df = s.frame()
    assert df.token.sum() == 2 and df.tool_index.dropna().tolist() == [0, 0, 0]
    assert all("delta.function_call" not in x for x in extras(df))
    assert_frame_agrees(s, df)


# -- 5. OpenAI audio output -----------------------------------------------------------------------
# openai-python, types/chat/chat_completion_chunk.py (ChoiceDelta.audio: id, data, transcript,
# expires_at pieces) and https://platform.openai.com/docs/guides/audio: content is null, the
# transcript is the audio's text, and the next turn refers to the audio by {"audio": {"id": ...}}.

AUDIO = body(
    chunk({"role": "assistant", "content": None, "refusal": None}, model="gpt-4o-audio-preview"),
    chunk({"audio": {"id": "audio_1", "transcript": "Hello"}}, model="gpt-4o-audio-preview"),
    chunk({"audio": {"data": "UklGRiQAAABXQVZF"}}, model="gpt-4o-audio-preview"),
    chunk({"audio": {"transcript": " there!"}}, model="gpt-4o-audio-preview"),
    chunk({"audio": {"expires_at": 1729234747}}, model="gpt-4o-audio-preview"),
    chunk({}, finish="stop", model="gpt-4o-audio-preview"),
    chunk(
        model="gpt-4o-audio-preview",
        usage={"prompt_tokens": 20, "completion_tokens": 40, "total_tokens": 60},
    ),
)


def test_openai_audio_transcript_is_read_apart_from_content() -> None:
    s = nito_nb.read_sse(AUDIO)
    assert s.content == "" and s.audio_transcript == "Hello there!"
    assert s.audio == {"id": "audio_1", "data_chars": 16, "expires_at": 1729234747}
    assert [a.kind for a in s.anomalies] == ["audio"]  # an audio-only answer does not look empty
    assert s.snapshot().n_token_chunks == 2
    assert s.message == {"role": "assistant", "content": "", "audio": {"id": "audio_1"}}
    df = s.frame()
    assert df.token.sum() == 2
    kept = [json.loads(x) for x in df["audio"].dropna()]  # its own column, no longer in extras
    assert "".join(a.get("transcript", "") for a in kept) == s.audio_transcript
    assert "UklGRiQAAABXQVZF" not in df.to_csv()  # the base64 data is in no column
    assert df.nito.text().iloc[0] == ""
    assert_frame_agrees(s, df)


def test_an_audio_answers_transcript_is_shown_escaped() -> None:
    from nito_nb._render import join_parts, render_parts

    stream_body = body(
        chunk({"audio": {"id": "a", "transcript": "<b>Hi</b> there"}}), chunk({}, finish="stop")
    )
    s = nito_nb.read_sse(stream_body)
    assert s.snapshot().audio_transcript == "<b>Hi</b> there"
    shown = join_parts(render_parts(s.snapshot(), live=False))  # was only the anomaly's note
    assert (
        "Audio transcript" in shown["text/html"]
        and "&lt;b&gt;Hi&lt;/b&gt; there" in shown["text/html"]
    )
    assert "<b>Hi</b>" not in shown["text/html"] and "<b>Hi</b> there" in shown["text/plain"]


def test_no_audio_no_audio_fields() -> None:
    s = nito_nb.read_sse(body(chunk({"content": "hi"})))
    assert s.audio is None and s.audio_transcript is None and "audio" not in s.message


# -- 6. OpenRouter: reasoning_details sent back -------------------------------------------------
# https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks: when tool
# calling, the assistant message must carry the reasoning_details as received.

OPENROUTER = body(
    chunk(
        {
            "role": "assistant",
            "content": "",
            "reasoning_details": [
                {
                    "type": "reasoning.text",
                    "text": "Let me ",
                    "index": 0,
                    "format": "anthropic-claude-v1",
                }
            ],
        }
    ),
    chunk(
        {
            "reasoning_details": [
                {"type": "reasoning.text", "text": "look.", "index": 0, "signature": "sig1"}
            ]
        }
    ),
    chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "opaque", "index": 1}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                }
            ]
        },
        finish="tool_calls",
    ),
)


def test_openrouter_reasoning_details_are_in_the_message() -> None:
    s = nito_nb.read_sse(OPENROUTER)
    details = [
        {
            "type": "reasoning.text",
            "index": 0,
            "text": "Let me look.",
            "signature": "sig1",
            "format": "anthropic-claude-v1",
        },
        {"type": "reasoning.encrypted", "index": 1, "data": "opaque"},
    ]
    assert s.reasoning_details == details
    assert s.message["reasoning_details"] == details and s.message["tool_calls"][0]["id"] == "t1"
    assert s.messages[-1] == s.message
    assert_frame_agrees(s, s.frame())
    # Only when the stream had some.
    assert (
        "reasoning_details"
        not in nito_nb.read_sse(
            body(chunk({"reasoning": "plain"}), chunk({"content": "x"}))
        ).message
    )


def test_audio_of_an_unexpected_shape_is_kept_and_noted() -> None:
    s = nito_nb.read_sse(body(chunk({"audio": {"id": "a", "data": 7, "transcript": 5}})))
    assert s.audio == {"id": "a", "data": 7, "transcript": 5} and s.audio_transcript == ""
    assert {a.kind for a in s.anomalies} == {"audio", "bad-field"}
    assert_frame_agrees(s, s.frame())


def test_perplexity_cost_object_gives_its_total_cost() -> None:
    # Perplexity's usage.cost is an object (input_tokens_cost, output_tokens_cost, request_cost,
    # total_cost); the cost column read only a number and was NaN.
    cost = {
        "input_tokens_cost": 0.00144,
        "output_tokens_cost": 0.04234,
        "request_cost": 0.008,
        "total_cost": 0.05178,
    }
    usage = {
        "prompt_tokens": 480,
        "completion_tokens": 2823,
        "total_tokens": 3303,
        "search_context_size": "medium",
        "cost": cost,
    }
    s = nito_nb.read_sse(
        body(
            chunk({"content": "Hi"}, model="sonar"),
            chunk({}, finish="stop", model="sonar"),
            {"id": "c1", "model": "sonar", "choices": [], "usage": usage},
        )
    )
    assert s.usage == usage  # the object is kept as sent
    df = s.frame()
    assert df.nito.usage()["cost"].iloc[0] == 0.05178
    assert_frame_agrees(s, df)
