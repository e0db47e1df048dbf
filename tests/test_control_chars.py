"""Control characters a server sends never reach a terminal or a text/plain output raw (issue 28,
item 8): an ANSI escape clears a screen or hides a link, a carriage return or backspaces overwrite
what was printed ("✓ done" over an error), the C1 ``\\x9b`` is a one-byte ``ESC [``, a bidi
override reverses the line. JupyterLab acts on ANSI escapes in text/plain and stderr too.

The rule (``nito_nb/_core/printable.py``) shows each as its escape; the Stream's data stays what
the server sent. Real loopback servers (tests/scripted_server.py) send the escapes in an error
body, in a header that an error quotes, and in a mid-stream error chunk; a real kernel runs the
magic.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, chunk_line, execute_cells
from scripted_server import Script, ScriptedServer

import nito_nb
from nito_nb._core.errors import one_line
from nito_nb._core.printable import printable
from nito_nb._display.terminal import TerminalDisplay
from nito_nb._render import final_bundle, render_parts, status_text

#: Everything that acts on a terminal or reorders a line: ESC sequences (CSI, OSC 8 hyperlink
#: ended by BEL), a lone carriage return, backspaces, the C1 CSI, a right-to-left override.
HOSTILE = "\x1b[2J\x1b[31mred\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07 \u202eevil\rfake \x08\x08\x9b2J end"
#: Characters no printed text may hold (tab and line feed are layout).
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_printable(text: str) -> None:
    found = RAW.search(text)
    assert found is None, f"raw {found.group()!r} at {found.start()} in {text[:300]!r}"


def midstream(scripted: ScriptedServer, name: str) -> str:
    """A gateway whose model name and answer hold escapes, then an error chunk full of them."""
    model = "vendor/model\x1b[2J"
    parts = [
        chunk_line({"role": "assistant", "content": f"Hi {HOSTILE} there"}, model=model),
        chunk_line({"content": "!"}, model=model),
        b"data: "
        + json.dumps({"error": {"message": f"boom {HOSTILE}", "code": "E\x1b[5m"}}).encode()
        + b"\n\n",
    ]
    return scripted.add(name, Script(parts=parts))


# -- the rule ---------------------------------------------------------------------------------------


def test_printable_shows_each_control_as_its_escape_and_keeps_layout() -> None:
    shown = printable(HOSTILE + "\ttab\nline\r\nwindows")
    assert_printable(shown)
    assert printable(HOSTILE[:9]) + printable(HOSTILE[9:]) == printable(HOSTILE)  # piece by piece
    assert shown.startswith("\\x1b[2J\\x1b[31mred\\x1b]8;;http://evil.example/\\x07click")
    assert "\\u202eevil\\x0dfake \\x08\\x08\\x9b2J" in shown
    assert shown.endswith("\ttab\nline\\x0d\nwindows")  # tab and line feed are layout
    assert printable(shown) == shown  # idempotent
    plain = "plain ✓ text, עברית\u200f, emoji 👍🏽"  # bidi marks and other characters stay
    assert printable(plain) is plain


def test_one_line_is_printable_whatever_raised_it() -> None:
    assert_printable(one_line(RuntimeError(HOSTILE)))
    assert "\\x1b[2J" in one_line(RuntimeError(HOSTILE))


# -- from a server --------------------------------------------------------------------------------


def test_an_error_body_and_a_quoted_header_reach_no_message_raw(scripted: ScriptedServer) -> None:
    body = json.dumps({"error": {"message": f"bad {HOSTILE}", "code": 500}}).encode()
    base = scripted.add(
        "ctl-500", Script(status=500, content_type="application/json", parts=[body])
    )
    with pytest.raises(nito_nb.ServerError) as caught:
        nito_nb.stream("hi", model="vendor/model", base_url=base, api_key=KEY, max_retries=0)
    error = caught.value
    for text in (
        str(error),
        error.message,
        one_line(error),
        repr(error.stream),
        final_bundle(error.stream)["text/plain"],
        status_text(error.stream),
    ):
        assert_printable(text)
    assert "\\x1b[2J" in str(error) and "\\u202e" in str(error)
    # the body is data, kept as it came
    assert json.loads(error.body)["error"]["message"] == f"bad {HOSTILE}"

    # A content type that is not a stream is quoted: its byte 0x9b arrives as the C1 CSI.
    html = scripted.add("ctl-header", Script(content_type="text/html\x9b2J", parts=[b"<p>hi</p>"]))
    with pytest.raises(nito_nb.NotEventStreamError) as caught:
        nito_nb.stream("hi", model="vendor/model", base_url=html, api_key=KEY)
    assert "text/html\\x9b2J" in str(caught.value)
    assert_printable(str(caught.value))


def test_a_midstream_error_reaches_repr_text_plain_and_the_status_line_printable(
    scripted: ScriptedServer,
) -> None:
    s = nito_nb.stream(
        "hi",
        model="vendor/model",
        base_url=midstream(scripted, "ctl-mid"),
        api_key=KEY,
        raise_errors=False,
    ).wait()
    assert s.status == "error" and isinstance(s.exception, nito_nb.MidStreamError)
    # The data stays what the server sent.
    assert s.content == f"Hi {HOSTILE} there!" and HOSTILE in s.error["message"]
    for text in (
        repr(s),
        str(s.exception),
        one_line(s.exception),
        status_text(s),
        final_bundle(s)["text/plain"],
        final_bundle(s, format="text")["text/plain"],
        s._repr_mimebundle_()["text/plain"],
    ):
        assert_printable(text)
    assert "vendor/model\\x1b[2J" in repr(s) and "\\x1b[31mred" in final_bundle(s)["text/plain"]
    for part in render_parts(s, live=True):
        assert_printable(part.text)
    [error_part] = [p for p in render_parts(s) if p.key == "error"]
    assert_printable(error_part.html)  # the gateway's words in the banner's HTML too


def test_the_terminal_sink_prints_nothing_raw(scripted: ScriptedServer) -> None:
    s = nito_nb.stream(
        "hi",
        model="vendor/model",
        base_url=midstream(scripted, "ctl-terminal"),
        api_key=KEY,
        raise_errors=False,
    )
    out = io.StringIO()
    with TerminalDisplay(s, file=out, max_rate=1e9) as view:
        for _ in s:
            view.update()
    printed = out.getvalue()
    assert_printable(printed)
    assert f"Hi {printable(HOSTILE)} there!" in printed and "Error E\\x1b[5m: boom" in printed


def test_an_on_done_failure_is_one_printable_line(capsys: pytest.CaptureFixture[str]) -> None:
    def callback(stream: Any) -> None:
        raise ValueError(f"from the callback {HOSTILE}")

    s = nito_nb.read_sse(b"data: [DONE]\n\n")
    s.on_done(callback)
    err = capsys.readouterr().err
    assert "the on_done callback" in err and "ValueError: from the callback \\x1b[2J" in err
    assert_printable(err)


def test_a_runs_panel_and_stderr_line_show_the_gateways_error_code_printable(
    scripted: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from nito_nb._runs.progress import StderrLine, panel_model, panel_text

    body = json.dumps({"error": {"message": f"no {HOSTILE}", "code": f"bad{HOSTILE}"}}).encode()
    base = scripted.add(
        "ctl-run", Script(status=400, content_type="application/json", parts=[body])
    )
    run = nito_nb.run(
        ["a", "b"], model="vendor/model", base_url=base, api_key=KEY, progress=False
    ).wait()
    model = panel_model(run.stats())
    assert "\\x1b[2J" in model["rows"][0]["errors"]
    assert_printable(panel_text(model))
    line = StderrLine(run, stream=io.StringIO())
    line.finish()
    assert_printable(line.stream.getvalue())


def test_a_tool_run_line_shows_the_models_name_printable() -> None:
    from nito_nb.tools import execute_tool

    call = nito_nb.read_sse(
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        b'"function":{"name":"x\\u001b[2J","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    ).tool_calls[0]
    line = execute_tool({}, call).line
    assert "x\\x1b[2J" in line
    assert_printable(line)


# -- the magic, in a real kernel ----------------------------------------------------------------


@pytest.mark.spawns
@pytest.mark.slow
def test_the_magics_stderr_and_text_plain_hold_no_raw_control(
    scripted: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    broken = midstream(scripted, "ctl-magic-mid")
    body = json.dumps({"error": {"message": f"bad {HOSTILE}"}}).encode()
    refused = scripted.add(
        "ctl-magic-500", Script(status=503, content_type="application/json", parts=[body])
    )
    nb = execute_cells(
        [
            "%load_ext nito_nb",
            f"%config Nito.base_url = {broken!r}",
            "%%nito -m vendor/model\nhi",
            f"print(_nito.content == {f'Hi {HOSTILE} there!'!r})",
            f"%config Nito.base_url = {refused!r}",
            "%%nito -m vendor/model\nhi",
            "_nito",
        ],
        tmp_path,
    )
    outputs = [output for cell in nb.cells for output in cell.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    stderr = "".join(
        o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"
    )
    assert "nito: MidStreamError" in stderr and "nito: ServerError" in stderr
    assert "\\x1b[2J" in stderr and "\\u202e" in stderr
    assert_printable(stderr)
    plain = [
        o["data"]["text/plain"]
        for o in outputs
        if o["output_type"] in ("display_data", "execute_result") and "text/plain" in o["data"]
    ]
    assert any("\\x1b[31mred" in text for text in plain)
    for text in plain:
        assert_printable(text)
    assert nb.cells[3]["outputs"][0]["text"].strip() == "True"  # the data kept what the model sent


def test_the_chat_widgets_status_shows_the_models_tool_names_printable(
    scripted: ScriptedServer,
) -> None:
    pytest.importorskip("ipywidgets")
    from nito_nb._widget import ChatWidget

    def get_weather(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    name = "get_weather\u202e\x1b[2J"
    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": "{}"},
    }
    base = scripted.add(
        "ctl-widget",
        Script(
            parts=[
                chunk_line({"role": "assistant", "tool_calls": [call]}),
                chunk_line({}, finish="tool_calls"),
                b"data: [DONE]\n\n",
            ]
        ),
        Script(
            parts=[
                chunk_line({"role": "assistant", "content": "ok"}, finish="stop"),
                b"data: [DONE]\n\n",
            ]
        ),
    )
    w = ChatWidget(
        model="vendor/model", base_url=base, api_key=KEY, tools=[get_weather], run_tools=True
    )
    seen: list[str] = []
    w.observe(lambda change: seen.append(change["new"]), names="status")
    try:
        w.ask("weather?")
        assert w.wait(20) is not None
    finally:
        w.close()
    running = [status for status in seen if status.startswith("running tools")]
    assert running and "\\u202e\\x1b[2J" in running[0]
    for status in seen:
        assert_printable(status)
