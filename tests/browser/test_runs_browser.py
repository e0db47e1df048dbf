"""A run's progress panel in a real JupyterLab: it grows, Stop ends the run within a second, and
what arrived is kept (in-flight requests recorded as stopped)."""

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
