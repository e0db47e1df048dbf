"""A user's mistakes with logs, frames and run stores: one line that says what to do, never a
raw error from deep inside (numpy, DuckDB, open()), and nothing that arrived lost."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nito_nb
from nito_nb._runs.store import Store
from nito_nb._runs.store_writer import StoreWriter, write_streams

FAST = {"sim": {"tps": 0, "ttft_ms": 0}}
BIG = 2**70  # past 64 bits


def _saved(tmp_path: Path) -> tuple[nito_nb.Stream, Path]:
    s = nito_nb.stream("hi", model="sim/chat", **FAST)
    s.wait()
    path = tmp_path / "run.jsonl"
    s.save(path)
    return s, path


def _sse(*chunks: dict[str, Any]) -> str:
    return (
        "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks)
        + "data: [DONE]\n\n"
    )


_BASE = {"id": "x", "model": "m", "object": "chat.completion.chunk"}


# -- 1. nito_nb.load -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("gz", None, "gzip"),
        ("utf16", None, "UTF-16"),
        ("binary", b"\x80\x81\x82 not text at all", "not UTF-8"),
    ],
)
def test_load_of_a_file_that_is_not_utf8_is_a_log_format_error(
    tmp_path: Path, name: str, content: bytes | None, said: str
) -> None:
    _, path = _saved(tmp_path)
    text = path.read_bytes()
    data = {"gz": gzip.compress(text), "utf16": text.decode("utf-8").encode("utf-16")}.get(
        name, content
    )
    bad = tmp_path / f"{name}.jsonl"
    bad.write_bytes(data)  # type: ignore[arg-type]
    with pytest.raises(nito_nb.LogFormatError, match=said) as info:
        nito_nb.load(bad)
    assert "\n" not in str(info.value) and str(bad) in str(info.value)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("gz", "gzip file: decompress it first"),
        ("utf16", "UTF-16"),
        ("binary", r"not UTF-8 text \(it starts b'\\x80"),
    ],
)
def test_frame_of_a_recording_that_is_not_utf8_says_what_it_is(
    tmp_path: Path, name: str, said: str
) -> None:
    text = _sse({**_BASE, "choices": [{"index": 0, "delta": {"content": "hi"}}]}).encode()
    data = {
        "gz": gzip.compress(text),
        "utf16": text.decode().encode("utf-16"),
        "binary": b"\x80\x81\x82 not text at all",
    }[name]
    bad = tmp_path / f"body.{name}"
    bad.write_bytes(data)
    # was the bytes shown as garbled text
    with pytest.raises(nito_nb.LogFormatError, match=said) as info:
        nito_nb.frame(str(bad))
    assert (
        "\n" not in str(info.value)
        and "\ufffd" not in str(info.value)
        and str(bad) in str(info.value)
    )


def test_load_of_the_logs_text_says_it_takes_a_path_without_echoing_it(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    text = path.read_text()
    for given in (text, text.encode(), text[:100]):
        with pytest.raises(nito_nb.ConfigurationError, match="takes the path of a file") as info:
            nito_nb.load(given)  # type: ignore[arg-type]
        message = str(info.value)
        assert (
            "\n" not in message
            and "hi" not in message.replace("this", "")
            and "sim/chat" not in message
        )
        assert "write_text" in message and "read_sse" in message


def test_load_refuses_what_is_not_a_path_and_keeps_file_descriptors_open(tmp_path: Path) -> None:
    read, write = os.pipe()
    try:
        for value in (read, None, 2.5):
            with pytest.raises(nito_nb.ConfigurationError, match="takes the path of a file"):
                nito_nb.load(value)  # type: ignore[arg-type]
        os.fstat(read)  # still open: load(fd) opened it as a file and closed it
    finally:
        os.close(read)
        os.close(write)
    with pytest.raises(nito_nb.ConfigurationError, match=r"is a folder.*nito_nb\.frame"):
        nito_nb.load(tmp_path)


@pytest.mark.parametrize(
    ("line", "edit", "field"),
    [
        (0, {"nito_nb_log": "x"}, "'nito_nb_log' is 'x'"),
        (0, {"attempts": "many"}, "'attempts' is 'many'"),
        (0, {"t0_wall": 5}, "'t0_wall' is 5"),
        (0, {"request": [1]}, "'request' is"),
        (2, {"raw": 5}, "'raw' is 5"),
        (2, {"dt_ns": "soon"}, "'dt_ns' is 'soon'"),
        (2, {"raw_b64": "***"}, "'raw_b64'"),
    ],
)
def test_a_hand_edited_log_names_the_line_and_the_field(
    tmp_path: Path, line: int, edit: dict[str, Any], field: str
) -> None:
    _, path = _saved(tmp_path)
    lines = path.read_text().splitlines()
    item = json.loads(lines[line])
    if "raw_b64" in edit:
        item.pop("raw", None)
    item.update(edit)
    lines[line] = json.dumps(item)
    path.write_text("\n".join(lines) + "\n")
    for read in (nito_nb.load, nito_nb.frame):
        with pytest.raises(nito_nb.LogFormatError, match=f"line {line + 1} of .*{field}") as info:
            read(path)
        assert "\n" not in str(info.value)


def test_a_last_line_cut_inside_a_character_still_loads_as_cut(tmp_path: Path) -> None:
    s = nito_nb.read_sse(
        _sse({**_BASE, "choices": [{"index": 0, "delta": {"content": "héllo ünïcode"}}]})
    )
    path = tmp_path / "cut.jsonl"
    s.save(path)
    data = path.read_bytes()
    cut = data.rindex("ü".encode()) + 1  # inside the two bytes of ü, on the last event's line
    path.write_bytes(data[:cut])
    loaded = nito_nb.load(path)
    assert loaded.log.cut and any(a.kind == "cut-log" for a in loaded.anomalies)


# -- 2. the run store ----------------------------------------------------------------------------


def _ended(prompt: str = "hi") -> nito_nb.Stream:
    s = nito_nb.stream(prompt, model="sim/chat", **FAST)
    s.wait()
    return s


def test_every_store_connection_has_extension_downloads_off(tmp_path: Path) -> None:
    write_streams(tmp_path / "s", [_ended()], "r1")
    settings = "SELECT current_setting('autoinstall_known_extensions'), current_setting('autoload_known_extensions')"
    with Store(tmp_path / "s") as store:
        assert store.con.execute(settings).fetchone() == (False, False)
    writer = StoreWriter(tmp_path / "s")
    try:
        assert writer.con.execute(settings).fetchone() == (False, False)
    finally:
        writer.close()


def test_a_store_whose_database_is_not_duckdb_is_one_line(tmp_path: Path) -> None:
    junk, lite = tmp_path / "junk", tmp_path / "lite"
    junk.mkdir()
    (junk / "runs.duckdb").write_text("hello")
    lite.mkdir()
    con = sqlite3.connect(lite / "runs.duckdb")
    con.execute("CREATE TABLE x (a)")
    con.commit()
    con.close()
    # A SQLite file made DuckDB download its sqlite scanner from extensions.duckdb.org.
    for folder, what in ((junk, "not a DuckDB file"), (lite, "SQLite")):
        for opening in (nito_nb.open_store, StoreWriter):
            with pytest.raises(
                nito_nb.ConfigurationError, match=f"runs.duckdb' is not a nito_nb run store.*{what}"
            ):
                opening(folder)


def test_a_store_whose_events_folder_is_a_file_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "s"
    store.mkdir()
    (store / "events").write_text("x")
    with pytest.raises(nito_nb.ConfigurationError, match=r"events' is a file.*move that file away"):
        write_streams(store, [_ended()], "r1")


def test_a_corrupt_events_file_is_named_and_the_store_still_works(tmp_path: Path) -> None:
    store = tmp_path / "s"
    [bad_key] = write_streams(store, [_ended("first")], "r1")
    [file] = [p for p in (store / "events").glob("*.parquet") if not p.name.startswith("_")]
    file.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match=f"{file.name}' cannot be read.*1 request.*move it out"):
        [good_key] = write_streams(store, [_ended("second")], "r2")  # a new write still works
    with pytest.warns(UserWarning, match=file.name), Store(store) as opened:
        assert len(opened.results()) == 2  # every row kept
        assert set(opened.frame()["stream"].astype(str)) == {good_key}
        assert opened.streams(good_key).content
        with pytest.raises(nito_nb.LogFormatError, match=f"{file.name}', which cannot be read"):
            opened.streams(bad_key)


def test_store_arguments_of_the_wrong_type_and_a_closed_store(tmp_path: Path) -> None:
    write_streams(tmp_path / "s", [_ended()], "r1")
    store = nito_nb.open_store(tmp_path / "s")
    with pytest.raises(nito_nb.ConfigurationError, match="request key is a string"):
        store.streams(5)  # type: ignore[arg-type]
    with pytest.raises(nito_nb.ConfigurationError, match="run_id is a string"):
        store.results(run_id=5)  # type: ignore[arg-type]
    with pytest.raises(nito_nb.ConfigurationError, match="query is a string"):
        store.sql(None)  # type: ignore[arg-type]
    store.close()
    store.close()  # twice is fine
    assert "closed" in repr(store)
    with pytest.raises(nito_nb.ConfigurationError, match="was closed: open it again"):
        store.results()


def test_frame_of_a_run_store_says_how_to_read_it(tmp_path: Path) -> None:
    # Its folder was an empty (0, 39) frame; its database file a few rows of binary read as SSE.
    store = tmp_path / "runs" / "load"
    write_streams(store, [_ended("one"), _ended("two")], "r1")
    hint = rf"is a run store.*nito_nb\.open_store\({str(store)!r}\)\.frame\(\)"
    for given in (store, str(store), store / "runs.duckdb", [store]):
        with pytest.raises(nito_nb.ConfigurationError, match=hint) as info:
            nito_nb.frame(given)
        assert "\n" not in str(info.value)
    with pytest.warns(UserWarning, match=r"skipped 1 file.*load \(ConfigurationError\)"):
        df = nito_nb.frame([store, _ended("three")], errors="skip")
    assert df["stream"].nunique() == 1
    assert "open_store" in df.attrs["nito_skipped"][str(store)]
    with nito_nb.open_store(store) as opened:  # what the line points to works
        assert opened.frame()["stream"].nunique() == 2


# -- 3. plots ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    a, b = _ended("one"), _ended("two")
    return nito_nb.frame([a, b])


@pytest.mark.parametrize("bins", [0, -3, "x", None, 2.5, True, 10**9])
def test_plot_gaps_refuses_bins_that_are_not_a_sane_whole_number(
    df: pd.DataFrame, bins: Any
) -> None:
    with pytest.raises(
        nito_nb.ConfigurationError, match="bins is a whole number, from 1 to 10,000"
    ):
        df.nito.plot_gaps(bins=bins)


def test_plot_gaps_skips_infinite_times_and_plot_timeline_checks_max_legend(
    df: pd.DataFrame,
) -> None:
    edited = df.copy()
    edited.loc[edited.index[5], "t"] = np.inf
    edited.nito.plot_gaps(bins=np.int64(10))
    for value in (None, "x", -1, 1.5):
        with pytest.raises(nito_nb.ConfigurationError, match="max_legend is a whole number"):
            df.nito.plot_timeline(max_legend=value)
    df.nito.plot_timeline(max_legend=0)


# -- 4. values past 64 bits, hand-edited frames ----------------------------------------------------


def test_counts_and_indexes_past_64_bits_are_kept_exactly(tmp_path: Path) -> None:
    body = _sse(
        {
            **_BASE,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": BIG, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
                        ]
                    },
                }
            ],
        },
        {
            **_BASE,
            "choices": [],
            "usage": {"prompt_tokens": BIG, "completion_tokens": BIG + 1, "total_tokens": 3},
        },
    )
    frame = nito_nb.read_sse(body).frame()
    assert frame.nito.usage()["prompt_tokens"].iloc[0] == BIG
    assert frame.nito.metrics()["n_output_tokens"].iloc[0] == BIG + 1
    assert frame.nito.tool_calls()["index"].tolist() == [BIG]
    path = tmp_path / "f.csv"
    frame.to_csv(path, index=False)
    assert nito_nb.frame(pd.read_csv(path)).nito.usage()["prompt_tokens"].iloc[0] == BIG
    from nito_nb._frame import EndedStream
    from nito_nb._runs.events import write_events

    (tmp_path / "events").mkdir()
    # was OverflowError
    write_events(tmp_path, "b1", "r1", {"k": EndedStream.of(nito_nb.read_sse(body))})
    stored = pd.read_parquet(tmp_path / "events" / "b1.parquet")
    assert stored["prompt_tokens"].max() == float(BIG)


@pytest.mark.spawns
def test_a_runs_results_and_store_keep_going_past_64_bits(tmp_path: Path, replay_dir: Path) -> None:
    body = _sse(
        {**_BASE, "choices": [{"index": 0, "delta": {"content": "hi"}}]},
        {
            **_BASE,
            "choices": [],
            "usage": {"prompt_tokens": BIG, "completion_tokens": 1, "total_tokens": BIG + 1},
        },
    )
    recording = replay_dir / "big.sse"
    recording.write_text(body)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = nito_nb.run(
            ["x"],
            model="sim/replay",
            sim={"replay": str(recording), "speed": 0},
            progress=False,
            store=str(tmp_path / "s"),
        )
        run.wait()
    assert run.error is None
    results = run.results()  # was OverflowError
    assert results["prompt_tokens"].iloc[0] == BIG and results["completion_tokens"].iloc[0] == 1
    # the batch was written, the count missing
    stored = nito_nb.open_store(str(tmp_path / "s")).results()
    assert stored["status"].tolist() == ["done"] and pd.isna(stored["prompt_tokens"].iloc[0])
    assert any("prompt_tokens" in str(w.message) and "64 bits" in str(w.message) for w in caught)


def test_hand_edited_frames_are_read_or_refused_in_one_line(df: pd.DataFrame) -> None:
    edited = df.copy()
    edited.attrs["nito"] = ["not", "a", "dict"]
    assert edited.nito.metrics()["connect"].isna().all()
    edited = df.copy()
    edited["http_status"] = (
        edited["http_status"].astype(object).where(edited["http_status"].isna(), "200")
    )
    assert edited.nito.metrics()["http_status"].tolist() == [200, 200]
    edited["http_status"] = edited["http_status"].where(edited["http_status"].isna(), "OK")
    with pytest.raises(nito_nb.ConfigurationError, match="'http_status' column holds 'OK'"):
        edited.nito.metrics()
    edited = df.copy()
    edited["cost"] = "x"
    with pytest.raises(nito_nb.ConfigurationError, match="'cost' column holds"):
        edited.nito.usage()
    # ended: frame() shows what arrived
    tools = nito_nb.stream("call f", model="sim/tools", **FAST).wait().frame()
    edited = tools.copy()
    # On the frame's own index: an assignment aligns on it, and a frame's index is not always 0..n-1.
    edited["tool_index"] = pd.Series(
        [None if pd.isna(v) else str(v) for v in tools["tool_index"]],
        dtype=object,
        index=tools.index,
    )
    assert (
        edited.nito.tool_calls()["index"].tolist()
        == tools.nito.tool_calls()["index"].tolist()
        == [0, 1]
    )
    edited["tool_index"] = edited["tool_index"].where(edited["tool_index"].isna(), "a")
    with pytest.raises(nito_nb.ConfigurationError, match="'tool_index' column holds 'a'"):
        edited.nito.tool_calls()


# -- 5. streams that share a label -----------------------------------------------------------------


def test_concatenated_frames_with_the_same_label_warn_how_to_label_them() -> None:
    a, b = _ended("one"), _ended("two")
    both = pd.concat([a.frame(), b.frame()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        both.nito.metrics()
    said = [str(w.message) for w in caught if "share the label" in str(w.message)]
    assert len(said) == 1 and "'sim/chat#0'" in said[0] and "nito_nb.frame({" in said[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # labelled apart: no warning
        assert nito_nb.frame([a, b]).nito.metrics()["n_chunks"].tolist() == [a.n_chunks, b.n_chunks]
