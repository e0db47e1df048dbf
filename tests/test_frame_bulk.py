"""The frame's bulk path (``_frame/cuts.py``, ``_frame/pieces.py``) gives the frame of every chunk
parsed whole, on every chunk shape of ``bench/shapes.py`` and every recording.

A log of many chunks is planned in bulk, a short one chunk by chunk: each test runs on both.
The cuts are found for all chunks at once with numpy; the rule is ``cuts.cut_one``, for one
chunk, which the bulk search must agree with everywhere (strings longer than its windows, escapes
across a window's end, padding as sent and not). The skeletons are grouped with pyarrow, or
with Python bytes without it: both must give the same frame.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest
from conftest import frame_parsed_whole

import nito_nb
from nito_nb._core.log import CHUNK
from nito_nb._frame import cuts, dtypes, pieces, plan

REAL = Path(__file__).parent / "data" / "real"
_spec = importlib.util.spec_from_file_location(
    "bench_shapes", Path(__file__).parent.parent / "bench" / "shapes.py"
)
assert _spec is not None and _spec.loader is not None
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)

BODIES = {f"shape:{name}": shapes.build(name, 300) for name in shapes.SHAPES} | {
    path.name: path.read_bytes() for path in sorted(REAL.glob("*.sse"))
}


def _long_texts() -> bytes:
    """Texts around the windows' ends (32 and 32 + 1024 bytes): escaped quotes and backslashes
    on either side, and paddings as sent and not."""
    lines = []
    for length in [*range(0, 40), *range(1040, 1070), 3000]:
        for tail in ("", '"', "\\", 'a\\"', "\\\\", "é"):
            text = "x" * length + tail
            for padding in (None, "", "aZ9" * (length % 7), 'a"b', "é"):
                chunk: dict[str, Any] = {
                    "id": "c",
                    "model": "m",
                    "choices": [{"index": 0, "delta": {"content": text}}],
                }
                if padding is not None:
                    chunk["obfuscation"] = padding
                lines.append(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n")
    return ("".join(lines) + "data: [DONE]\n\n").encode()


BODIES["long-texts"] = _long_texts()


@pytest.fixture(autouse=True, params=["in bulk", "one by one"])
def _planned(request: pytest.FixtureRequest) -> Any:
    """Every test on both paths: logs planned in bulk (any length), and one chunk at a time (the
    path of short logs, below ``plan._BULK_FROM`` chunks)."""
    with patch.object(plan, "_BULK_FROM", 0 if request.param == "in bulk" else 10**9):
        yield


def _chunks(stream: nito_nb.Stream) -> tuple[bytes, np.ndarray, np.ndarray]:
    log = stream.log
    kinds = np.frombuffer(log.kind_codes(), dtype=np.uint8)
    ends = np.array(log.offsets(), dtype=np.int64)
    starts = np.concatenate([np.zeros(1, np.int64), ends[:-1]])
    seqs = np.flatnonzero(kinds == CHUNK)
    return log.body, starts[seqs], ends[seqs]


@pytest.mark.parametrize("name", list(BODIES))
def test_the_bulk_cuts_are_the_rule_of_one_chunk(name: str) -> None:
    body, firsts, lasts = _chunks(nito_nb.read_sse(BODIES[name]))
    found = cuts.cut_all(body, firsts, lasts)
    for row, (first, last) in enumerate(zip(firsts.tolist(), lasts.tolist(), strict=True)):
        one = cuts.cut_one(body, first, last)
        assert tuple(found[row]) == ((-1,) * 6 if one is None else one), (name, row)


@pytest.mark.parametrize("name", list(BODIES))
def test_the_bulk_frame_is_the_frame_of_every_chunk_parsed_whole(name: str) -> None:
    stream = nito_nb.read_sse(BODIES[name])
    fast = nito_nb.frame(stream)
    slow = frame_parsed_whole(stream)
    assert list(fast.columns) == list(slow.columns)
    assert (fast.dtypes == slow.dtypes).all()
    pd.testing.assert_frame_equal(fast, slow)
    # the padding, random in every OpenAI chunk, is kept in each row's extras (never dropped)
    assert fast["extras"].equals(slow["extras"])
    if name == "shape:openai":
        assert fast["extras"].str.contains('"obfuscation"').sum() >= 300


@pytest.mark.parametrize("name", ["shape:openai", "shape:tools", "openai-content-1.sse"])
def test_the_skeletons_group_alike_without_pyarrow(name: str) -> None:
    stream = nito_nb.read_sse(BODIES[name])
    with_arrow = nito_nb.frame(stream)
    with (
        patch.object(pieces, "_arrow", lambda: None),
        patch.object(plan, "_arrow", lambda: None),
        patch.object(dtypes, "_arrow", lambda: None),
    ):
        without = nito_nb.frame(stream)
    pd.testing.assert_frame_equal(with_arrow, without)


def test_many_streams_share_skeletons_and_keep_their_own_rows() -> None:
    # Skeletons are kept across the streams of one frame: each stream's rows still get their own
    # texts, paddings and values.
    streams = [nito_nb.read_sse(BODIES[name]) for name in ("shape:openai", "shape:uniform")] * 2
    together = nito_nb.frame(streams)
    alone = pd.concat([nito_nb.frame(s) for s in streams], ignore_index=True)
    for column in ("content", "extras", "id", "model", "reasoning", "tool_args"):
        assert together[column].tolist() == alone[column].tolist(), column


@pytest.mark.parametrize("name", list(BODIES))
def test_the_guessed_cuts_once_checked_are_the_rule_of_one_chunk(name: str) -> None:
    # The frame guesses where most chunks' strings are (cuts.guess_all) and checks one chunk of
    # each skeleton: what it then uses is cut_one's, chunk by chunk.
    body, firsts, lasts = _chunks(nito_nb.read_sse(BODIES[name]))
    found, _ = pieces.pieces_of(body, firsts, lasts)
    for row, (first, last) in enumerate(zip(firsts.tolist(), lasts.tolist(), strict=True)):
        one = cuts.cut_one(body, first, last)
        assert tuple(found[row]) == ((-1,) * 6 if one is None else one), (name, row)


def test_a_chunk_unlike_the_guess_is_cut_by_the_rule() -> None:
    # Chunks whose content sits where the first one's does, but with a "content" key earlier in
    # the chunk (inside another field's object, the same size), and chunks with a padding.
    same = 'data: {"id":"c","x":{"a":"bbbbbbbbbbbbbb"},"choices":[{"delta":{"content":"%s"}}]}\n\n'
    other = 'data: {"id":"c","x":{"content":"bbbbbbbb"},"choices":[{"delta":{"content":"%s"}}]}\n\n'
    padded = 'data: {"id":"c","obfuscation":"ab","choices":[{"delta":{"content":"%s"}}]}\n\n'
    kinds = (padded, same, other)  # the first chunk (a same) is the first guess
    lines = [kinds[i % 3] % f"w{i}" for i in range(1, 60)]
    stream = nito_nb.read_sse(("".join(lines) + "data: [DONE]\n\n").encode())
    body, firsts, lasts = _chunks(stream)
    guess, _ = cuts.guess_all(body, firsts, lasts)
    found, _ = pieces.pieces_of(body, firsts, lasts)
    assert (guess != found).any()  # some guesses were wrong, and the check found them
    for row, (first, last) in enumerate(zip(firsts.tolist(), lasts.tolist(), strict=True)):
        one = cuts.cut_one(body, first, last)
        assert tuple(found[row]) == ((-1,) * 6 if one is None else one), row
    pd.testing.assert_frame_equal(nito_nb.frame(stream), frame_parsed_whole(stream))


def test_a_refusal_beside_an_empty_content_carries_text_on_both_paths() -> None:
    # The skeleton's own text counts as the chunk's (hypothesis found it: the frame's token was
    # False where the chunk read whole says True).
    def chunk(delta: dict[str, Any]) -> bytes:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}], "usage": None,
                "obfuscation": ""}  # fmt: skip
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    body = b"".join([chunk({"content": "", "refusal": ":"}), chunk({"content": "x"})] * 3)
    stream = nito_nb.read_sse(body + b"data: [DONE]\n\n")
    fast = nito_nb.frame(stream)
    pd.testing.assert_frame_equal(fast, frame_parsed_whole(stream))
    assert fast["token"].tolist()[1:7] == [True] * 6  # row 0: the response
