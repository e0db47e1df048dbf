"""While a run's writer computes result rows, the GIL's switch interval is short (runs/_gil.py),
and it is put back afterwards, whatever happens."""

from __future__ import annotations

import sys
import threading

import pytest

import nito_nb._frame
from nito_nb.runs import _gil
from nito_nb.runs._results import result_rows


class _Stop(Exception):
    pass


def test_rows_are_computed_with_a_short_switch_interval_then_it_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    before = sys.getswitchinterval()
    seen = []

    def frame(streams):  # type: ignore[no-untyped-def]
        seen.append(sys.getswitchinterval())
        raise _Stop  # a failing batch must restore it too

    monkeypatch.setattr(nito_nb._frame, "frame", frame)
    with pytest.raises(_Stop):
        result_rows([], "run")
    assert seen and seen[0] < before / 2  # the sending loop waited up to `before` for the GIL
    assert sys.getswitchinterval() == before


def test_overlapping_writers_restore_the_first_value_once_the_last_ends() -> None:
    before = sys.getswitchinterval()
    first_in, second_out = threading.Event(), threading.Event()
    during = []

    def writer() -> None:
        with _gil.loop_first():
            first_in.set()
            second_out.wait(5)
            during.append(sys.getswitchinterval())

    thread = threading.Thread(target=writer)
    thread.start()
    assert first_in.wait(5)
    with _gil.loop_first():
        assert sys.getswitchinterval() == _gil.WRITER_SWITCH_INTERVAL
    second_out.set()  # the second writer ended first: still short for the first one
    thread.join(5)
    assert during == [_gil.WRITER_SWITCH_INTERVAL]
    assert sys.getswitchinterval() == before
