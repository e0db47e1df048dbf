"""%%nito in a real kernel: a notebook executed headless (nbclient) and saved, and the interrupt.

What is checked is the saved file, as GitHub, nbviewer or VS Code would read it: the final answers
are there as text/html + text/plain, no model text became live markup, no key is anywhere.
"""

from __future__ import annotations

import contextlib
import html
import json
import queue
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import joined_text
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from nito_nb.sim import SimServer

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.spawns]

KEY = "sk-test-SECRET123456789"
PAYLOAD = '<img src=x onerror="window.__xss=1"><script>window.__xss2=1</script>'
HOSTILE = f"{PAYLOAD}\n\n[click](javascript:alert(1))\n\n```html\n<div>shown literally</div>\n```"
ACTIVE_TAG = re.compile(r"<[a-z][^<>]*\son\w+\s*=", re.IGNORECASE)


def outputs_of(cell: Any) -> list[dict[str, Any]]:
    return [dict(o) for o in cell.get("outputs", [])]


def output_text(cell: Any, mime: str = "text/plain") -> str:
    texts = []
    for output in outputs_of(cell):
        if output.get("output_type") in ("display_data", "execute_result"):
            texts.append((False, str(output["data"].get(mime, ""))))
        elif output.get("output_type") == "stream":
            texts.append((True, output["text"]))
    return joined_text(texts)


@pytest.fixture
def kernel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel inherits this process's environment: a key that must never show, fast sims.
    monkeypatch.setenv("NITO_API_KEY", KEY)
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")


def test_headless_notebook_is_saved_with_final_safe_answers(
    tmp_path: Path, kernel_env: None
) -> None:
    with (
        SimServer(api_key=KEY) as accepting,
        SimServer(api_key="sk-another-key-000000") as refusing,
    ):
        cells = [
            "%load_ext nito_nb",
            "%%nito -m sim/chat\nExplain SSE",
            "%%nito -m sim/reasoning\nThink first",
            'def get_weather(city: str) -> str:\n    """Weather for a city."""\n    return "sunny"',
            "%%nito -m sim/tools --tools get_weather\nWeather in Paris?",
            "%%nito -m sim/error-midstream\nBreak halfway",
            f"%%nito -m sim/echo --no-interpolate\n{HOSTILE}",
            "%%nito -m sim/chat,sim/echo\nCompare these",
            f"%config Nito.base_url = {accepting!r}",
            "%%nito -m sim/echo\nthe key was sent and accepted",
            f"%config Nito.base_url = {refusing!r}",
            "%%nito -m sim/echo\nrefused",
            "%%nito -m sim/echo --raise\nrefused, raised",
            "%nito config",
            "print(_nito.status, type(_nito.exception).__name__)",
            "%config Nito.max_rate = -1",
            "%config Nito.max_rate",
            "%%nito -m sim/echo --param temperature=hot\nnever sent",
        ]
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
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
    saved = nbformat.read(path, as_version=4)
    raw = path.read_text()
    c = saved.cells

    # Final answers, as html + plain text, once each (no Out[] duplicate).
    chat = output_text(c[1])
    assert "Streaming, in short" in chat and "Tip: when a stream fails halfway" in chat
    assert "✓ done" in chat
    for index in (1, 2, 4, 5, 6, 7, 9):
        kinds = [o["output_type"] for o in outputs_of(c[index])]
        assert "execute_result" not in kinds
        for output in outputs_of(c[index]):
            if output["output_type"] == "display_data":
                assert set(output["data"]) == {"text/html", "text/plain"}
    assert "Reasoning" in output_text(c[2]) and "✓ done" in output_text(c[2])
    assert "tool call get_weather" in output_text(c[4]).lower()
    assert "city" in output_text(c[4])
    broken = output_text(c[5])
    assert "✗ error" in broken and "Upstream provider disconnected" in broken
    assert "nito: MidStreamError" in broken and "Traceback" not in broken
    grid = output_text(c[7])
    assert "== sim/chat ==" in grid and "== sim/echo ==" in grid and "Compare these" in grid
    assert "the key was sent and accepted" in output_text(c[9])
    assert "nito: AuthenticationError" in output_text(c[11])
    assert [o["output_type"] for o in outputs_of(c[12])][-1] == "error"
    assert "API key (NITO_API_KEY): set" in output_text(c[13])
    assert output_text(c[14]).strip() == "failed AuthenticationError"
    # User mistakes: one line each, no traceback; a refused setting keeps its value.
    for index in (15, 17):
        [output] = outputs_of(c[index])
        assert output["output_type"] == "stream" and output["name"] == "stderr"
        assert len(output["text"].strip().splitlines()) == 1 and "Traceback" not in output["text"]
    assert "Nito.max_rate must be a positive number" in output_text(c[15])
    assert output_text(c[16]).strip() == "20.0"
    assert output_text(c[17]).startswith("UsageError: temperature must be a number, not 'hot'")

    # Hostile content: escaped in every output, code still shows the tag, no live link.
    hostile_html = output_text(c[6], "text/html")
    assert "&lt;script&gt;" in hostile_html
    assert "<div>shown literally</div>" in html.unescape(re.sub(r"<[^>]+>", "", hostile_html))
    for cell in c:
        for output in outputs_of(cell):
            text = json.dumps(output, ensure_ascii=False)
            for mime, value in output.get("data", {}).items():
                if mime == "text/html":
                    page = str(value).lower()
                    assert "<img" not in page and "<script" not in page
                    assert 'href="javascript' not in page
                    assert not ACTIVE_TAG.search(page)
            assert "text/markdown" not in output.get("data", {})
            assert KEY not in text
    assert KEY not in raw  # nowhere in the file: outputs, errors, tracebacks, metadata


def _collect(kc: Any, msg_id: str, until_idle: bool, timeout: float) -> list[dict[str, Any]]:
    messages = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            if not until_idle:
                return messages
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if (
            until_idle
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            return messages
    if not until_idle:
        return messages
    raise AssertionError(f"no idle within {timeout} s: {[m['msg_type'] for m in messages]}")


def _execute(kc: Any, code: str, timeout: float = 60) -> list[dict[str, Any]]:
    return _collect(kc, kc.execute(code), until_idle=True, timeout=timeout)


def _plain(messages: list[dict[str, Any]]) -> str:
    return "\n".join(
        m["content"].get("data", {}).get("text/plain", "") or m["content"].get("text", "")
        for m in messages
        if m["msg_type"] in ("display_data", "update_display_data", "stream", "execute_result")
    )


@contextlib.contextmanager
def _kernel(cwd: Path) -> Iterator[tuple[KernelManager, Any]]:
    """A real kernel with the extension loaded, shut down afterwards."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        _execute(kc, "%load_ext nito_nb")
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _interrupted(
    km: KernelManager, kc: Any, code: str, arrived: Callable[[str], bool]
) -> tuple[str, list[dict[str, Any]]]:
    """Run ``code``, interrupt the kernel (the toolbar's stop) once ``arrived(output so far)``,
    and return the cell's msg_id with every message it sent until idle."""
    msg_id = kc.execute(code)
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while not arrived(_plain(seen)):
        assert time.monotonic() < deadline, "the answer did not start to arrive"
        seen += _collect(kc, msg_id, until_idle=False, timeout=0.5)
    km.interrupt_kernel()
    seen += _collect(kc, msg_id, until_idle=True, timeout=30)
    return msg_id, seen


def test_a_long_answer_is_saved_whole_in_html_and_as_its_head_and_tail_in_text(
    tmp_path: Path, kernel_env: None
) -> None:
    # The saved notebook of a long answer: its text/html holds all of it; its text/plain, read
    # output by output, is the answer's head, one line for the rest, and its tail
    # (_render/plain.py), not a second copy of the whole (docs/JUPYTER.md).
    from conftest import execute_cells

    from nito_nb._render.plain import excerpt

    nb = execute_cells(
        [
            "%load_ext nito_nb",
            "%%nito -m sim/long --param sim='{\"chunks\": 8000}'\nWrite a long answer.",
            "import json; print(json.dumps(_nito.content))",
        ],
        tmp_path,
    )
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    content = json.loads(output_text(saved.cells[2]))
    assert len(content) > 20_000
    shown = [o for o in outputs_of(saved.cells[1]) if o["output_type"] == "display_data"]
    assert shown[0]["data"]["text/plain"].startswith("✓ done")
    plain = "".join(o["data"]["text/plain"] for o in shown[1:])
    assert plain == excerpt(content)
    assert "characters left out of this plain text; all of them: " in plain
    assert "_nito.content" in plain
    html_text = html.unescape(
        re.sub(r"<[^>]+>", "", "".join(o["data"]["text/html"] for o in shown))
    )
    middle = content[len(content) // 2 :][:2000]
    words = [w for w in re.findall(r"[A-Za-z]{4,}", middle)][:40]
    assert words and " ".join(words) in " ".join(re.findall(r"[A-Za-z]{4,}", html_text))


def test_kernel_interrupt_stops_keeps_partial_and_next_cell_runs(
    tmp_path: Path, kernel_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_SIM_TPS", "40")  # about 7 s for sim/chat: plenty of time to interrupt
    with _kernel(tmp_path) as (km, kc):
        # Interrupted once the answer has started to arrive.
        msg_id, seen = _interrupted(
            km, kc, "%%nito -m sim/chat\nExplain SSE", lambda out: "gateway" in out
        )
        reply = kc.get_shell_msg(timeout=10)
        while reply["parent_header"].get("msg_id") != msg_id:  # replies to the earlier cells
            reply = kc.get_shell_msg(timeout=10)
        assert reply["content"]["status"] == "error"  # Run All stops at a stopped cell
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        # ... shown as one line, not the frames of the socket read the interrupt landed in.
        [error] = [m["content"] for m in seen if m["msg_type"] == "error"]
        assert error["traceback"] == [
            "KeyboardInterrupt: nito stopped; what arrived is kept in _nito, marked stopped."
        ]
        updates = [m for m in seen if m["msg_type"] in ("display_data", "update_display_data")]
        statuses = [
            m["content"]["data"]["text/plain"]
            for m in updates
            if "nito-status" in m["content"]["data"]["text/html"]
        ]
        assert statuses[-1].startswith("■ stopped")
        assert "gateway" in _plain(updates)
        after = _plain(_execute(kc, "print(_nito.status, len(_nito.content), _nito.finish_reason)"))
        status, length, finish = after.split()
        assert status == "stopped" and 0 < int(length) < 1309 and finish == "None"
        assert KEY not in json.dumps(seen, default=str)
        monkeypatch.setenv("NITO_SIM_TPS", "0")
        done = _plain(
            _execute(kc, "%%nito -m sim/echo --param sim='{\"tps\": 0}'\nthe next cell runs")
        )
        assert "the next cell runs" in done and "✓ done" in done


def test_kernel_interrupt_stops_every_model_before_the_last_render(
    tmp_path: Path, kernel_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interrupt lands while the cell's thread waits for the worker. The last grid the cell
    # shows must already say "stopped" for each model (it said "streaming" when a KeyboardInterrupt
    # inside Thread.join let the cell finish before the worker: see _magic/grid.py, run_models).
    monkeypatch.setenv("NITO_SIM_TPS", "40")
    with _kernel(tmp_path) as (km, kc):
        code = "%%nito -m sim/chat,sim/reasoning\nExplain SSE"
        # Interrupted once both are arriving.
        _, seen = _interrupted(km, kc, code, lambda out: out.count("● streaming") >= 2)
        grids = [
            m["content"]["data"]["text/plain"]
            for m in seen
            if m["msg_type"] in ("display_data", "update_display_data")
            and "== sim/reasoning ==" in m["content"]["data"].get("text/plain", "")
        ]
        assert grids[-1].count("■ stopped") == 2 and "● streaming" not in grids[-1]
        [error] = [m["content"] for m in seen if m["msg_type"] == "error"]
        assert len(error["traceback"]) == 1 and "nito stopped" in error["traceback"][0]
        after = _plain(_execute(kc, "print(sorted({s.status for s in _nito}))"))
        assert after.strip() == "['stopped']"
