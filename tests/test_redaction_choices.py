"""A key echoed by a choice other than the first (``n > 1``), split across chunks: every choice's
text is a channel of its own (docs/SECURITY.md). Before, only choice 0's text and every choice's
logprobs tokens were followed across chunks; another choice's content kept a split key."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb

KEY = "sk-test-SECRET123"
MARK = "[redacted]"


def _delta(channel: str, piece: str) -> dict[str, Any]:
    if channel == "tool":
        return {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
    return {channel: piece}


def chunk(choices: list[tuple[int, str, str]]) -> bytes:
    """One chunk with a choice per (index, channel, piece)."""
    body = {
        "id": "g",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": index, "delta": _delta(channel, piece), "finish_reason": None}
            for index, channel, piece in choices
        ],
    }
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


def protected() -> nito_nb.StreamSource:
    source = nito_nb.StreamSource({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    source.protect(KEY)
    return source


def text_of(choice: Any, channel: str) -> str:
    if channel == "tool":
        return "".join(call.arguments for call in choice.tool_calls)
    return getattr(choice, "reasoning" if channel == "reasoning_content" else channel) or ""


def no_key_anywhere(s: nito_nb.Stream, tmp_path: Path) -> None:
    assert KEY.encode() not in s.log.body
    assert KEY not in s.save(tmp_path / "s.jsonl").read_text()
    assert KEY not in repr(s.choices)
    frame = s.frame()
    for column in ("content", "reasoning", "refusal", "tool_arguments"):
        if column in frame:
            assert KEY not in "".join(frame[column].dropna().astype(str))
    for e in s.log:
        if e.kind == "chunk":
            assert KEY not in json.dumps(json.loads(e.data), ensure_ascii=False)


@pytest.mark.parametrize("channel", ["content", "reasoning_content", "refusal", "tool"])
@pytest.mark.parametrize("cut", [1, 5, 8, len(KEY) - 1])
@pytest.mark.parametrize("index", [1, 2])
def test_another_choices_split_key_is_redacted(
    channel: str, cut: int, index: int, tmp_path: Path
) -> None:
    source = protected()
    s = source.stream
    source.feed(chunk([(0, "content", "zero "), (index, channel, f"key {KEY[:cut]}")]), 1)
    source.feed(chunk([(index, channel, f"{KEY[cut:]} end")]), 2)
    source.feed(chunk([(0, "content", "done")]), 3)
    source.feed(b"data: [DONE]\n\n", 4)
    source.end(5)
    assert s.content == "zero done"  # choice 0 untouched
    other = next(c for c in s.choices if c.index == index)
    assert KEY not in text_of(other, channel)
    assert text_of(other, channel) == f"key {MARK}{MARK} end"
    no_key_anywhere(s, tmp_path)


def test_two_choices_each_holding_half_a_key_do_not_make_one(tmp_path: Path) -> None:
    # The halves are in different choices: no choice echoed the key, nothing is taken out.
    source = protected()
    s = source.stream
    source.feed(chunk([(0, "content", KEY[:6]), (1, "content", KEY[6:])]), 1)
    source.feed(b"data: [DONE]\n\n", 2)
    source.end(3)
    assert s.content == KEY[:6] and s.choices[1].content == KEY[6:]


@settings(max_examples=60, deadline=None)
@given(
    cuts=st.lists(st.integers(1, len(KEY) - 1), min_size=1, max_size=4, unique=True),
    reads=st.integers(1, 97),
)
def test_any_split_of_another_choices_key_never_shows(cuts: list[int], reads: int) -> None:
    bounds = [0, *sorted(cuts), len(KEY)]
    pieces = [KEY[a:b] for a, b in itertools.pairwise(bounds)]
    body = b"".join(
        [
            chunk([(0, "content", "a"), (1, "content", "x ")]),
            *(chunk([(1, "content", piece), (0, "content", "b")]) for piece in pieces),
            chunk([(1, "content", " y")]),
            b"data: [DONE]\n\n",
        ]
    )
    source = protected()
    for i in range(0, len(body), reads):
        source.feed(body[i : i + reads], i)
    source.end(len(body))
    s = source.stream
    assert KEY.encode() not in s.log.body
    shown = s.choices[1].content
    assert KEY not in shown and shown.startswith("x ") and shown.endswith(" y")
    assert s.content == "a" + "b" * len(pieces)


def test_another_choices_start_of_a_key_stays_back_while_it_arrives() -> None:
    source = protected()
    s = source.stream
    source.feed(chunk([(0, "content", "a"), (1, "content", f"x {KEY[:9]}")]), 1)
    assert [c.content for c in s.choices] == ["a", "x "]  # the start of the key is held back
    source.feed(chunk([(1, "content", f"{KEY[9:]} y")]), 2)
    source.feed(b"data: [DONE]\n\n", 3)
    source.end(4)
    assert s.choices[1].content == f"x {MARK}{MARK} y"
