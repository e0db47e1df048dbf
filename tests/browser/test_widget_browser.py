"""The chat widget in a real JupyterLab and in Notebook 7: chat, stop mid-answer, switch model,
get a DataFrame.

One session, as a user would have it: type a prompt key by key and click Send, watch the answer
grow, click Stop and see it stop growing within a second with the partial answer kept, switch the
model picker to sim/echo and send a hostile payload from the box with Shift+Enter (or Enter): it
comes back as inert text, and the key does not re-run the cell; then `w.frame()` in the next cell
has a row per turn. A second test types a two-line prompt in the multi-line box: Enter makes the
new line, Shift+Enter sends, and nothing typed reaches the notebook's own shortcuts.

The same test runs on ipykernel 6 when NITO_IPYKERNEL6_SITE names a folder holding it (put first on
the kernel's PYTHONPATH), e.g. `pip install --no-deps --target /tmp/k6site "ipykernel==6.29.5"`.
"""

from __future__ import annotations

import os
import time

import pytest

from .lab import XSS_PAYLOAD, Lab, NotebookPage

SETUP = """\
import nito_nb
# ~20 s for the whole sim/chat answer: plenty of time to stop it mid-way.
w = nito_nb.ChatWidget(model="sim/chat", sim={"tps": 20, "ttft_ms": 300})
w
"""
FRAME = """\
df = w.frame()
responses = df[df["kind"] == "response"]
print([(str(r.stream), str(r.model), str(r.status)) for r in responses.itertuples()])
"""
KERNEL_VERSION = "import ipykernel; print('ipykernel', ipykernel.__version__.split('.')[0])"
IPYKERNEL6_SITE = os.environ.get("NITO_IPYKERNEL6_SITE")


def _answer(nb: NotebookPage, turn: int) -> str:
    texts = (
        nb.cell(0).locator(".nito-chat-turn").nth(turn).locator(".nito-answer").all_inner_texts()
    )
    return "".join(texts)


def _status(nb: NotebookPage, turn: int) -> str:
    status = nb.cell(0).locator(".nito-chat-turn").nth(turn).locator(".nito-status")
    return status.inner_text() if status.count() else ""


def _wait(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("ipykernel", "send_key"),
    [
        ("7", "Shift+Enter"),
        pytest.param(
            "6",
            "Enter",
            marks=pytest.mark.skipif(not IPYKERNEL6_SITE, reason="NITO_IPYKERNEL6_SITE unset"),
        ),
    ],
)
def test_chat_stop_switch_model_and_frame(lab: Lab, ipykernel: str, send_key: str) -> None:
    env = {"PYTHONPATH": IPYKERNEL6_SITE} if ipykernel == "6" and IPYKERNEL6_SITE else None
    chat_session(lab, env, ipykernel, send_key=send_key)


def test_chat_in_notebook7(notebook7: Lab) -> None:
    # Notebook 7 runs its shortcuts before the page's widgets see the key: with ipywidgets' own Text
    # box, Shift+Enter re-ran the cell (a new widget replaced the chat). The prompt box opts out.
    chat_session(notebook7, None, "7", send_key="Shift+Enter")


MULTILINE = """import nito_nb
w = nito_nb.ChatWidget(model="sim/echo", multiline=True, sim={"tps": 0})
w
"""


@pytest.mark.parametrize("app", ["lab", "notebook7"])
def test_multiline_box_enter_is_a_new_line_and_shift_enter_sends(
    app: str, request: pytest.FixtureRequest
) -> None:
    lab: Lab = request.getfixturevalue(app)
    lab.write_notebook("multiline", [MULTILINE])
    nb = lab.open("multiline")
    nb.run_cell(0, wait=True)
    box = nb.cell(0).locator(".nito-chat-input textarea")
    box.wait_for(timeout=20_000)
    prompt_after_setup, cells = nb.prompt(0), nb.cell_count()
    box.click()
    # Letters that are notebook shortcuts in command mode ("i i" interrupts, "a"/"b" insert, "m"
    # makes Markdown, "d d" deletes): typed here, they must all land in the box.
    box.press_sequentially("a line, bimodal")
    box.press("Enter")
    box.press_sequentially("ii dd mm")
    time.sleep(0.5)
    assert box.input_value() == "a line, bimodal\nii dd mm"
    assert nb.cell(0).locator(".nito-chat-turn").count() == 0  # Enter sent nothing
    box.press("Shift+Enter")
    _wait(lambda: "✓ done" in _status(nb, 0), 20, "the echo turn to finish")
    assert "a line, bimodal\nii dd mm" in nb.cell(0).locator(".nito-user").first.inner_text()
    assert "ii dd mm" in _answer(nb, 0)
    assert box.input_value() == ""  # cleared for the next message
    assert (nb.prompt(0), nb.cell_count()) == (prompt_after_setup, cells)


def chat_session(lab: Lab, env: dict[str, str] | None, ipykernel: str, send_key: str) -> None:
    started = time.monotonic()
    lab.write_notebook("chat", [SETUP, FRAME, KERNEL_VERSION])
    nb = lab.open("chat", kernel_env=env)
    nb.run_cell(0, wait=True)
    widget = nb.cell(0).locator(".nito-chat")
    widget.wait_for(timeout=20_000)
    prompt_after_setup = nb.prompt(0)

    # Type, click Send, watch the answer grow.
    # Typed key by key: no letter may reach the notebook's own shortcuts ("a" inserts a cell...).
    nb.page.locator(".nito-chat-input input").press_sequentially("Tell me about streaming")
    nb.page.locator("button.nito-chat-send").click()
    _wait(lambda: nb.page.locator("button.nito-chat-send").is_disabled(), 10, "Send disabled")
    assert nb.page.locator("button.nito-chat-stop").is_enabled()
    lengths: list[int] = []
    _wait(
        lambda: lengths.append(len(_answer(nb, 0))) or len(set(lengths)) >= 5,
        20,
        "the answer to grow",
    )
    grown = sorted(set(lengths))
    assert grown == sorted(grown) and grown[-1] > 0

    # Stop mid-stream: within a second nothing more appears, and what arrived stays.
    nb.page.locator("button.nito-chat-stop").click()
    clicked = time.monotonic()
    _wait(lambda: "stopped" in _status(nb, 0), 5, "the stopped status")
    shown_at_stop = len(_answer(nb, 0))
    time.sleep(max(0.0, clicked + 1.0 - time.monotonic()))
    settled = _answer(nb, 0)
    time.sleep(1.5)
    assert _answer(nb, 0) == settled, "the answer still grew more than a second after Stop"
    assert len(settled) >= shown_at_stop > 0  # the partial answer is kept
    assert "■ stopped" in _status(nb, 0)
    _wait(lambda: nb.page.locator("button.nito-chat-send").is_enabled(), 5, "Send enabled again")

    # Switch the model, send a hostile payload with the key in the box.
    nb.page.locator(".nito-chat-model input").fill("sim/echo")
    box = nb.page.locator(".nito-chat-input input")
    box.fill(XSS_PAYLOAD)
    box.press(send_key)
    _wait(lambda: "✓ done" in _status(nb, 1), 20, "the echo turn to finish")
    assert "sim/echo" in _status(nb, 1)
    assert XSS_PAYLOAD in _answer(nb, 1)  # shown as text...
    assert XSS_PAYLOAD in nb.cell(0).locator(".nito-user").nth(1).inner_text()
    time.sleep(0.5)
    nb.assert_no_xss()  # ...and inert
    assert nb.cell(0).locator(".nito-chat-turn img, .nito-chat-turn script").count() == 0
    # The key sent the message; it did not re-run the cell.
    assert nb.prompt(0) == prompt_after_setup

    # A DataFrame of all turns.
    nb.run_cell(1, wait=True)
    out = nb.output_text(1)
    assert "('sim/chat#0', 'sim/chat', 'stopped')" in out, out
    assert "('sim/echo#1', 'sim/echo', 'done')" in out, out
    nb.run_cell(2, wait=True)
    assert nb.output_text(2) == f"ipykernel {ipykernel}"
    print(f"browser chat test ({lab.server.app}): {time.monotonic() - started:.1f} s")


TOOLS = """\
import nito_nb

def get_weather(city: str) -> dict:
    "Current weather in a city."
    return {"city": city, "sky": "clear"}

def get_time(timezone: str) -> str:
    "Local time in a time zone."
    raise RuntimeError("the clock service is down")

w = nito_nb.ChatWidget(model="sim/tools", tools=[get_weather, get_time], run_tools=True, sim={"tps": 0})
w
"""


def test_run_tools_rounds_reach_the_page(lab: Lab) -> None:
    # With run_tools=True the tool round's turn (its Tools box and its answer) is made on the
    # turn's thread, after the cell has finished: its widgets must reach the page all the same.
    # A tool that raises is one line in the Tools box, not a traceback.
    lab.write_notebook("tools", [TOOLS])
    nb = lab.open("tools")
    nb.run_cell(0, wait=True)
    box = nb.cell(0).locator(".nito-chat-input input")
    box.wait_for(timeout=20_000)
    box.fill("Weather in Paris, and the time in Tokyo?")
    box.press("Enter")
    _wait(lambda: "✓ done" in _status(nb, 1), 30, "the answer to the tool results")
    runs = nb.cell(0).locator(".nito-tool-runs").inner_text()
    lines = [line for line in runs.splitlines() if line.startswith("→ ran")]
    assert any(line.startswith("→ ran get_weather(city=") and "clear" in line for line in lines), (
        runs
    )
    assert any(
        line.endswith("→ Error: RuntimeError: the clock service is down") for line in lines
    ), runs
    assert "Traceback" not in nb.cell(0).inner_text()
    # The model answered from the results (its blocks are widgets of their own: they may reach the
    # page a moment after the status line).
    _wait(lambda: bool(_answer(nb, 1).strip()), 10, "the answer's text")
    assert _wait_enabled(nb)


def _wait_enabled(nb: NotebookPage) -> bool:
    _wait(lambda: nb.page.locator("button.nito-chat-send").is_enabled(), 10, "Send enabled again")
    return True
