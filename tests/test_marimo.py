"""nito_nb in marimo, without a browser: the cell output adapter (``_display/marimo.py``) on real
streams from the simulator, the chat model for ``mo.ui.chat`` (``nito_nb.marimo_chat``) and a
run's panel. marimo's own ``output.replace`` is replaced by a recorder here (only a running marimo
cell has one); tests/test_marimo_notebook.py runs a real marimo notebook."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest

import nito_nb
from nito_nb._display.marimo import CellOutput, show_stream, stream_html, stream_output
from nito_nb._render import final_bundle

pytest.importorskip("marimo")

XSS_PAYLOAD = '<img src=x onerror="window.__xss=1"><script>window.__xss2=1</script>'
#: Paced: a few hundred milliseconds of streaming, so several renders happen before the end.
PACED = {"sim": {"tps": 150, "ttft_ms": 0}}


class Recorder:
    """Stands in for marimo's ``output.replace``: every HTML sent, with the sending thread."""

    def __init__(self, raise_at: int | None = None) -> None:
        self.sent: list[tuple[str, str]] = []
        self.raise_at = raise_at

    def __call__(self, html: str) -> None:
        self.sent.append((html, threading.current_thread().name))
        if self.raise_at is not None and len(self.sent) == self.raise_at:
            raise KeyboardInterrupt  # marimo's Stop lands in whatever the cell's thread does

    @property
    def htmls(self) -> list[str]:
        return [html for html, _ in self.sent]


def test_a_stream_as_a_cell_output_grows_live_and_ends_as_jupyters_rendering() -> None:
    stream = nito_nb.stream("Tell me a story about the sea", model="sim/chat", **PACED)
    recorder = Recorder()
    output = stream_output(stream, replace=recorder)
    output.follow_here(interrupted=stream.close)
    assert stream.status == "done"
    assert output.finished
    # Every render in the cell's thread: marimo's output belongs to the thread that runs the cell.
    assert {thread for _, thread in recorder.sent} == {threading.current_thread().name}
    live = recorder.htmls[:-1]
    assert len({len(html) for html in live}) > 1, "the answer did not grow in the cell"
    assert recorder.htmls[-1] == final_bundle(stream)["text/html"]  # Jupyter's final rendering
    # The same throttle as Jupyter's outputs: at most 20 renders a second (and the first, the last).
    elapsed = stream.elapsed or 0.0
    assert len(recorder.sent) <= elapsed * 20 + 3, (len(recorder.sent), elapsed)


def test_the_final_state_shows_reasoning_tool_cards_and_the_status_line() -> None:
    stream = nito_nb.stream("What is the weather in Paris?", model="sim/tools", **PACED)
    html = show_stream(stream, replace=Recorder()).text
    assert html == final_bundle(stream)["text/html"]
    assert "get_weather" in html and "sim/tools" in html
    thinking = nito_nb.stream("Think first", model="sim/reasoning", **PACED)
    assert "Reasoning" in show_stream(thinking, replace=Recorder()).text


def test_hostile_model_text_stays_escaped_live_and_at_the_end() -> None:
    stream = nito_nb.stream(XSS_PAYLOAD * 3, model="sim/echo", **PACED)
    recorder = Recorder()
    show_stream(stream, replace=recorder)
    assert stream.content.count("<script>") == 3
    for html in recorder.htmls:
        assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in recorder.htmls[-1]


def test_stop_in_marimo_closes_the_stream_and_shows_its_final_state() -> None:
    # marimo's Stop interrupts the cell's thread: here during the third render.
    stream = nito_nb.stream("A long story", model="sim/chat", sim={"tps": 20, "ttft_ms": 0})
    recorder = Recorder(raise_at=3)
    shown = show_stream(stream, replace=recorder)
    assert stream.status == "stopped"
    assert recorder.htmls[-1] == shown.text == final_bundle(stream)["text/html"]
    assert len(recorder.sent) == 4  # three live renders, then the final one


def test_a_finished_stream_is_rendered_at_once_and_an_async_one_is_never_waited_for() -> None:
    stream = nito_nb.stream("hello", model="sim/chat")
    stream.wait()
    recorder = Recorder()
    assert show_stream(stream, replace=recorder).text == final_bundle(stream)["text/html"]
    assert recorder.sent == []  # nothing to follow: the returned output is the cell's
    # marimo calls the display protocol; outside a cell it is the same final rendering.
    assert stream._display_().text == final_bundle(stream)["text/html"]


def test_a_cell_output_that_cannot_end_by_itself_is_refused() -> None:
    output = CellOutput(lambda live: "", ended=lambda: False, replace=Recorder())
    output.ends_itself = False
    with pytest.raises(TypeError, match="cannot be followed"):
        output.follow_here()


def test_a_failing_render_is_raised_in_the_cells_thread_after_the_final_render() -> None:
    calls: list[bool] = []

    def html(live: bool) -> str:
        calls.append(live)
        if live and len(calls) == 2:
            raise ValueError("broken renderer")
        return "x"

    ended = threading.Event()
    output = CellOutput(html, ended=ended.is_set, replace=Recorder())
    with pytest.raises(ValueError, match="broken renderer"):
        output.follow_here()
    assert calls[-1] is False  # the final state was still rendered


def test_stream_html_escapes_live_parts() -> None:
    stream = nito_nb.stream(XSS_PAYLOAD, model="sim/echo")
    stream.wait()
    for live in (True, False):
        assert "<script" not in stream_html(stream.snapshot(), live=live)


# -- the chat model for mo.ui.chat -------------------------------------------------------------


def _chat_messages(*pairs: tuple[str, str]) -> list[Any]:
    from marimo._ai._types import ChatMessage

    return [ChatMessage(role=role, content=content) for role, content in pairs]  # type: ignore[arg-type]


def _collect(model: Any, messages: list[Any], config: Any = None) -> list[Any]:
    from marimo._ai._types import ChatModelConfig

    async def run() -> list[Any]:
        return [chunk async for chunk in model(messages, config or ChatModelConfig())]

    return asyncio.run(run())


def test_the_chat_model_streams_the_answer_as_text_and_keeps_each_turns_stream() -> None:
    chat = nito_nb.marimo_chat("sim/echo", system="Be brief.", temperature=0.5, **PACED)
    from marimo._ai._types import ChatModelConfig

    history = _chat_messages(
        ("user", "first question"), ("assistant", "first answer"), ("user", "one two three four")
    )
    chunks = _collect(chat, history, ChatModelConfig(max_tokens=50, top_k=3))
    texts = [c for c in chunks if isinstance(c, str)]
    assert len(texts) > 1, "the answer came in one piece, not streamed"
    [stream] = chat.streams
    assert "".join(texts) == stream.content == "one two three four"
    assert stream.status == "done"
    assert stream.request["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "one two three four"},
    ]
    params = stream.request["params"]
    assert params["temperature"] == 0.5 and params["max_tokens"] == 50 and "top_k" not in params
    assert len(nito_nb.frame(chat.streams)) > 1  # every turn's Stream, for frames


def test_the_chat_model_sends_reasoning_as_marimos_reasoning_chunks() -> None:
    chat = nito_nb.marimo_chat("sim/reasoning")
    chunks = _collect(chat, _chat_messages(("user", "think")))
    kinds = [c["type"] if isinstance(c, dict) else "text" for c in chunks]
    assert kinds[0] == "reasoning-start" and "reasoning-end" in kinds
    assert kinds.index("reasoning-end") < kinds.index("text")  # reasoning closed before the answer
    reasoning = "".join(
        c["delta"] for c in chunks if isinstance(c, dict) and c["type"] == "reasoning-delta"
    )
    assert reasoning == chat.streams[0].reasoning


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_the_chat_model_shows_tool_calls_and_runs_them_with_run_tools() -> None:
    shown = nito_nb.marimo_chat("sim/tools", tools=[get_weather])
    chunks = _collect(shown, _chat_messages(("user", "weather in Paris?")))
    calls = [c for c in chunks if isinstance(c, dict) and c["type"] == "tool-input-available"]
    assert calls and calls[0]["toolName"] == "get_weather" and isinstance(calls[0]["input"], dict)
    assert len(shown.streams) == 1  # calls are only shown
    ran = nito_nb.marimo_chat("sim/tools", tools=[get_weather], run_tools=True)
    chunks = _collect(ran, _chat_messages(("user", "weather in Paris?")))
    outputs = [c for c in chunks if isinstance(c, dict) and c["type"] == "tool-output-available"]
    assert outputs and outputs[0]["output"].startswith("sunny in ")
    assert len(ran.streams) == 2 and ran.streams[1].request["messages"][-1]["role"] == "tool"
    assert ran.streams[1].content  # the model answered after the tool's result


def test_stop_in_the_chat_element_closes_the_turns_stream() -> None:
    # marimo's Stop cancels the task that runs the model.
    chat = nito_nb.marimo_chat("sim/chat", sim={"tps": 30, "ttft_ms": 0})

    async def run() -> list[Any]:
        from marimo._ai._types import ChatModelConfig

        got: list[Any] = []

        async def consume() -> None:
            async for chunk in chat(_chat_messages(("user", "a long story")), ChatModelConfig()):
                got.append(chunk)

        task = asyncio.create_task(consume())
        while len(got) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return got

    got = asyncio.run(run())
    [stream] = chat.streams
    assert stream.status == "stopped"
    assert stream.content.startswith("".join(c for c in got if isinstance(c, str)))


def test_an_http_error_is_one_line_of_the_answer() -> None:
    chat = nito_nb.marimo_chat("sim/http-402")
    chunks = _collect(chat, _chat_messages(("user", "hi")))
    assert chunks[-1].startswith("\n\n✗ ") and "\n" not in chunks[-1].strip()
    assert chat.streams[0].status != "done"


def test_the_chat_models_display_is_each_turns_status_line() -> None:
    chat = nito_nb.marimo_chat("sim/echo")
    _collect(chat, _chat_messages(("user", "hello there")))
    html = chat._display_().text
    assert "sim/echo" in html and "TTFT" in html


# -- a run in marimo -------------------------------------------------------------------------------


def test_a_run_as_a_cell_output_shows_its_panel_live_and_returns_the_same_run(
    tmp_path: Any,
) -> None:
    from nito_nb._runs.progress import panel_html, panel_model, show_in_cell

    prompts = [f"question {i}" for i in range(12)]
    run = nito_nb.run(
        prompts, model="sim/echo", concurrency=2, progress=False, sim={"tps": 80, "ttft_ms": 0}
    )
    assert isinstance(run, nito_nb.Run)
    recorder = Recorder()
    shown = show_in_cell(run, mark=lambda: run.n_attempts, replace=recorder)
    assert run.done and len(run.results()) == len(prompts)
    assert {thread for _, thread in recorder.sent} == {threading.current_thread().name}
    assert len(set(recorder.htmls)) > 2, "the table did not move while the run went"
    final = panel_html(panel_model(run.stats()))
    assert recorder.htmls[-1] == shown.text == final  # the same table as Jupyter's static copy
    assert f"{len(prompts)}/{len(prompts)}" in final


def test_stop_in_marimo_stops_the_run_and_shows_its_end() -> None:
    from nito_nb._runs.progress import show_in_cell

    run = nito_nb.run(
        [f"q{i}" for i in range(50)],
        model="sim/chat",
        concurrency=1,
        progress=False,
        sim={"tps": 40, "ttft_ms": 0},
    )
    show_in_cell(run, mark=lambda: run.n_attempts, replace=Recorder(raise_at=2))
    assert run.done and run.stopped
    assert len(run.results()) < 50


def test_the_ipywidgets_views_say_in_one_line_what_to_use_in_marimo() -> None:
    widget = nito_nb.ChatWidget("sim/echo")
    try:
        line = widget._display_().text
        assert "mo.ui.chat(nito_nb.marimo_chat(" in line and line.count("\n") == 0
    finally:
        widget.close()
    stream = nito_nb.stream("hi", model="sim/echo")
    stream.wait()
    view = nito_nb.StreamView(stream)
    assert "the Stream itself as the cell&#x27;s output" in view._display_().text
    view.close()


def test_map_in_marimo_shows_the_runs_table_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    import nito_nb._display.marimo as cell

    recorder = Recorder()
    monkeypatch.setattr(cell, "in_marimo", lambda: True)
    monkeypatch.setattr(cell, "replace_cell_output", recorder)
    answers = nito_nb.map(
        ["one two", "three four"], model="sim/echo", sim={"tps": 40, "ttft_ms": 0}
    )
    assert list(answers) == ["one two", "three four"]
    assert recorder.htmls and "done: 2/2 requests" in recorder.htmls[-1]


def test_during_a_stall_the_cells_status_line_clock_keeps_moving() -> None:
    import time

    from nito_nb._display.refresh import CLOCK_PERIOD

    stream = nito_nb.stream(
        "hi", model="sim/stall", sim={"stall_s": CLOCK_PERIOD * 4, "tps": 500, "ttft_ms": 0}
    )
    times: list[float] = []
    recorder = Recorder()

    def replace(html: str) -> None:
        times.append(time.monotonic())
        recorder(html)

    show_stream(stream, replace=replace)
    assert stream.status == "done"
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) < CLOCK_PERIOD * 2.5, gaps  # no render missing for the stall's 2 s
    during = [html for html in recorder.htmls[:-1] if "so far" in html]
    assert len(set(during)) >= 3  # the same text, a moving clock


def test_two_chat_elements_may_share_one_model_at_once() -> None:
    from marimo._ai._types import ChatModelConfig

    chat = nito_nb.marimo_chat("sim/echo", sim={"tps": 100, "ttft_ms": 0})

    async def answer(text: str) -> str:
        chunks = [c async for c in chat(_chat_messages(("user", text)), ChatModelConfig())]
        return "".join(c for c in chunks if isinstance(c, str))

    async def both() -> list[str]:
        return list(
            await asyncio.gather(answer("one two three four five"), answer("six seven eight"))
        )

    assert asyncio.run(both()) == ["one two three four five", "six seven eight"]
    assert sorted(s.status for s in chat.streams) == ["done", "done"]


def test_a_chat_models_mistake_is_one_line_when_it_is_made() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="must start with http"):
        nito_nb.marimo_chat("sim/chat", base_url="ftp://example.org")
    with pytest.raises(ValueError, match="run_tools=True runs the Python functions"):
        nito_nb.marimo_chat(
            "sim/tools", tools=[{"type": "function", "function": {"name": "x"}}], run_tools=True
        )
