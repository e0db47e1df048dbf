"""Every count a caller gives follows one rule (``nito_nb/_core/counts.py`` ``whole``): workers,
per_worker, concurrency, repeats, max_requests, max_retries, max_event_size and a request's
max_tokens, max_completion_tokens and n. A bool, a fraction, a string, a number under the bound
(or None where there is no default) is refused in one line that names the parameter, before any
worker, simulator process or request starts; a numpy integer (``np.int64(2)``, a count computed
from a frame) is taken, as an ``int``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest

import nito_nb
from nito_nb._runs import plan as _plan
from nito_nb._runs import runner as _runner

FAST: dict[str, Any] = {"progress": False, "sim": {"tps": 0, "ttft_ms": 0}}
BAD = [True, 0, -1, 2.5, "3"]


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Run starts the simulator's process first, then the store, the engine's workers (or Ray)
    and the requests: a count refused before that refuses it before all of them."""

    def started() -> Any:
        raise AssertionError("the run got past its checks: the simulator's process was started")

    monkeypatch.setattr(_runner, "simulator_apart", started)


def _run(**options: Any) -> Any:
    return nito_nb.run(["a"], model="sim/chat", **FAST, **options)


def _sweep(**options: Any) -> Any:
    return nito_nb.sweep(
        ["a"], model="sim/chat", rates=[100], **{"max_requests": 1, **FAST, **options}
    )


def _map(**options: Any) -> Any:
    return nito_nb.map(["a"], model="sim/chat", **FAST, **options)


class _Sent:
    """A client whose requests would go to a transport that records them (none should)."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, **params: Any) -> Any:
        http = httpx.Client(transport=httpx.MockTransport(self._record))
        with nito_nb.Client(base_url="http://127.0.0.1:9/v1", http_client=http) as client:
            try:
                return client.stream("hi", model="m", **params)
            finally:
                http.close()
                assert self.requests == []

    def _record(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(500)


def _client(**options: Any) -> Any:
    with nito_nb.Client(**options) as client:
        return client


async def _async_client(**options: Any) -> Any:
    async with nito_nb.AsyncClient(**options) as client:
        return client


#: (where, the parameter, a call with it, the bound, whether None is refused)
CASES: list[tuple[str, str, Callable[..., Any], int, bool]] = [
    ("run", "concurrency", _run, 1, False),
    ("run", "repeats", _run, 1, True),
    ("run", "max_retries", _run, 0, True),
    ("run", "max_tokens", _run, 1, False),
    ("run", "max_completion_tokens", _run, 1, False),
    ("run", "n", _run, 1, False),
    ("run rate=", "max_requests", lambda **o: _run(rate=100, **o), 1, False),
    ("run processes", "workers", lambda **o: _run(engine="processes", **o), 1, False),
    ("run processes", "per_worker", lambda **o: _run(engine="processes", **o), 1, False),
    ("run ray", "workers", lambda **o: _run(engine="ray", **o), 1, False),
    ("run ray", "per_worker", lambda **o: _run(engine="ray", **o), 1, False),
    ("sweep", "concurrency", _sweep, 1, False),
    ("sweep", "max_requests", _sweep, 1, False),
    ("sweep", "repeats", _sweep, 1, True),
    ("map", "concurrency", _map, 1, False),
    ("Client", "max_retries", _client, 0, True),
    ("Client", "max_event_size", _client, 1, True),
    ("Client.stream", "max_event_size", _Sent(), 1, False),
    ("Client.stream", "max_tokens", _Sent(), 1, False),
    ("Client.stream", "n", _Sent(), 1, False),
    ("stream", "max_tokens", lambda **o: nito_nb.stream("hi", model="sim/chat", **o), 1, False),
]


def _bad_values() -> Iterator[Any]:
    for where, name, call, at_least, none_refused in CASES:
        for value in [*BAD, *([None] if none_refused else [])]:
            if value == 0 and at_least == 0:  # max_retries=0: no retry, a whole number
                value = -2
            yield pytest.param(name, call, at_least, value, id=f"{where}-{name}-{value!r}")


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(("name", "call", "at_least", "value"), list(_bad_values()))
def test_a_bad_count_is_one_line_naming_it(
    name: str, call: Callable[..., Any], at_least: int, value: Any
) -> None:
    with pytest.raises(nito_nb.ConfigurationError) as caught:
        call(**{name: value})
    message = str(caught.value)
    assert message.startswith(f"{name} must be a whole number >= {at_least}, not {value!r}")
    assert "\n" not in message


def test_the_async_client_refuses_the_same_counts() -> None:
    for name, at_least in (("max_retries", 0), ("max_event_size", 1)):
        for value in (True, -1, 2.5, "3", None):
            with pytest.raises(
                nito_nb.ConfigurationError, match=f"^{name} must be a whole number >= {at_least}, "
            ):
                asyncio.run(_async_client(**{name: value}))


def test_hints_after_the_sentence_are_kept() -> None:
    with pytest.raises(
        nito_nb.ConfigurationError,
        match=r"^max_event_size must be a whole number >= 1, not 0; "
        r"it is a number of bytes, 67,108,864 \(64 MiB\) by default$",
    ):
        _client(max_event_size=0)


@pytest.mark.usefixtures("nothing_starts")
def test_a_value_with_a_long_repr_is_shown_on_one_short_line() -> None:
    frame = pd.DataFrame({"a": range(100), "b": range(100)})
    with pytest.raises(nito_nb.ConfigurationError) as caught:
        _run(concurrency=frame)
    message = str(caught.value)
    assert message.startswith("concurrency must be a whole number >= 1, not ") and message.endswith(
        "…"
    )
    assert "\n" not in message and len(message) < 120


@pytest.mark.usefixtures("nothing_starts")
def test_numpy_bools_and_floats_are_refused_as_python_ones_are() -> None:
    for value in (np.bool_(True), np.float64(2.0), np.array([2])):
        with pytest.raises(
            nito_nb.ConfigurationError, match=r"^repeats must be a whole number >= 1"
        ):
            _run(repeats=value)


# -- numpy integers are taken, as ints -------------------------------------------------------------


def test_a_run_takes_numpy_counts_as_ints() -> None:
    two = np.int64(2)
    run = _run(concurrency=two, repeats=two, max_retries=two, max_tokens=two).wait(timeout=60)
    assert run.error is None and run.concurrency == 2 and type(run.concurrency) is int
    assert (run.results()["status"] == "done").tolist() == [True, True]
    params = run.plan.requests[0].params
    assert params["max_tokens"] == 2 and type(params["max_tokens"]) is int  # sent as JSON
    # The same key as with a Python int: a store resumes it.
    same = _plan.plan(
        "a",
        template=None,
        models=["sim/chat"],
        repeats=2,
        params={"max_tokens": 2, "sim": FAST["sim"]},
    )
    assert [r.key for r in run.plan.requests] == [r.key for r in same.requests]


def test_a_load_run_and_a_sweep_take_a_numpy_max_requests() -> None:
    run = _run(rate=100, max_requests=np.int64(2)).wait(timeout=60)
    assert run.error is None and len(run.results()) == 2
    sweep = _sweep(max_requests=np.int64(2), concurrency=np.int64(2)).wait(timeout=60)
    assert sweep.error is None and len(sweep.runs[0].results()) == 2


def test_numpy_workers_and_per_worker_are_counts() -> None:
    # Taken, then refused by the machine's own limit (before any process starts): as a count.
    with pytest.raises(
        nito_nb.ConfigurationError, match=r"^workers=1000000 is more local processes"
    ):
        _run(engine="processes", workers=np.int64(10**6), per_worker=np.int64(2))


def test_a_client_takes_numpy_counts_as_ints() -> None:
    client = _client(max_retries=np.int64(2), max_event_size=np.int64(4096))
    assert (client.max_retries, client.max_event_size) == (2, 4096)
    assert type(client.max_retries) is int and type(client.max_event_size) is int
    s = nito_nb.stream(
        "hi",
        model="sim/chat",
        max_tokens=np.int64(2),
        max_event_size=np.int64(4096),
        sim=FAST["sim"],
    ).wait(timeout=60)
    assert s.status == "done" and type(s.request["params"]["max_tokens"]) is int
