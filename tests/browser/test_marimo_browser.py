"""nito_nb in marimo, in a real browser: ``marimo run`` serves a notebook (in a process of its
own), Debian Chromium opens it. A Stream as a cell's output grows while it arrives (several
lengths seen before the end), ends with its status line; marimo's chat element answers through
``nito_nb.marimo_chat`` and its Stop ends an answer halfway; hostile model text stays inert in
both."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import XSS_PAYLOAD

pytest.importorskip("marimo")

pytestmark = [pytest.mark.spawns, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MARIMO = Path(sys.executable).with_name("marimo")

NOTEBOOK = """
import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo
    import nito_nb
    return mo, nito_nb


@app.cell
def _(nito_nb):
    story = nito_nb.stream("Tell me", model="sim/chat", sim={"tps": 80, "ttft_ms": 0})
    story
    return


@app.cell
def _(nito_nb):
    hostile = nito_nb.stream(XSS + "\\n\\n[click me](javascript:window.__xss=1)", model="sim/echo")
    hostile
    return


@app.cell
def _(mo, nito_nb):
    chat_model = nito_nb.marimo_chat("sim/echo", sim={"tps": 40, "ttft_ms": 0})
    chat = mo.ui.chat(chat_model)
    chat
    return chat, chat_model


@app.cell
def _(chat, chat_model):
    chat.value
    chat_model
    return


if __name__ == "__main__":
    app.run()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def marimo_app(tmp_path: Path) -> Iterator[str]:
    """``marimo run`` of the notebook above on loopback; its URL."""
    notebook = tmp_path / "live.py"
    notebook.write_text(NOTEBOOK.replace("XSS + ", f"{XSS_PAYLOAD!r} + "), encoding="utf-8")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "NITO_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [
            str(MARIMO),
            "run",
            str(notebook),
            "--headless",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-token",
            "--no-check",
            "--no-sandbox",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                output = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"marimo run did not start: {output[-2000:]}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _status_and_length(page: Any) -> tuple[str, int]:
    """The story's status line and the length of its answer's text (the first nito_nb output)."""
    return page.evaluate(
        """() => {
            const status = document.querySelector('.nito-status');
            if (!status) return ['', 0];
            let length = 0, node = status.parentElement;
            node.querySelectorAll('.nito-answer').forEach(e => { length += e.textContent.length; });
            return [status.textContent, length];
        }"""
    )


def test_a_stream_grows_live_in_a_marimo_cell_and_the_chat_answers_inertly(
    browser: Any, marimo_app: str
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(marimo_app)
        seen: list[int] = []
        deadline = time.monotonic() + 60
        status = ""
        while time.monotonic() < deadline:
            status, length = _status_and_length(page)
            if "done" in status and "sim/chat" in status:
                break
            if "streaming" in status:
                seen.append(length)
            time.sleep(0.03)
        assert "done" in status and "sim/chat" in status, status
        assert len(set(seen)) > 1, f"the answer did not grow in the cell: {sorted(set(seen))}"
        assert (
            "Tip: when a stream fails halfway, keep what arrived"
            in page.locator("body").inner_text()
        )

        # The hostile echo: shown as text, nothing ran. Its cell's status shows first "waiting, 0
        # chunks" (the check once read the page then, on a busy machine): wait for its end.
        page.wait_for_function(
            """() => {
                const statuses = document.querySelectorAll('.nito-status');
                return statuses.length >= 2 && statuses[1].textContent.includes('done');
            }""",
            timeout=30_000,
        )
        body = page.locator("body").inner_text()
        assert "<img src=x onerror=" in body and "<script>" in body
        assert (
            page.locator(
                '.nito-answer img, .nito-answer script, .nito-answer a[href^="javascript"]'
            ).count()
            == 0
        )

        # The chat element answers through nito_nb (sim/echo repeats the message, paced).
        box = page.locator("marimo-chatbot [contenteditable='true'][role='textbox']")
        box.wait_for(timeout=30_000)
        box.click()
        page.keyboard.type(f"hello {XSS_PAYLOAD} [click me](javascript:window.__xss=1) over")
        page.keyboard.press("Enter")
        chat = page.locator("marimo-chatbot")
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline:
            # marimo's chat lives in a shadow root: its text is read there.
            text = chat.evaluate("e => (e.shadowRoot || e).textContent || ''")
            if text.count("hello") >= 2 and text.count("over") >= 2:
                break  # the message, then the whole echo of it
            time.sleep(0.1)
        assert text.count("hello") >= 2 and text.count("over") >= 2, text
        # marimo renders the chat's Markdown itself (it blocks images and scripts): nothing ran.
        # (the input box is CodeMirror: its own cm-widgetBuffer images are no model text)
        found = chat.locator('img:not(.cm-widgetBuffer), script, iframe, a[href^="javascript"]')
        assert found.count() == 0, [
            found.nth(i).evaluate("e => e.outerHTML") for i in range(found.count())
        ]
        # The model's cell ran again after the answer: the turn's status line (timings, usage).
        page.wait_for_function(
            "() => [...document.querySelectorAll('.nito-status')].some(e => e.textContent.includes('sim/echo') "
            "&& e.textContent.includes('TTFT') && !e.closest('.nito-answer'))",
            timeout=30_000,
        )

        # marimo's Stop (the chat's square button) ends a turn halfway: the answer stops growing.
        words = " ".join(f"w{i}" for i in range(120))  # 120 words at 40 a second: 3 s of echo
        box.click()
        page.keyboard.type(words)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => { const c = document.querySelector('marimo-chatbot'); "
            "return ((c.shadowRoot || c).textContent || '').split('w1 ').length > 2; }",
            timeout=30_000,
        )
        chat.locator("button:has(svg.lucide-square)").click()
        stopped = chat.evaluate("e => (e.shadowRoot || e).textContent || ''")
        time.sleep(4)  # past the whole echo's time
        after = chat.evaluate("e => (e.shadowRoot || e).textContent || ''")
        # the message's only
        assert after.count("w119") == 1, "the answer went on to its end after Stop"
        assert len(after) - len(stopped) < 100, "the answer kept growing after Stop"

        time.sleep(0.5)  # an onerror would fire as soon as the (non-)image failed to load
        assert page.evaluate("() => [window.__xss, window.__xss2]") == [None, None]
    finally:
        context.close()
