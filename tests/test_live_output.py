"""Every live output implements the one protocol (``_display/sink.py`` ``LiveOutput``) by sharing
its one lifecycle (``LiveSink``): the final render happens once and last, after the refresh
thread has stopped, in the thread that calls ``finish()`` (the widget's, which finishes itself,
in whichever thread first sees its stream's end). Real streams from the simulator, real runs."""

from __future__ import annotations

import ast
import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import nito_nb
from nito_nb._display import LiveDisplay, TerminalDisplay
from nito_nb._display.marimo import CellOutput
from nito_nb._display.refresh import CLOCK_PERIOD
from nito_nb._display.sink import LiveOutput, LiveSink
from nito_nb._magic.grid import Grid
from nito_nb._runs.progress import Panel, StderrLine
from nito_nb._runs.sweep_view import SweepView
from nito_nb._widget import StreamView

PACKAGE = Path(nito_nb.__file__).parent
#: The live outputs of the package.
OUTPUTS = (LiveDisplay, TerminalDisplay, Grid, StreamView, Panel, StderrLine, SweepView, CellOutput)
#: Classes with an ``update()`` and a ``finish()`` that are no live output, and why.
NOT_OUTPUTS = {
    "_capture.Views": "the live outputs of one captured stream: it hands each update and finish on to them",
}
#: sim/stall's silence: longer than CLOCK_PERIOD, so the refresh thread renders during it.
STALL = {"sim": {"stall_s": CLOCK_PERIOD * 1.6, "tps": 500, "ttft_ms": 0}}
FAST = {"sim": {"tps": 0, "ttft_ms": 0}}


class Renders:
    """Every render of one live output, as (live, thread's name, refresh thread still running)."""

    def __init__(self, sink: Any) -> None:
        self.log: list[tuple[bool, str, bool]] = []
        draw = sink._draw

        def recorded(*, live: bool) -> None:
            refresher = sink._refresher
            self.log.append(
                (live, threading.current_thread().name, refresher is not None and refresher.running)
            )
            draw(live=live)

        sink._draw = recorded  # every render of a LiveSink goes through _draw

    def assert_final_once_and_last(self, thread: str | None = None) -> None:
        finals = [i for i, (live, _, _) in enumerate(self.log) if not live]
        assert finals == [len(self.log) - 1], self.log  # once, and last
        _, where, refreshing = self.log[-1]
        assert not refreshing, "the final render came before the refresh thread stopped"
        if thread is not None:
            assert where == thread, (where, thread)


class Page:
    """A notebook's outputs, for LiveDisplay's ``display=``."""

    def __call__(
        self, bundle: dict[str, str], *, raw: bool = False, display_id: bool = False
    ) -> Page:
        return self

    def update(self, bundle: dict[str, str], *, raw: bool = False) -> None:
        pass


def _after_the_end(sink: Any, renders: Renders) -> None:
    """finish() again, update(), and a wait longer than the refresh thread's period: nothing renders."""
    n = len(renders.log)
    sink.finish()
    sink.update()
    time.sleep(CLOCK_PERIOD * 1.2)
    sink.update()
    assert len(renders.log) == n and sink.finished


@pytest.mark.parametrize(
    "make",
    [
        lambda s: LiveDisplay(s, format="text", display=Page()),
        lambda s: TerminalDisplay(s, file=io.StringIO()),
        lambda s: Grid([s], ["sim/stall"], "text"),
    ],
    ids=["LiveDisplay", "TerminalDisplay", "Grid"],
)
def test_a_streams_output_renders_its_final_state_once_last_and_in_the_callers_thread(
    make: Callable[[Any], LiveSink], capsys: pytest.CaptureFixture[str]
) -> None:
    stream = nito_nb.stream("a b c " * 40, model="sim/stall", raise_errors=False, **STALL)
    sink = make(stream)
    renders = Renders(sink)
    chunks = iter(stream)  # iterated from here on: the output reads what arrived so far
    assert sink.start() is sink
    for _ in chunks:
        sink.update()
    assert stream.status == "done"
    sink.finish()
    renders.assert_final_once_and_last(thread=threading.current_thread().name)
    assert any(where == type(sink).refresher_name for _, where, _ in renders.log), (
        "the stall was never refreshed"
    )
    _after_the_end(sink, renders)


def test_a_feeder_and_the_refresh_thread_never_render_after_the_final_render() -> None:
    # A feeder calls update() as fast as it can from its own thread while the caller finishes.
    stream = nito_nb.stream("a b c " * 40, model="sim/stall", raise_errors=False, **STALL)
    sink = LiveDisplay(stream, format="text", display=Page(), max_rate=1000)
    renders = Renders(sink)
    chunks = iter(stream)
    sink.start()
    feeding = threading.Event()
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            sink.update()
            feeding.set()

    feeder = threading.Thread(target=feed, name="feeder")
    feeder.start()
    try:
        feeding.wait(5)
        for _ in chunks:
            pass
        sink.finish()
        time.sleep(0.05)  # the feeder goes on after the final render
    finally:
        stop.set()
        feeder.join(5)
    renders.assert_final_once_and_last(thread=threading.current_thread().name)
    assert sum(1 for _, where, _ in renders.log if where == "feeder") > 1


def test_the_widgets_view_finishes_itself_once_when_its_stream_ends() -> None:
    stream = nito_nb.stream("a b c " * 40, model="sim/stall", raise_errors=False, **STALL)
    view = StreamView(stream, format="text")  # shown at once (start()), refreshed from then on
    renders = Renders(view)
    view.follow().join(30)
    assert view.finished and stream.status == "done"
    renders.assert_final_once_and_last()  # in the follower's thread or the refresh thread
    _after_the_end(view, renders)
    view.close()
    assert view.closed


def test_a_closed_output_renders_nothing_more() -> None:
    stream = nito_nb.stream("a b c " * 40, model="sim/stall", raise_errors=False, **STALL)
    view = StreamView(stream, format="text")
    renders = Renders(view)
    view.close()
    view.update(force=True)
    view.finish()
    stream.close()
    time.sleep(CLOCK_PERIOD * 1.2)
    assert renders.log == [] and view.closed and not view.finished


@pytest.mark.parametrize(
    "make", [Panel, lambda run: StderrLine(run, io.StringIO())], ids=["Panel", "StderrLine"]
)
def test_a_runs_progress_renders_its_final_state_once_and_last(
    make: Callable[[Any], LiveSink],
) -> None:
    run = nito_nb.run(
        [f"q{i}" for i in range(6)], model="sim/chat", concurrency=2, progress=False, **FAST
    )
    sink = make(run)
    renders = Renders(sink)
    sink.start()
    while not run.done:
        sink.update()
        time.sleep(0.01)
    sink.finish()  # as the run's writer thread does once the run has ended
    renders.assert_final_once_and_last(thread=threading.current_thread().name)
    _after_the_end(sink, renders)
    assert sink.run is None  # it let go of the run


def test_a_sweeps_view_renders_its_final_state_once_and_last() -> None:
    sweep = nito_nb.sweep(
        ["a"], model="sim/chat", rates=[20, 40], max_requests=2, progress=False, **FAST
    )
    view = SweepView(sweep)
    renders = Renders(view)
    view.start()
    view.update()
    view.finish()  # as the sweep's thread does once its last rate has ended
    renders.assert_final_once_and_last(thread=threading.current_thread().name)
    _after_the_end(view, renders)
    assert view.button.disabled and "summary" in view.html.value


def test_every_live_output_implements_the_protocol_through_the_one_lifecycle() -> None:
    for output in OUTPUTS:
        assert issubclass(output, LiveSink), output
        for name in ("start", "update", "finish", "close"):  # none of them re-implemented
            assert getattr(output, name) is getattr(LiveSink, name), (output, name)
    shown = StreamView(nito_nb.read_sse(b"data: [DONE]\n\n"))
    assert isinstance(shown, LiveOutput) and isinstance(TerminalDisplay(object()), LiveOutput)


def test_no_other_class_of_the_package_is_a_live_output() -> None:
    # Found on the source: a LiveSink's subclass not listed above, or a class with an update()
    # and a finish() of its own (a live output outside the protocol), fails here.
    names = {output.__name__ for output in OUTPUTS}
    subclasses, own_lifecycles = set(), set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            if any(ast.unparse(base).split(".")[-1] == "LiveSink" for base in node.bases):
                subclasses.add(node.name)
            methods = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
            if {"update", "finish"} <= methods and node.name not in ("LiveSink", "LiveOutput"):
                own_lifecycles.add(f"{module}.{node.name}")
    assert subclasses == names
    assert own_lifecycles == set(NOT_OUTPUTS)
