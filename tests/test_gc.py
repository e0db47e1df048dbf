"""What streams and runs leave to Python's cyclic garbage collector (_runs/gc.py): its full passes
stop every thread, the sending loop's too, for tens of milliseconds per 100,000 objects."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nito_nb
from nito_nb import _last as nito_nb_last
from nito_nb import _stream_results

FAST = {"sim": {"tps": 0, "ttft_ms": 0}}


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """gc.garbage of what becomes cyclic garbage during the test (DEBUG_SAVEALL), then cleared."""
    # An earlier test's run kept by nito_nb.last() is let go of now, not when this test's run
    # replaces it: one with failed requests (their exceptions' tracebacks are cycles) would be
    # this test's garbage.
    nito_nb_last.remember(None)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_an_ended_stream_leaves_no_reference_cycle(saved_garbage: list[object]) -> None:
    # httpx's streamed Response and its body point at each other; unbroken, each stream left
    # about 46 objects (its request, connection, h11 state...) for a full GC pass to find.
    # (A stream that fails keeps its exception, whose traceback makes a cycle: not measured here,
    # failures are rare in a run.)
    async def some() -> None:
        for i in range(5):
            await nito_nb.astream(f"async {i}", model="sim/chat", **FAST).wait()

    asyncio.run(some())
    for i in range(5):
        nito_nb.stream(f"sync {i}", model="sim/chat", **FAST).wait()
    gc.collect()
    left = [type(o).__module__ + "." + type(o).__qualname__ for o in saved_garbage]
    # Nor the client's own: a pushed body and its socket stream referred to each other, and the
    # cycle held the Stream's state and log (a run with a store kept every stream's bytes).
    ours = (
        "httpx.",
        "httpcore.",
        "h11.",
        "nito_nb._transport.",
        "nito_nb._core.",
        "nito_nb._stream",
    )
    assert not [name for name in left if name.startswith(ours)], sorted(set(left))


@pytest.mark.spawns
@pytest.mark.parametrize("how", ["asyncio", "store", "processes", "sweep"])
def test_a_dropped_run_is_freed_at_once_not_by_a_full_gc_pass(
    how: str, tmp_path: Path, saved_garbage: list[object]
) -> None:
    # A Run held a future resolved with itself, and its loop thread held its bound methods: each
    # a cycle, so a Run the user dropped, with all its streams, waited for a full GC pass. After
    # a run a gen-2 pass rarely comes: six runs of 1,000 requests in a row grew the process by
    # 80 MB each (bench/bench_load.py's runs, one after the other).
    options: dict[str, Any] = {"model": "sim/chat", "progress": how == "asyncio", **FAST}
    if how == "store":
        options["store"] = str(tmp_path / "runs")
    if how == "processes":
        options.update(engine="processes", workers=1)
    if how == "sweep":
        made: Any = nito_nb.sweep(["a", "b"], rates=[20, 40], duration=0.2, **options)
    else:
        made = nito_nb.run([f"q{i}" for i in range(6)], concurrency=3, **options)
    made.wait(timeout=120)
    assert made.error is None
    runs = made.runs if how == "sweep" else [made]
    assert runs and all(run.results()["status"].eq("done").all() for run in runs)
    dropped = [weakref.ref(made), *(weakref.ref(run) for run in runs)]
    del made, runs
    nito_nb_last.remember(None)  # nito_nb.last() keeps the last run on purpose
    assert [ref() for ref in dropped] == [None] * len(dropped)  # freed by reference counting alone
    gc.collect()
    left = {type(o).__module__ + "." + type(o).__qualname__ for o in saved_garbage}
    assert not {name for name in left if name.startswith("nito_nb.")}, sorted(left)


def test_a_run_freezes_what_is_old_and_gives_it_back_when_the_last_run_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the runs do to the collector, recorded: the freeze count alone cannot tell, because a
    # frozen object is still freed when nothing refers to it (a run that ended lets go of its
    # loop and tasks), so the count may fall while nothing was given back (it did, in the suite).
    calls: list[str] = []
    freeze, unfreeze = gc.freeze, gc.unfreeze
    monkeypatch.setattr(gc, "freeze", lambda: (calls.append("freeze"), freeze())[1])
    monkeypatch.setattr(gc, "unfreeze", lambda: (calls.append("unfreeze"), unfreeze())[1])
    assert gc.get_freeze_count() == 0
    paced = {"sim": {"tps": 200, "ttft_ms": 0}}
    first = nito_nb.run(
        [f"a{i}" for i in range(6)], model="sim/echo", concurrency=2, progress=False, **paced
    )
    assert gc.get_freeze_count() > 0  # what existed before the run: no full pass walks it meanwhile
    second = nito_nb.run(
        [f"b{i} " + "word " * 40 for i in range(30)],
        model="sim/echo",
        concurrency=2,
        progress=False,
        **paced,
    )  # about 3 s: batches are recorded every second
    try:
        first.wait(timeout=60)
        assert "unfreeze" not in calls and gc.get_freeze_count() > 0  # the second run still goes
        calls.clear()
        while second.stats()["finished"] == 0:  # requests finished: what they left is frozen too
            time.sleep(0.01)
        deadline = time.monotonic() + 30
        while "freeze" not in calls and not second.done and time.monotonic() < deadline:
            time.sleep(0.01)
        assert calls and set(calls) == {"freeze"} and not second.done
    finally:
        second.wait(timeout=60)
    assert calls.count("unfreeze") == 1 and calls[-1] == "unfreeze" and gc.get_freeze_count() == 0
    assert first.error is None and second.error is None


def test_a_run_that_fails_to_start_gives_everything_back() -> None:
    with pytest.raises(nito_nb.ConfigurationError):
        nito_nb.run(["x"], model="sim/echo", concurrency=0, progress=False)
    assert gc.get_freeze_count() == 0


def _held_by(root: object, skip: tuple[object, ...]) -> list[object]:
    """Every object ``root`` holds, through anything but modules, types, functions and ``skip``
    (what many requests share: the run's client, the event loop)."""
    import types

    seen: set[int] = {id(s) for s in skip}
    out: list[object] = []
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(
            obj, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
        ):
            continue
        seen.add(id(obj))
        out.append(obj)
        todo.extend(gc.get_referents(obj))
    return out


def test_a_kept_request_holds_its_log_and_answer_not_its_transport() -> None:
    # A run without a store keeps every Stream for run.frame(): each held its network stream,
    # pushed body, reader task and futures, a threading.Event and its log's room to grow, 1.6x
    # its body per request in all (bench/bench_runs_floor.py; the target is 1.2x).
    run = nito_nb.run(
        [f"q{i}" for i in range(4)], model="sim/chat", concurrency=2, progress=False, **FAST
    )
    run.wait(timeout=60)
    assert run.results()["status"].eq("done").all()
    kept = run._writer.kept_streams()
    assert len(kept) == 4
    for stream in kept.values():
        # shared by every request: the run's client, and the Event every settled Stream shares
        shared = (stream._route.client, _stream_results._SETTLED)
        held = _held_by(stream, shared)
        names = {type(o).__module__ + "." + type(o).__qualname__ for o in held}
        transport = sorted(
            n for n in names if n.startswith(("httpx.", "httpcore.", "h11.", "nito_nb._transport."))
        )
        assert not transport, transport
        assert not [o for o in held if isinstance(o, (asyncio.Future, threading.Condition))]
        raw = stream.log.body  # what the log holds: its bytes, without room to grow
        grown = [o for o in held if isinstance(o, bytearray) and sys.getsizeof(o) > len(o) + 64]
        assert not grown, [(len(o), sys.getsizeof(o)) for o in grown]
        assert len(raw) > 1000


def test_a_run_lets_the_young_pass_wait_and_puts_the_threshold_back() -> None:
    # At Python's 700 the young pass ran every few requests of a run, to free nothing: 75-95 µs of
    # the sending loop per sim/chat request at concurrency 64 (_runs/gc.py).
    before = gc.get_threshold()
    assert before[0] < 10_000
    paced = {"sim": {"tps": 200, "ttft_ms": 0}}
    run = nito_nb.run(
        [f"t{i} " + "word " * 20 for i in range(4)],
        model="sim/echo",
        concurrency=2,
        progress=False,
        **paced,
    )
    seen = {gc.get_threshold()[0]}  # the run has begun: its writer took the collector
    run.wait(timeout=60)
    assert run.error is None
    assert min(seen) >= 10_000, seen  # _runs/gc.py's YOUNG_THRESHOLD
    assert gc.get_threshold() == before  # the last run's end puts it back

    # a threshold of the program's own above it (or 0: the collector off) is left alone
    try:
        gc.set_threshold(50_000, *before[1:])
        nito_nb.run(["u"], model="sim/echo", progress=False, **FAST).wait(timeout=60)
        assert gc.get_threshold()[0] == 50_000
    finally:
        gc.set_threshold(*before)
