"""Stream.snapshot(): one immutable value of what arrived, taken under the Stream's lock."""

from __future__ import annotations

import dataclasses
import threading

import pytest

import nito_nb
from nito_nb._core.status import Status

CHUNK = (
    'data: {{"id":"c1","model":"m","choices":[{{"index":0,"delta":{{"content":"{text}"}},'
    '"finish_reason":null}}]}}\n\n'
)


def test_snapshot_has_what_arrived_and_does_not_change_afterwards() -> None:
    source = nito_nb.StreamSource({"model": "m", "messages": []})
    s = source.stream
    source.feed(CHUNK.format(text="Hel").encode(), s.log.t0_ns + 1_000_000)
    first = s.snapshot()
    assert first.status is Status.STREAMING and first.status == "streaming"
    assert first.content == "Hel" and first.n_chunks == 1 and first.n_token_chunks == 1
    assert first.ttft == pytest.approx(0.001) and not first.finished
    source.feed(CHUNK.format(text="lo").encode(), s.log.t0_ns + 2_000_000)
    source.feed(b"data: [DONE]\n\n", s.log.t0_ns + 3_000_000)
    source.end(s.log.t0_ns + 3_000_000)
    assert first.content == "Hel" and first.status == "streaming"  # taken before: unchanged
    last = s.snapshot()
    assert last.content == "Hello" and last.done and last.status is Status.DONE and last.finished
    assert last.elapsed == pytest.approx(0.003)
    with pytest.raises(dataclasses.FrozenInstanceError):
        last.content = "x"  # type: ignore[misc]


def test_snapshot_tool_calls_are_copies_that_later_fragments_do_not_reach() -> None:
    def tool(args: str, name: str | None = None) -> bytes:
        fn = {"arguments": args} | ({"name": name} if name else {})
        call = {"index": 0, "function": fn} | ({"id": "t1", "type": "function"} if name else {})
        import json

        chunk = {
            "id": "c",
            "model": "m",
            "choices": [{"index": 0, "delta": {"tool_calls": [call]}}],
        }
        return f"data: {json.dumps(chunk)}\n\n".encode()

    source = nito_nb.StreamSource({"model": "m"})
    s = source.stream
    source.feed(tool('{"a":', "f"), 1)
    snap = s.snapshot()
    source.feed(tool(" 1}"), 2)
    assert snap.tool_calls[0].arguments == '{"a":' and snap.tool_calls[0].name == "f"
    assert s.snapshot().tool_calls[0].arguments == '{"a": 1}'


def test_snapshot_output_tps_is_the_metrics_definition() -> None:
    s = nito_nb.read_sse(CHUNK.format(text="a") + CHUNK.format(text="b") + "data: [DONE]\n\n")
    snap = s.snapshot()
    assert snap.timed is False and snap.ttft is None and snap.output_tps is None
    assert snap.output_chunks_per_s is None  # no arrival times: undefined, like output_tps
    assert snap.n_token_chunks == 2 and snap.n_output_tokens is None  # no usage: no token count


def test_snapshot_counts_chunks_and_tokens_apart() -> None:
    usage = '{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}'
    source = nito_nb.StreamSource({"model": "m", "messages": []})
    s = source.stream
    t0 = s.log.t0_ns
    source.feed(CHUNK.format(text="several tokens ").encode(), t0 + 100_000_000)
    source.feed(CHUNK.format(text="in each chunk").encode(), t0 + 300_000_000)
    source.feed(f"data: {usage}\n\ndata: [DONE]\n\n".encode(), t0 + 500_000_000)
    source.end(t0 + 500_000_000)
    snap = s.snapshot()
    assert (snap.n_token_chunks, snap.n_output_tokens) == (2, 9)
    assert snap.output_tps == pytest.approx(9 / 0.4)  # N / (elapsed - ttft)
    assert snap.output_chunks_per_s == pytest.approx(2 / 0.4)  # K / (elapsed - ttft)


def test_snapshot_from_another_thread_never_sees_a_torn_state() -> None:
    # A writer appends fragments while readers take snapshots: the content of every snapshot is a
    # prefix of the final text, and its chunk count matches its text (taken in one step).
    source = nito_nb.StreamSource({"model": "m"})
    s = source.stream
    stop = threading.Event()
    bad: list[str] = []

    def read() -> None:
        while not stop.is_set():
            snap = s.snapshot()
            if len(snap.content) != snap.n_chunks:
                bad.append(f"{len(snap.content)} chars, {snap.n_chunks} chunks")

    readers = [threading.Thread(target=read) for _ in range(4)]
    for r in readers:
        r.start()
    for i in range(2000):
        source.feed(CHUNK.format(text="x").encode(), i)
    stop.set()
    for r in readers:
        r.join()
    assert not bad and s.snapshot().content == "x" * 2000


def test_a_status_shows_as_the_plain_word_everywhere() -> None:
    s = nito_nb.read_sse("data: [DONE]\n\n")
    assert s.status == "done" and s.status is Status.DONE
    assert str(s.status) == f"{s.status}" == "done" and repr([s.status]) == "['done']"
    assert sorted({Status.STOPPED, Status.DONE}) == ["done", "stopped"]
