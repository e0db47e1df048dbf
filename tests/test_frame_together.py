"""Short logs of one frame planned together (``_frame/plan.py`` ``_plan_together``) give the frame
of each log planned on its own, and of every chunk parsed whole.

A run store's batch (128 streams of a few hundred events) and ``run.frame()`` over many kept
Streams are many short logs: planned one by one, each paid a plan's fixed cost; together, their
chunks are cut, grouped by skeleton and placed at once, over their bodies joined. Nothing of one
log may leak into another's rows: texts, paddings, tokens after [DONE], tool indexes, reasoning
sources, comments, the categories' order.
"""

from __future__ import annotations

import importlib.util
import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pandas as pd
import pytest
from conftest import frame_parsed_whole
from hypothesis import given, settings
from hypothesis import strategies as st
from test_frame_openrouter import stream as openrouter_stream
from test_varying_layout import _new_texts, chunk

import nito_nb
from nito_nb._frame import dtypes, pieces, plan

REAL = Path(__file__).parent / "data" / "real"
RECORDINGS = [path.read_bytes() for path in sorted(REAL.glob("*.sse"))]
_spec = importlib.util.spec_from_file_location(
    "bench_shapes", Path(__file__).parent.parent / "bench" / "shapes.py"
)
assert _spec is not None and _spec.loader is not None
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)


@st.composite
def log(draw: st.DrawFn) -> bytes:
    """One short log: chunks of a few drawn layouts (each with texts of its own), OpenRouter's
    reasoning chunks, or the start of a real recording; with comments, [DONE] anywhere (chunks
    after it are ignored by the answer) or none."""
    source = draw(st.sampled_from(["layouts", "layouts", "openrouter", "recording"]))
    if source == "recording":
        events = draw(st.sampled_from(RECORDINGS)).split(b"\n\n")
        return b"\n\n".join(events[: draw(st.integers(1, 40))]) + b"\n\n"
    if source == "openrouter":
        values = draw(openrouter_stream())
    else:
        layouts = draw(st.lists(chunk(), min_size=1, max_size=3))
        values = []
        for _ in range(draw(st.integers(1, 12))):
            value = json.loads(json.dumps(draw(st.sampled_from(layouts))))
            for one in value["choices"]:
                _new_texts(draw, one["delta"])
            values.append(value)
    spaced = draw(st.booleans())
    lines = [
        "data: "
        + json.dumps(v, ensure_ascii=False, separators=(", ", ": ") if spaced else (",", ":"))
        + "\n\n"
        for v in values
    ]
    for _ in range(draw(st.integers(0, 2))):
        lines.insert(draw(st.integers(0, len(lines))), ": keep-alive\n\n")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "data: [DONE]\n\n")
    return "".join(lines).encode()


def _framed(streams: dict[str, Any], **limits: int) -> pd.DataFrame:
    with ExitStack() as stack:
        for name, value in limits.items():
            stack.enter_context(patch.object(plan, name, value))
        return nito_nb.frame(streams)


def _streams(bodies: list[bytes]) -> dict[str, Any]:
    return {f"s{i}": nito_nb.read_sse(body) for i, body in enumerate(bodies)}


@given(
    st.lists(log(), min_size=2, max_size=8),
    st.integers(0, 40),
    st.integers(1, 80),
    st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_short_logs_planned_together_frame_as_each_alone(
    bodies: list[bytes], alone_from: int, up_to: int, arrow: bool
) -> None:
    # alone_from: logs of this many chunks or more are planned alone (in bulk), between groups of
    # shorter ones; up_to: a group is planned once it has this many chunks.
    streams = _streams(bodies)
    with ExitStack() as stack:
        if not arrow:  # an install without pyarrow: the skeletons grouped with Python bytes
            for module in (pieces, plan, dtypes):
                stack.enter_context(patch.object(module, "_arrow", lambda: None))
        together = _framed(streams, _BULK_FROM=alone_from, _TOGETHER_FROM=0, _TOGETHER_UP_TO=up_to)
        one_by_one = _framed(streams, _BULK_FROM=10**9, _TOGETHER_FROM=10**9)
        whole = frame_parsed_whole(streams)
    pd.testing.assert_frame_equal(together, one_by_one)
    pd.testing.assert_frame_equal(together, whole)
    assert together.attrs == one_by_one.attrs


def test_a_short_logs_categories_come_in_row_order() -> None:
    # hypothesis found it: a chunk parsed whole (choice 1's) above a plain one of another model;
    # planned one chunk at a time, the plain chunk's model was placed first, and the categories
    # of ``model`` were ["gpt-5", ""] where the bulk path and every chunk parsed whole say
    # ["", "gpt-5"].
    def chunk(model: str, index: int) -> bytes:
        return (
            b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"%s",'
            b'"choices":[{"index":%d,"delta":{"content":""},"finish_reason":null}],'
            b'"usage":null,"obfuscation":""}\n\n' % (model.encode(), index)
        )

    streams = _streams([b"data: [DONE]\n\n" + chunk("", 1) + chunk("gpt-5", 0)])
    one_by_one = _framed(streams, _BULK_FROM=10**9)
    assert one_by_one["model"].cat.categories.tolist() == ["", "gpt-5"]
    pd.testing.assert_frame_equal(one_by_one, frame_parsed_whole(streams))
    pd.testing.assert_frame_equal(one_by_one, _framed(streams, _BULK_FROM=0))


@pytest.mark.parametrize("shape", shapes.SHAPES)
def test_a_store_batch_of_short_streams_is_planned_once(shape: str) -> None:
    # 128 short streams (a run store's batch; sim/chat's are about 270 events): one plan for all
    # of them, not 128 (each under plan._BULK_FROM chunks, they were planned one by one). Their
    # frame is the frame of each planned alone.
    bodies = [shapes.build(shape, 100 + i, [f"w{i}", f" {i}\\n", "é"]) for i in range(128)]
    calls = []
    original = plan.pieces_of

    def counted(*args: Any) -> Any:
        calls.append(len(args[1]))
        return original(*args)

    streams = _streams(bodies)
    with patch.object(plan, "pieces_of", counted):
        together = _framed(streams)
    assert len(calls) == 1 and calls[0] >= 128 * 100
    pd.testing.assert_frame_equal(together, _framed(streams, _TOGETHER_FROM=10**9))


#: Ids as gateways send them, and as they could: empty, another field's value (the model, a
#: tool call's id), escaped, quoted, a tab (raw: the chunk is not JSON).
CHUNK_IDS = st.one_of(
    st.sampled_from(["", "gpt-5", "call_1", "chatcmpl-2"]),
    st.text(alphabet=st.sampled_from(list('ab-1é"\\\t')), max_size=4).map("chatcmpl-x{}".format),
)


@given(log(), st.lists(CHUNK_IDS, min_size=2, max_size=6), st.lists(st.booleans(), min_size=6))
@settings(max_examples=150, deadline=None)
def test_streams_that_differ_only_in_their_chunk_ids_frame_as_each_read_whole(
    body: bytes, ids: list[str], raw: list[bool]
) -> None:
    # A batch's streams differ in their chunk id (each stream has its own): the skeleton of one
    # is the skeleton of the next with the id changed (_frame/ids.py). Each row's id is its
    # own stream's; an id that is not plain JSON (escaped, or raw and breaking the JSON) is read
    # from its own bytes.
    bodies = []
    for chunk_id, as_it_is in zip(ids, raw, strict=False):
        spelled = (
            f'"{chunk_id}"'.encode() if as_it_is else json.dumps(chunk_id).encode()
        )  # raw: maybe not JSON at all
        one = body
        for spacing in (b"", b" "):
            one = one.replace(b'"id":%s"chatcmpl-1"' % spacing, b'"id":%s' % spacing + spelled)
        bodies.append(one)
    streams = _streams(bodies)
    whole = frame_parsed_whole(streams)
    for limits in (
        {"_BULK_FROM": 10**9, "_TOGETHER_FROM": 0},  # together: the streams' chunks at once
        {"_BULK_FROM": 0},  # each alone, in bulk
        {"_BULK_FROM": 10**9, "_TOGETHER_FROM": 10**9},  # each alone, chunk by chunk
    ):
        pd.testing.assert_frame_equal(_framed(streams, **limits), whole, obj=str(limits))


def test_a_skeleton_read_for_one_stream_is_made_again_for_another_with_its_own_id() -> None:
    # 40 streams of one shape, each its own id: their skeletons are read once, then made for
    # each stream by changing the id (a fifth of a run store's events helper was reading them).
    bodies = [
        shapes.build("openai", 30, ["w", " x", "é"]).replace(
            b'"id":"chatcmpl-', b'"id":"chatcmpl-%d-' % i
        )
        for i in range(40)
    ]
    streams = _streams(bodies)
    read = []
    original = plan._Planner._skeleton

    def counted(self: Any, key: bytes, *args: Any, **kwargs: Any) -> int:
        read.append(key)
        return original(self, key, *args, **kwargs)

    with patch.object(plan._Planner, "_skeleton", counted):
        together = _framed(streams)
    assert 0 < len(read) < 10, len(read)
    assert together.groupby("stream", observed=True)["id"].nunique().eq(1).all()
    pd.testing.assert_frame_equal(together, frame_parsed_whole(streams))
