"""ChunkParser: its shortcut gives exactly what json.loads gives, whatever the chunks."""

from __future__ import annotations

import json

import pytest
from conftest import real_recordings
from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb
from nito_nb._core.layout import ChunkParser


def test_repeated_layout_is_rebuilt_not_parsed() -> None:
    parser = ChunkParser()
    base = '{"id":"g","model":"m","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}'
    first, content = parser.parse(base % "Hel")
    assert content == "Hel" and first == json.loads(base % "Hel")
    second, content = parser.parse(base % "lo")
    assert content == "lo" and second == json.loads(base % "lo")
    assert list(second) == list(json.loads(base % "lo"))  # keys in the order sent
    assert second["choices"] is not first["choices"]  # nothing shared between two results


def test_a_field_that_changes_on_every_chunk_does_not_grow_the_templates() -> None:
    # The simulator's send stamp, OpenAI's obfuscation padding: no chunk's layout ever repeats.
    from nito_nb._core.layout import MAX_TEMPLATES

    parser = ChunkParser()
    base = '{"sim_sent_ns":%d,"id":"g","choices":[{"index":0,"delta":{"content":"x%d"},"finish_reason":null}]}'
    for i in range(10 * MAX_TEMPLATES):
        assert parser.parse(base % (i, i)) == (json.loads(base % (i, i)), f"x{i}")
    assert len(parser._templates) <= MAX_TEMPLATES


@pytest.mark.parametrize(
    "data",
    [
        '{"id":"g","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}',  # finished
        '{"id":"g","web_search":null,"choices":[{"index":0,"delta":{"content":"x"}}]}',  # meaningful key
        '{"id":"g","usage":7,"choices":[{"index":0,"delta":{"content":"x"}}]}',  # a usage that is not null
        '{"id":"g","choices":[{"index":1,"delta":{"content":"x"}}]}',  # another choice
        '{"id":"g","choices":[{"delta":{"content":"x","role":"assistant"}}]}',  # more than content
    ],
)
def test_chunks_that_are_not_plain_content_are_parsed(data: str) -> None:
    parser = ChunkParser()
    for _ in range(2):
        value, content = parser.parse(data)
        assert value == json.loads(data) and content is None


@pytest.mark.parametrize("path", real_recordings(), ids=lambda p: p.stem)
def test_every_recorded_chunk_equals_json_loads(path) -> None:  # type: ignore[no-untyped-def]
    parser = ChunkParser()
    for event in nito_nb.read_sse(path).log:
        if event.kind == "chunk":
            data = event.data
            assert parser.parse(data)[0] == json.loads(data)


scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=4))
texts = st.text(alphabet=st.sampled_from(list('ab "\\\n\u00e9{}:,')), max_size=6)


@st.composite
def chunks(draw: st.DrawFn) -> str:
    top = draw(
        st.dictionaries(
            st.sampled_from(["id", "model", "object", "usage", "provider", "x"]),
            scalars | st.just({"k": 1}),
            max_size=3,
        )
    )
    delta = {"content": draw(texts)}
    if draw(st.booleans()):
        delta.update(
            draw(st.dictionaries(st.sampled_from(["role", "reasoning"]), scalars, max_size=1))
        )
    choice = {
        "index": draw(st.sampled_from([0, 0, 1])),
        "delta": delta,
        "finish_reason": draw(st.sampled_from([None, None, "stop"])),
    }
    value = {**top, "choices": [choice]}
    spaced = draw(st.booleans())
    return json.dumps(
        value, ensure_ascii=draw(st.booleans()), separators=(", ", ": ") if spaced else (",", ":")
    )


@given(st.lists(chunks(), min_size=1, max_size=12))
@settings(max_examples=300, deadline=None)
def test_any_sequence_parses_like_json_loads(datas: list[str]) -> None:
    parser = ChunkParser()
    for data in datas:
        value, content = parser.parse(data)
        assert value == json.loads(data)
        if content is not None:
            assert value["choices"][0]["delta"] == {"content": content}


@given(
    st.lists(chunks(), min_size=1, max_size=12),
    st.lists(st.sampled_from(["g1", "g2", ""]), min_size=12, max_size=12),
)
@settings(max_examples=300, deadline=None)
def test_the_shortcut_accumulates_like_the_full_rules(datas: list[str], ids: list[str]) -> None:
    from nito_nb._core.accumulate import Accumulator

    # Same chunks, with ids that change now and then: through the Stream (shortcut) and
    # through Accumulator.add alone, the results and the anomalies noted are the same.
    datas = [
        json.dumps({**json.loads(d), "id": i}, separators=(",", ":"))
        for d, i in zip(datas, ids, strict=False)
    ]
    stream = nito_nb.read_sse("".join(f"data: {d}\n\n" for d in datas).encode())
    full = Accumulator()
    for seq, d in enumerate(datas):
        full.add(json.loads(d), seq)
    assert (stream.content, stream.finish_reason, stream.n_chunks, stream.role) == (
        full.content,
        full.finish_reason,
        full.n_chunks,
        full.role,
    )
    assert [(a.kind, a.seq, a.count) for a in stream.anomalies if a.kind != "unterminated"] == [
        (a.kind, a.seq, a.count) for a in full.anomalies
    ]


def test_escaped_strings_are_read_by_the_scanner_and_kept_as_templates() -> None:
    # Tool arguments are JSON, full of \\": the string is read by json's C scanner, its layout kept.
    parser = ChunkParser()
    for text in ['a"b', "x\\ny", 'q"']:
        data = (
            '{"id":"g","choices":[{"index":0,"delta":{"content":'
            + json.dumps(text)
            + '},"finish_reason":null}]}'
        )
        assert parser.parse(data) == (json.loads(data), text)
    assert len(parser._templates) == 1


def test_a_chunk_with_a_nested_value_is_content_but_never_a_template() -> None:
    # A template would share the nested object between two results: such a layout is not kept,
    # its content is still the reader's (the accumulator takes it as plain content).
    data = '{"id":"g","x":{"y":1},"choices":[{"index":0,"delta":{"content":"x"}}]}'
    parser = ChunkParser()
    first, _ = parser.parse(data)
    second, content = parser.parse(data)
    assert second == json.loads(data) and content == "x" and not parser._templates
    assert second["x"] is not first["x"]


def test_content_parts_take_the_json_loads_path() -> None:
    # Mistral's list-valued content is never a template: parsed whole, and no content string.
    data = '{"id":"g","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a\\"b"}]}}]}'
    parser = ChunkParser()
    for _ in range(2):
        value, content = parser.parse(data)
        assert value == json.loads(data) and content is None
