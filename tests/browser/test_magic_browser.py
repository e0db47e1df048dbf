"""%%nito in a real JupyterLab (Debian Chromium): the answer grows live, formatted, and stays inert.

The README screenshot of a live answer is taken here too, but written only when NITO_SCREENSHOT is
set (``NITO_SCREENSHOT=1 .venv/bin/python -m pytest tests/browser/test_magic_browser.py``), so that
running the suite never dirties the tree.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from .lab import XSS_PAYLOAD, take_screenshot

ROOT = Path(__file__).resolve().parents[2]
SLOW = "--param sim='{\"tps\": 60}'"  # sim/chat then takes about 4.5 s: long enough to watch


def test_answer_streams_in_live_as_markdown(lab: Any) -> None:
    lab.write_notebook(
        "live",
        [
            "%load_ext nito_nb",
            f"%%nito -m sim/chat {SLOW}\nExplain streaming",
            "%%nito -m sim/reasoning\nThink first",
            "schema = {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': "
            "{'city': {'type': 'string'}}}}",
            "%%nito -m sim/tools --tools schema\nWeather?",
        ],
    )
    nb = lab.open("live", kernel_env={"NITO_SIM_TPS": "0", "NITO_SIM_TTFT_MS": "0"})
    nb.run_cell(0, wait=True)
    start = time.monotonic()
    nb.run_cell(1)
    samples: list[tuple[float, int]] = []
    while not nb.prompt(1).startswith("[") or nb.prompt(1) == "[*]:":
        samples.append((time.monotonic() - start, len(nb.output_text(1))))
        assert time.monotonic() - start < 60, f"not done: {samples[-5:]}"
        time.sleep(0.2)
    nb.wait_cell_done(1)
    lengths = [n for _, n in samples if n]
    growth = sorted(set(lengths))
    # Seen growing: several distinct partial lengths before the end. (The text may shrink by a few
    # characters between samples: the status line's figures change width, a table's tail re-lays.)
    assert len(growth) >= 5, samples
    assert all(b >= 0.95 * a for a, b in itertools.pairwise(lengths)), samples
    final = nb.output_text(1)
    assert "Tip: when a stream fails halfway" in final
    assert "✓ done" in final and "TTFT" in final
    page = nb.output_html(1)
    assert "<h2" in page and "<table" in page and 'class="nito-code' in page  # rendered Markdown
    assert len(lengths) and lengths[0] < len(final) / 2  # the first sample was a partial answer

    nb.run_cell(2, wait=True)
    assert nb.cell(2).locator(".jp-Cell-outputArea details").count() >= 1  # reasoning, collapsed
    assert "Reasoning" in nb.output_text(2)
    nb.run_cell(3, wait=True)
    nb.run_cell(4, wait=True)
    assert "tool call get_weather" in nb.output_text(4).lower()
    nb.assert_no_xss()


# The same front-end components in Notebook 7's own shell: the safety bar and the stop button there.
APPS = ["lab", "notebook7"]


@pytest.mark.parametrize("app", APPS)
def test_hostile_answer_stays_inert(app: str, request: pytest.FixtureRequest) -> None:
    lab = request.getfixturevalue(app)
    hostile = (
        f"{XSS_PAYLOAD}\n\n[click me](javascript:window.__xss=1)\n\n"
        "```html\n<div>shown literally</div>\n```"
    )
    lab.write_notebook(
        "hostile",
        [
            "%load_ext nito_nb",
            f"%%nito -m sim/echo --no-interpolate\n{hostile}",
            f"%%nito -m sim/echo,sim/echo --no-interpolate\n{XSS_PAYLOAD}",
        ],
    )
    nb = lab.open("hostile", kernel_env={"NITO_SIM_TPS": "0", "NITO_SIM_TTFT_MS": "0"})
    nb.run_all(wait=True)
    time.sleep(0.5)  # an onerror would fire as soon as the (non-)image failed to load
    nb.assert_no_xss()
    text = nb.output_text(1)
    assert "<img src=x onerror=" in text and "<script>" in text  # shown as text
    assert "<div>shown literally</div>" in text
    area = nb.cell(1).locator(".jp-Cell-outputArea")
    assert area.locator("img, script").count() == 0
    assert area.locator('a[href^="javascript"]').count() == 0
    assert "<img src=x onerror=" in nb.output_text(2)
    assert nb.cell(2).locator(".jp-Cell-outputArea img, .jp-Cell-outputArea script").count() == 0


def test_readme_screenshot(lab: Any, tmp_path: Path) -> None:
    target = (
        ROOT / "docs" / "screenshot.png"
        if os.environ.get("NITO_SCREENSHOT")
        else tmp_path / "shot.png"
    )
    lab.viewport = (1000, 900)
    lab.device_scale_factor = 2  # crisp on high-density screens
    path = take_screenshot(
        lab,
        [
            "%load_ext nito_nb",
            "%%nito -m sim/chat --temperature 0.2\nHow does a streaming chat completion work?",
        ],
        target,
        when=6.5,  # mid-answer: past the list, into the code block
        kernel_env={"NITO_SIM_TPS": "30", "NITO_SIM_TTFT_MS": "400"},
    )
    nb = lab.pages[-1]
    live = nb.output_text(1)
    assert "● streaming" in live, live[-300:]  # taken mid-stream
    assert path.stat().st_size > 10_000
    nb.wait_cell_done(1, 60)
    assert "✓ done" in nb.output_text(1)


@pytest.mark.parametrize("app", APPS)
def test_stop_button_keeps_the_partial_answer(app: str, request: pytest.FixtureRequest) -> None:
    lab = request.getfixturevalue(app)
    lab.write_notebook(
        "stop",
        [
            "%load_ext nito_nb",
            "%%nito -m sim/chat --param sim='{\"tps\": 30}'\nExplain streaming",
            "print(_nito.status, len(_nito.content))",
        ],
    )
    nb = lab.open("stop", kernel_env={"NITO_SIM_TTFT_MS": "0"})
    nb.run_cell(0, wait=True)
    nb.run_cell(1)
    deadline = time.monotonic() + 30
    while "gateway" not in nb.output_text(1):
        assert time.monotonic() < deadline, nb.output_text(1)
        time.sleep(0.1)
    # The toolbar's stop button: the kernel's interrupt, as a user would press it.
    nb.click('.jp-NotebookPanel-toolbar [data-command="notebook:interrupt-kernel"]')
    nb.wait_cell_done(1, 30)
    stopped = nb.output_text(1)
    assert "■ stopped" in stopped and "gateway" in stopped
    assert "Tip: when a stream fails halfway" not in stopped  # really cut short
    time.sleep(1.0)
    assert nb.output_text(1) == stopped  # nothing arrives after the stop
    nb.run_cell(2, wait=True)
    status, length = nb.output_text(2).split()
    assert status == "stopped" and 0 < int(length) < 1309


def test_a_stall_keeps_the_status_clock_moving_on_the_page(lab: Any) -> None:
    # sim/stall: 30 tokens, then STALL_S seconds of silence, then the rest. On the page, the
    # status line's elapsed time keeps moving during the silence (it froze before issue 12), and
    # the text that came before it stays shown.
    stall_s = 6.0
    lab.write_notebook(
        "stall",
        ["%load_ext nito_nb", '%%nito -m sim/stall --param sim=\'{"stall_s": 6, "tps": 100}\'\nx'],
    )
    nb = lab.open("stall", kernel_env={"NITO_SIM_TTFT_MS": "0"})
    nb.run_cell(0, wait=True)
    start = time.monotonic()
    nb.run_cell(1)
    samples: list[tuple[float, str]] = []
    while not nb.prompt(1).startswith("[") or nb.prompt(1) == "[*]:":
        samples.append((time.monotonic() - start, nb.output_text(1)))
        assert time.monotonic() - start < 60, f"not done: {samples[-3:]}"
        time.sleep(0.1)
    nb.wait_cell_done(1)
    during = [
        (at, float(match[1]))
        for at, text in samples
        if (match := re.search(r"(\d+\.\d+) s so far", text))
        and "Tip:" not in text
        and "short" in text
    ]
    clocks = sorted({value for _, value in during})
    assert len(clocks) >= stall_s / 1.5, during
    assert max(b - a for a, b in itertools.pairwise(clocks)) <= stall_s / 4, clocks
    assert clocks[-1] - clocks[0] >= stall_s / 2, clocks
