"""The pandas adapter: frames, metrics by hand-computed values, every recording, round trips,
the accessor's errors, plots. No timing assertions (bench/bench_frame.py measures speed)."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from conftest import REAL, chunk_line, real_recordings
from hypothesis import given, settings
from hypothesis import strategies as st

import nito_nb
from nito_nb._frame import COLUMNS
from nito_nb._render import status_text

matplotlib.use("Agg")

MS = 1_000_000


def timed(
    events: list[tuple[float, bytes]], *, ttfb: float | None = 0.05, end: float | None = None
) -> nito_nb.Stream:
    """A finished Stream fed ``(seconds since request, bytes)`` reads through the I/O-free API."""
    source = nito_nb.StreamSource(
        {"model": "test/model", "messages": [{"role": "user", "content": "hi"}]}
    )
    s = source.stream
    s.log.t0_ns = 0
    if ttfb is not None:
        s.log.set_response(200, {"content-type": "text/event-stream"}, round(ttfb * 1e9))
    for t, data in events:
        source.feed(data, round(t * 1e9))
    last = events[-1][0] if events else 0.0
    source.end(round((end if end is not None else last) * 1e9))
    return s


def usage_line(completion: int, prompt: int = 10, **extra: object) -> bytes:
    chunk = {
        "id": "gen-1",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            **extra,
        },
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def hand_stream() -> nito_nb.Stream:
    return timed(
        [
            (0.100, chunk_line({"role": "assistant", "content": ""})),
            (0.150, chunk_line({"reasoning": "think"})),
            (0.200, b": PROCESSING\n\n"),
            (0.300, chunk_line({"content": "Hel"})),
            (0.350, chunk_line({"content": "lo"})),
            (0.600, chunk_line({"content": "!"})),
            (0.650, chunk_line({}, finish="stop")),
            (0.700, usage_line(5, cost=0.25, completion_tokens_details={"reasoning_tokens": 1})),
            (0.710, DONE),
        ]
    )


# -- metrics by hand ------------------------------------------------------------------------------


def test_metrics_match_hand_computed_values() -> None:
    s = hand_stream()
    m = s.frame().nito.metrics().iloc[0]
    # Token-bearing events at 0.150 (reasoning), 0.300, 0.350, 0.600: K = 4; usage says N = 5.
    assert m["ttfb"] == pytest.approx(0.05)
    assert m["ttft"] == pytest.approx(0.15) == pytest.approx(s.ttft)
    assert m["ttfc"] == pytest.approx(0.30)
    assert m["e2e"] == pytest.approx(0.71)
    assert m["itl"] == pytest.approx((0.60 - 0.15) / 3)
    assert m["tpot"] == pytest.approx((0.60 - 0.15) / 4)
    assert m["output_tps"] == pytest.approx(5 / (0.71 - 0.15))
    assert m["output_chunks_per_s"] == pytest.approx(4 / (0.71 - 0.15))
    # Gaps 0.15, 0.05, 0.25: linear-interpolated percentiles of [0.05, 0.15, 0.25].
    assert m["itl_p50"] == pytest.approx(0.15)
    assert m["itl_p90"] == pytest.approx(0.23)
    assert m["itl_p99"] == pytest.approx(0.248)
    assert m["itl_max"] == pytest.approx(0.25)
    assert (m["n_events"], m["n_chunks"], m["n_token_chunks"], m["n_output_tokens"]) == (9, 7, 4, 5)
    assert m["finish_reason"] == "stop" and pd.isna(m["error"])
    assert m["status"] == "done" and m["http_status"] == 200 and m["model"] == "test/model"


def test_metrics_without_usage_have_no_token_figures() -> None:
    s = timed(
        [(0.1, chunk_line({"content": "a"})), (0.3, chunk_line({"content": "b"})), (0.4, DONE)]
    )
    m = s.frame().nito.metrics().iloc[0]
    # Chunks are not tokens: the per-token columns are NA, the per-chunk ones are defined.
    assert undefined(m, "n_output_tokens", "tpot", "output_tps")
    assert m["n_token_chunks"] == 2 and m["itl"] == pytest.approx(0.2)
    assert m["output_chunks_per_s"] == pytest.approx(2 / (0.4 - 0.1))


def packed_and_bare_streams() -> tuple[nito_nb.Stream, nito_nb.Stream]:
    """Over HTTP from the simulator: a real recording whose chunks hold several tokens each (K =
    27 token-bearing chunks, usage N = 228), and a stream sent without usage."""
    packed = nito_nb.stream(
        "x", model="sim/replay", sim={"replay": str(REAL / "openai-content-1.sse"), "tps": 400}
    )
    bare = nito_nb.stream(
        "x", model="sim/chat", sim={"tps": 400}, stream_options={"include_usage": False}
    )
    packed.wait()
    bare.wait()
    return packed, bare


PER_TOKEN = ("n_output_tokens", "tpot", "output_tps")
PER_CHUNK = ("n_token_chunks", "itl", "itl_p50", "itl_p90", "itl_p99", "itl_max",
             "output_chunks_per_s")  # fmt: skip


def test_a_column_never_mixes_tokens_and_chunks() -> None:
    packed, bare = packed_and_bare_streams()
    m = nito_nb.frame({"packed": packed, "bare": bare}).nito.metrics()
    assert "tokens_source" not in m.columns and not m.columns.str.startswith("gap").any()
    p, b = m.loc["packed"], m.loc["bare"]
    assert (p["n_token_chunks"], p["n_output_tokens"]) == (27, 228)
    # Without usage the token columns are NA (not the chunk count), the chunk columns are set.
    assert undefined(b, *PER_TOKEN)
    assert not undefined(b, *PER_CHUNK) and b["n_token_chunks"] > 2
    assert not undefined(p, *PER_TOKEN, *PER_CHUNK)
    span = p["e2e"] - p["ttft"]
    assert p["output_tps"] == pytest.approx(228 / span)
    assert p["output_chunks_per_s"] == pytest.approx(27 / span)
    assert p["tpot"] == pytest.approx(p["itl"] * 26 / 227)
    # The snapshot and the status line take the same figures from the same functions.
    for s, row in ((packed, p), (bare, b)):
        snap = s.snapshot()
        assert snap.n_token_chunks == row["n_token_chunks"]
        assert snap.output_chunks_per_s == pytest.approx(row["output_chunks_per_s"])
        if pd.isna(row["n_output_tokens"]):
            assert snap.n_output_tokens is None and snap.output_tps is None
        else:
            assert snap.n_output_tokens == row["n_output_tokens"]
            assert snap.output_tps == pytest.approx(row["output_tps"])
    assert f"{p['output_tps']:,.1f} tok/s (usage)" in status_text(packed.snapshot())
    bare_line = status_text(bare.snapshot())
    assert f"{b['output_chunks_per_s']:,.1f} chunks/s" in bare_line and "tok/s" not in bare_line


def test_usage_table() -> None:
    u = hand_stream().frame().nito.usage().iloc[0]
    assert (
        u["prompt_tokens"],
        u["completion_tokens"],
        u["total_tokens"],
        u["reasoning_tokens"],
    ) == (10, 5, 15, 1)
    assert pd.isna(u["cached_tokens"]) and u["cost"] == pytest.approx(0.25)


def undefined(m: pd.Series, *names: str) -> bool:
    return all(pd.isna(m[name]) for name in names)


def test_edge_empty_answer() -> None:
    s = timed(
        [
            (0.1, chunk_line({"role": "assistant", "content": ""})),
            (0.2, chunk_line({}, finish="stop")),
            (0.3, DONE),
        ]
    )
    df = s.frame()
    m = df.nito.metrics().iloc[0]
    assert undefined(m, "ttft", "ttfc", "itl", "tpot", "output_tps", "itl_p50", "itl_max")
    assert undefined(m, "output_chunks_per_s", "n_output_tokens")  # no usage sent
    assert m["n_token_chunks"] == 0 and m["e2e"] == pytest.approx(0.3)
    assert df.nito.text().iloc[0] == "" and df.nito.tool_calls().empty


def test_edge_single_chunk() -> None:
    s = timed(
        [
            (0.2, chunk_line({"content": "all at once"}, finish="stop")),
            (0.2, usage_line(3)),
            (0.25, DONE),
        ]
    )
    m = s.frame().nito.metrics().iloc[0]
    assert m["ttft"] == pytest.approx(0.2) and m["n_token_chunks"] == 1
    assert undefined(m, "itl", "tpot", "itl_p50", "itl_max")  # one event spans no time
    assert m["output_tps"] == pytest.approx(3 / 0.05)


def test_edge_error_stream() -> None:
    error = {
        "id": "gen-1",
        "error": {"code": 502, "message": "Upstream provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    s = timed(
        [
            (0.1, chunk_line({"content": "part"})),
            (0.2, b"data: " + json.dumps(error).encode() + b"\n\n"),
            (0.3, DONE),
        ]
    )
    df = s.frame()
    m = df.nito.metrics().iloc[0]
    assert m["status"] == "error" == s.status
    assert m["error"] == "Upstream provider disconnected" and m["finish_reason"] == "error"
    row = df[df.error_message.notna()].iloc[0]
    assert row["error_code"] == "502"
    assert df.nito.text().iloc[0] == "part"


def test_edge_event_error_without_done() -> None:
    body = b'event: error\ndata: {"message": "overloaded", "code": "overloaded_error"}\n\n'
    s = timed([(0.1, chunk_line({"content": "x"})), (0.2, body)])
    df = s.frame()
    m = df.nito.metrics().iloc[0]
    assert m["status"] == "error" and m["error"] == "overloaded" == s.error["message"]


def test_edge_truncated_stream() -> None:
    s = timed([(0.1, chunk_line({"content": "cut "})), (0.2, chunk_line({"content": "short"}))])
    m = s.frame().nito.metrics().iloc[0]
    assert m["status"] == "truncated" and pd.isna(m["finish_reason"])
    assert m["itl"] == pytest.approx(0.1) and m["n_events"] == 2


def test_edge_comments_only() -> None:
    s = timed([(0.1, b": PROCESSING\n\n"), (0.5, b": PROCESSING\n\n")])
    df = s.frame()
    m = df.nito.metrics().iloc[0]
    assert undefined(m, "ttft", "ttfc", "itl", "tpot", "output_tps")
    assert m["e2e"] == pytest.approx(0.5) and m["n_events"] == 2 and m["n_chunks"] == 0
    assert df.comment.dropna().tolist() == ["PROCESSING", "PROCESSING"]


def test_edge_http_error_and_no_headers_time() -> None:
    s = nito_nb.read_sse(b'{"error": {"code": 429, "message": "Rate limited"}}', status_code=429)
    df = s.frame()
    m = df.nito.metrics().iloc[0]
    assert m["status"] == "failed" and m["error"] == "Rate limited" and m["http_status"] == 429
    assert undefined(m, "ttft", "itl")
    assert m["ttfb"] == s.ttfb if s.ttfb is not None else pd.isna(m["ttfb"])
    assert df.kind.tolist() == ["response", "http-error"]


def test_chunks_after_done_are_ignored() -> None:
    s = timed(
        [
            (0.1, chunk_line({"content": "kept"})),
            (0.2, DONE),
            (0.3, chunk_line({"content": " late"})),
        ]
    )
    df = s.frame()
    assert df.ignored.tolist() == [False, False, False, True]
    assert df.nito.text().iloc[0] == "kept" == s.content
    assert df.nito.metrics().iloc[0]["n_chunks"] == 1 == s.n_chunks


# -- the frame ----------------------------------------------------------------------------------


def test_columns_and_dtypes() -> None:
    df = hand_stream().frame()
    assert list(df.columns) == list(COLUMNS)
    assert {name: str(dtype) for name, dtype in df.dtypes.items()} == COLUMNS
    assert df.kind.tolist()[:3] == ["response", "chunk", "chunk"]
    assert df.seq.tolist() == list(range(-1, 9))
    assert df.t.iloc[0] == pytest.approx(0.05)
    assert df.gap.iloc[2] == pytest.approx(0.05) and math.isnan(df.gap.iloc[1])
    assert df.bytes.iloc[1:].sum() == len(hand_stream().log.body)
    assert df.token.tolist() == [False, False, True, False, True, True, True, False, False, False]
    assert df.reasoning_type.dropna().tolist() == ["reasoning"]


def test_one_row_per_fragment_with_parts() -> None:
    both = {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_a",
                "type": "function",
                "function": {"name": "a", "arguments": '{"x":'},
            },
            {
                "index": 1,
                "id": "call_b",
                "type": "function",
                "function": {"name": "b", "arguments": '{"y":'},
            },
        ]
    }
    more = {
        "tool_calls": [
            {"index": 1, "function": {"arguments": " 2}"}},
            {"index": 0, "function": {"arguments": " 1}"}},
        ]
    }
    details = {
        "reasoning_details": [
            {"type": "reasoning.text", "index": 0, "text": "first"},
            {"type": "reasoning.encrypted", "index": 1, "data": "c2VjcmV0"},
            {"type": "reasoning.summary", "index": 2, "summary": "sum"},
        ],
        "reasoning": "firstsum",
    }
    s = timed(
        [
            (0.1, chunk_line(details)),
            (0.2, chunk_line(both)),
            (0.3, chunk_line(more)),
            (0.4, chunk_line({}, finish="tool_calls")),
            (0.5, DONE),
        ]
    )
    df = s.frame()
    assert df.seq.tolist() == [-1, 0, 0, 0, 1, 1, 2, 2, 3, 4]
    assert df.part.tolist() == [0, 0, 1, 2, 0, 1, 0, 1, 0, 0]
    assert df.reasoning_type.tolist()[1:4] == [
        "reasoning.text",
        "reasoning.encrypted",
        "reasoning.summary",
    ]
    assert pd.isna(df.reasoning.iloc[2])  # encrypted data is never text
    args = df.dropna(subset=["tool_index"]).groupby("tool_index").tool_args.agg("".join)
    assert args.tolist() == [c.arguments for c in s.tool_calls] == ['{"x": 1}', '{"y": 2}']
    calls = df.nito.tool_calls()
    assert calls[["index", "id", "name", "n_fragments"]].values.tolist() == [
        [0, "call_a", "a", 2],
        [1, "call_b", "b", 2],
    ]
    assert calls.parsed.tolist() == [{"x": 1}, {"y": 2}] and calls.valid_json.all()
    assert calls.t_first.tolist() == [0.2, 0.2] and calls.t_last.tolist() == [0.3, 0.3]
    assert df.nito.reasoning().iloc[0] == s.reasoning == "first\n\nsum"
    m = df.nito.metrics().iloc[0]
    assert m["n_events"] == 5 == s.n_events and m["n_token_chunks"] == 3


def test_extras_web_search_free_tier_kept_whole() -> None:
    s = timed(
        [
            (
                0.1,
                chunk_line(
                    {"content": "x", "refusal": None, "annotations": []},
                    provider="P",
                    web_search={"results": [1, 2]},
                    free_tier={"ok": True},
                ),
            ),
            (0.2, DONE),
        ]
    )
    row = s.frame().iloc[1]
    assert json.loads(row["extras"]) == {"provider": "P", "delta.annotations": []}
    assert pd.isna(row["refusal"])  # a known field (its own column), null here
    assert json.loads(row["web_search"]) == {"results": [1, 2]} == s.web_search
    assert json.loads(row["free_tier"]) == {"ok": True}


RECORDINGS = real_recordings()


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_every_recording(path: Path) -> None:
    s = nito_nb.read_sse(path)
    df = nito_nb.frame(path)
    assert df.stream.cat.categories.tolist() == [path.stem]
    assert df.nito.text().iloc[0] == s.content
    assert df.nito.reasoning().iloc[0] == s.reasoning
    # Joining the content column gives the content (the frame is lossless for the answer).
    assert "".join(df.content[~df.ignored].dropna()) == s.content
    calls = df.nito.tool_calls()
    expected = [
        (c.index, c.id, c.name, c.arguments, c.valid_json, c.n_fragments) for c in s.tool_calls
    ]
    got = [
        (r.index, None if pd.isna(r.id) else r.id, r.name, r.arguments, r.valid_json, r.n_fragments)
        for r in calls.itertuples()
    ]
    assert got == expected
    assert calls.parsed.tolist() == [c.parsed for c in s.tool_calls]
    m = df.nito.metrics().iloc[0]
    assert (m["n_events"], m["n_chunks"], m["status"]) == (s.n_events, s.n_chunks, s.status)
    assert (None if pd.isna(m["finish_reason"]) else m["finish_reason"]) == s.finish_reason
    assert (None if pd.isna(m["error"]) else m["error"]) == (s.error or {}).get("message")
    if s.ttft is None:
        assert pd.isna(m["ttft"])
    else:
        assert m["ttft"] == s.ttft
    u = df.nito.usage().iloc[0]
    if s.usage and "completion_tokens" in s.usage:
        assert u["completion_tokens"] == s.usage["completion_tokens"] == m["n_output_tokens"]
    else:
        assert pd.isna(m["n_output_tokens"])
    assert m["n_token_chunks"] == s.snapshot().n_token_chunks


def test_all_recordings_in_one_frame_side_by_side() -> None:
    df = nito_nb.frame(RECORDINGS[0].parent)
    assert df.stream.cat.categories.tolist() == [p.stem for p in RECORDINGS]
    metrics = df.nito.metrics()
    assert metrics.index.tolist() == [p.stem for p in RECORDINGS]
    texts = df.nito.text()
    assert all(texts[p.stem] == nito_nb.read_sse(p).content for p in RECORDINGS)


# -- many streams, files, round trips -------------------------------------------------------------


def test_many_sources_and_labels(tmp_path: Path) -> None:
    a, b = hand_stream(), timed([(0.1, chunk_line({"content": "b"})), (0.2, DONE)])
    a.save(tmp_path / "run.jsonl")
    logs = tmp_path / "logs"
    logs.mkdir()
    b.save(logs / "one.jsonl")
    (logs / "two.sse").write_bytes(chunk_line({"content": "two"}) + DONE)
    (logs / "notes.txt").write_text("not a log")
    df = nito_nb.frame([a, b, tmp_path / "run.jsonl", str(logs)])
    labels = ["test/model#0", "test/model#1", "run", "one", "two"]
    assert df.stream.cat.categories.tolist() == labels
    metrics = df.nito.metrics()
    assert metrics.index.tolist() == labels
    # A saved log keeps its times: the same metrics as the live Stream.
    pd.testing.assert_series_equal(
        metrics.loc["run"], metrics.loc["test/model#0"], check_names=False
    )
    assert df.nito.text().tolist() == ["Hello!", "b", "Hello!", "b", "two"]
    assert set(df.attrs["nito"]) == set(labels) and df.attrs["nito"]["run"]["source"].endswith(
        "run.jsonl"
    )

    named = nito_nb.frame({"x": a, "y": a})
    assert named.stream.cat.categories.tolist() == ["x", "y"]
    twice = nito_nb.frame([tmp_path / "run.jsonl", tmp_path / "run.jsonl"])
    assert twice.stream.cat.categories.tolist() == ["run", "run#2"]


def test_stream_frame_is_nito_frame() -> None:
    s = hand_stream()
    pd.testing.assert_frame_equal(s.frame(), nito_nb.frame(s))


def test_metrics_from_columns_alone() -> None:
    df = hand_stream().frame()
    expected = df.nito.metrics()
    df.attrs.clear()
    pd.testing.assert_frame_equal(df.nito.metrics(), expected)
    # Filtering rows keeps it a frame of ours.
    two = nito_nb.frame({"a": hand_stream(), "b": hand_stream()})
    only_b = two[two.stream == "b"]
    assert only_b.nito.metrics().loc["b", "ttft"] == pytest.approx(0.15)


def test_parquet_round_trip(tmp_path: Path) -> None:
    df = nito_nb.frame([hand_stream(), *RECORDINGS[:5]])
    df.to_parquet(tmp_path / "f.parquet")
    back = pd.read_parquet(tmp_path / "f.parquet")
    pd.testing.assert_frame_equal(back, df)
    pd.testing.assert_frame_equal(nito_nb.frame(back), df)
    pd.testing.assert_frame_equal(back.nito.metrics(), df.nito.metrics())


def test_csv_round_trip(tmp_path: Path) -> None:
    df = nito_nb.frame([hand_stream(), *RECORDINGS[:8]])
    df.to_csv(tmp_path / "f.csv", index=False)
    back = nito_nb.frame(pd.read_csv(tmp_path / "f.csv"))
    assert {n: str(d) for n, d in back.dtypes.items()} == COLUMNS
    pd.testing.assert_frame_equal(back.nito.metrics(), df.nito.metrics(), check_exact=False)
    pd.testing.assert_series_equal(back.nito.text(), df.nito.text())
    calls = df.nito.tool_calls()
    pd.testing.assert_frame_equal(
        back.nito.tool_calls().drop(columns="parsed"), calls.drop(columns="parsed")
    )


# -- errors ---------------------------------------------------------------------------------------


def test_accessor_rejects_other_frames() -> None:
    other = pd.DataFrame({"a": [1, 2]})
    with pytest.raises(
        AttributeError, match=r"not a nito_nb frame: it lacks the column\(s\) stream, seq"
    ):
        other.nito.metrics()
    assert not hasattr(other, "nito")
    with pytest.raises(ValueError, match="not a nito_nb frame"):
        nito_nb.frame(other)
    df = hand_stream().frame()
    with pytest.raises(AttributeError, match=r"lacks the column.*token"):
        _ = df.drop(columns=["token"]).nito


def test_frame_rejects_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="takes a Stream, a path"):
        nito_nb.frame(42)
    with pytest.raises(TypeError, match="cannot read a int"):
        nito_nb.frame([42])
    with pytest.raises(FileNotFoundError, match="neither a file nor a folder"):
        nito_nb.frame(tmp_path / "missing.jsonl")


def test_frame_names_the_file_it_cannot_read_and_can_skip_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    hand_stream().save(runs / "a.jsonl")
    (runs / "b.sse").write_text("<html><title>502 Bad Gateway</title></html>\n")
    (runs / "c.jsonl").write_text('{"nito_nb_log": 1}\nnot json\n{"end": {}}\n')
    with pytest.raises(nito_nb.LogFormatError, match=r"b\.sse' holds no server-sent event"):
        nito_nb.frame(runs)
    with pytest.warns(
        UserWarning, match=r"skipped 3 file\(s\).*b\.sse.*c\.jsonl.*missing\.sse"
    ) as seen:
        df = nito_nb.frame([runs, tmp_path / "missing.sse"], errors="skip")
    assert len(seen) == 1  # one warning for all of them
    assert df.stream.cat.categories.tolist() == ["a"] and df.nito.text().tolist() == ["Hello!"]
    skipped = df.attrs["nito_skipped"]
    assert sorted(Path(p).name for p in skipped) == ["b.sse", "c.jsonl", "missing.sse"]
    assert "line 2" in skipped[str(runs / "c.jsonl")]
    with pytest.raises(ValueError, match='errors must be "raise" or "skip"'):
        nito_nb.frame(runs, errors="ignore")


def test_frame_of_a_csv_says_how_to_read_it(tmp_path: Path) -> None:
    hand_stream().frame().to_csv(tmp_path / "f.csv", index=False)
    with pytest.raises(
        nito_nb.LogFormatError, match=r"CSV file.*nito_nb\.frame\(pandas\.read_csv\(path\)\)"
    ):
        nito_nb.frame(tmp_path / "f.csv")
    # A saved log is recognised by its first line, whatever its name.
    hand_stream().save(tmp_path / "renamed.sse")
    assert nito_nb.frame(tmp_path / "renamed.sse").nito.text().tolist() == ["Hello!"]


def test_empty_inputs(tmp_path: Path) -> None:
    df = nito_nb.frame(tmp_path)
    assert len(df) == 0 and list(df.columns) == list(COLUMNS)
    assert df.nito.metrics().empty and df.nito.tool_calls().empty and df.nito.text().empty


@pytest.mark.spawns
def test_import_nito_nb_imports_no_pandas() -> None:
    code = "import sys, nito_nb; assert 'pandas' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)


# -- plots ----------------------------------------------------------------------------------------


def test_plot_timeline_points() -> None:
    df = hand_stream().frame()
    fig = df.nito.plot_timeline()
    lines = {line.get_label(): line for line in fig.axes[0].lines}
    points = {label: len(line.get_xdata()) for label, line in lines.items()}
    assert points == {
        "test/model#0": 4,  # the token-bearing events
        "test/model#0 content": 3,
        "test/model#0 reasoning": 1,
        "test/model#0 comment": 1,
        "test/model#0 done": 1,
        "test/model#0 response": 1,
    }
    assert list(lines["test/model#0"].get_ydata()) == [5, 8, 10, 11]  # characters so far
    fig.savefig(__import__("io").BytesIO(), format="png")


def test_plot_timeline_tools_and_many_streams() -> None:
    df = nito_nb.frame([p for p in RECORDINGS if "tools" in p.stem][:3])
    fig = df.nito.plot_timeline()
    for label in df.stream.cat.categories:
        token_events = int(df[(df.stream == label) & df.token & (df.part == 0)].shape[0])
        mine = [ln for ln in fig.axes[0].lines if ln.get_label().startswith(f"{label} ")]
        kinds = {ln.get_label().split(" ")[-1]: len(ln.get_xdata()) for ln in mine}
        assert sum(kinds.get(k, 0) for k in ("content", "reasoning", "tool")) == token_events
        assert kinds.get("tool", 0) > 0


def test_plot_gaps_counts() -> None:
    df = nito_nb.frame({"a": hand_stream(), "b": hand_stream()})
    fig = df.nito.plot_gaps()
    bars = fig.axes[0].containers
    assert [c.get_label() for c in bars] == ["a", "b"]
    assert [sum(p.get_height() for p in c) for c in bars] == [3, 3]  # K - 1 gaps each


def legend_texts(fig: object) -> list[str]:
    legend = fig.axes[0].get_legend()  # type: ignore[attr-defined]
    return [] if legend is None else [text.get_text() for text in legend.get_texts()]


def test_plot_legends_name_each_stream_once() -> None:
    df = nito_nb.frame({"a": hand_stream(), "b": hand_stream(), "c": hand_stream()})
    assert legend_texts(df.nito.plot_gaps()) == ["a", "b", "c"]
    kinds = ["content", "reasoning", "comment", "done", "response"]
    assert legend_texts(df.nito.plot_timeline()) == ["a", "b", "c", *kinds]
    # Past max_legend streams their names would hide the plot: the markers stay explained.
    assert legend_texts(df.nito.plot_timeline(max_legend=2)) == kinds
    tools = nito_nb.frame([p for p in RECORDINGS if "tools" in p.stem][:1])
    assert "tool" in legend_texts(tools.nito.plot_timeline())


def test_a_filtered_frame_gives_the_tables_of_what_is_left() -> None:
    tool = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": '{"x": 1}'},
    }
    b = timed(
        [
            (0.1, chunk_line({"content": "b"})),
            (0.2, chunk_line({"tool_calls": [tool]})),
            (0.3, chunk_line({"content": "!"})),
            (0.4, usage_line(3)),
            (0.5, DONE),
        ]
    )
    df = nito_nb.frame({"a": hand_stream(), "b": b, "c": hand_stream()})
    whole = df.nito.metrics()
    for kept in (["b"], ["a", "c"]):
        part = df[df.stream.isin(kept)]
        metrics = part.nito.metrics()
        assert metrics.index.tolist() == kept
        pd.testing.assert_frame_equal(metrics, whole.loc[kept])
        assert part.nito.usage().index.tolist() == kept
        pd.testing.assert_frame_equal(part.nito.usage(), df.nito.usage().loc[kept])
        assert part.nito.text().index.tolist() == kept
        assert part.nito.reasoning().index.tolist() == kept
        assert part.nito.tool_calls().stream.cat.categories.tolist() == kept
        assert [c.get_label() for c in part.nito.plot_gaps().axes[0].containers] == kept
        timeline = part.nito.plot_timeline()
        assert {line.get_label().split(" ")[0] for line in timeline.axes[0].lines} == set(kept)
    assert df[df.stream == "b"].nito.text().tolist() == ["b!"]
    assert df[df.stream == "b"].nito.tool_calls().name.tolist() == ["f"]
    # A filter that keeps some rows of a stream keeps the stream; one that keeps none, no stream.
    assert df[df.kind != "response"].nito.metrics().index.tolist() == ["a", "b", "c"]
    assert df[df.stream == "zz"].nito.metrics().empty


TEXT_COLUMNS = [name for name, dtype in COLUMNS.items() if dtype == "string"]


def test_text_columns_are_kept_in_pyarrow_whatever_pandas_defaults_to() -> None:
    # pandas' "string" follows mode.string_storage (Python objects by default in pandas 2): frame()
    # chooses pyarrow itself, since Python strings make it 1.5x slower (bench/bench_frame.py).
    arrow = pd.StringDtype("pyarrow")
    with pd.option_context("mode.string_storage", "python"):
        df = nito_nb.frame([hand_stream(), *[p for p in RECORDINGS if "tools" in p.stem][:1]])
        assert {name: df[name].dtype for name in TEXT_COLUMNS} == dict.fromkeys(TEXT_COLUMNS, arrow)
        assert df.nito.text().dtype == arrow and df.nito.reasoning().dtype == arrow
        assert df.nito.metrics()["finish_reason"].dtype == arrow
        assert df.nito.tool_calls()["arguments"].dtype == arrow


def test_pyarrow_is_a_dependency_of_a_plain_install() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())[
        "project"
    ]
    assert any(
        dep.split(">")[0].split("=")[0].strip() == "pyarrow" for dep in project["dependencies"]
    )


@pytest.mark.spawns
def test_frame_works_without_pyarrow_on_python_strings() -> None:
    # An install made with --no-deps: slower, but the same frame.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pyarrow': raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import nito_nb\n"
        f"s = nito_nb.read_sse({str(RECORDINGS[0])!r})\n"
        "df = s.frame()\n"
        "assert df.nito.text().iloc[0] == s.content, 'text'\n"
        "print(df['content'].dtype.storage, 'pyarrow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["python", "False"]


# -- properties -----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=6), st.integers(1, 500)), min_size=0, max_size=25),
    st.lists(st.text(alphabet='{}":ab1 ,\\', max_size=8), max_size=6),
)
def test_any_stream_text_and_itl(pieces: list[tuple[str, int]], args: list[str]) -> None:
    events, t = [], 0.0
    for text, step_ms in pieces:
        t += step_ms / 1000
        events.append((t, chunk_line({"content": text})))
    for number, arg in enumerate(args):
        t += 0.001
        first = (
            {"id": "call_1", "function": {"name": "f", "arguments": arg}}
            if number == 0
            else {"function": {"arguments": arg}}
        )
        events.append((t, chunk_line({"tool_calls": [{"index": 0, **first}]})))
    events.append((t + 0.01, DONE))
    s = timed(events)
    df = s.frame()
    assert df.nito.text().iloc[0] == s.content
    assert df.nito.tool_calls().arguments.tolist() == [c.arguments for c in s.tool_calls]
    m = df.nito.metrics().iloc[0]
    times = [
        ev.t
        for ev in s.log
        if ev.kind == "chunk"
        and (
            json.loads(ev.data)["choices"][0]["delta"].get("content")
            or json.loads(ev.data)["choices"][0]["delta"]
            .get("tool_calls", [{}])[0]
            .get("function", {})
            .get("arguments")
        )
    ]
    assert m["n_token_chunks"] == len(times)
    if len(times) >= 2:
        assert m["itl"] == pytest.approx((times[-1] - times[0]) / (len(times) - 1))
    else:
        assert pd.isna(m["itl"])


# -- live streams from the simulator --------------------------------------------------------------

QUICK_SIM = {"tps": 400, "ttft_ms": 20, "think_s": 0.05, "keepalive_s": 0.01, "chunks": 300}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_simulated_streams_side_by_side() -> None:
    models = [
        "sim/chat",
        "sim/reasoning",
        "sim/slow",
        "sim/websearch",
        "sim/error-midstream",
        "sim/drop",
        "sim/garbage",
        "sim/long",
    ]
    # Its own client, closed at the end: no connection outlives the test.
    with nito_nb.Client() as client:
        streams = [
            client.stream("Hello", model=m, sim=QUICK_SIM, stream_options={"include_usage": True})
            for m in models
        ]
        streams.append(client.stream("Weather?", model="sim/tools", tools=[TOOL], sim=QUICK_SIM))
        for s in streams:
            s.wait(raise_errors=False)
    df = nito_nb.frame(streams)
    metrics = df.nito.metrics()
    texts, reasoning, calls = df.nito.text(), df.nito.reasoning(), df.nito.tool_calls()
    for label, s in zip(metrics.index, streams, strict=True):
        m = metrics.loc[label]
        assert texts[label] == s.content and reasoning[label] == s.reasoning
        assert (m["status"], m["n_events"], m["n_chunks"]) == (s.status, s.n_events, s.n_chunks)
        assert m["ttfb"] == pytest.approx(s.ttfb) and m["ttfb"] > 0
        assert m["ttft"] == pytest.approx(s.ttft) if s.ttft is not None else pd.isna(m["ttft"])
        assert m["e2e"] >= m["ttfb"]
        mine = calls[calls.stream == label]
        assert mine.arguments.tolist() == [c.arguments for c in s.tool_calls]
    assert (metrics["n_token_chunks"] > 0).all()
    assert metrics.loc["sim/tools#8", "finish_reason"] == "tool_calls"
    assert metrics.loc["sim/error-midstream#4", "status"] == "error"
    assert metrics.loc["sim/drop#5", "status"] == "truncated"
    assert metrics.loc["sim/long#7", "itl"] > 0
    assert (df[df.stream == "sim/slow#2"].kind == "comment").any()


def test_frame_of_a_live_stream_is_a_snapshot() -> None:
    source = nito_nb.StreamSource({"model": "m"})
    s = source.stream
    s.log.t0_ns = 0
    source.feed(chunk_line({"content": "so far"}), 10 * MS)
    df = s.frame()
    source.feed(chunk_line({"content": " and more"}) + DONE, 20 * MS)  # the log still grows
    source.end(20 * MS)
    assert df.nito.metrics().iloc[0]["status"] == "streaming"
    assert df.nito.text().iloc[0] == "so far" and s.frame().nito.text().iloc[0] == "so far and more"


def test_content_strings_with_escapes_and_lookalike_keys() -> None:
    texts = ['say "hi"', "ends with a backslash \\", '\\"', "é😀\u2028", "", "tab\there"]
    lines = [
        b"data: "
        + json.dumps({"id": "g", "choices": [{"index": 0, "delta": {"content": text}}]}).encode()
        + b"\n\n"
        for text in texts
    ]
    # A vendor field named "content" before the delta: its string is not the answer's.
    lookalike = {
        "meta": {"content": "not the answer"},
        "choices": [{"index": 0, "delta": {"content": "real"}}],
    }
    lines.append(b"data: " + json.dumps(lookalike).encode() + b"\n\n")
    lines.append(b'data:{"choices":[{"index":0,"delta":{"content" : "spaced"}}]}\n\n')
    s = timed([(0.1 * (i + 1), line) for i, line in enumerate(lines)])
    df = s.frame()
    assert df.nito.text().iloc[0] == s.content == "".join(texts) + "real" + "spaced"
    assert df.content.iloc[1 : len(texts) + 1].tolist() == texts
    assert json.loads(df.extras.iloc[len(texts) + 1]) == {"meta": {"content": "not the answer"}}
    assert df.token.sum() == len([t for t in texts if t]) + 2


def test_plots_show_as_images_in_ipython_without_pyplot() -> None:
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    # The same test shell as tests/test_magic.py: a process-wide singleton, returned once.
    shell = start_ipython() or get_ipython()
    df = nito_nb.frame(nito_nb.read_sse(REAL / "openrouter-content-1.sse"))
    for figure in (df.nito.plot_timeline(), df.nito.plot_gaps()):
        # A terminal test shell keeps its PNG formatter switched off: look up what it would call
        # in a kernel, where it is on.
        formatter = shell.display_formatter.formatters["image/png"]
        assert formatter.lookup(figure)(figure)[:8] == b"\x89PNG\r\n\x1a\n"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["m1", "m2", "m10"]),
            st.text(max_size=4),
            st.sampled_from([None, "stop", "tool"]),  # two of equal length after the content
        ),
        max_size=30,
    )
)
def test_neighbouring_chunks_of_other_layouts_keep_their_own_values(
    pieces: list[tuple[str, str, str | None]],
) -> None:
    # frame() reads a chunk's layout once and reuses it for the next chunk when its bytes around
    # the content match: "m1" and "m2" (before it) or "stop" and "tool" (after it) make layouts
    # of equal length that differ in one byte.
    lines = [
        json.dumps(
            {
                "id": "gen-1",
                "model": model,
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": fin}],
            },
            separators=(",", ":"),  # compact, as gateways send it
        ).encode()
        for model, text, fin in pieces
    ]
    s = timed([(0.1 + i / 1000, b"data: " + line + b"\n\n") for i, line in enumerate(lines)])
    df = s.frame()
    chunks = df[df.kind == "chunk"]
    assert chunks.model.tolist() == [model for model, _, _ in pieces]
    finishes = chunks.finish_reason.astype(object).where(chunks.finish_reason.notna(), None)
    assert finishes.tolist() == [fin for _, _, fin in pieces]
    assert chunks.content.fillna("").tolist() == [text for _, text, _ in pieces]
    assert df.nito.text().iloc[0] == s.content


def test_a_recording_without_times_has_unknown_timings_not_zeros() -> None:
    recorded = nito_nb.read_sse(REAL / "openrouter-reasoning-tools-2.sse")
    df = recorded.frame()
    assert df["t"].isna().all() and df["gap"].isna().all()
    m = df.nito.metrics().iloc[0]
    for name in (
        "ttfb",
        "ttft",
        "ttfc",
        "e2e",
        "itl",
        "tpot",
        "output_tps",
        "output_chunks_per_s",
        "itl_p50",
        "itl_max",
    ):
        assert pd.isna(m[name]), name
    assert m["n_chunks"] == recorded.n_chunks and m["finish_reason"] == "tool_calls"
    calls = df.nito.tool_calls()
    assert calls.arguments.tolist() == [c.arguments for c in recorded.tool_calls]
    for figure in (df.nito.plot_timeline(), df.nito.plot_gaps()):
        assert any("no arrival times" in text.get_text() for text in figure.axes[0].texts)
    # Beside a timed stream, each keeps its own: the timed one's metrics are numbers.
    both = nito_nb.frame({"recorded": recorded, "live": hand_stream()}).nito.metrics()
    assert pd.isna(both.loc["recorded", "ttft"]) and both.loc["live", "ttft"] == pytest.approx(0.15)


def test_refusal_column_and_content_parts() -> None:
    image = {"type": "image_url", "image_url": "https://example.com/x.png"}
    s = timed(
        [
            (0.1, chunk_line({"role": "assistant", "content": None, "refusal": None})),
            (0.2, chunk_line({"refusal": "I can't "})),
            (0.3, chunk_line({"refusal": "do that."})),
            (
                0.4,
                chunk_line(
                    {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t"}]}]}
                ),
            ),
            (0.5, chunk_line({"content": [{"type": "text", "text": "a"}, image]})),
            (0.6, DONE),
        ]
    )
    df = s.frame()
    assert "".join(df.refusal.dropna()) == s.refusal == "I can't do that."
    assert df.token.tolist() == [False, False, True, True, True, True, False]
    assert df.nito.reasoning().iloc[0] == s.reasoning == "t"
    assert df.reasoning_type.dropna().tolist() == ["thinking"]
    assert df.nito.text().iloc[0] == s.content == "a"
    assert json.loads(df.extras.iloc[5]) == {"delta.content": [image]}
    assert COLUMNS["refusal"] == "string" and list(df.columns) == list(COLUMNS)


def test_the_frames_attrs_are_read_only_and_cost_nothing_to_copy(tmp_path: Path) -> None:
    # pandas deep-copies attrs into every df[col], df.loc... result: with a plain dict that was
    # 10 ms per column read of a 1,000-stream frame. One read-only object stands for every copy.
    import copy

    s = nito_nb.read_sse(real_recordings()[0].read_bytes())
    df = nito_nb.frame({f"s{i}": s for i in range(50)})
    info = df.attrs["nito"]
    assert df["content"].attrs["nito"] is info and df.loc[df["seq"] >= 0].attrs["nito"] is info
    assert copy.deepcopy(df.attrs)["nito"] is info
    for change in (
        lambda: info.update(x=1),
        lambda: info["s0"].__setitem__("status", "x"),
        info.clear,
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert json.loads(json.dumps(df.attrs))["nito"]["s0"] == info["s0"]
    df.to_parquet(tmp_path / "f.parquet")  # pandas stores attrs as JSON
    assert pd.read_parquet(tmp_path / "f.parquet").attrs["nito"]["s1"] == json.loads(
        json.dumps(info["s1"])
    )
    assert pickle.loads(pickle.dumps(df)).attrs["nito"] == info
    request = info["s0"]["request"]
    # a dict, lists are lists
    assert isinstance(request, dict) and json.loads(json.dumps(request)) == request
