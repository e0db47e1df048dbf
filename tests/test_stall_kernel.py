"""Stalls in a real kernel: the iopub messages of ``%%nito`` during ``sim/stall``, with the times
they reached this process.

While the stream is open and idle, what arrived before the pause is on the page long before the
pause ends (it used to wait for the next chunk: the last ``1 / max_rate`` seconds of a burst), and
the status line's clock keeps moving (it used to freeze). One model and the side-by-side grid.
"""

from __future__ import annotations

import itertools
import json
import queue
import re
import time
from pathlib import Path
from typing import Any

import pytest
from test_magic_notebook import _execute, _kernel, kernel_env  # noqa: F401 (a fixture)

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.spawns]

STALL_S = 6.0
CLOCK = re.compile(r"(\d+\.\d+) s so far")


def _timed(kc: Any, code: str, timeout: float = 90) -> list[tuple[float, dict[str, Any]]]:
    """Every iopub message of the cell, with the moment it reached this process, until idle."""
    msg_id = kc.execute(code)
    seen: list[tuple[float, dict[str, Any]]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append((time.monotonic(), msg))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen
    raise AssertionError("the cell did not finish")


def _pages(seen: list[tuple[float, dict[str, Any]]]) -> list[tuple[float, str]]:
    """The page's text after each display message: every output, latest value, in page order."""
    outputs: dict[str, str] = {}
    pages = []
    for at, msg in seen:
        if msg["msg_type"] not in ("display_data", "update_display_data"):
            continue
        display_id = msg["content"].get("transient", {}).get("display_id") or str(len(outputs))
        outputs[display_id] = msg["content"]["data"].get("text/plain", "")
        pages.append((at, "\n".join(outputs.values())))
    return pages


def _head_and_tail(kc: Any, stream: str = "_nito") -> tuple[str, str]:
    """The answer text that came before the stall, and the text after it (from the kept Stream)."""
    code = (
        "import json\n"
        f"ev = [e for e in {stream}.log if e.kind == 'chunk' and e.chunk.get('choices')]\n"
        "cut = max(range(1, len(ev)), key=lambda i: ev[i].t - ev[i - 1].t)\n"
        "text = lambda es: ''.join(e.chunk['choices'][0].get('delta', {}).get('content') or '' for e in es)\n"
        "print(json.dumps([text(ev[:cut]), text(ev[cut:])]))"
    )
    out = "".join(
        m["content"].get("text", "") for m in _execute(kc, code) if m["msg_type"] == "stream"
    )
    head, tail = json.loads(out)
    return head, tail


def _stall_window(
    pages: list[tuple[float, str]], head: str, tail: str
) -> tuple[float, float, float]:
    """(first text of the head shown, whole head shown, first tail text shown): arrival times."""
    flat = [(at, " ".join(page.split())) for at, page in pages]  # outputs are separate blocks
    head, tail = " ".join(head.split()), " ".join(tail.split())
    started = next(at for at, page in flat if head.split()[0] in page)
    shown = next(at for at, page in flat if head in page)
    resumed = next(at for at, page in flat if tail.split()[0] in page.partition(head)[2])
    return started, shown, resumed


def _clock_values(pages: list[tuple[float, str]], since: float, until: float) -> list[float]:
    values = []
    for at, page in pages:
        if since <= at < until:
            values += [float(v) for v in CLOCK.findall(page)[:1]]
    return values


def _assert_stall_shown(pages: list[tuple[float, str]], head: str, tail: str) -> None:
    started, shown, resumed = _stall_window(pages, head, tail)
    # The pause is on the page as a pause (the tail came after about STALL_S)...
    assert resumed - started > STALL_S / 2
    # ... and everything that came before it is shown within a small part of it (the old display
    # showed the last part of the burst only with the tail).
    assert shown - started < (resumed - started) / 10
    # The status line's clock advanced during the pause, every half second or so (at least once a
    # second is the rule; the bound is the pause's sixth to leave room for a busy machine).
    clocks = _clock_values(pages, shown, resumed)
    assert len(clocks) >= STALL_S / 1.5, clocks
    assert clocks == sorted(clocks) and len(set(clocks)) == len(clocks)
    gaps = [b - a for a, b in itertools.pairwise(clocks)]
    assert max(gaps) <= STALL_S / 6, gaps


def test_a_stall_keeps_the_text_shown_and_the_clock_moving(
    tmp_path: Path,
    kernel_env: None,  # noqa: F811
) -> None:
    # 100 tokens a second: the head's last chunks come between two renders (not in one read).
    sim = json.dumps({"stall_s": STALL_S, "tps": 100})
    with _kernel(tmp_path) as (_km, kc):
        seen = _timed(kc, f"%%nito -m sim/stall --param sim='{sim}'\nanything")
        head, tail = _head_and_tail(kc)
    assert head.strip() and tail.strip()
    _assert_stall_shown(_pages(seen), head, tail)


def test_a_stall_keeps_the_grid_current_and_its_clock_moving(
    tmp_path: Path,
    kernel_env: None,  # noqa: F811
) -> None:
    # Two models side by side; the grid is a sink of the same pipeline as one model (its own
    # Throttle and refresh thread): during sim/stall's pause its column shows what came before the
    # pause long before the pause ends, and its clock moves, while the other model has finished.
    sim = json.dumps({"stall_s": STALL_S, "tps": 100})
    with _kernel(tmp_path) as (_km, kc):
        seen = _timed(kc, f"%%nito -m sim/stall,sim/echo --param sim='{sim}'\nanything")
        head, tail = _head_and_tail(kc, "_nito[0]")
    assert head.strip() and tail.strip()
    columns = [
        (
            at,
            msg["content"]["data"]["text/plain"]
            .split("== sim/stall ==", 1)[1]
            .split("== sim/echo ==", 1)[0],
        )
        for at, msg in seen
        if msg["msg_type"] in ("display_data", "update_display_data")
        and "== sim/stall ==" in msg["content"]["data"].get("text/plain", "")
    ]
    _assert_stall_shown(columns, head, tail)
