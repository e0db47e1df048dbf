"""The ``timeout`` of every wait(): one rule (``nito_nb/_core/waiting.py``). None waits for the
end; seconds >= 0 wait at most that long and return, the stream or run going on; anything else
is one clear line, and an infinite timeout waits for the end (it overflowed)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import nito_nb
from nito_nb._core.waiting import wait_timeout

BAD = ["10", -1, math.nan, True, [1]]


def test_the_rule() -> None:
    assert (
        wait_timeout(None) is None
        and wait_timeout(math.inf) is None
        and wait_timeout(10**400) is None
    )
    assert wait_timeout(0) == 0.0 and wait_timeout(2.5) == 2.5
    for bad in BAD:
        with pytest.raises(
            nito_nb.ConfigurationError, match=r"timeout is in seconds, a number >= 0 \(or None"
        ):
            wait_timeout(bad)


def test_a_streams_wait_checks_its_timeout_and_waits_forever_on_infinity() -> None:
    stream = nito_nb.stream("hi", model="sim/echo", sim={"tps": 0})
    for bad in BAD:
        with pytest.raises(nito_nb.ConfigurationError, match="timeout is in seconds"):
            stream.wait(timeout=bad)
    assert stream.wait(timeout=math.inf).status == "done"  # OverflowError: timestamp out of range


def test_an_async_streams_wait_checks_its_timeout() -> None:
    async def main() -> Any:
        stream = nito_nb.astream("hi", model="sim/echo", sim={"tps": 0})
        with pytest.raises(nito_nb.ConfigurationError, match="timeout is in seconds"):
            await stream.wait(timeout="x")
        return await stream.wait(timeout=math.inf)

    assert asyncio.run(main()).status == "done"


def test_a_runs_wait_returns_after_its_timeout_and_the_run_goes_on() -> None:
    # It raised concurrent.futures' TimeoutError, with an empty message.
    run = nito_nb.run(
        ["a"], model="sim/chat", progress=False, sim={"tps": 20, "ttft_ms": 0}, max_tokens=40
    )
    assert run.wait(timeout=0.3) is run and not run.done
    for bad in BAD:
        with pytest.raises(nito_nb.ConfigurationError, match="timeout is in seconds"):
            run.wait(timeout=bad)
    assert run.wait(timeout=math.inf).done and run.results()["status"].tolist() == ["done"]


def test_a_sweeps_wait_returns_after_its_timeout() -> None:
    sweep = nito_nb.sweep(
        ["a"], model="sim/chat", rates=[2], duration=1.5, progress=False, sim={"tps": 0}
    )
    sweep.stop()  # not in a kernel: sweep() returned after its rates ran
    assert sweep.wait(timeout=0.1) is sweep and sweep.done
    with pytest.raises(nito_nb.ConfigurationError, match="timeout is in seconds"):
        sweep.wait(timeout=-1)
