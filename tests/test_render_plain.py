"""The text/plain of a long answer: its head and tail, one line for the rest (_render/plain.py)."""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace
from typing import Any

import pytest
from display_samples import make_state, sample_answer

from nito_nb._render import final_bundle, render_parts
from nito_nb._render import plain as plain_rule
from nito_nb._render.plain import HEAD_CHARS, TAIL_CHARS, excerpt, piece


def done_state(**fields: Any) -> SimpleNamespace:
    return make_state(status="done", done=True, finish_reason="stop", **fields)


def test_a_short_text_stays_whole() -> None:
    text = "x" * (HEAD_CHARS + TAIL_CHARS)
    assert excerpt(text) == text
    assert piece(text, 0, len(text), last=True) == text


def test_a_long_text_keeps_its_head_and_tail_and_says_what_was_left_out() -> None:
    text = "".join(f"{i:07d}\n" for i in range(20_000))  # 160,000 characters
    shown = excerpt(text)
    left = len(text) - HEAD_CHARS - TAIL_CHARS
    assert shown.startswith(text[:HEAD_CHARS] + "\n… ")
    assert shown.endswith(" …\n" + text[-TAIL_CHARS:])
    line = shown[HEAD_CHARS + 1 : -TAIL_CHARS - 1]
    assert "\n" not in line
    assert f"{left:,} characters left out" in line and "_nito.content" in line
    assert len(shown) < HEAD_CHARS + TAIL_CHARS + 200


@pytest.mark.parametrize("size", [10, 5_000, 7_999, 8_000, 8_001, 9_000, 60_000])
def test_pieces_read_in_order_are_the_excerpt(size: int) -> None:
    # The rule a live view relies on: however the answer is cut into blocks, their text/plain,
    # the last one's included, reads as the excerpt of the whole.
    text = "".join(chr(97 + i % 26) for i in range(size))
    rng = random.Random(size)
    for _ in range(30):
        cuts = sorted({0, size, *(rng.randrange(size) for _ in range(rng.randint(0, 12)))})
        pieces = [piece(text, a, b, last=b == size) for a, b in itertools.pairwise(cuts)]
        assert "".join(pieces) == excerpt(text)


def test_a_growing_last_piece_carries_only_its_own_characters() -> None:
    text = "y" * 50_000
    # A live tail of 1,000 characters far past the head: just those, no line (the final adds it).
    assert piece(text, 49_000, 50_000, last=True, growing=True) == "y" * 1_000
    # A live tail longer than the tail: its last TAIL_CHARS.
    assert piece(text, 10_000, 50_000, last=True, growing=True) == "y" * TAIL_CHARS
    # A live tail that straddles the head: its share of the head, and its own end.
    assert piece(text, 4_000, 6_000, last=True, growing=True) == "y" * 2_000


def test_final_bundle_of_a_long_answer_carries_it_once() -> None:
    answer = sample_answer(200_000)
    state = done_state(content=answer)
    bundle = final_bundle(state)
    text = bundle["text/plain"]
    assert answer[:HEAD_CHARS] in text and text.endswith(answer[-TAIL_CHARS:])
    assert len(text) < HEAD_CHARS + TAIL_CHARS + 400  # and the status line
    # The HTML still shows everything: the middle of the answer is in it.
    assert "Sentence 21.3 talks about &lt;b&gt;tags&lt;/b&gt;" in bundle["text/html"]
    assert len(bundle["text/html"]) > len(answer)


def test_the_plain_text_of_a_long_answer_shows_control_characters_as_escapes() -> None:
    answer = "\x1b[2J" + "z" * 20_000 + "\x1b]52;c;bad\x07\u202e"
    text = final_bundle(done_state(content=answer))["text/plain"]
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b[2J" in text and text.endswith("\\x1b]52;c;bad\\x07\\u202e")


def test_long_reasoning_and_tool_arguments_keep_their_head_and_tail() -> None:
    reasoning = "r" * 30_000
    arguments = '{"text": "' + "a" * 30_000 + '"}'
    call = SimpleNamespace(
        index=0, id="call_1", name="write", arguments=arguments, valid_json=False, json_error=None
    )
    state = done_state(content="The answer.", reasoning=reasoning, tool_calls=[call])
    text = final_bundle(state)["text/plain"]
    assert len(text) < 3 * (HEAD_CHARS + TAIL_CHARS)
    assert "_nito.reasoning" in text and ".tool_calls[0].arguments" in text
    parts = {p.key: p for p in render_parts(state, live=False)}
    # Their HTML and their text stay whole.
    assert parts["reasoning"].text.endswith(reasoning) and reasoning in parts["reasoning"].html
    assert arguments in parts["tool-0"].text


def test_the_head_and_tail_sizes_are_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests of block splitting widen them to see all of an answer's text in its outputs.
    monkeypatch.setattr(plain_rule, "HEAD_CHARS", 10)
    monkeypatch.setattr(plain_rule, "TAIL_CHARS", 5)
    shown = plain_rule.excerpt("0123456789abcdefghijKLMNO")
    assert shown.startswith("0123456789\n… 10 characters") and shown.endswith("…\nKLMNO")
