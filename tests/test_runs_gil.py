"""While a run's writer thread makes result rows, or builds a store's events in its own process
(no helper process: the magic, or a helper that died), the GIL's switch interval is short
(_runs/gil.py), and it is put back afterwards, whatever happens."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

import nito_nb._frame
from nito_nb._runs import gil as _gil
from nito_nb._runs.events_helper import EventsHelper


class _Stop(Exception):
    pass


def test_events_are_built_with_a_short_switch_interval_then_it_is_restored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    before = sys.getswitchinterval()
    seen = []

    def events_rows(streams):  # type: ignore[no-untyped-def]
        seen.append(sys.getswitchinterval())
        raise _Stop  # a failing batch must restore it too

    monkeypatch.setattr(nito_nb._frame, "events_rows", events_rows)
    with pytest.raises(_Stop):
        EventsHelper(process=False).submit(tmp_path, "batch", "run", {})
    assert seen and seen[0] < before / 2  # the sending loop waited up to `before` for the GIL
    assert sys.getswitchinterval() == before


def test_a_runs_result_rows_are_made_with_a_short_switch_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nito_nb
    from nito_nb._runs import writer as _record

    before = sys.getswitchinterval()
    seen = []
    real = _record.result_rows

    def result_rows(*args: Any) -> Any:
        seen.append(sys.getswitchinterval())
        return real(*args)

    monkeypatch.setattr(_record, "result_rows", result_rows)
    run = nito_nb.run(["a", "b"], model="sim/echo", progress=False, sim={"tps": 0})
    run.wait(timeout=60)
    assert len(run.results()) == 2
    assert seen and all(value == _gil.WRITER_SWITCH_INTERVAL for value in seen)
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
