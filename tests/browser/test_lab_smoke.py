"""The browser harness itself works: live output updates, the XSS sentinel, widget comms.

None of this needs nito_nb; it is what the _magic/widget/screenshot tests build on.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

from .lab import XSS_PAYLOAD, Lab, take_screenshot

GROW = """\
import time
from IPython.display import Pretty, display

h = display(Pretty("grow:"), display_id=True)
for k in range(1, 11):
    time.sleep(0.3)
    h.update(Pretty("grow:" + "".join(f" {j}" for j in range(1, k + 1))))
"""
FINAL = "grow: 1 2 3 4 5 6 7 8 9 10"


def test_display_id_updates_are_seen_live(lab: Lab) -> None:
    lab.write_notebook("grow", [GROW])
    nb = lab.open("grow")
    nb.run_cell(0)
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = nb.output_text(0)
        if text.startswith("grow:") and (not seen or text != seen[-1]):
            seen.append(text)
        if text == FINAL:
            break
        time.sleep(0.05)
    nb.wait_cell_done(0)
    assert nb.output_text(0) == FINAL
    # Sampled while running: several intermediate states, each extending the previous one.
    assert len(seen) >= 4, seen
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(seen)), seen


ESCAPED = f"""\
import html
from IPython.display import HTML, display
display(HTML(html.escape({XSS_PAYLOAD!r})))
"""
RAW = f"""\
from IPython.display import HTML, display
display(HTML({XSS_PAYLOAD!r}))
"""


def test_xss_sentinel_detects_execution(lab: Lab) -> None:
    lab.write_notebook("xss", [ESCAPED, RAW])
    nb = lab.open("xss")
    nb.run_cell(0, wait=True)
    assert nb.output_text(0) == XSS_PAYLOAD  # shown as text...
    # ...and inert. The raw control below fires within milliseconds of rendering; 0.5 s is ample.
    time.sleep(0.5)
    nb.assert_no_xss()

    # Control: the same payload unescaped does run (trusted live output, see docs/JUPYTER.md),
    # so an undefined sentinel above means "escaped", not "the sentinel cannot see anything".
    nb.run_cell(1, wait=True)
    nb.page.wait_for_function("() => window.__xss === 1 && window.__xss2 === 1", timeout=10_000)
    assert nb.xss_sentinels() == [1, 1]


WIDGET = """\
import ipywidgets as w

clicks = 0
out = w.HTML(value="<b>clicks: 0</b>")
btn = w.Button(description="Click me")

def on_click(_):
    global clicks
    clicks += 1
    out.value = f"<b>clicks: {clicks}</b>"

btn.on_click(on_click)
display(w.VBox([btn, out]))
"""


def test_widget_button_callback_round_trip(lab: Lab) -> None:
    lab.write_notebook("widget", [WIDGET])
    nb = lab.open("widget")
    nb.run_cell(0, wait=True)
    button = nb.cell(0).get_by_role("button", name="Click me")
    html = nb.cell(0).locator(".widget-html-content")
    html.get_by_text("clicks: 0").wait_for()  # the widget rendered: its model reached the page
    button.click()
    html.get_by_text("clicks: 1").wait_for(timeout=10_000)  # kernel callback ran, update came back
    button.click()
    html.get_by_text("clicks: 2").wait_for(timeout=10_000)
    assert html.inner_text().strip() == "clicks: 2"


PROBE = """\
import os, sys
print(sys.executable, os.environ.get("NITO_HARNESS_PROBE"), os.environ["HOME"] != os.path.expanduser("~root"))
"""


def test_kernel_is_our_python_with_per_test_env(lab: Lab) -> None:
    lab.write_notebook("probe", [PROBE])
    nb = lab.open("probe", kernel_env={"NITO_HARNESS_PROBE": "42"})
    nb.run_cell(0, wait=True)
    assert nb.output_text(0) == f"{sys.executable} 42 True"


def test_take_screenshot_runs_all_cells(lab: Lab, tmp_path: Path) -> None:
    shot = take_screenshot(lab, ["x = 6 * 7", "print(x)"], tmp_path / "shot.png", when="done")
    assert shot.read_bytes().startswith(b"\x89PNG")
    nb = lab.pages[-1]
    assert nb.output_text(1) == "42"  # cell 1 ran after cell 0: Run All, in order
