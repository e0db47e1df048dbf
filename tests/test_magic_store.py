"""``%config Nito.store = PATH``: every %%nito stream also written to a run store, so that
``%nito history`` survives a kernel restart (issue 13).

Real kernels (nbclient) for the restart, the in-process shell for the kinds of streams (one
model, several, --chat, --run-tools, failed, stopped), a busy or broken store, and a run of the
same kernel writing the same store. The simulator is real HTTP on loopback throughout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import chunk_line, execute_cells, joined_text, sigint_after, stored_bytes
from scripted_server import Script, ScriptedServer

import nito_nb
from nito_nb import _magic as _magic
from nito_nb._runs.store_open import DB_NAME
from nito_nb.sim import SimServer

KEY = "sk-test-STORESECRET-0123456789"


# -- in-process shell: the shell and ip fixtures of conftest.py ---------------------------------


def cell(ip: Any, line: str, text: str) -> None:
    ip.run_cell_magic("nito", line, text)


def stored(path: Path) -> pd.DataFrame:
    with nito_nb.open_store(path) as store:
        return store.results()


def test_every_kind_of_stream_is_written_with_the_runs_result_row(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "magic"
    ip.run_line_magic("config", f"Nito.store = {str(path)!r}")

    def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        return {"city": city, "sky": "sunny"}

    ip.user_ns["weather"] = get_weather
    cell(ip, "-m sim/echo", "one model")
    one = ip.user_ns["_nito"]
    cell(ip, "-m sim/echo,sim/reasoning", "two models")
    cell(ip, "-m sim/echo --chat c", "first turn")
    cell(ip, "-m sim/echo --chat c", "second turn")
    # a call, then the answer
    cell(ip, "-m sim/tools --tools weather --run-tools", "Weather in Paris?")
    cell(ip, "-m sim/http-401", "refused")
    cell(ip, "-m sim/error-midstream", "broken")
    with pytest.raises(KeyboardInterrupt), sigint_after(1.0):
        cell(ip, "-m sim/chat --param sim='{\"tps\": 20}'", "stopped half way")
    assert "not written to the store" not in capsys.readouterr().err

    magics = next(
        m for m in ip.magics_manager.registry.values() if isinstance(m, _magic.NitoMagics)
    )
    kept = magics.streams  # the session's streams, in the order they ended
    results = stored(path)
    assert len(results) == len(kept) == 10
    by_key = results.set_index("key")
    assert results["key"].is_unique and results["run_id"].str.startswith("magic-").all()
    assert len(set(results["run_id"])) == 1
    assert sorted(results["status"]) == sorted(s.status for s in kept)
    assert {"done", "failed", "error", "stopped"} <= set(results["status"])
    assert set(results["content"].dropna()) >= {
        "one model",
        "two models",
        "first turn",
        "second turn",
    }
    assert (results["model"] == "sim/tools").sum() == 2  # the tool call and the follow-up answer

    # The same row as a run would write: the same code (_runs/results.py) on the same Stream.
    from nito_nb._runs.plan import Request
    from nito_nb._runs.results import Finished, result_rows
    from nito_nb._runs.store_writer import stream_key

    key = stream_key(one)
    expected = result_rows(
        [Finished(Request(key, None, "sim/echo", 0, [], {}), one, 1, one.t0_wall)], "x"
    )
    for name in (
        "status",
        "content",
        "ttft",
        "e2e",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "n_token_chunks",
    ):
        assert by_key.loc[key, name] == expected[0][name], name
    with nito_nb.open_store(path) as store:
        frame = store.frame()
        assert set(frame["stream"].astype(str)) == set(results["key"])
        rebuilt = store.streams(key)
        assert (rebuilt.content, rebuilt.status, rebuilt.ttft) == pytest.approx(
            (one.content, one.status, one.ttft)
        )
        stopped = results.loc[results["status"] == "stopped", "key"].iloc[0]
        assert store.streams(stopped).content == by_key.loc[stopped, "content"] != ""


def test_history_cost_and_last_read_the_store_after_the_session_is_gone(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "magic"
    ip.run_line_magic("config", f"Nito.store = {str(path)!r}")
    cell(ip, "-m sim/echo", "from before")
    cell(ip, "-m sim/chat", "also from before")
    before = ip.run_line_magic("nito", "history")
    # reset: this session's streams are gone from memory (a restart, as far as the magic knows)
    ip.run_line_magic("nito", "reset")
    capsys.readouterr()
    ip.run_line_magic("nito", "last")  # nothing kept: the store's last, rebuilt
    assert "Streaming, in short" in capsys.readouterr().out
    cell(ip, "-m sim/echo", "this session")
    history = ip.run_line_magic("nito", "history")
    assert list(history["prompt"]) == [
        "from before",
        "also from before",
        "this session",
    ]  # earlier first
    assert list(history["status"]) == ["done"] * 3
    assert history["time"].is_monotonic_increasing
    assert history["cost"].iloc[:2].tolist() == pytest.approx(before["cost"].tolist())
    assert history["ttft"].iloc[:2].tolist() == pytest.approx(before["ttft"].tolist())
    assert history["cost_total"].iloc[-1] == pytest.approx(history["cost"].sum())
    capsys.readouterr()
    ip.run_line_magic("nito", "cost")
    line = capsys.readouterr().out.strip()
    assert (
        line
        == f"nito: ${history['cost_total'].iloc[-1]:.6f} over 3 stream(s) in the store and this session"
    )
    # Without a store: this session only, as before.
    ip.run_line_magic("config", "Nito.store = None")
    assert list(ip.run_line_magic("nito", "history")["prompt"]) == ["this session"]
    assert len(stored(path)) == 3  # nothing written twice


def test_a_replay_is_not_written_again(ip: Any, tmp_path: Path) -> None:
    path = tmp_path / "magic"
    ip.run_line_magic("config", f"Nito.store = {str(path)!r}")
    cell(ip, f"-m sim/echo --save {tmp_path / 'log.jsonl'}", "recorded")
    ip.run_line_magic("nito", f"--replay {tmp_path / 'log.jsonl'} --speed 0")
    assert ip.user_ns["_nito"].content == "recorded"
    assert len(stored(path)) == 1


@pytest.mark.spawns
def test_a_store_held_by_another_process_is_one_line_and_the_answer_stays(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "magic"
    ip.run_line_magic("config", f"Nito.store = {str(path)!r}")
    cell(ip, "-m sim/echo", "written")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from nito_nb._runs.store_writer import StoreWriter; w = StoreWriter(sys.argv[1]); "
            "print('holding', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().startswith("holding")
        capsys.readouterr()
        cell(ip, "-m sim/echo", "while another process writes")
        captured = capsys.readouterr()
        assert "while another process writes" in captured.out  # the answer is shown
        assert ip.user_ns["_nito"].content == "while another process writes"
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"nito: not written to the store {str(path)!r} (StoreBusy:"
        )
        assert "another process" in err[0] and "Traceback" not in captured.err
        history = ip.run_line_magic("nito", "history")  # the store cannot be read: this session's
        assert list(history["prompt"]) == ["written", "while another process writes"]
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"nito: cannot read the store {str(path)!r} (StoreBusy:"
        )
    finally:
        holder.kill()
        holder.communicate(timeout=30)
    assert list(stored(path)["content"]) == ["written"]


def test_a_broken_store_file_is_one_line_and_the_answer_stays(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken"
    path.mkdir()
    (path / DB_NAME).write_bytes(b"not a database " * 1000)
    ip.run_line_magic("config", f"Nito.store = {str(path)!r}")
    cell(ip, "-m sim/echo", "kept anyway")
    captured = capsys.readouterr()
    assert "kept anyway" in captured.out and ip.user_ns["_nito"].content == "kept anyway"
    err = captured.err.strip().splitlines()
    assert (
        len(err) == 1
        and err[0].startswith("nito: not written to the store")
        and "Traceback" not in captured.err
    )


def test_a_store_left_open_for_reading_in_the_kernel_is_one_line_that_says_so(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "magic"
    ip.run_line_magic("config", f"Nito.store = {str(path)!r}")
    cell(ip, "-m sim/echo", "before")
    ip.run_line_magic("nito", "reset")  # "before" is now an earlier session's
    reader = nito_nb.open_store(path)  # left open (DuckDB: one mode per file per process)
    try:
        capsys.readouterr()
        cell(ip, "-m sim/echo", "while a Store is open")
        err = capsys.readouterr().err.strip().splitlines()
        assert (
            len(err) == 1
            and "open for reading in this process" in err[0]
            and "store.close()" in err[0]
        )
        assert ip.user_ns["_nito"].content == "while a Store is open"
        history = ip.run_line_magic("nito", "history")  # read through the reader's mode
        assert list(history["prompt"]) == ["before", "while a Store is open"]
        assert capsys.readouterr().err == ""
    finally:
        reader.close()
    cell(ip, "-m sim/echo", "after")
    assert list(stored(path)["content"]) == ["before", "after"]


@pytest.mark.spawns
def test_a_run_of_the_same_kernel_writing_the_same_store(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "shared"
    ip.run_line_magic("config", f"Nito.store = {str(path)!r}")
    # Paced so that it is still writing when the cells end (then stopped): 16 at a time, 0.2 s each.
    run = nito_nb.run(
        [f"row {i}" for i in range(2000)],
        model="sim/echo",
        store=str(path),
        progress=False,
        sim={"ttft_ms": 200},
    )
    try:
        deadline = time.monotonic() + 60
        while run.stats()["finished"] < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        for i in range(3):
            cell(ip, "-m sim/echo", f"during the run {i}")
        history = ip.run_line_magic("nito", "history")
        assert run.stats()["state"] == "running"  # the cells really overlapped the run's writes
    finally:
        run.stop()
        run.wait()
    assert run.error is None
    assert "not written" not in capsys.readouterr().err
    assert list(history["prompt"]) == [f"during the run {i}" for i in range(3)]
    results = stored(path)
    magic = results[results["run_id"].str.startswith("magic-")]
    assert list(magic["content"]) == [f"during the run {i}" for i in range(3)]
    assert (results["run_id"] == run.run_id).sum() == len(run.results()) >= 50


def test_a_path_that_cannot_be_a_store_is_refused_in_one_line(ip: Any, tmp_path: Path) -> None:
    settings = next(c for c in ip.configurables if isinstance(c, _magic.Nito))
    (tmp_path / "file").write_text("x")
    (tmp_path / "db" / DB_NAME).mkdir(parents=True)
    for bad, why in [
        (tmp_path / "file", "is a file"),
        (tmp_path / "file" / "under", "is a file, so no folder can be made under it"),
        (tmp_path / "db", "is a folder"),
    ]:
        with pytest.raises(Exception, match=r"Nito\.store must be a folder") as info:
            settings.store = str(bad)
        assert why in str(info.value) and "\n" not in str(info.value)
        assert settings.store is None  # unchanged
    settings.store = str(tmp_path / "new" / "deeper")  # made at the first write
    assert settings.store == str((tmp_path / "new" / "deeper").resolve())
    settings.store = ""
    assert settings.store is None


# -- no key in the store ---------------------------------------------------------------------------


def echoing_parts(key: str) -> list[bytes]:
    """A gateway that echoes the key: in a comment and in its error chunk."""
    return [
        f": debug Authorization: Bearer {key}\n\n".encode(),
        chunk_line({"role": "assistant", "content": "partial "}),
        chunk_line(
            {"content": ""}, finish="error", error={"code": 401, "message": f"Invalid key {key}"}
        ),
        b"data: [DONE]\n\n",
    ]


def assert_no_key(path: Path, shown: str) -> None:
    """No form of the key in the store's files (where ``shown``, a stored text, is found as is:
    DuckDB keeps these strings and blobs readable, so the search is not blind) nor its tables."""
    files = stored_bytes(path)  # Parquet files: their table's text too (pages are compressed)
    assert b"".join(files.values()).count(shown.encode())
    for file, data in files.items():
        assert KEY.encode() not in data, file
    with nito_nb.open_store(path) as store:
        requests, events = store.sql("select * from requests"), store.sql("select * from events")
        assert len(requests) and len(events)
        assert KEY not in requests.to_csv() and KEY not in events.to_csv()
        assert all(KEY.encode() not in bytes(body) for body in requests["body"])


# -- a real kernel, restarted ----------------------------------------------------------------------


def _text(cell: Any) -> str:
    out = []
    for output in cell.get("outputs", []):
        if output.get("output_type") in ("display_data", "execute_result"):
            out.append((False, str(output["data"].get("text/plain", ""))))
        elif output.get("output_type") == "stream":
            out.append((True, output["text"]))
        elif output.get("output_type") == "error":
            out.append((False, "\n".join(output.get("traceback", []))))
    return joined_text(out)


@pytest.mark.spawns
@pytest.mark.slow
def test_history_survives_a_kernel_restart_and_no_key_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripted: ScriptedServer
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)  # the kernels inherit it: sent, never stored
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    path = tmp_path / "store"
    echo = scripted.add("store-echo", Script(parts=echoing_parts(KEY)))
    with SimServer(api_key=KEY) as accepting:
        first = execute_cells(
            [
                "%load_ext nito_nb",
                f"%config Nito.store = {str(path)!r}",
                "%%nito -m sim/chat\nThe first kernel's first prompt",
                f"%config Nito.base_url = {accepting!r}",  # the key is sent there, and accepted
                "%%nito -m sim/echo\nThe first kernel's second prompt",
                f"%config Nito.base_url = {echo!r}",  # a gateway that echoes the key back
                "%%nito -m some/model\nEcho the key",
            ],
            tmp_path,
        )
    assert "✓ done" in _text(first.cells[2]) and "✓ done" in _text(first.cells[4])
    assert "partial" in _text(first.cells[6]) and "[redacted]" in _text(first.cells[6])
    assert all("not written" not in _text(c) and "Traceback" not in _text(c) for c in first.cells)

    (tmp_path / "a-file").write_text("x")
    second = execute_cells(
        [  # a NEW kernel: nothing in memory
            "%load_ext nito_nb",
            "%nito history",  # no store set: this session's, empty
            f"%config Nito.store = {str(path)!r}",
            "h = %nito history\nprint(list(h['prompt']), list(h['model']), list(h['status']))",
            "%nito last",
            "%nito cost",
            f"%config Nito.store = {str(tmp_path / 'a-file')!r}",
            "%config Nito.store",
        ],
        tmp_path,
    )
    c = second.cells
    assert "Empty DataFrame" in _text(c[1])
    listed = _text(c[3]).strip()
    assert (
        listed
        == (
            "[\"The first kernel's first prompt\", \"The first kernel's second prompt\", 'Echo the key'] "
            "['sim/chat', 'sim/echo', 'test/model'] ['done', 'done', 'error']"  # the model the chunks name
        )
    )
    assert "partial" in _text(c[4])  # the last stream, rebuilt from the store
    assert _text(c[5]).strip().startswith("nito: $") and "over 3 stream(s) in the store" in _text(
        c[5]
    )
    refused = _text(c[6]).strip()
    assert refused.startswith("ERROR:root:Nito.store must be a folder") and "is a file" in refused
    assert len(refused.splitlines()) == 1 and "Traceback" not in refused
    assert str(path) in _text(c[7])  # unchanged

    results = stored(path)
    assert list(results["content"]) == [
        results["content"][0],
        "The first kernel's second prompt",
        "partial ",
    ]
    assert results["content"][0].startswith("## Streaming, in short")
    assert list(results["row"]) == ["In[3]", "In[5]", "In[7]"]  # the cells
    with nito_nb.open_store(path) as store:
        frame = store.frame(list(results["key"]))
        events = frame.groupby("stream", observed=True).size()
        assert set(events.index.astype(str)) == set(results["key"]) and (events > 1).all()
        assert (
            json.loads(
                store.sql("select request from requests where model = 'sim/echo'")["request"][0]
            )["messages"][-1]["content"]
            == "The first kernel's second prompt"
        )
    assert_no_key(path, "The first kernel's second prompt")
