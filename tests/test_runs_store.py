"""The run store (DuckDB in a folder): what is written, resume, a process killed half-way, and a
second process kept out while one writes. Real files, real subprocesses, the simulator."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import stored_bytes

import nito_nb

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = pytest.mark.spawns

FAST = {"sim": {"tps": 0, "ttft_ms": 0}}

CHILD = textwrap.dedent(
    """
    import sys, time, nito_nb
    store, n = sys.argv[1], int(sys.argv[2])
    prompts = [f"prompt {i} " + "word " * 30 for i in range(n)]
    # The pacing comes from NITO_SIM_TPS: the same requests (the same keys) at any speed.
    run = nito_nb.run(prompts, model="sim/echo", concurrency=4, store=store, progress=False)
    print("started", flush=True)
    print("helper", run._writer.store._events._proc.pid, flush=True)  # the store's events helper process
    while not run.done:
        print("finished", run.stats()["finished"], flush=True)
        time.sleep(0.05)
    print("ended", len(run.results()), "sent", run.total, flush=True)
    """
)


def _ends(pid: int, within: float = 10.0) -> bool:
    """True once process ``pid`` has ended (gone, or a zombie nobody reaped) within ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _child(store: Path, n: int, tps: float) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "NITO_SIM_TPS": str(tps),
        "NITO_SIM_TTFT_MS": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _prompts(n: int) -> list[str]:
    return [f"prompt {i} " + "word " * 30 for i in range(n)]


def test_the_store_holds_results_frames_and_streams_like_the_run(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    run = nito_nb.run(
        ["one two three", "four five"],
        model=["sim/echo", "sim/reasoning"],
        store=str(store),
        progress=False,
        **FAST,
    )
    run.wait()
    assert not run._writer.kept_streams()  # with a store, no log is kept in memory
    # Nothing else, nowhere else: the database and the events files (whole: no partial file).
    assert sorted(p.name for p in store.iterdir()) == ["events", "runs.duckdb"]
    files = sorted(p.name for p in (store / "events").iterdir())
    assert (
        "_columns.parquet" in files
        and all(f.endswith(".parquet") for f in files)
        and len(files) >= 2
    )
    results = run.results().set_index("key")
    with nito_nb.open_store(store) as opened:
        stored = opened.results().set_index("key")
        assert sorted(stored.index) == sorted(results.index)
        for column in (
            "status",
            "content",
            "reasoning",
            "model",
            "run_id",
            "completion_tokens",
            "attempts",
        ):
            assert stored[column].to_dict() == results[column].to_dict()
        for column in ("connect", "ttft", "e2e", "itl"):
            assert stored[column].astype(float).to_dict() == pytest.approx(
                results[column].astype(float).to_dict(), nan_ok=True
            )
        assert (stored["connect"] > 0).all()
        key = results.index[results["model"] == "sim/reasoning"][0]
        stream = opened.streams(key)
        assert (stream.status, stream.content, stream.reasoning) == (
            results.loc[key, "status"],
            results.loc[key, "content"],
            results.loc[key, "reasoning"],
        )
        assert stream.ttft == pytest.approx(results.loc[key, "ttft"], abs=1e-9)
        assert stream.connect == pytest.approx(results.loc[key, "connect"], abs=1e-9)
        frame = opened.frame([key])
        assert set(frame["stream"]) == {key}
        assert frame.nito.metrics().loc[key, "ttft"] == pytest.approx(
            results.loc[key, "ttft"], abs=1e-9
        )
        assert frame.nito.text()[key] == results.loc[key, "content"]
        summary = opened.summary()
        assert list(summary["ok"]) == [2, 2]
        p99 = opened.sql(
            "select model, quantile_cont(ttft, 0.99) as p99 from requests group by model order by model"
        )
        assert list(p99["model"]) == ["sim/echo", "sim/reasoning"]


@pytest.mark.skipif(sys.platform == "win32", reason="* and ? cannot be in a Windows file name")
def test_a_store_in_a_folder_whose_name_looks_like_a_pattern(tmp_path: Path) -> None:
    # DuckDB reads the events through a glob: "exp[1]" was a pattern that matched no file, and
    # the run failed as it opened its store.
    store = tmp_path / "exp[1] *{a,b}" / "runs"
    run = nito_nb.run(
        ["one two", "three"], model="sim/echo", store=str(store), progress=False, **FAST
    )
    run.wait()
    assert run.error is None and set(run.results()["status"]) == {"done"}
    with nito_nb.open_store(store) as opened:
        key = opened.results()["key"].iloc[0]
        assert len(opened.sql("SELECT * FROM events")) > 0
        assert set(opened.frame()["stream"]) == set(run.results()["key"])
        assert opened.streams(key).content == run.results().set_index("key").loc[key, "content"]
        for wrong in (5, [5], [key, None]):  # a TypeError from Python or DuckDB before
            with pytest.raises(nito_nb.ConfigurationError, match="frame takes request keys"):
                opened.frame(wrong)  # type: ignore[arg-type]
    again = nito_nb.run(
        ["one two", "three"], model="sim/echo", store=str(store), progress=False, **FAST
    )
    again.wait()
    assert again.total == 0  # resumed: both were done


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX path")
@pytest.mark.parametrize("name", ["a?b", "a\\b"])
def test_a_store_path_duckdb_cannot_open_is_one_clear_error(tmp_path: Path, name: str) -> None:
    store = tmp_path / name / "runs"
    with pytest.raises(
        nito_nb.ConfigurationError, match="DuckDB cannot open a database whose path holds"
    ):
        nito_nb.run(["x"], model="sim/echo", store=str(store), progress=False, **FAST)
    assert not (tmp_path / name).exists()  # refused before anything was made
    with pytest.raises(nito_nb.ConfigurationError, match="DuckDB cannot open"):
        nito_nb.open_store(store)


@pytest.mark.skipif(sys.platform == "win32", reason="? cannot be in a Windows file name")
def test_a_relative_store_in_a_folder_with_a_question_mark_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DuckDB makes the path absolute before it derives its write-ahead log's ("q.wal?d/...").
    (tmp_path / "q?d").mkdir()
    monkeypatch.chdir(tmp_path / "q?d")
    with pytest.raises(nito_nb.ConfigurationError, match="DuckDB cannot open"):
        nito_nb.run(["x"], model="sim/echo", store="runs", progress=False, **FAST)


def test_a_store_written_before_the_units_were_told_apart_reads_in_the_new_units(
    tmp_path: Path,
) -> None:
    # One request with usage, one without; then the requests table is put back the way it was
    # written before the rename (CHANGELOG.md): K in `n_chunks`, no new
    # columns, and the chunk figures that `tpot` and `output_tps` held without usage.
    from nito_nb._runs.store_writer import StoreWriter

    path = tmp_path / "old"
    for usage in (True, False):
        run = nito_nb.run(
            ["a"],
            model="sim/chat",
            store=str(path),
            progress=False,
            stream_options={"include_usage": usage},
            sim={"tps": 1000, "ttft_ms": 0},
        )
        run.wait(timeout=60)
        assert run.error is None
    with nito_nb.open_store(path) as store:
        new = store.results()
    new_bare = new[new["completion_tokens"].isna()].iloc[0]
    new_packed = new[new["completion_tokens"].notna()].iloc[0]
    writer = StoreWriter(path)
    con = writer.con
    con.execute('ALTER TABLE requests RENAME COLUMN "n_token_chunks" TO "n_chunks"')
    con.execute('ALTER TABLE requests DROP COLUMN "n_output_tokens"')
    con.execute('ALTER TABLE requests DROP COLUMN "output_chunks_per_s"')
    con.execute("UPDATE requests SET tpot = itl, output_tps = 1.0 WHERE completion_tokens IS NULL")
    con.execute('ALTER TABLE requests DROP COLUMN "connect"')  # nor this newer one
    writer.con.close()
    for reopened in (False, True):  # read as it is, then after a writer added the new columns
        if reopened:
            StoreWriter(path).con.close()
        with nito_nb.open_store(path) as store:
            old = store.results()
        bare = old[old["completion_tokens"].isna()].iloc[0]
        packed = old[old["completion_tokens"].notna()].iloc[0]
        assert (
            pd.isna(bare["tpot"])
            and pd.isna(bare["output_tps"])
            and pd.isna(bare["n_output_tokens"])
        )
        assert (
            bare["n_token_chunks"] == new_bare["n_token_chunks"] and bare["itl"] == new_bare["itl"]
        )
        assert (
            packed["n_output_tokens"]
            == packed["completion_tokens"]
            == new_packed["n_output_tokens"]
        )
        assert (
            packed["tpot"] == new_packed["tpot"]
            and packed["output_tps"] == new_packed["output_tps"]
        )
        assert pd.isna(bare["connect"]) and pd.isna(packed["connect"])
        with nito_nb.open_store(path) as store:
            assert store.streams(packed["key"]).connect is None


def test_a_store_whose_events_files_lack_a_newer_column_still_opens(tmp_path: Path) -> None:
    # Every events file (the columns file too) put back as a version before `tool_type` wrote
    # it: the view named the column and failed to bind, so the store did not open at all.
    import pyarrow.parquet as pq

    from nito_nb._runs.store_writer import StoreWriter

    path = tmp_path / "old"
    run = nito_nb.run(
        ["a", "b"], model="sim/chat", store=str(path), progress=False, sim={"tps": 0, "ttft_ms": 0}
    )
    run.wait(timeout=60)
    assert run.error is None
    files = sorted((path / "events").glob("*.parquet"))
    assert any(f.name == "_columns.parquet" for f in files) and len(files) >= 2
    for file in files:
        pq.write_table(pq.read_table(file).drop(["tool_type"]), file)
    with nito_nb.open_store(path) as store:  # read-only, as it is
        keys = store.results()["key"].tolist()
        frame = store.frame(keys)
        assert frame["tool_type"].isna().all() and frame["content"].notna().any()
        assert store.sql("select count(tool_type) n from events")["n"].iloc[0] == 0
        assert store.streams(keys[0]).status == "done"
    StoreWriter(path).con.close()  # a writer writes the columns file again, whole
    assert "tool_type" in pq.read_schema(path / "events" / "_columns.parquet").names
    with nito_nb.open_store(path) as store:
        assert len(store.frame(keys)) == len(frame)


def test_a_failed_request_is_rebuilt_with_its_http_error(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    run = nito_nb.run(
        ["refused"],
        model="sim/echo",
        store=store,
        max_retries=0,
        progress=False,
        sim={"tps": 0, "fail_rate": 1, "fail_status": 503, "fail_attempts": 99, "seed": 41},
    ).wait()
    key = run.results()["key"][0]
    with nito_nb.open_store(store) as opened:
        stream = opened.streams(key)
    assert stream.status == "failed" and isinstance(stream.exception, nito_nb.ServerError)
    assert stream.error is not None and "Simulated fault" in stream.error["message"]


def test_resume_skips_done_keys_and_reruns_the_rest_once(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    first = nito_nb.run(
        _prompts(10),
        model="sim/echo",
        store=store,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0, "fail_rate": 0.3, "fail_status": "error", "seed": 31},
    ).wait()
    errors = set(first.results().query("status == 'error'")["key"])
    assert errors
    second = nito_nb.run(
        _prompts(15),
        model="sim/echo",
        store=store,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0, "fail_rate": 0.3, "fail_status": "error", "seed": 31},
    ).wait()
    assert len(second.skipped) == 10 - len(errors)
    assert set(second.results()["key"]) >= errors  # re-run, and the server lets them through now
    with nito_nb.open_store(store) as opened:
        results = opened.results()
        assert len(results) == 15 and results["key"].is_unique
        assert set(results[results["key"].isin(errors)]["status"]) == {"done"}
        per_key = opened.sql(
            "select stream, count(*) filter (where kind = 'done') as n, "
            "count(*) filter (where error_message is not null) as e from events group by stream"
        )
        assert len(per_key) == 15 and set(per_key["n"]) == {1}
        # the error's events were replaced
        assert set(per_key[per_key["stream"].isin(errors)]["e"]) == {0}
        assert set(results["run_id"]) == {first.run_id, second.run_id}
        not_done = int((results["status"] != "done").sum())
    again = nito_nb.map(
        _prompts(15),
        model="sim/echo",
        store=store,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0, "fail_rate": 0.3, "fail_status": "error", "seed": 31},
    )
    assert nito_nb.last().total == not_done  # only what was not done is sent again
    # every answer, stored or new
    assert [a.strip() for a in again] == [p.strip() for p in _prompts(15)]


def test_a_run_killed_half_way_then_resumed_has_each_result_once(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    n = 60
    child = _child(store, n, tps=80)
    try:
        assert child.stdout is not None
        helper = 0
        for line in child.stdout:
            if line.startswith("helper"):
                helper = int(line.split()[1])
            if line.startswith("finished") and int(line.split()[1]) >= 12:
                break
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.communicate(timeout=30)
    assert helper and _ends(helper)  # the store's events helper does not outlive the run's process
    with nito_nb.open_store(store) as opened:
        kept = opened.results()
    assert 12 <= len(kept) < n and kept["key"].is_unique
    resumed = _child(store, n, tps=0)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert f"ended {n}" in out  # its results: every key, those done before the kill included
    # only what was not done is sent
    assert f"sent {n - len(kept[kept['status'] == 'done'])}" in out
    with nito_nb.open_store(store) as opened:  # from this process, after the writer ended
        results = opened.results()
        assert len(results) == n and results["key"].is_unique and set(results["status"]) == {"done"}
        prompts = {p.strip() for p in _prompts(n)}
        assert {c.strip() for c in results["content"]} == prompts  # none lost
        events = opened.sql(
            "select stream, count(*) filter (where kind = 'done') as done, "
            "count(*) filter (where seq = -1) as response from events group by stream"
        )
        assert len(events) == n and set(events["done"]) == {1} and set(events["response"]) == {1}
        for key in results["key"][:10]:
            stream = opened.streams(key)
            assert (
                stream.status == "done"
                and stream.content == results.set_index("key").loc[key, "content"]
            )


def test_a_second_process_gets_a_clear_error_while_one_writes(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    child = _child(store, 40, tps=20)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().startswith("started")
        with pytest.raises(nito_nb.StoreBusy, match="being written by another process"):
            nito_nb.run(["x"], model="sim/echo", store=str(store), progress=False)
        with pytest.raises(nito_nb.StoreBusy, match="being written by another process"):
            nito_nb.open_store(store)
    finally:
        child.kill()
        child.communicate(timeout=30)
    # killed: the file is whole, what was committed is there
    with nito_nb.open_store(store) as opened:
        assert opened.sql("select count(*) as n from requests")["n"][0] >= 0


def test_store_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="no run store"):
        nito_nb.open_store(tmp_path / "nothing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(nito_nb.ConfigurationError, match="names a folder"):
        nito_nb.run(["x"], model="sim/echo", store=str(tmp_path / "file"), progress=False)
    # Not a path (a TypeError), or an empty one (the run wrote its store into the current folder).
    for value in (123, "", "  "):
        with pytest.raises(nito_nb.ConfigurationError, match="store= is the path of a folder"):
            nito_nb.run(["x"], model="sim/echo", store=value, progress=False)  # type: ignore[arg-type]
        with pytest.raises(nito_nb.ConfigurationError, match="store= is the path of a folder"):
            nito_nb.open_store(value)  # type: ignore[arg-type]


def test_with_a_store_only_in_flight_logs_stay_in_memory(tmp_path: Path) -> None:
    captured: list[int] = []
    run = nito_nb.run(
        _prompts(80),
        model="sim/echo",
        store=str(tmp_path / "r"),
        progress=False,
        concurrency=8,
        **FAST,
    )

    def watch(_: Any = None) -> None:
        captured.append(len(run._dispatcher.in_flight) + len(run._writer.kept_streams()))

    while not run.done:
        watch()
        time.sleep(0.005)
    run.wait()
    assert max(captured) <= 8 and not run._writer.kept_streams()


def test_no_key_reaches_the_store_the_results_or_the_repr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nito_nb.sim import SimServer

    key = "sk-test-RUNSECRET-123456789"
    store = tmp_path / "runs"
    with SimServer(api_key=key) as base_url:
        run = nito_nb.run(
            ["hello there", "and again"],
            model="sim/echo",
            base_url=base_url,
            api_key=key,
            store=str(store),
            sim={"tps": 0},
        ).wait()
        refused = nito_nb.run(
            ["x"],
            model="sim/echo",
            base_url=base_url,
            api_key=key + "-wrong",
            store=str(tmp_path / "refused"),
            progress=False,
        ).wait()
    assert set(run.results()["status"]) == {"done"}  # the key was sent, and accepted
    assert isinstance(refused.error, nito_nb.AuthenticationError)
    shown = (
        repr(run)
        + run.results().to_csv()
        + repr(refused)
        + str(refused.error)
        + capsys.readouterr().err
    )
    assert key not in shown
    for folder in (store, tmp_path / "refused"):
        for path, data in stored_bytes(folder).items():
            assert key.encode() not in data, path
        with nito_nb.open_store(folder) as opened:
            assert key not in opened.sql("select * from requests").to_csv()
            assert key not in opened.sql("select * from events").to_csv()


def test_the_events_are_written_by_a_helper_process_and_a_dead_helper_loses_nothing(
    tmp_path: Path,
) -> None:
    # The frames of a store's events are built in a helper process (_runs/events.py), off the
    # sending loop's GIL; if it dies, the run's own process writes them from then on.
    store = tmp_path / "runs"
    n = 40
    run = nito_nb.run(
        _prompts(n),
        model="sim/echo",
        concurrency=4,
        store=str(store),
        progress=False,
        sim={"tps": 100, "ttft_ms": 0},
    )  # about 3 s: batches (1 s each) after the kill
    events = run._writer.store._events
    helper = events._proc.pid
    assert "nito_nb._runs.events_main" in Path(f"/proc/{helper}/cmdline").read_bytes().decode()
    while run.stats()["finished"] == 0:  # counted once a batch is written: the helper wrote one
        time.sleep(0.01)
    assert run.stats()["finished"] < n
    with pytest.warns(RuntimeWarning, match="helper process ended.*nothing is lost"):
        os.kill(helper, signal.SIGKILL)
        run.wait(timeout=120)
    assert run.error is None and events.failure is not None and _ends(helper)
    with nito_nb.open_store(store) as opened:
        results = opened.results()
        assert len(results) == n and set(results["status"]) == {"done"}
        counts = opened.sql(
            "select stream, count(*) filter (where kind = 'done') as done from events group by stream"
        )
        assert len(counts) == n and set(counts["done"]) == {1}
        for key in results["key"]:
            assert opened.streams(key).content == results.set_index("key").loc[key, "content"]


def test_the_next_store_run_takes_the_helper_the_last_one_left_until_it_idles_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Starting a helper costs about 0.7 s of CPU (its imports), which every run with a store paid
    # again: a closed writer hands its helper to the next one (_runs/events_helper.py), and one
    # left idle longer than IDLE_SECONDS ends.
    helpers = []
    for name in ("first", "second"):
        run = nito_nb.run(_prompts(3), model="sim/echo", store=str(tmp_path / name), **FAST)
        helpers.append(run._writer.store._events._proc.pid)
        run.wait()
        with nito_nb.open_store(tmp_path / name) as opened:
            assert len(opened.sql("select distinct stream from events")) == 3
    assert helpers[0] == helpers[1] and not _ends(helpers[0], within=0.5)
    from nito_nb._runs import events_helper

    monkeypatch.setattr(events_helper, "IDLE_SECONDS", 0.2)
    third = nito_nb.run(_prompts(3), model="sim/echo", store=str(tmp_path / "third"), **FAST)
    assert third._writer.store._events._proc.pid == helpers[0]
    third.wait()
    assert _ends(helpers[0])  # idle too long: let go (its pipe closed), and reaped
    fourth = nito_nb.run(_prompts(3), model="sim/echo", store=str(tmp_path / "fourth"), **FAST)
    assert fourth._writer.store._events._proc.pid != helpers[0]  # a new one, not the dead one
    fourth.wait()
    with nito_nb.open_store(tmp_path / "fourth") as opened:
        assert set(opened.results()["status"]) == {"done"}


def test_a_helper_whose_answer_was_not_taken_is_let_go_not_handed_on(tmp_path: Path) -> None:
    # The next writer would read that answer as its own batch's, and commit its rows before
    # their events file is in place.
    import duckdb

    from nito_nb._frame import EndedStream
    from nito_nb._runs.events import prepare
    from nito_nb._runs.events_helper import EventsHelper

    prepare(tmp_path, duckdb.connect())
    stream = nito_nb.stream("hello", model="sim/echo", **FAST)
    stream.wait()
    first = EventsHelper()
    assert first._proc is not None
    pid = first._proc.pid
    first.submit(tmp_path, "one", "run", {"k": EndedStream.of(stream)})
    first.close()  # its answer never taken
    assert _ends(pid)
    second = EventsHelper()
    assert second._proc is not None and second._proc.pid != pid
    second.submit(tmp_path, "two", "run", {"k": EndedStream.of(stream)})
    second.wait()
    assert (tmp_path / "events" / "two.parquet").is_file()
    second.close()


def test_an_events_file_without_committed_rows_is_never_seen(tmp_path: Path) -> None:
    # A process killed after writing a batch's events file but before its rows committed leaves
    # the file behind; a re-run key's old file stays too. The view shows neither.
    from nito_nb._frame import EndedStream
    from nito_nb._runs.events import write_events

    store = tmp_path / "runs"
    run = nito_nb.run(
        ["one", "two"], model="sim/echo", store=str(store), progress=False, **FAST
    ).wait()
    key = run.results()["key"][0]
    with nito_nb.open_store(store) as opened:
        before = opened.sql("select * from events order by stream, seq, part")
    stray = nito_nb.stream("a different answer", model="sim/echo", **FAST)
    stray.wait()
    write_events(store, "uncommitted", "other-run", {key: EndedStream.of(stray)})
    assert (store / "events" / "uncommitted.parquet").is_file()
    with nito_nb.open_store(store) as opened:
        after = opened.sql("select * from events order by stream, seq, part")
        assert opened.streams(key).content == run.results().set_index("key").loc[key, "content"]
    pd.testing.assert_frame_equal(before, after)


def test_a_store_with_its_events_in_the_database_reads_and_resumes(tmp_path: Path) -> None:
    # Stores written before the events became Parquet files hold them in an `events` table:
    # such a store still reads, and a resumed run adds its events beside them, replacing a
    # re-run key's old rows.
    import duckdb

    store = tmp_path / "runs"
    prompts = ["one", "two", "three"]
    run = nito_nb.run(prompts, model="sim/echo", store=str(store), progress=False, **FAST).wait()
    again = run.results()["key"][0]
    with nito_nb.open_store(store) as opened:
        expected = opened.frame()
    con = duckdb.connect(str(store / "runs.duckdb"))  # put it back the way it was written before
    con.execute(
        f"CREATE TABLE events AS SELECT * EXCLUDE (batch) FROM read_parquet('{store}/events/*.parquet') "
        "WHERE batch IS NOT NULL"
    )
    con.execute("ALTER TABLE requests DROP COLUMN batch")
    con.execute("UPDATE requests SET status = 'error' WHERE key = ?", [again])  # to be re-run
    con.close()
    for path in (store / "events").iterdir():
        path.unlink()
    (store / "events").rmdir()
    with nito_nb.open_store(store) as opened:
        pd.testing.assert_frame_equal(opened.frame(), expected)
    resumed = nito_nb.run(
        prompts, model="sim/echo", store=str(store), progress=False, **FAST
    ).wait()
    assert [r.key for r in resumed.skipped] and resumed.total == 1
    assert list(resumed.results()["done_before"]) == [key != again for key in run.results()["key"]]
    with nito_nb.open_store(store) as opened:
        results = opened.results()
        assert len(results) == 3 and set(results["status"]) == {"done"}
        frame = opened.frame()
        assert len(frame) == len(expected)  # the re-run key's rows once: its old ones were replaced
        assert opened.streams(again).content == "one"
