"""The %%nito magic through IPython's run_cell_magic, against the embedded simulator."""

from __future__ import annotations

import gc
import html
import json
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import sigint_after, start_tags
from IPython.core.displaypub import DisplayPublisher
from IPython.core.error import UsageError

import nito_nb
from nito_nb import _client
from nito_nb import _magic as _magic
from nito_nb._display import notebook as _display
from nito_nb._magic import output as _output
from nito_nb.sim import SimServer

KEY = "sk-test-SECRET123456789"
HOSTILE = (
    '<img src=x onerror="window.__xss=1"><script>window.__xss2=1</script> [x](javascript:alert(1))'
)


# A real tag with an event-handler attribute (escaped text like `onerror=&quot;` is inert).
ACTIVE_TAG = re.compile(r"<[a-z][^<>]*\son\w+\s*=", re.IGNORECASE)


class Recorder(DisplayPublisher):
    """Keeps every display message the shell publishes (what a kernel would send)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.messages: list[dict[str, Any]] = []

    def publish(
        self,
        data: Any,
        metadata: Any = None,
        source: Any = None,
        *,
        transient: Any = None,
        update: bool = False,
        **kwargs: Any,
    ) -> None:
        self.messages.append(
            {
                "data": data,
                "transient": transient or {},
                "update": update,
                "thread": threading.current_thread().name,
            }
        )

    def clear_output(self, wait: bool = False) -> None:
        pass

    def final_outputs(self) -> list[dict[str, Any]]:
        """The outputs a saved notebook would hold: each display id's last data, in order."""
        outputs: dict[Any, dict[str, Any]] = {}
        for index, message in enumerate(self.messages):
            key = message["transient"].get("display_id") or index
            if message["update"]:
                if key in outputs:
                    outputs[key] = message["data"]
            else:
                outputs[key] = message["data"]
        return list(outputs.values())


@pytest.fixture
def notebook(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Behave as in a kernel (HTML live display) and record what would be sent."""
    recorder = Recorder()
    monkeypatch.setattr(ip, "display_pub", recorder)
    monkeypatch.setattr(_display, "in_kernel", lambda: True)
    return recorder


def run(ip: Any, line: str, cell: str) -> Any:
    return ip.run_cell_magic("nito", line, cell)


def all_text(recorder: Recorder) -> str:
    return "\n".join(json.dumps(m["data"], ensure_ascii=False) for m in recorder.messages)


# -- the basics ------------------------------------------------------------------------------------


def test_streams_and_keeps_the_stream(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(ip, "-m sim/echo -o answer", "Hello there, magic") is None  # no Out[] copy
    stream = ip.user_ns["_nito"]
    assert isinstance(stream, nito_nb.Stream)
    assert stream.status == "done"
    assert stream.content == "Hello there, magic"
    assert nito_nb.last() is stream
    assert ip.user_ns["answer"] is stream
    out = capsys.readouterr().out  # outside a kernel: plain text, live
    assert "Hello there, magic" in out
    assert "done" in out


def test_default_model_from_config_and_env(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    run(ip, "", "hi")
    assert ip.user_ns["_nito"].request["model"] == "sim/chat"
    ip.run_line_magic("config", "Nito.model = 'sim/echo'")
    run(ip, "", "configured")
    assert ip.user_ns["_nito"].content == "configured"
    monkeypatch.setenv("NITO_MODEL", "sim/echo")
    assert _magic.Nito().model == "sim/echo"


def test_options_reach_the_request(ip: Any) -> None:
    run(
        ip,
        '-m sim/echo --system "Be brief" --temperature 0.2 --max-tokens 50 --reasoning low '
        "--json --param seed=7 --param tag=hello",
        "Question?",
    )
    request = ip.user_ns["_nito"].request
    assert request["messages"] == [
        {"role": "system", "content": "Be brief"},
        {"role": "user", "content": "Question?"},
    ]
    params = request["params"]
    assert params["temperature"] == 0.2
    assert params["max_tokens"] == 50
    assert params["reasoning"] == {"effort": "low"}
    assert params["response_format"] == {"type": "json_object"}
    assert params["seed"] == 7
    assert params["tag"] == "hello"


def test_config_defaults_apply(ip: Any) -> None:
    ip.run_line_magic("config", "Nito.system = 'You are terse'")
    ip.run_line_magic("config", "Nito.temperature = 0.5")
    ip.run_line_magic("config", "Nito.params = {'seed': 3}")
    run(ip, "-m sim/echo", "x")
    request = ip.user_ns["_nito"].request
    assert request["messages"][0] == {"role": "system", "content": "You are terse"}
    assert request["params"]["temperature"] == 0.5
    assert request["params"]["seed"] == 3


def test_interpolation(ip: Any) -> None:
    ip.user_ns["topic"] = "SSE"
    run(ip, "-m sim/echo", "About {topic} and {nothing_here} and {{topic}}")
    assert ip.user_ns["_nito"].content == "About SSE and {nothing_here} and {topic}"
    run(ip, "-m sim/echo --no-interpolate", "About {topic}")
    assert ip.user_ns["_nito"].content == "About {topic}"
    ip.run_line_magic("config", "Nito.interpolate = False")
    run(ip, "-m sim/echo", "About {topic}")
    assert ip.user_ns["_nito"].content == "About {topic}"


def test_usage_errors(ip: Any) -> None:
    with pytest.raises(UsageError, match="empty"):
        run(ip, "-m sim/echo", "  \n")
    with pytest.raises(UsageError, match="--chat"):
        run(ip, "-m sim/echo --new", "x")
    with pytest.raises(UsageError, match="format"):
        run(ip, "-m sim/echo -f html", "x")
    with pytest.raises(UsageError, match="variable name"):
        run(ip, "-m sim/echo -o 1x", "x")
    with pytest.raises(UsageError, match="one model"):
        run(ip, "-m sim/echo,sim/chat --chat c", "x")
    with pytest.raises(UsageError):
        run(ip, "--reasoning extreme", "x")
    with pytest.raises(UsageError, match="unknown command"):
        ip.run_line_magic("nito", "frobnicate")


# -- tools -----------------------------------------------------------------------------------------


def test_tools_from_functions_and_schemas(ip: Any) -> None:
    def weather(
        city: str, days: int = 1, units: str | None = None, detail: list[str] | None = None
    ) -> str:
        """Forecast for a city.

        More words that are not the description.
        """
        raise AssertionError("tools are never run")

    ip.user_ns["weather"] = weather
    ip.user_ns["schema"] = {
        "name": "lookup",
        "description": "Look up",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    }
    run(ip, "-m sim/tools --tools weather,schema", "Weather in Paris?")
    stream = ip.user_ns["_nito"]
    tools = stream.request["params"]["tools"]
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer", "default": 1},
                    "units": {"type": "string", "default": None},
                    "detail": {"type": "array", "items": {"type": "string"}, "default": None},
                },
                "required": ["city"],
            },
        },
    }
    assert tools[1] == {"type": "function", "function": ip.user_ns["schema"]}
    assert stream.tool_calls
    assert {call.name for call in stream.tool_calls} <= {"weather", "lookup"}
    with pytest.raises(UsageError, match="no variable"):
        run(ip, "-m sim/tools --tools missing", "x")


def test_run_tools_sends_results_back(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[dict[str, Any]] = []

    def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        ran.append({"city": city})
        return {"city": city, "sky": "sunny"}

    ip.user_ns["weather"] = get_weather
    run(ip, "-m sim/tools --tools weather --run-tools --chat w", "Weather in Paris?")
    final = ip.user_ns["_nito"]
    assert ran and final.status == "done"
    messages = final.request["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["role"] for m in messages] == ["user", "assistant"] + ["tool"] * len(results)
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in messages[1]["tool_calls"]]
    assert json.loads(results[0]["content"])["sky"] == "sunny"
    assert final.content and not final.tool_calls  # the model answered from the results
    assert "→ ran get_weather(city=" in capsys.readouterr().out
    run(ip, "-m sim/echo --chat w", "thanks")  # the chat holds the whole exchange, valid
    roles = [m["role"] for m in ip.user_ns["_nito"].request["messages"]]
    assert roles[:2] == ["user", "assistant"] and "tool" in roles and roles[-1] == "user"
    with pytest.raises(UsageError, match="--run-tools"):
        run(ip, "-m sim/tools --run-tools", "x")


def test_run_tools_reports_failures_to_the_model(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def get_weather(city: str) -> str:
        """Weather for a city."""
        raise RuntimeError("the weather service is down")

    ip.user_ns["weather"] = get_weather
    run(ip, "-m sim/tools --tools weather --run-tools", "Weather?")
    results = [m for m in ip.user_ns["_nito"].request["messages"] if m["role"] == "tool"]
    assert results and results[0]["content"] == "Error: RuntimeError: the weather service is down"


# -- conversation memory ---------------------------------------------------------------------------


def test_chat_memory_is_bounded_and_can_restart(ip: Any) -> None:
    run(ip, "-m sim/echo --chat c --system S", "first")
    run(ip, "-m sim/echo --chat c --system S", "second")
    messages = ip.user_ns["_nito"].request["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2] == {"role": "assistant", "content": "first"}
    run(ip, "-m sim/echo", "alone")  # no --chat: no memory
    assert len(ip.user_ns["_nito"].request["messages"]) == 1
    ip.run_line_magic("config", "Nito.history = 2")
    run(ip, "-m sim/echo --chat c", "third")
    run(ip, "-m sim/echo --chat c", "fourth")
    contents = [m["content"] for m in ip.user_ns["_nito"].request["messages"]]
    assert contents == ["second", "second", "third", "third", "fourth"]
    run(ip, "-m sim/echo --chat c --new", "fresh")
    assert len(ip.user_ns["_nito"].request["messages"]) == 1
    run(ip, "-m sim/echo --chat other", "elsewhere")
    assert len(ip.user_ns["_nito"].request["messages"]) == 1


def test_chat_keeps_tool_calls_valid(ip: Any) -> None:
    ip.user_ns["schema"] = {"name": "lookup", "parameters": {"type": "object", "properties": {}}}
    run(ip, "-m sim/tools --chat t --tools schema", "Look it up")
    calls = ip.user_ns["_nito"].tool_calls
    assert calls
    run(ip, "-m sim/tools --chat t --tools schema", "And then?")
    messages = ip.user_ns["_nito"].request["messages"]
    assert messages[1]["tool_calls"]
    tool_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert tool_ids == [call.id for call in calls]


def test_failed_request_is_not_remembered(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "-m sim/http-503 --chat f", "lost")
    run(ip, "-m sim/echo --chat f", "kept")
    assert len(ip.user_ns["_nito"].request["messages"]) == 1


# -- errors ----------------------------------------------------------------------------------------


def test_midstream_error_keeps_partial_answer(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "-m sim/error-midstream", "x")
    stream = ip.user_ns["_nito"]
    assert stream.status == "error"
    assert stream.content
    captured = capsys.readouterr()
    assert stream.content[:40] in captured.out
    error_lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(error_lines) == 1 and error_lines[0].startswith("nito: MidStreamError")
    assert "Traceback" not in captured.err
    with pytest.raises(nito_nb.MidStreamError):
        run(ip, "-m sim/error-midstream --raise", "x")
    assert ip.user_ns["_nito"].status == "error"


def test_http_error_is_shown_and_kept(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "-m sim/http-401", "x")
    stream = ip.user_ns["_nito"]
    assert stream.status == "failed"
    captured = capsys.readouterr()
    assert "failed" in captured.out
    assert captured.err.strip().startswith("nito: AuthenticationError")
    with pytest.raises(nito_nb.AuthenticationError) as info:
        run(ip, "-m sim/http-401 --raise", "x")
    assert info.value.stream is ip.user_ns["_nito"]


def test_no_key_says_how_a_notebook_sets_it(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # A cell has no api_key= to pass: the line names the environment variable and a way to set it
    # that does not write the key into the notebook.
    with pytest.raises(UsageError) as info:
        run(ip, "-m vendor/model", "x")
    message = str(info.value)
    assert "NITO_API_KEY" in message and "getpass" in message and "api_key=" not in message
    assert "\n" not in message and ip.user_ns.get("_nito") is None  # nothing was sent
    # With several models, the gateway one says so and the simulator one still runs.
    run(ip, "-m vendor/model,sim/echo", "still here")
    err = capsys.readouterr().err
    assert "nito: vendor/model: No API key" in err and "api_key=" not in err
    assert [s.content for s in ip.user_ns["_nito"]] == ["still here"]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("--param model=sim/chat", "model: the model is chosen"),
        ("--param messages=[]", "messages: the messages are the prompt"),
        ("--param api_key=sk-secret-123456", "api_key: the API key is not a body field"),
        ("--param api_key='\"sk-secret-123456'", "api_key: the API key is not a body field"),
        ("--param presence_penalty=NaN", "presence_penalty must be a finite number, not nan"),
        ("--param temperature=hot", "temperature must be a number, not 'hot'"),
        ("--temperature nan", "temperature must be a number from 0, not nan"),
        ("--param max_tokens=0", "max_tokens must be a whole number"),
        ("--param sim='{\"tps\": 20'", "--param sim: the value is not valid JSON"),
        ("--param sim=fast", "sim must be an object"),
        ("--param top_p=1.5", "top_p must be a number from 0 to 1"),
    ],
)
def test_bad_request_is_one_usage_line_before_sending(
    ip: Any, monkeypatch: pytest.MonkeyPatch, options: str, says: str
) -> None:
    sent: list[Any] = []
    monkeypatch.setattr(_client.Client, "stream", lambda *a, **k: sent.append(a))
    with pytest.raises(UsageError) as info:
        run(ip, f"-m sim/echo {options}", "x")
    assert says in str(info.value) and "\n" not in str(info.value)
    assert "sk-secret" not in str(info.value)  # a key given where it does not belong is not shown
    assert sent == []


def test_lone_surrogate_in_the_prompt_is_refused(ip: Any) -> None:
    ip.user_ns["topic"] = "bad \udcff byte"  # what errors="surrogateescape" leaves in text
    with pytest.raises(UsageError, match=r"messages\[0\]\.content holds a lone surrogate"):
        run(ip, "-m sim/echo", "About {topic}")
    assert ip.user_ns.get("_nito") is None


def test_error_line_keeps_the_hint(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "-m sim/http-401", "x")
    err = capsys.readouterr().err.strip()
    assert err.startswith("nito: AuthenticationError: HTTP 401") and "Check NITO_API_KEY" in err
    long = nito_nb.AuthenticationError("x" * 5000, status_code=401)
    _output.error_line(long)
    err = capsys.readouterr().err.strip()
    assert len(err) < 600 and err.endswith(long.hint) and "\n" not in err


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("format", "'weird'"),
        ("max_rate", "-1"),
        ("max_rate", "float('nan')"),
        ("timeout", "-1"),
        ("timeout", "0"),
        ("history", "-3"),
        ("temperature", "float('nan')"),
        ("temperature", "-0.5"),
        ("max_tokens", "0"),
        ("reasoning", "'extreme'"),
        ("model", "'a b'"),
        ("model", "'sim/chat,'"),
        ("base_url", "'ftp://example.com'"),
        ("params", "{'sim': 'fast'}"),
        ("params", "{'model': 'x'}"),
        ("params", "{'seed': float('inf')}"),
    ],
)
def test_config_refuses_a_bad_value_in_one_line_and_keeps_the_old(
    ip: Any, caplog: pytest.LogCaptureFixture, name: str, bad: str
) -> None:
    settings = next(c for c in ip.configurables if isinstance(c, _magic.Nito))
    before = getattr(settings, name)
    with caplog.at_level("ERROR"):
        ip.run_line_magic("config", f"Nito.{name} = {bad}")
    assert getattr(settings, name) == before
    [record] = caplog.records  # %config logs a refused value: one record, one line
    message = record.getMessage()
    assert message.startswith(f"Nito.{name}") and "unchanged" in message and "\n" not in message
    run(ip, "-m sim/echo", "the next cell runs")
    assert ip.user_ns["_nito"].status == "done"


def test_key_never_shown(
    ip: Any, notebook: Recorder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    with SimServer(api_key="sk-another-key-000000") as base_url:
        ip.run_line_magic("config", f"Nito.base_url = {base_url!r}")
        run(ip, "-m vendor/model", "x")  # the key is sent, and refused
        refused = ip.user_ns["_nito"]
        with pytest.raises(nito_nb.AuthenticationError) as info:
            run(ip, "-m vendor/model --raise", "x")
        ip.run_line_magic("nito", "config")
    with SimServer(api_key=KEY) as base_url:
        ip.run_line_magic("config", f"Nito.base_url = {base_url!r}")
        run(ip, "-m sim/echo", "accepted")
        assert ip.user_ns["_nito"].content == "accepted"
    assert refused.status == "failed"
    captured = capsys.readouterr()
    seen = [
        captured.out,
        captured.err,
        all_text(notebook),
        repr(info.value),
        str(info.value),
        json.dumps(refused.request, default=str),
        repr(refused.log.headers),
    ]
    assert all(KEY not in text for text in seen)
    assert "API key (NITO_API_KEY): set" in captured.out


# -- the notebook path (HTML) ------------------------------------------------------------------------


def test_hostile_output_is_inert(ip: Any, notebook: Recorder) -> None:
    cell = HOSTILE + "\n\n```html\n<div>literal</div>\n```\n"
    run(ip, "-m sim/echo --no-interpolate", cell)
    assert ip.user_ns["_nito"].content.split() == cell.split()
    assert notebook.messages
    for message in notebook.messages:
        assert set(message["data"]) <= {"text/html", "text/plain"}  # never text/markdown
        page = message["data"]["text/html"].lower()
        for bad in ("<img", "<script", 'href="javascript'):
            assert bad not in page
        assert not ACTIVE_TAG.search(page)
    final = "".join(d["text/html"] for d in notebook.final_outputs())
    shown = html.unescape(re.sub(r"<[^>]+>", "", final))  # what a reader sees on the page
    assert "<div>literal</div>" in shown  # the code block shows the tag literally
    assert "&lt;script&gt;" in final


def test_updates_are_throttled_and_final_arrives(ip: Any, notebook: Recorder) -> None:
    start = time.perf_counter()
    run(ip, '-m sim/long --param sim=\'{"tps": 0, "chunks": 20000}\'', "go")
    elapsed = time.perf_counter() - start
    stream = ip.user_ns["_nito"]
    assert stream.status == "done" and stream.n_chunks >= 20000
    rounds = len({id(m) for m in notebook.messages})
    assert rounds < 20000 / 10
    final_text = "".join(d["text/plain"] for d in notebook.final_outputs())
    assert stream.content[-200:] in final_text
    assert "done" in final_text
    sent = sum(len(json.dumps(m["data"])) for m in notebook.messages)
    assert sent <= 4 * len(stream.content.encode()) + 64 * 1024 + 20 * elapsed * 8192


def test_several_models_side_by_side(ip: Any, notebook: Recorder) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    start = time.perf_counter()
    run(ip, "-m sim/echo,sim/echo,sim/reasoning --param sim='{\"tps\": 40}'", words)
    elapsed = time.perf_counter() - start
    streams = ip.user_ns["_nito"]
    assert isinstance(streams, list) and len(streams) == 3
    assert nito_nb.last() is streams
    assert [s.status for s in streams] == ["done"] * 3
    assert streams[0].content == words
    one = max(s.elapsed for s in streams)
    assert elapsed < one + 0.6 * sum(s.elapsed for s in streams[:2])  # concurrent, not summed
    outputs = notebook.final_outputs()
    grid = outputs[0]
    assert 'class="nito-grid"' in grid["text/html"] and "== sim/reasoning ==" in grid["text/plain"]
    assert words in grid["text/plain"]
    assert "sim/echo" in outputs[1]["text/plain"]  # the comparison table


def test_the_grid_draws_itself_from_its_refresh_thread(ip: Any, notebook: Recorder) -> None:
    # The grid is a sink of the display pipeline: its live renders come from its own refresh
    # thread (_display/refresh.py), not from the cell's thread polling the streams; the cell's
    # thread shows it first and draws the final state.
    run(ip, "-m sim/echo,sim/chat --param sim='{\"tps\": 60}'", "side by side, live")
    grids = [m for m in notebook.messages if "== sim/chat ==" in m["data"].get("text/plain", "")]
    cell = threading.current_thread().name
    assert grids[0]["thread"] == cell and not grids[0]["update"]
    # The cell's thread draws the final grid, unless the refresh thread's last render, made once
    # every stream had ended, already showed exactly that: Grid.refresh sends no unchanged grid
    # (it made this test fail once in CI when the last message was the refresh thread's).
    assert "● streaming" not in grids[-1]["data"]["text/plain"]
    assert {m["thread"] for m in grids[1:]} <= {cell, "nito_nb-grid"}
    live = [m for m in grids[1:] if m["thread"] == "nito_nb-grid"]
    assert live and all("● streaming" in m["data"]["text/plain"] for m in live[:-1])


def test_several_models_in_a_terminal(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "-m sim/echo,sim/http-401", "side by side")
    out, err = capsys.readouterr()
    assert "== sim/echo ==" in out and "side by side" in out
    assert "failed" in out
    assert "AuthenticationError" in err
    assert [s.status for s in ip.user_ns["_nito"]] == ["done", "failed"]


# -- interrupt, save, replay --------------------------------------------------------------------


class InterruptingDisplay:
    """A display whose n-th update raises KeyboardInterrupt, as the kernel's stop button would."""

    def __init__(self, state: Any, after: int) -> None:
        self.state, self.after, self.updates, self.finished = state, after, 0, False

    def update(self) -> None:
        self.updates += 1
        if self.updates == self.after:
            raise KeyboardInterrupt

    def feed(self, items: Any) -> None:
        for _ in items:
            self.update()

    def finish(self) -> None:
        self.finished = True


def test_interrupt_keeps_partial_and_marks_stopped(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    displays: list[InterruptingDisplay] = []

    def make(self: Any, state: Any, fmt: str) -> InterruptingDisplay:
        displays.append(InterruptingDisplay(state, after=5))
        return displays[-1]

    monkeypatch.setattr(_magic.NitoMagics, "_display", make)
    with pytest.raises(KeyboardInterrupt) as info:
        run(ip, "-m sim/chat --chat k --param sim='{\"tps\": 300}'", "x")
    # IPython shows what _render_traceback_ returns instead of the traceback: one line.
    assert info.value._render_traceback_() == [  # type: ignore[attr-defined]
        "KeyboardInterrupt: nito stopped; what arrived is kept in _nito, marked stopped."
    ]
    stream = ip.user_ns["_nito"]
    assert stream.status == "stopped"
    assert stream.content and len(stream.content) < 500
    assert displays[0].finished
    monkeypatch.undo()
    run(ip, "-m sim/echo --chat k", "go on")  # the partial answer is part of the chat
    assert ip.user_ns["_nito"].request["messages"][1]["content"] == stream.content
    run(ip, "-m sim/echo", "next cell")  # the next cell runs normally
    assert ip.user_ns["_nito"].content == "next cell"


def test_interrupt_stops_every_model(ip: Any, notebook: Recorder) -> None:
    # The stop button's SIGINT lands in the cell's thread, which waits for the streams while the
    # grid draws itself from its refresh thread.
    with sigint_after(0.6), pytest.raises(KeyboardInterrupt):
        run(ip, "-m sim/chat,sim/reasoning --param sim='{\"tps\": 100}'", "x")
    streams = ip.user_ns["_nito"]
    assert [s.status for s in streams] == ["stopped", "stopped"]
    assert all(len(s.content) < 1000 for s in streams)
    grids = [
        m["data"]["text/plain"]
        for m in notebook.messages
        if "== sim/reasoning ==" in m["data"]["text/plain"]
    ]
    assert any("● streaming" in grid for grid in grids[:-1])  # live renders, then the final one
    assert grids[-1].count("■ stopped") == 2 and "● streaming" not in grids[-1]
    assert notebook.final_outputs()[0]["text/plain"].count("■ stopped") == 2
    assert not [t for t in threading.enumerate() if t.name == "nito_nb-models"]
    deadline = time.monotonic() + 5  # the grid's refresh thread is stopped, never joined: it ends
    while [t for t in threading.enumerate() if t.name == "nito_nb-grid"]:  # at its next wake-up
        assert time.monotonic() < deadline, "the grid's refresh thread outlived the cell"
        time.sleep(0.01)


def test_interrupt_while_connecting(
    ip: Any, notebook: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    with socket.socket() as silent:  # accepts connections, never answers: stuck before headers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        ip.run_line_magic(
            "config", f"Nito.base_url = 'http://127.0.0.1:{silent.getsockname()[1]}/v1'"
        )
        with sigint_after(0.5), pytest.raises(KeyboardInterrupt):
            run(ip, "-m a/one,b/two", "x")
    assert [s.status for s in ip.user_ns["_nito"]] == ["stopped", "stopped"]


def test_interrupt_before_the_headers_keeps_the_request(
    ip: Any, notebook: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One model, stuck before the response starts: the stop button's SIGINT lands in the client's
    # connect; the stopped Stream (request, no answer) still reaches _nito and the display.
    monkeypatch.setenv("NITO_API_KEY", KEY)
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        ip.run_line_magic(
            "config", f"Nito.base_url = 'http://127.0.0.1:{silent.getsockname()[1]}/v1'"
        )
        with sigint_after(0.3), pytest.raises(KeyboardInterrupt):
            run(ip, "-m a/one", "are you there?")
    stream = ip.user_ns["_nito"]
    assert stream.status == "stopped" and stream.content == "" and stream.log.status_code is None
    assert stream.request["messages"][-1]["content"] == "are you there?"
    assert "■ stopped" in notebook.final_outputs()[0]["text/plain"]
    assert KEY not in repr(stream) and KEY not in json.dumps(stream.request, default=str)


def test_save_and_replay(ip: Any, tmp_path: Path, notebook: Recorder) -> None:
    log = tmp_path / "run.jsonl"
    run(
        ip,
        f"-m sim/echo --save {log} --param sim='{{\"tps\": 40}}'",
        "one two three four five six seven eight",
    )
    original = ip.user_ns["_nito"]
    assert log.is_file()
    start = time.perf_counter()
    ip.run_line_magic("nito", f"--replay {log}")
    took = time.perf_counter() - start
    replayed = ip.user_ns["_nito"]
    assert replayed.content == original.content
    assert took >= 0.8 * original.elapsed  # the recorded pace
    start = time.perf_counter()
    ip.run_line_magic("nito", f"--replay {log} --speed 0")
    assert time.perf_counter() - start < original.elapsed
    sse = tmp_path / "run.sse"
    sse.write_bytes(b"".join(event.raw for event in original.log))
    run(ip, f"--replay {sse}", "(the cell is ignored)")
    assert ip.user_ns["_nito"].content == original.content
    assert original.content in "".join(d["text/plain"] for d in notebook.final_outputs())
    with pytest.raises(UsageError, match="no such file"):
        ip.run_line_magic("nito", f"--replay {tmp_path / 'missing.jsonl'}")


def test_replay_of_a_file_that_is_not_a_stream_says_what_it_expected(
    ip: Any, tmp_path: Path
) -> None:
    nito_nb.read_sse(b"data: [DONE]\n\n").frame().to_csv(tmp_path / "f.csv", index=False)
    with pytest.raises(UsageError, match=r"--replay: cannot read f\.csv: .* is a CSV file"):
        ip.run_line_magic("nito", f"--replay {tmp_path / 'f.csv'}")
    with pytest.raises(UsageError, match="no such file"):
        ip.run_line_magic("nito", f"--replay {tmp_path / 'missing.sse'}")


def test_save_several_models(ip: Any, tmp_path: Path) -> None:
    run(ip, f"-m sim/echo,sim/chat --save {tmp_path / 'cmp.jsonl'}", "hi")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cmp.sim-chat.jsonl",
        "cmp.sim-echo.jsonl",
    ]
    assert nito_nb.load(tmp_path / "cmp.sim-echo.jsonl").content == "hi"


# -- line magic --------------------------------------------------------------------------------------


def test_line_commands(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.run_line_magic("nito", "")
    assert "--model" in capsys.readouterr().out
    ip.run_line_magic("nito", "help")
    assert "never executed unless" in capsys.readouterr().out
    ip.run_line_magic("nito", "config")
    out = capsys.readouterr().out
    assert "Nito.model = 'sim/chat'" in out and "NITO_API_KEY): unset" in out
    ip.run_line_magic("nito", "last")
    assert "no stream yet" in capsys.readouterr().out
    run(ip, "-m sim/echo", "one")
    run(ip, "-m sim/error-midstream", "two")
    history = ip.run_line_magic("nito", "history")
    assert isinstance(history, pd.DataFrame)
    assert list(history.columns[:6]) == ["time", "prompt", "model", "status", "cost", "cost_total"]
    assert list(history["model"]) == ["sim/echo", "sim/error-midstream"]
    assert list(history["status"]) == ["done", "error"]
    assert list(history["prompt"]) == ["one", "two"]
    streams = [ip.user_ns["_nito"]]
    assert history["time"].iloc[-1] == pd.Timestamp(streams[0].t0_wall.astimezone()).tz_localize(
        None
    ).floor("s")
    capsys.readouterr()
    capsys.readouterr()
    ip.run_line_magic("nito", "last")
    assert "error" in capsys.readouterr().out
    models = ip.run_line_magic("nito", "models")
    assert "sim/chat" in set(models["id"])
    ip.run_line_magic("nito", "reset")
    assert nito_nb.last() is None and "_nito" not in ip.user_ns
    assert ip.run_line_magic("nito", "history").empty


def test_history_has_prompt_time_cost_and_the_session_total(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run(ip, "-m sim/echo", "first   prompt\non two lines")
    run(ip, "-m sim/http-401", "refused")  # no usage: no cost, the total goes on
    run(ip, "-m sim/echo,sim/chat", "x" * 200)
    streams = [s for s in _magic.last()]
    history = ip.run_line_magic("nito", "history")
    assert list(history["prompt"]) == [
        "first prompt on two lines",
        "refused",
        "x" * 79 + "…",
        "x" * 79 + "…",
    ]
    costs = [ip.user_ns["_nito"][0].usage["cost"], ip.user_ns["_nito"][1].usage["cost"]]
    assert history["cost"].isna().tolist() == [False, True, False, False]
    first = history["cost"].iloc[0]
    assert history["cost_total"].tolist() == pytest.approx(
        [first, first, first + costs[0], first + costs[0] + costs[1]]
    )
    assert history["time"].is_monotonic_increasing and len(streams) == 2
    capsys.readouterr()
    ip.run_line_magic("nito", "cost")
    line = capsys.readouterr().out.strip()
    assert (
        line
        == f"nito: ${history['cost_total'].iloc[-1]:.6f} over 4 stream(s) in this session (1 reported no cost)"
    )


def test_help_shows_the_cell_magic_and_no_rest_markup(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_line_magic("nito", "help")
    out = capsys.readouterr().out
    assert out.startswith("%%nito [options]")
    assert "::" not in out and "``" not in out
    assert "%nito [-m MODEL]" not in out  # the usage under the line magic's name is gone
    assert "--model" in out and "Line magic: %nito help | config | models | history | cost" in out


def test_models_from_the_gateway(
    ip: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NITO_API_KEY", KEY)
    with SimServer(api_key=KEY) as base_url:
        ip.run_line_magic("config", f"Nito.base_url = {base_url!r}")
        models = ip.run_line_magic("nito", "models")
        assert "gateway" in set(models["source"])
    ip.run_line_magic("config", "Nito.base_url = 'http://127.0.0.1:9/v1'")  # nothing listens there
    models = ip.run_line_magic("nito", "models")
    assert set(models["source"]) == {"simulator"}
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("nito: ")
    assert KEY not in err


def test_ipython_config_file_settings(ip: Any) -> None:
    ip.run_line_magic("config", "Nito.model = 'sim/chat'")  # so the fixture resets it afterwards
    ip.config.Nito.model = "sim/echo"  # what `c.Nito.model = ...` in ipython_config.py does
    ip.config.Nito.history = 3
    ip.configurables[:] = [c for c in ip.configurables if not isinstance(c, _magic.Nito)]
    _magic.load_ipython_extension(ip)
    ip.run_line_magic("nito", "config")
    settings = next(c for c in ip.configurables if isinstance(c, _magic.Nito))
    assert (settings.model, settings.history) == ("sim/echo", 3)
    with pytest.raises(Exception, match="format"):
        settings.format = "html"
    with pytest.raises(Exception, match="reasoning"):
        settings.reasoning = "extreme"


def test_a_bad_value_in_ipython_config_is_one_line_and_the_others_apply(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_line_magic("config", "Nito.model = 'sim/chat'")  # so the fixture resets it afterwards
    ip.config.Nito.model = "sim/echo"
    ip.config.Nito.max_rate = -1.0
    ip.configurables[:] = [c for c in ip.configurables if not isinstance(c, _magic.Nito)]
    _magic.load_ipython_extension(ip)  # raised a TraitError traceback: %load_ext failed
    settings = next(c for c in ip.configurables if isinstance(c, _magic.Nito))
    assert (settings.model, settings.max_rate) == ("sim/echo", 20.0)
    err = capsys.readouterr().err.strip()
    assert err.startswith("nito: ipython config: Nito.max_rate must be") and "\n" not in err
    run(ip, "", "configured")
    assert ip.user_ns["_nito"].content == "configured"


def test_reload_keeps_one_configurable(ip: Any) -> None:
    ip.run_line_magic("config", "Nito.model = 'sim/echo'")
    _magic.load_ipython_extension(ip)
    assert sum(isinstance(c, _magic.Nito) for c in ip.configurables) == 1
    run(ip, "", "still echo")
    assert ip.user_ns["_nito"].content == "still echo"


def test_reload_closes_the_old_magics_and_keeps_the_session(ip: Any) -> None:
    # IPython keeps registered Magics in `configurables`: a reload left the old one there for the
    # session, its Client's connection pool open, and started the history afresh.
    run(ip, "-m sim/echo", "before the reload")
    from nito_nb._magic.magics import NitoMagics

    old = next(c for c in ip.configurables if isinstance(c, NitoMagics))
    client = old._client()
    _magic.load_ipython_extension(ip)
    kept = [c for c in ip.configurables if isinstance(c, NitoMagics)]
    assert len(kept) == 1 and kept[0] is not old
    assert client._http.is_closed and old._sync_client is None
    assert [s.content for s in kept[0].streams] == ["before the reload"]
    run(ip, "-m sim/echo", "after")
    assert list(ip.run_line_magic("nito", "history").model) == ["sim/echo", "sim/echo"]


def test_history_lists_captured_streams_and_reset_clears_them(ip: Any) -> None:
    import openai

    run(ip, "-m sim/echo", "from the magic")
    with openai.OpenAI(
        base_url=nito_nb.sim.ensure_server(),
        api_key=nito_nb.sim.token(),
        max_retries=0,
        http_client=nito_nb.httpx_client(),
    ) as client:
        for _ in client.chat.completions.create(
            model="sim/chat", messages=[{"role": "user", "content": "from the SDK"}], stream=True
        ):
            pass
    history = ip.run_line_magic("nito", "history")
    assert list(history["model"]) == ["sim/echo", "sim/chat"] and list(history["status"]) == [
        "done",
        "done",
    ]
    assert nito_nb.last() is nito_nb.streams()[-1]
    ip.run_line_magic("nito", "reset")
    assert (
        nito_nb.last() is None
        and nito_nb.streams() == []
        and ip.run_line_magic("nito", "history").empty
    )


def test_the_comparison_table_keeps_tokens_and_chunks_apart() -> None:
    # A real recording whose chunks hold several tokens (K = 27, usage N = 228) and a stream
    # without usage: the table of `-m a,b` and its fallback from snapshots (when the adapter
    # cannot build a frame) have the same columns and the same figures.
    from nito_nb._magic import history as history

    recording = Path(__file__).parent / "data" / "real" / "openai-content-1.sse"
    packed = nito_nb.stream("x", model="sim/replay", sim={"replay": str(recording), "tps": 400})
    bare = nito_nb.stream(
        "x", model="sim/chat", sim={"tps": 400}, stream_options={"include_usage": False}
    )
    packed.wait()
    bare.wait()
    table = history.comparison_table([packed, bare])
    assert list(table.columns) == list(history.COMPARISON_COLUMNS)
    assert (table.loc[0, "n_output_tokens"], table.loc[0, "n_token_chunks"]) == (228, 27)
    assert pd.isna(table.loc[1, "n_output_tokens"]) and pd.isna(table.loc[1, "output_tps"])
    assert table.loc[1, "output_chunks_per_s"] > 0 and table.loc[1, "itl_max"] > 0
    simple = history._simple_metrics([packed, bare])
    for name in ("output_tps", "output_chunks_per_s", "n_output_tokens", "n_token_chunks"):
        assert [None if pd.isna(v) else pytest.approx(v) for v in table[name]] == [
            None if pd.isna(v) else v for v in simple[name]
        ], name


def test_earlier_tests_left_one_magics_and_no_open_client(ip: Any) -> None:
    # The ip fixture's teardown (conftest.py): IPython keeps every registered Magics in
    # shell.configurables, so without it each earlier test's NitoMagics stayed alive with its
    # Client's pooled sockets, finalized at exit as unclosed-socket ResourceWarnings. Meaningful
    # after other tests of the session (this file's order puts it last).
    from nito_nb._magic.magics import NitoMagics

    current = [c for c in ip.configurables if isinstance(c, NitoMagics)]
    assert len(current) == 1
    gc.collect()
    stale = [m for m in gc.get_objects() if isinstance(m, NitoMagics) and m is not current[0]]
    assert not [m for m in stale if m._sync_client is not None]


# -- images (docs/IMAGES.md) -----------------------------------------------------------------------


def test_image_options_reach_the_request(ip: Any, tmp_path: Path) -> None:
    import base64
    import hashlib

    png = b"\x89PNG\r\n\x1a\n" + b"\x07" * 300
    chart = tmp_path / "chart.png"
    chart.write_bytes(png)
    run(
        ip,
        f"-m sim/echo --image {chart} --image https://example.org/cat.jpg",
        "What does the chart show?",
    )
    stream = ip.user_ns["_nito"]
    digest = hashlib.sha256(png).hexdigest()
    # as received
    assert f"image_url image/png {len(png)} bytes sha256 {digest[:12]}" in stream.content
    assert "image_url url https://example.org/cat.jpg" in stream.content
    assert base64.b64encode(png).decode() not in json.dumps(stream.request)
    assert stream.request["messages"][-1]["content"][1]["attachment"]["sha256"] == digest
    fake = tmp_path / "photo.png"
    fake.write_text("no image")
    with pytest.raises(UsageError, match="is not a PNG, JPEG, GIF, WEBP or PDF"):
        run(ip, f"-m sim/echo --image {fake}", "x")
    ip.user_ns["df"] = pd.DataFrame({"q": ["x"]})  # --over: --image names a column
    with pytest.raises(UsageError, match="--image names the column of each row's images"):
        run(ip, f"-m sim/echo --over df --image {chart}", "x")


def test_the_live_view_shows_a_thumbnail_of_each_local_image_and_a_url_as_a_link(
    ip: Any, notebook: Recorder, tmp_path: Path
) -> None:
    import base64

    png = b"\x89PNG\r\n\x1a\n" + b"\x05" * 200
    hostile = tmp_path / '<img src=x onerror="window.__xss=1">.png'
    hostile.write_bytes(png)
    url = 'https://example.org/cat.jpg?a="><script>x</script>'
    run(ip, f"-m sim/echo --image '{hostile}' --image '{url}'", "Look")
    strips = [
        m["data"]
        for m in notebook.messages
        if isinstance(m["data"], dict) and "nito-attachments" in m["data"].get("text/html", "")
    ]
    assert len(strips) == 1
    shown = strips[0]["text/html"]
    # nothing fetched
    assert f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}"' in shown
    assert "max-width:96px;max-height:96px" in shown
    assert shown.count("<img") == 1  # the URL is a link, never loaded
    assert (
        '<a href="https://example.org/cat.jpg?a=&quot;&gt;&lt;script&gt;x&lt;/script&gt;"' in shown
    )
    assert "<script" not in shown
    # the name is inside a quoted attribute: no tag has an on... attribute
    found = start_tags(shown)
    assert [tag for tag, _ in found] == ["div", "img", "a"]
    assert not [name for _, attrs in found for name, _ in attrs if name.startswith("on")]
    # as text
    assert dict(found[1][1])["alt"].startswith('<img src=x onerror="window.__xss=1">.png')
    assert f"{hostile.name} (image/png, {len(png)} bytes)" in strips[0]["text/plain"]
