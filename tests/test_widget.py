"""ChatWidget and StreamView, headless: no kernel, no browser.

ipywidgets works in plain Python (its comms are ``comm.DummyComm``); a recording comm stands in for
the kernel so that the messages a real front end would receive can be counted and timed. Turns run
against the embedded simulator. Timing assertions are ratios against what the simulator would
have sent, never absolute latencies (CI machines are slow and noisy).
"""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import re
import subprocess
import sys
import threading
import time
from typing import Any, ClassVar

import comm
import comm.base_comm
import ipywidgets
import pytest
from conftest import sigint_after, start_tags

import nito_nb
from nito_nb._widget import ChatWidget, StreamView

XSS_PAYLOAD = '<img src=x onerror="window.__xss=1"><script>window.__xss2=1</script>'
FAST = {"tps": 0}


class RecordingComm(comm.DummyComm):  # type: ignore[misc]
    """A comm that keeps what would go to the front end: (time, msg_type, data)."""

    log: ClassVar[list[tuple[float, str, str, Any]]] = []

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        RecordingComm.log.append((time.monotonic(), self.comm_id, msg_type, data))


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, str, str, Any]]:
    log: ClassVar[list[tuple[float, str, str, Any]]] = []
    monkeypatch.setattr(RecordingComm, "log", log)
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: RecordingComm(**kwargs))
    return log


@pytest.fixture
def widgets() -> Any:
    """Close every ChatWidget made through it, and check that no turn thread outlives the test."""
    made: list[ChatWidget] = []

    def make(*args: Any, **kwargs: Any) -> ChatWidget:
        w = ChatWidget(*args, **kwargs)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()
    assert not _turn_threads()


def _turn_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("nito_nb-chat")]


def _html_values(widget: Any) -> list[str]:
    """Every HTML value in a widget tree."""
    out = []
    if isinstance(widget, ipywidgets.HTML):
        out.append(widget.value)
    for child in getattr(widget, "children", ()):
        out.extend(_html_values(child))
    return out


def _assert_inert(values: list[str]) -> None:
    for value in values:
        for tag, attrs in start_tags(value):
            assert tag not in ("script", "img", "iframe", "object", "embed"), (tag, value)
            for name, attr in attrs:
                assert not name.startswith("on"), (tag, name, value)
                assert not (attr or "").strip().lower().startswith("javascript:"), (tag, attr)


def _wait_until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.002)


# -- the package ----------------------------------------------------------------------------------


@pytest.mark.spawns
def test_exported_lazily() -> None:
    code = (
        "import sys, nito_nb\n"
        "assert 'ipywidgets' not in sys.modules\n"
        "assert 'ChatWidget' in nito_nb.__all__ and 'StreamView' in nito_nb.__all__\n"
        "assert 'ChatWidget' in dir(nito_nb)\n"
        "from nito_nb import ChatWidget, StreamView\n"
        "assert 'ipywidgets' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert nito_nb.ChatWidget is ChatWidget and nito_nb.StreamView is StreamView
    with pytest.raises(AttributeError):
        nito_nb.NoSuchThing  # noqa: B018


def test_a_usable_button_at_every_moment(widgets: Any) -> None:
    # Each button's change is a message of its own, drawn as it comes: the one that becomes usable
    # changes first, so no moment shows both Send and Stop disabled.
    w = widgets(model="sim/chat", sim=FAST)
    states: list[tuple[bool, bool]] = []
    for button in (w._send_button, w._stop_button):
        button.observe(
            lambda _: states.append((w._send_button.disabled, w._stop_button.disabled)), "disabled"
        )
    w.busy = True
    w.busy = False
    assert states == [(False, False), (True, False), (False, False), (False, True)]


# -- a turn ---------------------------------------------------------------------------------------


def _unwrapped(html_text: str) -> str:
    """The HTML without its ``<div>`` wrappers: finished answer blocks shown in one widget share
    one (``join_answer_blocks``), so the page and the parts differ only there."""
    return re.sub(r'<div class="nito-out nito-answer">|<div>|</div>', "", html_text)


def test_send_streams_an_answer_into_the_transcript(widgets: Any, comms: list[Any]) -> None:
    w = widgets(model="sim/chat", sim=FAST)
    assert (w._send_button.disabled, w._stop_button.disabled) == (False, True)
    w._input.value = "Explain SSE"
    w._send_button.click()
    assert w.busy and w._send_button.disabled and not w._stop_button.disabled
    assert w._input.value == ""  # the box is cleared for the next message
    stream = w.wait(20)
    assert stream is not None and stream.status == "done" and stream.content
    assert not w.busy and not w._send_button.disabled and w._stop_button.disabled
    assert w.status.startswith("✓") and w.last_exception is None

    view = w._turns[0].view
    keys = [p.key for p in view.parts]
    assert keys[0] == "status" and any(k.startswith("answer-") for k in keys)
    assert "".join(p.text for p in view.parts if p.key.startswith("answer-")) == stream.content
    assert "TTFT" in view.parts[0].text and "finish: stop" in view.parts[0].text
    # What the browser holds: the last value sent for every widget of the view is the final render.
    assert _unwrapped("".join(_html_values(view))) == _unwrapped(
        "".join(p.html for p in view.parts)
    )

    assert w.messages == [
        {"role": "user", "content": "Explain SSE"},
        {"role": "assistant", "content": stream.content},
    ]
    assert w.streams == [stream]
    bundle = w.transcript()
    assert (
        "You: Explain SSE" in bundle["text/plain"] and stream.content[:40] in bundle["text/plain"]
    )


def test_enter_in_the_box_sends(widgets: Any) -> None:
    w = widgets(model="sim/echo", sim=FAST)
    w._input.value = "hello there"
    w._input._handle_custom_msg({"event": "submit"}, [])  # what the front end sends on Enter
    stream = w.wait(20)
    assert stream is not None and stream.content == "hello there"
    w._input._handle_custom_msg({"event": "submit"}, [])  # an empty box sends nothing
    assert len(w.streams) == 1


def test_enter_sends_the_text_the_user_saw(widgets: Any) -> None:
    # The box's value update can still be held back in the front end (ipywidgets' throttle) when
    # Enter is pressed: the text in the submit message is what was in the box.
    w = widgets(model="sim/echo", sim=FAST)
    w._input.value = "hello th"
    w._input._handle_custom_msg({"event": "submit", "text": "hello there"}, [])
    stream = w.wait(20)
    assert stream is not None and stream.content == "hello there"
    assert w._input.value == ""
    w._input._handle_custom_msg({"event": "submit", "text": "  "}, [])  # blanks send nothing
    assert len(w.streams) == 1


def test_multiline_uses_a_text_area(widgets: Any) -> None:
    w = widgets(model="sim/echo", sim=FAST, multiline=True)
    assert w._input.multiline and "Shift+Enter" in w._input.placeholder
    w._input.value = "line one\nline two"
    w._send_button.click()
    stream = w.wait(20)
    assert stream is not None and stream.content == "line one\nline two"
    w._input.value = "and Shift+Enter"
    # What the front end sends on Shift+Enter (Enter there makes a new line):
    w._input._handle_custom_msg({"event": "submit", "text": "and Shift+Enter"}, [])
    stream = w.wait(20)
    assert stream is not None and stream.content == "and Shift+Enter"


def test_the_prompt_box_front_end_never_parses_markup() -> None:
    # The value and placeholder reach the page only as properties of an input or textarea; the
    # browser tests type a hostile payload through it. Here: no HTML sink in its code at all.
    from nito_nb._widget.prompt_box import _PROMPT_BOX_ESM

    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in _PROMPT_BOX_ESM
    assert 'setAttribute("data-lm-suppress-shortcuts", "true")' in _PROMPT_BOX_ESM


def test_an_interrupted_wait_still_lets_close_wait_for_the_turn(widgets: Any) -> None:
    # The kernel's stop button while a cell blocks in w.wait(): a KeyboardInterrupt inside
    # Thread.join would mark the running turn thread stopped, and close() would then not wait for
    # it (it uses an Event instead).
    w = widgets(model="sim/long", sim={"tps": 200, "chunks": 5000})
    stream = w.ask("go")
    deadline = time.monotonic() + 20
    while stream.status != "streaming":  # the interrupt must land mid-answer
        assert time.monotonic() < deadline, stream.status
        time.sleep(0.01)
    with sigint_after(0.3), pytest.raises(KeyboardInterrupt):
        w.wait(30)
    assert stream.status == "streaming"  # the interrupt stopped the wait, not the turn
    w.close()
    assert stream.status == "stopped" and not _turn_threads()


def test_send_is_refused_while_a_turn_streams(widgets: Any) -> None:
    w = widgets(model="sim/long", sim={"tps": 200, "chunks": 5000})
    w.ask("go")
    with pytest.raises(RuntimeError, match="still streaming"):
        w.ask("again")
    w._input.value = "again"
    w._send_button.click()  # ignored, with a note; the text stays in the box
    assert len(w.streams) == 1 and w._input.value == "again" and "Stop" in w.status
    w.stop()
    w.wait(20)


def test_conversation_carries_over_and_model_switch_applies_to_the_next_turn(widgets: Any) -> None:
    w = widgets(model="sim/chat", system="Be brief.", sim=FAST)
    first = w.ask("one")
    w.wait(20)
    w._picker.value = "sim/echo"  # what the picker does in the page
    assert w.model == "sim/echo"
    assert first.request["model"] == "sim/chat"
    second = w.ask("two")
    w.wait(20)
    assert second.request["model"] == "sim/echo" and second.content == "two"
    assert second.request["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "two"},
    ]
    assert w.messages == [*second.request["messages"], {"role": "assistant", "content": "two"}]
    assert w.streams == [first, second]


def test_frame_has_all_turns(widgets: Any) -> None:
    pytest.importorskip("nito_nb._frame")
    w = widgets(model="sim/chat", sim=FAST)
    w.ask("one")
    w.wait(20)
    w.model = "sim/echo"
    w.ask("two")
    w.wait(20)
    df = w.frame()
    assert df["stream"].nunique() == 2
    assert set(df.loc[df["kind"] == "response", "model"]) >= {"sim/echo"}


def test_clear_forgets_everything(widgets: Any) -> None:
    w = widgets(model="sim/echo", system="sys", sim=FAST)
    w.ask("one")
    w.wait(20)
    w.clear()
    assert w.messages == [{"role": "system", "content": "sys"}]
    assert w.streams == [] and w._transcript.children == () and not w.busy


# -- stop -----------------------------------------------------------------------------------------


def test_stop_mid_stream_keeps_the_partial_answer(widgets: Any) -> None:
    chunks, tps = 4000, 400  # the whole answer would take 10 s
    w = widgets(model="sim/long", sim={"tps": tps, "chunks": chunks, "ttft_ms": 0})
    stream = w.ask("go")
    _wait_until(lambda: len(stream.content) > 200)
    t0 = time.monotonic()
    w._stop_button.click()
    _wait_until(lambda: stream.status == "stopped" and not w.busy, timeout=10)
    latency = time.monotonic() - t0
    kept = stream.content
    time.sleep(0.3)
    assert stream.content == kept  # nothing arrives after the stop
    assert stream.n_chunks < chunks / 4  # stopped long before the whole answer
    # The view shows the stopped state with the partial answer, and the conversation keeps it.
    view = w._turns[0].view
    assert view.finished and view.parts[0].text.startswith("■ stopped")
    assert "".join(p.text for p in view.parts if p.key.startswith("answer-")) == kept
    assert w.messages[-1] == {"role": "assistant", "content": kept}
    assert w.status.startswith("■ stopped")
    print(f"stop latency {latency * 1000:.1f} ms, {stream.n_chunks} of {chunks} chunks")


def test_stop_while_waiting_for_the_first_token(widgets: Any) -> None:
    w = widgets(model="sim/chat", sim={"ttft_ms": 10_000})
    stream = w.ask("go")
    time.sleep(0.2)
    w.stop()
    assert w.wait(5) is stream
    assert stream.status == "stopped" and stream.content == "" and stream.elapsed < 5
    assert w.messages == []  # no answer: the turn is left out of the conversation


def test_close_stops_the_stream_and_leaves_no_thread(comms: list[Any]) -> None:
    w = ChatWidget(model="sim/long", sim={"tps": 200, "chunks": 5000})
    stream = w.ask("go")
    _wait_until(lambda: stream.n_chunks > 5)
    w.close()
    assert stream.status == "stopped"
    assert not _turn_threads()
    assert w.comm is None and w._turns[0].view.comm is None
    w.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        w.ask("more")


# -- traffic --------------------------------------------------------------------------------------


def test_update_rate_is_bounded_and_the_final_update_is_sent(
    widgets: Any, comms: list[Any]
) -> None:
    chunks, tps = 600, 400  # 1.5 s of 4-byte chunks: 400 chunks/s, ~20x the update budget
    w = widgets(model="sim/long", sim={"tps": tps, "chunks": chunks, "ttft_ms": 0})
    comms.clear()
    stream = w.ask("go")
    w.wait(30)
    assert stream.status == "done" and stream.n_chunks >= chunks
    view = w._turns[0].view
    # Renders, not chunks, drive messages: at most 20 renders a second, plus the final one.
    elapsed = stream.elapsed
    assert view.n_updates <= 20 * elapsed + 2, (view.n_updates, elapsed)
    assert view.n_updates >= 10  # it did update live
    # Each widget (status line, live tail...) gets at most one message per render.
    busiest = 0
    for c in _comms_of(view):
        times = [
            t
            for t, comm_id, kind, data in comms
            if comm_id == c.comm_id and kind == "comm_msg" and data.get("method") == "update"
        ]
        busiest = max(busiest, *_in_window(times, 1.0))
    assert 10 <= busiest <= 21, busiest
    assert len(comms) < stream.n_chunks / 2  # far fewer messages than chunks
    # The final state reached the front end: the last value sent to each widget is the final render.
    assert _unwrapped("".join(_html_values(view))) == _unwrapped(
        "".join(p.html for p in view.parts)
    )
    assert view.parts[0].text.startswith("✓ done")


def test_traffic_is_linear_in_the_answer(widgets: Any) -> None:
    w = widgets(model="sim/long", sim={"tps": 2000, "chunks": 6000, "ttft_ms": 0})
    stream = w.ask("go")
    w.wait(60)
    view = w._turns[0].view
    final = sum(len(p.html.encode()) for p in view.parts)
    # Each render re-sends only the status line and the live tail (bounded by the renderer's
    # FREEZE_CHARS); finished blocks go once. Re-sending the whole answer each time would cost
    # about n_updates * final / 2.
    per_update = 2 * 4096 + 2000
    assert view.bytes_sent <= 2 * final + view.n_updates * per_update
    assert view.bytes_sent < view.n_updates * final / 4, (view.bytes_sent, final, view.n_updates)
    assert len(stream.content) > 20_000


def _comms_of(widget: Any) -> list[Any]:
    out = [widget.comm] if widget.comm is not None else []
    for child in getattr(widget, "children", ()):
        out.extend(_comms_of(child))
    return out


def _in_window(times: list[float], width: float) -> list[int]:
    counts, start = [], 0
    for end, t in enumerate(times):
        while t - times[start] > width:
            start += 1
        counts.append(end - start + 1)
    return counts or [0]


# -- safety ---------------------------------------------------------------------------------------


def test_hostile_model_text_is_escaped(widgets: Any) -> None:
    w = widgets(model="sim/echo", sim=FAST)
    hostile = XSS_PAYLOAD + " [x](javascript:alert(1)) ![y](http://evil/pixel.png) <iframe src=x>"
    stream = w.ask(hostile)
    w.wait(20)
    assert stream.content == hostile
    values = _html_values(w)
    assert any("&lt;script&gt;" in v for v in values)  # shown as text, in the answer and the bubble
    _assert_inert(values)
    _assert_inert([w.transcript()["text/html"], w._repr_mimebundle_()["text/html"]])


def test_a_schema_shows_each_answer_as_the_object_and_stays_inert(widgets: Any) -> None:
    # issue 33: ChatWidget(schema=...) shows the object as parsed, as %%nito --schema does; field
    # values the model wrote (here enum values that are payloads) stay text.
    schema = {
        "title": "Verdict",
        "type": "object",
        "required": ["label", "why"],
        "properties": {
            "label": {"type": "string", "enum": [XSS_PAYLOAD]},
            "why": {
                "type": "array",
                "minItems": 1,
                "maxItems": 2,
                "items": {"type": "string", "const": "<iframe src=x>"},
            },
        },
    }
    w = widgets(model="sim/chat", sim=FAST, schema=schema)
    stream = w.ask("Classify: free money")
    w.wait(20)
    assert (
        stream.parsed == {"label": XSS_PAYLOAD, "why": stream.parsed["why"]}
        and stream.parse_error is None
    )
    (part,) = [p for p in w._turns[0].view.parts if p.key == "structured"]
    assert part.text.startswith("✓ Verdict") and "label: " in part.text
    values = _html_values(w)
    assert any("nito-structured" in v and "&lt;script&gt;" in v for v in values)
    _assert_inert(values)
    _assert_inert([w.transcript()["text/html"], w._repr_mimebundle_()["text/html"]])


def test_a_wrong_schema_is_refused_when_the_widget_is_made(widgets: Any) -> None:
    with pytest.raises(
        nito_nb.ConfigurationError,
        match="schema= takes a pydantic model class or a JSON-schema dict",
    ):
        widgets(model="sim/chat", schema="Verdict")


# -- failures -------------------------------------------------------------------------------------


def test_http_error_shows_a_banner_and_is_not_kept(widgets: Any) -> None:
    w = widgets(model="sim/http-401", sim=FAST)
    stream = w.ask("hi")
    w.wait(20)
    assert stream.status == "failed"
    view = w._turns[0].view
    error = [p for p in view.parts if p.key == "error"]
    assert error and "401" in error[0].text
    assert w.messages == [] and w.status.startswith("✗ the request failed")


def test_mid_stream_error_keeps_the_partial_answer(widgets: Any) -> None:
    w = widgets(model="sim/error-midstream", sim=FAST)
    stream = w.ask("hi")
    w.wait(20)
    assert stream.status == "error" and stream.content
    assert any(p.key == "error" for p in w._turns[0].view.parts)
    assert w.messages[-1]["content"] == stream.content


def test_configuration_errors_go_to_the_status_line(
    widgets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NITO_API_KEY", raising=False)
    w = widgets(model="some/model")
    w._input.value = "hi"
    w._send_button.click()  # no key: nothing is sent, no thread starts
    assert w.status.startswith("✗") and "NITO_API_KEY" in w.status
    assert w.streams == [] and not w.busy and w._input.value == "hi"


def test_tool_calls_become_cards(widgets: Any) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    w = widgets(model="sim/tools", tools=tools, sim=FAST)
    stream = w.ask("weather in Lyon?")
    w.wait(20)
    assert stream.tool_calls
    cards = [p for p in w._turns[0].view.parts if p.key.startswith("tool-")]
    assert cards and "get_weather" in cards[0].text
    assert w.messages[-1]["tool_calls"]


def test_python_functions_as_tools_are_shown_not_run_by_default(widgets: Any) -> None:
    def get_weather(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        raise AssertionError("tools never run without run_tools=True")

    w = widgets(model="sim/tools", tools=[get_weather], sim=FAST)
    stream = w.ask("weather in Lyon?")
    w.wait(20)
    # The schema is the magic's (nito_nb.tools), built from the signature and docstring.
    assert stream.request["params"]["tools"] == [nito_nb.tools.function_tool(get_weather)]
    assert [call.name for call in stream.tool_calls] == ["get_weather"]
    assert len(w.streams) == 1 and w.messages[-1]["tool_calls"]


def test_run_tools_runs_the_calls_and_sends_the_results_back(
    widgets: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []

    def get_weather(city: str) -> dict[str, str]:
        """Weather for a city."""
        ran.append(city)
        return {"city": city, "sky": "sunny"}

    w = widgets(model="sim/tools", tools=[get_weather], run_tools=True, sim=FAST)
    first = w.ask("weather in Lyon?")
    final = w.wait(20)
    assert final is not None and final is not first and w.streams == [first, final]
    assert ran and first.tool_calls and final.status == "done"
    assert final.content and not final.tool_calls  # the model answered from the results
    messages = final.request["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["role"] for m in messages] == ["user", "assistant"] + ["tool"] * len(results)
    assert [r["tool_call_id"] for r in results] == [c.id for c in first.tool_calls]
    assert json.loads(results[0]["content"]) == {"city": ran[0], "sky": "sunny"}
    # The conversation holds the whole exchange; the transcript shows what ran, one line each.
    assert [m["role"] for m in w.messages] == [*(m["role"] for m in messages), "assistant"]
    text = w.transcript()["text/plain"]
    assert f"→ ran get_weather(city={ran[0]!r}) → " in text
    assert not w.busy and w.status == "✓ done" and w.last_exception is None
    assert capsys.readouterr().out == ""  # a worker thread never prints


def test_a_failing_tool_is_one_line_and_its_error_goes_to_the_model(widgets: Any) -> None:
    def get_weather(city: str) -> str:
        """Weather for a city."""
        raise RuntimeError("the weather service is down")

    w = widgets(model="sim/tools", tools=get_weather, run_tools=True, sim=FAST)
    w.ask("weather?")
    final = w.wait(20)
    assert final is not None and final.status == "done" and len(w.streams) == 2
    results = [m for m in final.request["messages"] if m["role"] == "tool"]
    assert results and all(
        r["content"] == "Error: RuntimeError: the weather service is down" for r in results
    )
    (box,) = [v for v in _html_values(w) if "nito-tool-runs" in v]
    lines = html.unescape(box).split("</b>\n", 1)[1].removesuffix("</div>").splitlines()
    assert len(lines) == len(results)
    assert all(
        line.endswith("→ Error: RuntimeError: the weather service is down") for line in lines
    )
    assert not any("Traceback" in v for v in _html_values(w))
    assert w.last_exception is None and w.status == "✓ done"


def test_stop_while_tools_run_sends_nothing_more_and_keeps_the_results(widgets: Any) -> None:
    def get_weather(city: str) -> str:
        """Weather for a city."""
        w.stop()  # the user presses Stop while the tool runs
        return "sunny"

    w = widgets(model="sim/tools", tools=[get_weather], run_tools=True, sim=FAST)
    w.ask("weather?")
    w.wait(20)
    assert len(w.streams) == 1 and not w.busy
    roles = [m["role"] for m in w.messages]
    assert roles[:2] == ["user", "assistant"] and roles[2:] and set(roles[2:]) == {"tool"}


def test_run_tools_needs_a_python_function() -> None:
    schema = {"name": "lookup", "parameters": {"type": "object", "properties": {}}}
    with pytest.raises(ValueError, match="run_tools"):
        ChatWidget(model="sim/tools", tools=[schema], run_tools=True)
    with pytest.raises(ValueError, match="give a function"):
        ChatWidget(model="sim/tools", tools=[42])


def test_model_list_failure_is_a_note(widgets: Any) -> None:
    w = widgets(model="sim/chat", api_key="k", base_url="http://127.0.0.1:9/v1")
    assert w._models_thread is not None
    w._models_thread.join(20)
    assert w._note.value.startswith("model list unavailable")


def test_model_list_from_the_gateway(widgets: Any) -> None:
    base_url = nito_nb.sim.ensure_server()
    w = widgets(
        model="sim/chat", models=["my/model"], api_key=nito_nb.sim.token(), base_url=base_url
    )
    w._models_thread.join(20)
    assert "gateway models" in w._note.value
    assert {"sim/chat", "sim/echo", "my/model"} <= set(w._picker.options)


# -- reprs ------------------------------------------------------------------------------------------


def test_reprs_are_cheap_and_readable_without_widgets(widgets: Any) -> None:
    w = widgets(model="sim/echo", sim=FAST)
    w.ask("hello")
    w.wait(20)
    assert repr(w) == "<ChatWidget model='sim/echo' turns=1 status='✓ done'>"
    data = w._repr_mimebundle_()
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == w.model_id
    assert "You: hello" in data["text/plain"] and "hello" in data["text/html"]
    shown: list[Any] = []
    import IPython.display

    original = IPython.display.display
    IPython.display.display = lambda *a, **k: shown.append((a, k))  # type: ignore[assignment]
    try:
        w.snapshot()
    finally:
        IPython.display.display = original
    assert shown[0][0][0] == w.transcript() and shown[0][1] == {"raw": True}


# -- StreamView -------------------------------------------------------------------------------------


def test_stream_view_of_a_sync_stream_updated_by_hand() -> None:
    # A second before the first byte: the view is built while the stream is still waiting.
    stream = nito_nb.stream("hi", model="sim/chat", sim={"tps": 0, "ttft_ms": 1000})
    view = StreamView(stream)
    # Building the view must not wait for the stream (results of a sync Stream that nobody
    # iterates or shows wait for its end): the answer is still a second away.
    assert stream.status in ("waiting", "streaming") and not stream.content
    assert view.parts[0].text.startswith(("⏳ waiting", "● streaming")), view.parts[0].text
    for _ in stream:
        view.update()
    view.update()
    assert view.finished and view.parts[0].text.startswith("✓ done")
    assert stream.content.splitlines()[0] in view.text()
    view.close()


def test_stream_view_follow_in_a_thread() -> None:
    stream = nito_nb.stream("hi", model="sim/chat", sim={"tps": 0})
    view = StreamView(stream)
    thread = view.follow()
    thread.join(20)
    assert not thread.is_alive() and view.finished and stream.status == "done"
    assert view.follow_error is None
    with pytest.raises(RuntimeError):
        view.follow()
    view.close()


def test_stream_view_close_stops_a_followed_sync_stream() -> None:
    stream = nito_nb.stream("hi", model="sim/long", sim={"tps": 200, "chunks": 5000})
    view = StreamView(stream)
    thread = view.follow()
    _wait_until(lambda: stream.n_chunks > 3)
    view.close()
    thread.join(10)
    assert not thread.is_alive() and stream.status == "stopped"


def test_stream_view_afollow_an_async_stream() -> None:
    async def main() -> StreamView:
        client = nito_nb.AsyncClient()
        try:
            view = StreamView(client.stream("hi", model="sim/reasoning", sim={"tps": 0}))
            await view.afollow()
            return view
        finally:
            await client.aclose()

    view = asyncio.run(main())
    keys = [p.key for p in view.parts]
    assert view.finished and keys[:2] == ["status", "reasoning"]
    with pytest.raises(TypeError):
        view.follow()
    view.close()


def test_stream_views_side_by_side() -> None:
    # What the magic's -m a,b,c view can be: one StreamView per model in an HBox, followed together.
    async def main() -> list[StreamView]:
        client = nito_nb.AsyncClient()
        try:
            views = [
                StreamView(client.stream("hi", model=m, sim={"tps": 0}))
                for m in ("sim/chat", "sim/echo", "sim/error-midstream")
            ]
            ipywidgets.HBox(views)
            results = await asyncio.gather(*(v.afollow() for v in views), return_exceptions=True)
            # afollow() raises what iterating the stream raises (raise_errors=True by default).
            assert isinstance(results[2], nito_nb.MidStreamError)
            return views
        finally:
            await client.aclose()

    views = asyncio.run(main())
    assert [v.stream.status for v in views] == ["done", "done", "error"]
    assert all(v.finished for v in views)
    for view in views:
        view.close()


def test_stream_view_rejects_a_bad_format() -> None:
    stream = nito_nb.read_sse(b"data: [DONE]\n\n")
    with pytest.raises(ValueError, match="format"):
        StreamView(stream, format="html")
    view = StreamView(stream, format="text")
    assert view.finished and repr(view).startswith("<StreamView <Stream")
    assert "text/plain" in view._repr_mimebundle_()
    view.close()


def test_plain_transcript_labels_tool_results_by_role() -> None:
    from nito_nb._widget.chat import _user_text

    text = _user_text([{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}])
    assert text == "You: hi\n[tool] 42"


def test_stream_view_shows_a_refusal_escaped() -> None:
    line = (
        'data: {"id":"g","model":"m","choices":[{"index":0,"delta":%s,"finish_reason":null}]}\n\n'
    )
    body = "".join(line % d for d in ['{"refusal":"I <b>cannot</b>"}', '{"refusal":" do that."}'])
    view = nito_nb.StreamView(nito_nb.read_sse((body + "data: [DONE]\n\n").encode()))
    view.update()
    (refusal,) = [c.value for c in view.children if "nito-refusal" in c.value]
    assert "I &lt;b&gt;cannot&lt;/b&gt; do that." in refusal and "<b>" not in refusal


def test_a_stall_keeps_the_view_current_and_its_clock_moving(widgets: Any) -> None:
    # The chat's turn (an AsyncStream followed on the turn's loop thread) during sim/stall: what
    # came before the pause is shown long before the pause ends, and the status line's clock moves.
    stall_s = 4.0
    w = widgets(model="sim/stall", sim={"stall_s": stall_s, "tps": 100})
    stream = w.ask("anything")
    assert stream is not None
    view = w._current.view
    samples: list[tuple[float, str]] = []
    while not (view.finished and stream.finished):
        samples.append((time.monotonic(), view.text()))
        time.sleep(0.02)
        assert len(samples) < 100 * (stall_s + 20), "the turn did not end"
    w.wait(10)
    chunks = [e for e in stream.log if e.kind == "chunk" and e.chunk.get("choices")]
    cut = max(range(1, len(chunks)), key=lambda i: chunks[i].t - chunks[i - 1].t)

    def text(es: list[Any]) -> str:
        return "".join(e.chunk["choices"][0].get("delta", {}).get("content") or "" for e in es)

    head, tail = " ".join(text(chunks[:cut]).split()), " ".join(text(chunks[cut:]).split())
    flat = [(at, " ".join(shown.split())) for at, shown in samples]
    started = next(at for at, shown in flat if head.split()[0] in shown)
    whole = next(at for at, shown in flat if head in shown)
    resumed = next(at for at, shown in flat if tail.split()[0] in shown.partition(head)[2])
    assert resumed - started > stall_s / 2
    assert whole - started < (resumed - started) / 10
    clocks = []
    for at, shown in samples:
        match = re.search(r"(\d+\.\d+) s so far", shown)
        if whole <= at < resumed and match and (not clocks or float(match[1]) != clocks[-1]):
            clocks.append(float(match[1]))
    assert len(clocks) >= stall_s / 1.5, clocks
    assert max(b - a for a, b in itertools.pairwise(clocks)) <= stall_s / 4, clocks


def test_a_long_error_loses_its_middle_not_its_end() -> None:
    # One rule for every one-line error (the magic's lines, this widget's status): the hint, what
    # to do, comes last, so a long message loses its middle (the widget cut its end at 300).
    from nito_nb._core.errors import ERROR_LINE_CHARS, ConfigurationError, one_line

    error = ConfigurationError("the start\n" + "word " * 400 + "what to do: set X")
    line = one_line(error, with_type=False)
    assert len(line) <= ERROR_LINE_CHARS + 3 and "\n" not in line
    assert line.startswith("the start") and line.endswith("what to do: set X") and " … " in line
    assert one_line(error) == f"ConfigurationError: {line}"
