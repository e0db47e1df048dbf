"""A gateway echoes the key split across two deltas, or spelled with JSON escapes, in the answer and
in a mid-stream error: over HTTP (tests/scripted_server.py), the key is in none of the places a user
looks. The Stream (content, error, repr, frame, saved log, the live and final views, every snapshot
while it arrives), a run store (runs.duckdb and the events Parquet, read back as bytes and as
data), ``r.results()``, the ``%%nito`` output and ``%nito history`` in a real kernel (nbclient),
the chat widget (what went to the front end, its snapshot and the saved widget state).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, ClassVar

import comm
import comm.base_comm
import ipywidgets
import nbformat
import pytest
from conftest import chunk_line
from nbclient import NotebookClient
from scripted_server import Script, ScriptedServer

import nito_nb
from nito_nb._render import join_parts, render_parts

KEY = "sk-test-SECRET123"
MARK = "[redacted]"
#: Nothing of the key may show: neither whole, nor the piece of it either delta carried, nor the
#: escaped spelling the gateway sent.
FORBIDDEN = (
    KEY,
    "sk-test-SEC",
    "RET123",
    "sk-test-SE",
    "CRET123",
    "\\u0053ECRET",
    "\\\\u0053ECRET",
)


def _escaped_line(where: str, text: str) -> bytes:
    """A chunk whose ``where`` (content, or an error's message) is ``text`` with the key in it
    spelled ``sk-test-\\u0053ECRET123``: only decoding the JSON gives the key back."""
    placeholder = "\x00here\x00"
    if where == "content":
        line = chunk_line({"content": placeholder})
    else:
        line = chunk_line({}, finish="error", error={"code": 401, "message": placeholder})
    literal = json.dumps(text).replace("sk-test-SECRET123", "sk-test-\\u0053ECRET123")
    return line.replace(json.dumps(placeholder).encode(), literal.encode())


#: The four attacks: (parts, delays before each part).
ATTACKS: dict[str, list[bytes]] = {
    "split": [
        chunk_line({"role": "assistant", "content": "your key is sk-test-SEC"}),
        chunk_line({"content": "RET123 ok"}, finish="stop"),
        b"data: [DONE]\n\n",
    ],
    "escaped": [
        chunk_line({"role": "assistant", "content": "your key is "}),
        _escaped_line("content", "sk-test-SECRET123 ok"),
        chunk_line({}, finish="stop"),
        b"data: [DONE]\n\n",
    ],
    "error split": [
        chunk_line({"role": "assistant", "content": "partial"}),
        chunk_line({}, error={"code": 401, "message": "Invalid key sk-test-SE"}),
        chunk_line({}, finish="error", error={"code": 401, "message": "CRET123 was revoked"}),
        b"data: [DONE]\n\n",
    ],
    "error escaped": [
        chunk_line({"role": "assistant", "content": "partial"}),
        _escaped_line("error", "Invalid key sk-test-SECRET123"),
        b"data: [DONE]\n\n",
    ],
}


def script(name: str) -> Script:
    parts = ATTACKS[name]
    return Script(parts=parts, delays=[0.0] + [0.25] * (len(parts) - 1))  # one read per part


def leaks(where: dict[str, str]) -> list[tuple[str, str]]:
    return [(place, piece) for place, text in where.items() for piece in FORBIDDEN if piece in text]


def shown_by(s: nito_nb.Stream, tmp_path: Path) -> dict[str, str]:
    """Every place an ended Stream shows or keeps its text."""
    s.save(tmp_path / "s.jsonl")
    loaded = nito_nb.load(tmp_path / "s.jsonl")
    return {
        "s.content": s.content,
        "s.error": json.dumps(s.error),
        "repr(s)": repr(s),
        "s.exception": f"{s.exception!s} {s.exception!r}",
        "s.frame()": s.frame().to_csv(),
        "saved log": (tmp_path / "s.jsonl").read_text(),
        "loaded": f"{loaded.content} {json.dumps(loaded.error)} {loaded!r}",
        "raw log": s.log.body.decode(),
        "final view": json.dumps(s._repr_mimebundle_()),
        "snapshot": repr(s.snapshot()),
        "messages": json.dumps(s.messages),
    }


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_stream_shows_no_part_of_an_echoed_key(
    scripted: ScriptedServer, tmp_path: Path, attack: str
) -> None:
    base = scripted.add(f"echo-{attack}", script(attack))
    s = nito_nb.stream("hi", model="vendor/model", base_url=base, api_key=KEY, raise_errors=False)
    seen: dict[str, str] = {}
    for i, _ in enumerate(s):  # while it arrives: what a live view and a snapshot show
        snapshot = s.snapshot()
        seen[f"live view {i}"] = json.dumps(join_parts(render_parts(s, live=True)))
        seen[f"snapshot {i}"] = f"{snapshot.content} {json.dumps(snapshot.error)}"
    s.wait()
    assert not leaks(seen)
    assert not leaks(shown_by(s, tmp_path))
    if attack in ("split", "escaped"):
        assert (
            s.status == "done"
            and s.content.startswith("your key is [redacted]")
            and s.content.endswith(" ok")
        )
    else:
        assert s.status == "error" and MARK in s.error["message"] and MARK in str(s.exception)
    assert "".join(s.frame()["content"].dropna()) == s.content  # the frame and the Stream agree


@pytest.mark.spawns
def test_a_run_store_and_its_results_hold_no_part_of_the_key(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    base = scripted.add("echo-run", *(script(name) for name in ATTACKS))
    store = tmp_path / "runs"
    r = nito_nb.run(
        [f"prompt {i}" for i in range(len(ATTACKS))],
        model="vendor/model",
        base_url=base,
        api_key=KEY,
        store=str(store),
        concurrency=1,
        max_retries=0,
        progress=False,
    )
    r.wait()
    results = r.results()
    assert sorted(results["status"]) == ["done", "done", "error", "error"]
    shown = {"r.results()": results.to_csv(), "r.frame()": r.frame().to_csv(), "repr(r)": repr(r)}
    with nito_nb.open_store(store) as opened:
        shown["stored results"] = opened.results().to_csv()
        shown["stored events"] = opened.sql("select * from events").to_csv()
        for key in results["key"]:
            stream = opened.streams(key)
            shown[f"stored stream {key}"] = (
                f"{stream.content} {json.dumps(stream.error)} {stream.log.body!r}"
            )
    for path in sorted(store.rglob("*")):  # the files as bytes: runs.duckdb, the events Parquet
        if path.is_file():
            data = path.read_bytes()
            shown[f"{path.relative_to(store)} (bytes)"] = data.decode("latin-1")
            if path.suffix == ".parquet":
                import pyarrow.parquet as pq

                shown[f"{path.name} (read)"] = json.dumps(
                    pq.read_table(path).to_pylist(), default=str
                )
    assert not leaks(shown)
    assert any(MARK in text for text in shown.values())


@pytest.mark.spawns
def test_the_magic_output_and_history_hold_no_part_of_the_key(
    scripted: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)  # the kernel inherits it
    base = scripted.add("echo-magic", *(script(name) for name in ATTACKS))
    cells = [
        "%load_ext nito_nb",
        f"%config Nito.base_url = {base!r}",
        *["%%nito -m vendor/model\nhi"] * len(ATTACKS),
        "%nito history",
        "print(repr(_nito), _nito.content, _nito.error, _nito.exception)",
        "_nito.frame()",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = path.read_text()
    outputs = {f"cell {i}": json.dumps(cell.get("outputs", [])) for i, cell in enumerate(nb.cells)}
    assert not leaks({"saved notebook": saved, **outputs})
    assert MARK in outputs["cell 2"] and MARK in outputs["cell 6"]  # the answers, and the history
    assert "Traceback" not in saved


class RecordingComm(comm.DummyComm):  # type: ignore[misc]
    """A comm that keeps every message that would go to the front end."""

    log: ClassVar[list[Any]] = []

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        RecordingComm.log.append((msg_type, data))


def test_the_chat_widget_and_its_saved_state_hold_no_part_of_the_key(
    scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RecordingComm, "log", [])
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: RecordingComm(**kwargs))
    base = scripted.add("echo-widget", *(script(name) for name in ATTACKS))
    w = nito_nb.ChatWidget("vendor/model", base_url=base, api_key=KEY)
    try:
        for _ in ATTACKS:
            w.ask("hi")
            assert w.wait(30) is not None
            time.sleep(0.05)
        shown = {
            "to the front end": json.dumps(RecordingComm.log, default=str),
            "snapshot": json.dumps(w.transcript()),
            "display": json.dumps(w._repr_mimebundle_(), default=str),
            "saved widget state": json.dumps(ipywidgets.Widget.get_manager_state(), default=str),
            "frame": w.frame().to_csv(),
        }
        assert not leaks(shown)
        assert MARK in shown["snapshot"] and MARK in shown["saved widget state"]
    finally:
        w.close()
