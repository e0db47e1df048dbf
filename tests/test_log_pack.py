"""A packed log (``ChunkLog.pack``: what a run keeps of its streams without a store) reads exactly
as it did: every event, time, offset and byte, its frame, its save; writing to it unpacks it
first; it crosses to another process and back packed. An ended state forgets its layouts."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from conftest import chunk_line, real_recordings
from pandas.testing import assert_frame_equal
from test_log import KEEP_ALIVE, fed, same

import nito_nb
from nito_nb._core.log import CHUNK, ChunkLog
from nito_nb._recordings import from_log, from_wire, to_wire


def reading(log: ChunkLog) -> tuple[Any, ...]:
    """Everything a reader can ask a log for its events."""
    n = len(log)
    return (
        [(e.seq, e.t_ns, e.t, e.kind, e.raw, e.repeat, e.data) for e in log],
        [log[seq] for seq in range(n)],  # by index, each decompressed up to its own event
        [log[-1]] if n else [],
        list(log.times_ns()),
        list(log.offsets()),
        log.kind_codes(),
        log.body,
        bytes(log.body_buffer()),
        list(log.raw_slices()),
        list(log.to_lines()),
        [log.repeat(seq) for seq in range(n)],
        n,
        repr(log),
    )


def timed() -> nito_nb.Stream:
    """A stream with times of its own per read, a counted run of comments, content and usage."""
    words = [chunk_line({"content": f"w{i} "}) for i in range(40)]
    return fed(
        (10, KEEP_ALIVE * 100),
        (2_000_000, b"".join(words[:15])),
        *[(3_000_000 + i * 7_919, word) for i, word in enumerate(words[15:])],
        (90_000_000, chunk_line(finish="stop", usage={"completion_tokens": 40})),
        (90_000_001, b"data: [DONE]\n\n"),
    )


@pytest.mark.parametrize("path", real_recordings(), ids=lambda p: p.stem)
def test_a_packed_recording_reads_and_frames_as_before(path: Path) -> None:
    s = nito_nb.read_sse(path)
    before, frame, snapshot = reading(s.log), s.frame(), s.snapshot()
    s.log.pack()
    assert s.log.packed
    assert reading(s.log) == before
    assert_frame_equal(s.frame(), frame)
    assert s.snapshot() == snapshot


def test_a_packed_timed_log_keeps_every_time_to_the_nanosecond(tmp_path: Path) -> None:
    s = timed()
    before, frame = reading(s.log), s.frame()
    metrics = (s.ttft, s.ttfb, s.elapsed, s.snapshot().last_event, s.snapshot().last_token)
    size = s.log.nbytes
    s.log.pack()
    assert reading(s.log) == before and s.log.packed
    assert_frame_equal(s.frame(), frame)
    assert (s.ttft, s.ttfb, s.elapsed, s.snapshot().last_event, s.snapshot().last_token) == metrics
    assert s.log.nbytes < size / 5  # what it holds now
    same(s, nito_nb.load(s.save(tmp_path / "packed.jsonl")))
    same(s, from_log(s.log))  # what a worker sends back for a stream that ended with an error
    s.log.pack()  # again: nothing changes
    assert reading(s.log) == before and s.log.packed


def test_writing_to_a_packed_log_unpacks_it_first_and_shifting_keeps_it_packed() -> None:
    plain, packed = timed().log, timed().log
    packed.t0_wall = plain.t0_wall  # made a moment apart
    packed.pack()
    for log in (plain, packed):
        log.extend(95_000_000, bytes([CHUNK]), [chunk_line({"content": "more"})])
        log.rewrite(1, b": rewritten\n\n")
        log.append(96_000_000, CHUNK, chunk_line({"content": "last"}))
    assert not packed.packed and reading(packed) == reading(plain)
    packed.pack()
    for log in (plain, packed):
        log.shift(-123_456_789)  # onto another process's clock
        assert log.last_is(CHUNK, 96_000_000 - 123_456_789, chunk_line({"content": "last"}))
    assert packed.packed and reading(packed) == reading(plain)
    empty = packed.without_events()
    assert not empty.packed and len(empty) == 0 and empty.body == b""
    empty.append(5, CHUNK, b"data: {}\n\n")
    assert empty.body == b"data: {}\n\n" and reading(packed) == reading(plain)


def test_a_state_with_a_packed_log_crosses_processes_and_stays_packed() -> None:
    s = timed()
    s.log.pack()
    back = from_wire(pickle.loads(pickle.dumps(to_wire(s))))
    assert back.log.packed and reading(back.log) == reading(s.log)
    same(s, back)
    # A log pickled unpacked (as every one was before packing) has no packed bytes of its own.
    assert "_packed" not in vars(pickle.loads(pickle.dumps(timed().log)))


def test_an_ended_state_forgets_its_layouts_and_its_chunks_still_build() -> None:
    source = nito_nb.StreamSource({"model": "m"})
    body = b"".join(chunk_line({"content": f"w{i} "}) for i in range(20))
    chunks = source.feed(body, 5)
    assert source.stream._state.parser._templates  # learnt while the stream ran
    source.feed(b"data: [DONE]\n\n", 6)
    source.end(7)
    state = source.stream._state
    assert not state.parser._templates and state.parser._last is None
    # the chunks handed out before the end hold their layouts themselves
    assert [c["choices"][0]["delta"]["content"] for c in chunks] == [f"w{i} " for i in range(20)]
    assert source.stream.content == "".join(f"w{i} " for i in range(20))


def test_a_run_without_a_store_keeps_its_logs_packed_and_reads_them_whole() -> None:
    run = nito_nb.run(
        [f"request {i}" for i in range(12)],
        model="sim/chat",
        concurrency=4,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
        max_tokens=60,
    )
    run.wait(timeout=60)
    kept = run._writer.kept_streams()
    assert len(kept) == 12 and all(stream.log.packed for stream in kept.values())
    bodies = sum(len(stream.log.body) for stream in kept.values())
    assert sum(stream.log.nbytes for stream in kept.values()) < bodies / 5
    results = run.results().set_index("key")
    rows = {}
    for key, stream in kept.items():
        unpacked = from_log(stream.log)  # the same stream, its log rebuilt event by event
        assert not unpacked.log.packed
        assert_frame_equal(stream.frame(), unpacked.frame())
        assert results.loc[key, "content"] == stream.content == unpacked.content
        rows[key] = len(unpacked.frame())
    assert run.frame().groupby("stream").size().to_dict() == rows
