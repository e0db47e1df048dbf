"""A run's progress panel in a real JupyterLab: it grows, Stop ends the run within a second, and
what arrived is kept (in-flight requests recorded as stopped). A sweep's view: each rate step
live, then the summary; its Stop ends the whole sweep, keeping what arrived."""

from __future__ import annotations

import re
import time

from .lab import Lab

SETUP = """\
import nito_nb
# 40 answers of ~300 words at 50 tokens/s, 4 at a time: far longer than the test waits.
run = nito_nb.run([f"q{i} " + "word " * 300 for i in range(40)], model="sim/echo", concurrency=4,
                  sim={"tps": 50, "ttft_ms": 0})
run
"""
CHECK = """\
r = run.results()
stopped = r[r.status == "stopped"]
print(run.done, run.stopped, len(r) < 40, len(stopped) > 0, all(len(c) > 0 for c in stopped.content))
"""


def _wait(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def test_the_panels_stop_button_ends_the_run_within_a_second(lab: Lab) -> None:
    lab.write_notebook("runs", [SETUP, CHECK])
    nb = lab.open("runs")
    nb.run_cell(0, wait=True)
    panel = nb.cell(0).locator(".nito-run")
    panel.wait_for(timeout=20_000)
    head = panel.locator("div").first

    def elapsed() -> float:
        found = re.search(r"elapsed ([\d.]+) (ms|s)", head.inner_text())
        if not found:
            return 0.0
        return float(found.group(1)) / (1000 if found.group(2) == "ms" else 1)

    _wait(lambda: elapsed() >= 1.0, 20, "the panel to show the run going")  # it refreshes live
    assert head.inner_text().startswith("running:")
    nb.cell(0).locator("button", has_text="Stop").click()
    _wait(lambda: head.inner_text().startswith("stopped:"), 5, "the stopped state")
    settled = panel.inner_text()
    time.sleep(1.5)
    assert panel.inner_text() == settled, "the panel still changed after the run said stopped"
    assert nb.cell(0).locator("button", has_text="Ended").is_disabled()
    nb.run_cell(1, wait=True)
    assert nb.output_text(1) == "True True True True True"
    nb.assert_no_xss()


SWEEP = """\
import nito_nb
short = nito_nb.sweep(["a", "b"], model="sim/chat", rates=[4, 8], duration=1.0, sim={"tps": 0, "ttft_ms": 0})
"""
LONG_SWEEP = """\
# Answers of ~300 words at 50 tokens/s: the first rate is still running when Stop is clicked.
long = nito_nb.sweep([f"q{i} " + "word " * 300 for i in range(8)], model="sim/echo", rates=[2, 4], duration=4,
                     sim={"tps": 50, "ttft_ms": 0})
"""
SWEEP_CHECK = """\
r = long.results()
stopped = r[r.status == "stopped"]
print(long.done, long.stopped, long.rates, len(stopped) > 0, all(len(c) > 0 for c in stopped.content))
"""


def test_a_sweeps_view_shows_each_rate_then_the_summary_and_stop_ends_it(lab: Lab) -> None:
    lab.write_notebook("sweep", [SWEEP, LONG_SWEEP, SWEEP_CHECK])
    nb = lab.open("sweep")
    nb.run_cell(0, wait=True)  # returns at once: the rates run in the background, shown live
    view = nb.cell(0).locator(".nito-sweep")
    view.wait_for(timeout=20_000)
    head = view.locator(".nito-sweep-head")
    seen: set[str] = set()

    def step() -> bool:
        text = head.inner_text()
        seen.add(text)
        return text.startswith("sweep done")

    _wait(step, 60, "the sweep to end")
    # each step, live
    assert {"sweep running: rate 1 of 2", "sweep running: rate 2 of 2"} <= seen, seen
    steps = [
        line.split("\t") for line in view.locator(".nito-sweep-steps").inner_text().splitlines()[1:]
    ]
    assert [line[:3] for line in steps] == [["4/s", "done", "4/4"], ["8/s", "done", "8/8"]], steps
    summary = view.locator(".nito-sweep-summary")
    assert "achieved_rate" in summary.inner_text() and summary.locator("tbody tr").count() == 2
    assert head.inner_text() == "sweep done: 2 of 2 rates"
    assert nb.cell(0).locator("button", has_text="Ended").is_disabled()

    nb.run_cell(1, wait=True)
    long_view = nb.cell(1).locator(".nito-sweep")
    long_view.wait_for(timeout=20_000)
    long_head = long_view.locator(".nito-sweep-head")
    running = long_view.locator(".nito-run div").first  # the current rate's panel, live

    def elapsed() -> float:
        found = (
            re.search(r"elapsed ([\d.]+) (ms|s)", running.inner_text()) if running.count() else None
        )
        if not found:
            return 0.0
        return float(found.group(1)) / (1000 if found.group(2) == "ms" else 1)

    _wait(lambda: elapsed() >= 1.0, 20, "the first rate to run")
    assert long_head.inner_text() == "sweep running: rate 1 of 2"
    nb.cell(1).locator("button", has_text="Stop").click()
    clicked = time.monotonic()
    _wait(lambda: long_head.inner_text().startswith("sweep stopped"), 5, "the sweep to stop")
    took = time.monotonic() - clicked
    assert long_head.inner_text() == "sweep stopped: 1 of 2 rates"
    settled = long_view.inner_text()
    time.sleep(1.5)
    assert long_view.inner_text() == settled, "the view still changed after the sweep said stopped"
    # the second rate never started
    assert "not run" in long_view.locator(".nito-sweep-steps").inner_text()
    nb.run_cell(2, wait=True)
    assert nb.output_text(2) == "True True [2] True True"
    nb.assert_no_xss()
    print(f"stop took {took:.2f} s from the click to the view saying stopped")
