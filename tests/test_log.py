"""The chunk log: events, times and bytes; JSON Lines save/load that gives back the same Stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REAL, chunk_line, real_recordings
from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb
from nito_nb._core.log import ChunkLog


def fed(*reads: tuple[int, bytes], end: int | None = None, **end_kwargs: object) -> nito_nb.Stream:
    """A Stream fed by hand: (arrival time in ns since t0, bytes) per read."""
    source = nito_nb.StreamSource(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "params": {}}
    )
    s = source.stream
    s.log.t0_ns = 1_000
    s.log.set_response(
        200, {"content-type": "text/event-stream", "Set-Cookie": "x"}, 1_000 + 5_000_000
    )
    for t, data in reads:
        source.feed(data, 1_000 + t)
    source.end(1_000 + (end if end is not None else reads[-1][0]), **end_kwargs)  # type: ignore[arg-type]
    return s


def same(a: nito_nb.Stream, b: nito_nb.Stream) -> None:
    assert [(e.seq, e.t_ns, e.kind, e.raw) for e in a.log] == [
        (e.seq, e.t_ns, e.kind, e.raw) for e in b.log
    ]
    for name in (
        "content",
        "reasoning",
        "reasoning_details",
        "finish_reason",
        "usage",
        "error",
        "done",
        "status",
        "model",
        "ttft",
        "ttfb",
        "elapsed",
        "timed",
        "n_chunks",
        "n_events",
        "request",
        "web_search",
        "free_tier",
    ):
        assert getattr(a, name) == getattr(b, name), name
    assert [(c.id, c.name, c.arguments) for c in a.tool_calls] == [
        (c.id, c.name, c.arguments) for c in b.tool_calls
    ]
    assert [(x.kind, x.seq, x.count) for x in a.anomalies] == [
        (x.kind, x.seq, x.count) for x in b.anomalies
    ]
    assert type(a.exception) is type(b.exception)
    assert (
        a.log.t0_wall == b.log.t0_wall
        and a.log.headers == b.log.headers
        and a.log.status_code == b.log.status_code
    )


def test_events_have_times_kinds_and_raw_bytes() -> None:
    s = fed(
        (10_000_000, b": PROCESSING\n\n"),
        (20_000_000, chunk_line({"role": "assistant", "content": "Hi"}) + b"data: nope\n\n"),
        (30_000_000, b"data: 42\n\ndata:\n\ndata: [DONE]\n\n"),
    )
    assert [e.kind for e in s.log] == ["comment", "chunk", "bad-data", "other", "empty", "done"]
    assert [round(e.t, 3) for e in s.log] == [0.01, 0.02, 0.02, 0.03, 0.03, 0.03]
    first, second = s.log[0], s.log[1]
    assert first.comment == "PROCESSING" and first.data is None and first.raw == b": PROCESSING\n"
    assert second.chunk["choices"][0]["delta"]["content"] == "Hi" and second.event == "message"
    assert s.log[-1].data == "[DONE]" and s.log[-1].chunk is None
    assert s.ttft == pytest.approx(0.02) and s.ttfb == pytest.approx(0.005)
    assert [a.kind for a in s.anomalies] == ["bad-data", "not-an-object"]
    assert "set-cookie" not in s.log.headers
    with pytest.raises(IndexError):
        s.log[6]


def test_save_and_load_give_the_same_stream(tmp_path: Path) -> None:
    s = fed(
        (1_000_000, b": keep-alive\n\n"),
        (
            2_000_000,
            chunk_line(
                {
                    "role": "assistant",
                    "reasoning_details": [{"type": "reasoning.text", "text": "t", "index": 0}],
                }
            ),
        ),
        (
            3_000_000,
            chunk_line(
                {
                    "content": "héllo \U0001f600",
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
                    ],
                }
            ),
        ),
        (4_000_000, chunk_line({}, finish="stop", usage={"total_tokens": 3}) + b"data: [DONE]\n\n"),
    )
    loaded = nito_nb.load(s.save(tmp_path / "run.jsonl"))
    same(s, loaded)
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["nito_nb_log"] == 1 and json.loads(lines[-1]) == {
        "end": {"status": "done"}
    }


@pytest.mark.parametrize(
    ("reads", "end_kwargs", "status"),
    [
        ([(1, chunk_line({"content": "cut"}))], {}, "truncated"),
        (
            [
                (
                    1,
                    chunk_line(
                        {"content": "x"}, finish="error", error={"code": 502, "message": "down"}
                    ),
                )
            ],
            {},
            "error",
        ),
        ([(1, chunk_line({"content": "stop me"}))], {"status": "stopped"}, "stopped"),
        (
            [(1, chunk_line({"content": "lost"}))],
            {"status": "truncated", "exception": nito_nb.ConnectionLost("gone")},
            "truncated",
        ),
        ([(1, b"data: \xff\xfe not utf-8\n\n")], {}, "truncated"),
    ],
)
def test_every_ending_survives_save_and_load(
    tmp_path: Path, reads: list, end_kwargs: dict, status: str
) -> None:
    s = fed(*reads, **end_kwargs)
    assert s.status == status
    same(s, nito_nb.load(s.save(tmp_path / "x.jsonl")))


@pytest.mark.parametrize("path", real_recordings(), ids=lambda p: p.stem)
def test_recordings_round_trip(tmp_path: Path, path: Path) -> None:
    s = nito_nb.read_sse(path)
    same(s, nito_nb.load(s.save(tmp_path / "r.jsonl")))


def test_a_recording_has_no_times_and_keeps_none_when_saved(tmp_path: Path) -> None:
    s = nito_nb.read_sse(REAL / "openrouter-content-1.sse")
    assert not s.timed and (s.ttft, s.ttfb, s.elapsed) == (None, None, None)
    assert "no arrival times" in repr(s) and "ttft" not in repr(s)
    path = s.save(tmp_path / "r.jsonl")
    assert json.loads(path.read_text().splitlines()[0])["timed"] is False
    assert not nito_nb.load(path).timed
    # A log saved before the "timed" key existed was always a timed one.
    live = fed((1_000_000, chunk_line({"content": "hi"})), (2_000_000, b"data: [DONE]\n\n"))
    lines = live.save(tmp_path / "old.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    del header["timed"]
    (tmp_path / "old.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    old = nito_nb.load(tmp_path / "old.jsonl")
    assert old.timed and old.ttft == live.ttft is not None


def test_failed_request_round_trips(tmp_path: Path) -> None:
    s = nito_nb.read_sse(REAL / "openrouter-http-error-1.sse", status_code=429)
    loaded = nito_nb.load(s.save(tmp_path / "f.jsonl"))
    assert (
        loaded.status == "failed"
        and loaded.log[0].kind == "http-error"
        and loaded.log[0].raw == s.log[0].raw
    )


def test_load_rejects_what_is_not_a_log(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"hello": 1}\n')
    with pytest.raises(nito_nb.LogFormatError, match="read_sse"):
        nito_nb.load(tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_text('{"nito_nb_log": 99}\n')
    with pytest.raises(nito_nb.LogFormatError, match="upgrade nito_nb"):
        nito_nb.load(tmp_path / "b.jsonl")
    # (a bad last line is a cut file, loaded: see test_a_cut_log_loads_what_is_complete_with_a_note)
    (tmp_path / "c.jsonl").write_text(
        '{"nito_nb_log": 1, "t0_wall": null}\nnot json\n{"end": {}}\n'
    )
    with pytest.raises(nito_nb.LogFormatError, match="line 2"):
        nito_nb.load(tmp_path / "c.jsonl")


def test_a_cut_log_loads_what_is_complete_with_a_note(tmp_path: Path) -> None:
    s = fed(
        *[(i * 1_000_000, chunk_line({"content": f"w{i} "})) for i in range(10)],
        (11_000_000, b"data: [DONE]\n\n"),
    )
    text = s.save(tmp_path / "whole.jsonl").read_text()
    lines = text.splitlines(keepends=True)
    # Cut inside the 6th event's line (the header is line 1): the five events before it load.
    (tmp_path / "cut.jsonl").write_text("".join(lines[:6]) + lines[6][:20])
    cut = nito_nb.load(tmp_path / "cut.jsonl")
    assert cut.content == "w0 w1 w2 w3 w4 " and cut.status == "truncated"
    assert [a.kind for a in cut.anomalies] == ["cut-log"]
    assert "last line (7) is incomplete" in cut.anomalies[0].message
    # Cut at a line boundary before the end record: every event, and the note.
    (tmp_path / "no-end.jsonl").write_text("".join(lines[:-1]))
    no_end = nito_nb.load(tmp_path / "no-end.jsonl")
    assert no_end.content == s.content and no_end.status == "done"
    assert [a.kind for a in no_end.anomalies] == ["cut-log"]
    # A whole log has no note; a damaged line that is not the last is still an error.
    assert nito_nb.load(tmp_path / "whole.jsonl").anomalies == []
    (tmp_path / "damaged.jsonl").write_text("".join(lines[:3]) + "garbage\n" + "".join(lines[3:]))
    with pytest.raises(nito_nb.LogFormatError, match="line 4"):
        nito_nb.load(tmp_path / "damaged.jsonl")


def test_read_sse_of_a_path_that_is_missing_or_not_sse(tmp_path: Path) -> None:
    # A str that is not SSE text is a path: a missing one is an error, not an empty stream.
    with pytest.raises(FileNotFoundError, match=r"does/not/exist\.sse"):
        nito_nb.read_sse("does/not/exist.sse")
    with pytest.raises(FileNotFoundError):
        nito_nb.read_sse(tmp_path / "missing.sse")
    # SSE text stays text, also on one line without its blank line.
    assert nito_nb.read_sse("data: [DONE]").done
    assert nito_nb.read_sse(": keep-alive").n_events == 1
    assert nito_nb.read_sse('{"error": {"code": 429, "message": "slow down"}}').status == "failed"
    s = fed((0, chunk_line({"content": "hi"})), (1, b"data: [DONE]\n\n"))
    s.frame().to_csv(tmp_path / "f.csv", index=False)
    s.save(tmp_path / "log.jsonl")
    (tmp_path / "page.sse").write_text("<html><body>Bad gateway</body></html>")
    with pytest.raises(nito_nb.LogFormatError, match="CSV file"):
        nito_nb.read_sse(tmp_path / "f.csv")
    with pytest.raises(nito_nb.LogFormatError, match=r"saved by Stream.save.*nito_nb.load"):
        nito_nb.read_sse(str(tmp_path / "log.jsonl"))
    with pytest.raises(nito_nb.LogFormatError, match=r"holds no server-sent event .*<html>"):
        nito_nb.read_sse(tmp_path / "page.sse")
    (tmp_path / "empty.sse").write_bytes(b"")  # an empty recording is an empty, truncated stream
    assert nito_nb.read_sse(tmp_path / "empty.sse").status == "truncated"


def test_log_memory_is_close_to_the_raw_bytes() -> None:
    body = b"".join(chunk_line({"content": f"w{i} "}) for i in range(5_000)) + b"data: [DONE]\n\n"
    s = nito_nb.read_sse(body)
    assert len(s.log) == 5_001 and s.log.body == body
    assert s.log.nbytes <= len(body) + 17 * len(s.log)


def test_clean_headers_drops_credentials() -> None:
    from nito_nb._core.log import clean_headers

    assert clean_headers({"Authorization": "Bearer x", "Cookie": "c", "X-Request-Id": "r"}) == {
        "x-request-id": "r"
    }
    assert repr(ChunkLog()) == "<ChunkLog 0 events, 0 bytes>"


@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=5))
@settings(max_examples=200, deadline=None)
def test_garbage_bodies_never_raise_and_round_trip(body: bytes, cuts: list[int]) -> None:
    whole = nito_nb.read_sse(body)
    source = nito_nb.StreamSource({"model": "m"})
    s = source.stream
    points = sorted({c % (len(body) + 1) for c in cuts})
    for a, b in zip([0, *points], [*points, len(body)], strict=True):
        source.feed(body[a:b], 0)
    source.end(0)
    if whole.status != "failed":
        assert (s.content, s.status, s.n_events) == (whole.content, whole.status, whole.n_events)
    lines = list(whole.log.to_lines())
    assert json.loads(lines[0])["nito_nb_log"] == 1


def test_offsets_say_where_each_event_ends_in_the_body() -> None:
    s = nito_nb.read_sse('data: {"a": 1}\n\n: keep-alive\n\ndata: [DONE]\n\n')
    log = s.log
    ends = list(log.offsets())
    body = log.body
    assert len(ends) == len(log) == 3 and ends[-1] == len(body)
    starts = [0, *ends[:-1]]
    assert [body[a:b] for a, b in zip(starts, ends, strict=True)] == [e.raw for e in log]


# -- runs of identical comments (issue 28) ---------------------------------------------------------

KEEP_ALIVE = b": keep-alive\n\n"


def test_a_run_of_identical_comments_in_one_read_is_counted_not_stored(tmp_path: Path) -> None:
    from nito_nb._core.log import COMMENT_RUN

    body = KEEP_ALIVE * 1000 + chunk_line({"content": "Hi"}) + b"data: [DONE]\n\n"
    s = fed((7, body))
    # The first comment, then the run of the same bytes (each after the blank line before it):
    # COMMENT_RUN of them logged, the rest counted on the last one; then the chunk and [DONE].
    assert len(s.log) == 1 + COMMENT_RUN + 2 and s.content == "Hi" and s.status == "done"
    comments = [e for e in s.log if e.kind == "comment"]
    assert sum(e.repeat for e in comments) == 1000 and comments[-1].repeat == 1000 - COMMENT_RUN
    assert b"".join(e.raw * e.repeat for e in s.log) == body  # every byte still accounted for
    loaded = nito_nb.load(s.save(tmp_path / "x.jsonl"))
    same(s, loaded)
    assert [e.repeat for e in loaded.log] == [e.repeat for e in s.log]
    assert len(s.frame()) == len(loaded.frame())  # the frame builds, one row per event logged


def test_comments_that_came_apart_keep_their_own_times() -> None:
    # A thinking model's keep-alives, each in a read of its own: every one is logged, with its time.
    s = fed(
        *[(i * 1_000_000, KEEP_ALIVE) for i in range(COMMENTS_APART)], (10**9, b"data: [DONE]\n\n")
    )
    assert len(s.log) == COMMENTS_APART + 1 and all(e.repeat == 1 for e in s.log)


COMMENTS_APART = 200


def test_a_counted_run_crosses_to_another_process_and_back() -> None:
    from nito_nb._recordings import from_log

    s = fed(
        (7, KEEP_ALIVE * 500 + chunk_line({"content": "Hi"})),
        end=9,
        status="truncated",
        exception=nito_nb.ConnectionLost("gone"),
    )
    back = from_log(s.log)  # what a run's worker sends for a stream that ended with an error
    assert [(e.kind, e.raw, e.repeat) for e in back.log] == [
        (e.kind, e.raw, e.repeat) for e in s.log
    ]


def test_a_repeat_that_is_not_a_count_is_one_line(tmp_path: Path) -> None:
    s = fed((7, KEEP_ALIVE * 100))
    path = s.save(tmp_path / "x.jsonl")
    lines = path.read_text().splitlines()
    lines = [line.replace('"repeat": ', '"repeat": -') for line in lines]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(nito_nb.LogFormatError, match=r"'repeat' is -.* a whole number >= 1"):
        nito_nb.load(path)
