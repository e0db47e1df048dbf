"""What the live view costs a real kernel per message, and the order in which messages arrive.

ipykernel flushes stdout and stderr before every display message; each flush is a round trip to
its IOPub thread, made even when nothing was printed, and with the stream's reader thread holding
the GIL it was most of the display's cost in a short cell (bench/bench_magic.py --kernel). The
live view skips the flushes that would send nothing (``_display/iopub.py``): these tests count the
flushes a ``%%nito`` cell makes, and check that text printed before an output still arrives
before it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_magic_notebook import _execute, _kernel, kernel_env  # noqa: F401 (a fixture)

#: Every test here starts a kernel: `make check` leaves them to `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.spawns]

#: Counts every OutStream.flush the kernel makes (each waits for the IOPub thread unless it runs
#: there), from the moment the list is cleared.
COUNT_FLUSHES = """
import threading
from ipykernel.iostream import OutStream as _Out
_flushes = []
_flush = _Out.flush
def _counted(self):
    if threading.current_thread() is not self.pub_thread.thread:
        _flushes.append(self.name)
    return _flush(self)
_Out.flush = _counted
"""


def _display_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]


def _flushes_during(kc: Any, code: str) -> tuple[int, list[dict[str, Any]]]:
    """The flushes that waited for the IOPub thread while ``code`` ran (with those of the cells
    around it, the same for every ``code``), and the messages of its cell."""
    _execute(kc, "_flushes.clear()")
    messages = _execute(kc, code)
    printed = [
        m["content"]["text"]
        for m in _execute(kc, "print(len(_flushes))")
        if m["msg_type"] == "stream"
    ]
    return int("".join(printed)), messages


def test_the_live_view_makes_no_flush_when_nothing_was_printed(
    tmp_path: Path,
    kernel_env: None,  # noqa: F811
) -> None:
    # About a second of sim/long at a model's pace: a few dozen renders, each one or two messages.
    sim = json.dumps({"chunks": 600, "tps": 600, "ttft_ms": 0})
    with _kernel(tmp_path) as (_, kc):
        _execute(kc, COUNT_FLUSHES)
        cell = f"%%nito -m sim/long --param sim='{sim}'\nGo."
        _execute(kc, cell)  # once first: what a first use prints (a warning) is not counted
        baseline, _ = _flushes_during(kc, "x = 1")
        flushes, messages = _flushes_during(kc, cell)
        shown = _display_messages(messages)
        assert len(shown) >= 10, [m["msg_type"] for m in messages]  # the view was live
        texts = [m["content"]["data"]["text/plain"] for m in shown]
        assert any(text.startswith("● streaming") for text in texts)
        assert any(text.startswith("✓ done") for text in texts)
        # Before: two flushes (stdout, stderr) per display message, each a round trip.
        assert flushes == baseline, (flushes, baseline, len(shown))
        # Something printed in the cell is flushed before the output that follows it: the error
        # line of a failed stream comes after its final render (it is printed after it).
        flushes, messages = _flushes_during(kc, "%%nito -m sim/error-midstream\nBreak halfway")
        kinds = [m["msg_type"] for m in messages if m["msg_type"] != "status"]
        assert "stream" in kinds and kinds.index("stream") > max(
            i for i, kind in enumerate(kinds) if kind.endswith("display_data")
        ), kinds


def test_a_stream_that_ends_within_a_quarter_second_is_sent_once_final(
    tmp_path: Path,
    kernel_env: None,  # noqa: F811
) -> None:
    # A tenth of a second of sim/long: its live frames (waiting, the first words, a few more)
    # would go by unread, each a message. Its outputs are sent once, with the final state.
    sim = json.dumps({"chunks": 150, "tps": 1500, "ttft_ms": 0})
    with _kernel(tmp_path) as (_, kc):
        for _ in range(5):  # a busy machine may stretch a stream past the quarter second
            messages = _execute(kc, f"%%nito -m sim/long --param sim='{sim}'\nGo.")
            shown = _display_messages(messages)
            texts = [m["content"]["data"]["text/plain"] for m in shown]
            status = [text for text in texts if " · sim/long · " in text][-1]  # its last state
            total = re.search(r"(\d+\.\d+) s total", status)
            once = [m["msg_type"] for m in shown] == ["display_data"] * len(shown)
            if total and float(total.group(1)) < 0.2 and once:
                break
        else:  # a cell's thread that a busy machine holds back past the quarter second: not 5 times
            raise AssertionError(f"a stream of {status!r} sent {[m['msg_type'] for m in shown]}")
        assert texts[0].startswith("✓ done"), texts  # the status line, final, first
        assert len(shown) == 2 and len(texts[1]) > 100, texts  # then the whole answer


def test_text_printed_between_tool_rounds_arrives_before_the_next_round(
    tmp_path: Path,
    kernel_env: None,  # noqa: F811
) -> None:
    # --run-tools prints the line of each tool it ran, then streams the next round in new outputs:
    # the printed line is not yet sent when that round's first output goes out, so that output
    # must still flush it, or the line would land below the round it precedes.
    with _kernel(tmp_path) as (_, kc):
        _execute(
            kc,
            'def weather(city: str) -> str:\n    """Weather for a city."""\n    return "sunny"',
        )
        for _ in range(3):  # the IOPub thread's timer flushes within 0.2 s: try a few times
            messages = _execute(kc, "%%nito -m sim/tools --tools weather --run-tools\nWeather?")
            ran = [
                i
                for i, m in enumerate(messages)
                if m["msg_type"] == "stream" and "→ ran weather(" in m["content"]["text"]
            ]
            assert len(ran) == 1, [m["msg_type"] for m in messages]
            # The second round's outputs: those that end showing its answer or its finish.
            second = {
                m["content"]["transient"]["display_id"]
                for m in _display_messages(messages)
                if "finish: stop" in m["content"]["data"]["text/plain"]
                or "returned" in m["content"]["data"]["text/plain"]
            }
            assert second
            first_of_second = min(
                i
                for i, m in enumerate(messages)
                if m["msg_type"].endswith("display_data")
                and m["content"]["transient"]["display_id"] in second
            )
            assert ran[0] < first_of_second, [m["msg_type"] for m in messages]
