"""engine="processes": a run's requests sent by local worker processes; a worker killed mid-run
fails only its in-flight requests, with the reason, and the run goes on; worker times are mapped
onto the driver's timeline; a 429 on one worker pauses them all."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import nito_nb
from nito_nb._recordings import from_wire, to_wire
from nito_nb._runs import clock as _clock
from nito_nb._runs.ray import from_worker

#: Every test here starts a kernel or another process: `make check` leaves them to `make test`.
pytestmark = pytest.mark.spawns


def test_a_processes_run_gives_the_same_results_with_worker_and_node() -> None:
    prompts = [f"q{i}" for i in range(12)]
    run = nito_nb.run(
        prompts, model="sim/echo", engine="processes", workers=2, progress=False, sim={"tps": 0}
    )
    run.wait(timeout=120)
    assert run.error is None
    r = run.results()
    assert len(r) == 12 and (r["status"] == "done").all()
    assert r["content"].tolist() == prompts
    assert set(r["worker"]) == {"proc-0", "proc-1"} and r["node"].notna().all()
    assert (r["ttft"] > 0).all() and (r["e2e"] >= r["ttft"]).all()


def test_the_workers_states_are_kept_packed_and_read_as_the_threads_engine_reads_them() -> None:
    # The driver keeps what the workers send back (their ended states) as it keeps its own
    # streams: packed (ChunkLog.pack), and read whole again by the results and the frame.
    from nito_nb._recordings import from_log

    run = nito_nb.run(
        [f"q{i}" for i in range(8)],
        model="sim/chat",
        engine="processes",
        workers=2,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
        max_tokens=40,
    )
    run.wait(timeout=120)
    assert run.error is None
    kept = run._writer.kept_streams()
    assert len(kept) == 8 and all(stream.log.packed for stream in kept.values())
    results = run.results().set_index("key")
    for key, stream in kept.items():
        unpacked = from_log(stream.log)
        assert results.loc[key, "content"] == stream.content == unpacked.content != ""
        assert list(stream.log.times_ns()) == list(unpacked.log.times_ns())
    assert run.frame().groupby("stream").size().to_dict() == {
        key: len(from_log(stream.log).frame()) for key, stream in kept.items()
    }


def test_a_script_without_a_main_guard_runs_on_processes_and_its_workers_do_not_run_it_again(
    tmp_path: Path,
) -> None:
    # Workers were multiprocessing "spawn" children, which import the script as their __main__:
    # without an `if __name__ == "__main__":` guard each one ran the script's top level, started
    # the run again, multiprocessing refused, and every request failed with "every worker of the
    # run died" (after a RuntimeError traceback per worker). Now a worker runs nito_nb only.
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent("""
        import nito_nb
        print("top level of the script", flush=True)
        run = nito_nb.run([f"q{i}" for i in range(6)], model="sim/echo", engine="processes", workers=2,
                          progress=False, sim={"tps": 0})
        run.wait(timeout=120)
        r = run.results()
        print("statuses", sorted(set(r["status"])), "workers", sorted(set(r["worker"])), "error", run.error)
    """)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("top level of the script") == 1, done.stdout
    assert "statuses ['done'] workers ['proc-0', 'proc-1'] error None" in done.stdout
    assert "Traceback" not in done.stderr and "bootstrapping" not in done.stderr, done.stderr


def test_the_workers_loops_are_sampled_and_pooled_with_the_drivers(monkeypatch: Any) -> None:
    # The client of a processes run is also each worker: its loop stamps the chunks. Each reply
    # brings the worker loop's new lag samples, pooled into the run's ClientMonitor.
    from nito_nb._runs.client_load import LAG_INTERVAL, ClientMonitor, RunQueueClock

    added: list[tuple[list[float], list[float]]] = []
    waits: list[tuple[float, float]] = []
    real = ClientMonitor.add
    monkeypatch.setattr(
        ClientMonitor,
        "add",
        lambda self, lags, cpu, w=None: (
            added.append((lags, cpu)),
            waits.extend(w or ()),
            real(self, lags, cpu, w),
        ),
    )
    prompts = [f"q{i} " + "word " * 20 for i in range(8)]  # about 0.2 s each at 100 tokens/s
    run = nito_nb.run(
        prompts,
        model="sim/echo",
        engine="processes",
        workers=2,
        per_worker=1,
        progress=False,
        sim={"tps": 100, "ttft_ms": 0},
    )
    run.wait(timeout=120)
    assert run.error is None and len(added) == 8  # one batch per reply
    lags = [lag for batch, _ in added for lag in batch]
    # ~20 per 0.2 s stream
    assert len(lags) >= 8 * 0.1 / LAG_INTERVAL and all(lag >= 0 for lag in lags)
    assert set(lags) <= set(run.client.lags) or len(run.client.lags) == run.client.lags.maxlen
    # the worst loop of the run, workers included
    assert run.client.report()["client_lag_max"] >= max(lags)
    if RunQueueClock.open() is not None:  # Linux: each lag sample comes with its run-queue wait
        assert [lag for lag, _ in waits] == lags and all(0 <= wait <= lag for lag, wait in waits)


def test_an_open_loop_run_on_processes_keeps_its_schedule_columns() -> None:
    run = nito_nb.run(
        ["a", "b"],
        model="sim/chat",
        engine="processes",
        workers=2,
        rate=10,
        duration=1.0,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
    )
    run.wait(timeout=120)
    r = run.results()
    assert len(r) == 10 and (r["status"] == "done").all()
    assert r["send_delay"].notna().all() and set(r["phase"]) == {"measure"}


def test_a_killed_worker_fails_its_in_flight_requests_and_the_run_goes_on() -> None:
    sim: dict[str, Any] = {"tps": 20, "ttft_ms": 0, "seed": 1}
    run = nito_nb.run(
        [f"p{i}" for i in range(16)],
        model="sim/chat",
        engine="processes",
        workers=2,
        per_worker=4,
        concurrency=8,
        max_tokens=30,
        progress=False,
        sim=sim,
    )
    engine = run._dispatcher.engine
    assert engine is not None
    deadline = time.monotonic() + 60
    while engine._load.get("proc-1", 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(engine.pid("proc-1"), signal.SIGKILL)
    run.wait(timeout=180)
    assert run.error is None
    r = run.results()
    assert len(r) == 16 and r["key"].is_unique
    failed = r[r["status"] == "failed"]
    assert len(failed) >= 1 and (failed["worker"] == "proc-1").all()
    assert failed["error_message"].str.contains("the worker process proc-1 died").all()
    assert failed["error_message"].str.contains("exit code -9").all()
    done = r[r["status"] == "done"]
    assert len(done) == 16 - len(failed) and (done["worker"] == "proc-0").any()


# -- one timeline: worker times mapped onto the driver's (nito_nb/_runs/clock.py) ----------------


def test_a_worker_clock_far_from_the_drivers_is_mapped_and_durations_are_kept() -> None:
    # A stream streamed here, then its log "written by a worker" whose perf_counter is 10^6 s
    # ahead of ours: the same wall time, so its offset (wall - perf_counter) is 10^6 s smaller.
    stream = nito_nb.stream(
        "x", model="sim/chat", sim={"tps": 200, "ttft_ms": 20, "seed": 3}, max_tokens=8
    )
    stream.wait()
    far = 10**15
    local = _clock.offset_ns()
    assert _clock.to_local_ns(123 + far, local - far, local) == 123
    for wire in (
        to_wire(stream),
        stream.log,
    ):  # a stream as a worker sends it back: its state, or its log
        check_far_clock(stream, wire, far, local)


def check_far_clock(stream: Any, wire: Any, far: int, local: int) -> None:
    sent = pickle.loads(pickle.dumps(wire))
    sent.shift(far)  # written on a clock 10^6 s ahead
    # without the mapping: 10^6 s away from every time of ours
    naive = from_wire(pickle.loads(pickle.dumps(sent)))
    # measured now: the offsets of two processes on one machine
    back = from_worker(sent, local - far)
    assert abs(back.log.t0_ns - stream.log.t0_ns) < 10**7  # 10 ms: the two offset readings
    assert abs(back.log.headers_ns - stream.log.headers_ns) < 10**7

    def after_t0(s: Any) -> list[int]:
        return [t - s.log.t0_ns for t in s.log.times_ns()]

    # the worker's own durations
    assert after_t0(back) == after_t0(stream) and len(after_t0(stream)) > 3
    assert back.content == stream.content and back.status == "done" and back.usage == stream.usage
    assert back.ttft == stream.ttft and back.ttfb == stream.ttfb and back.elapsed == stream.elapsed
    assert [(e.kind, e.raw) for e in back.log] == [(e.kind, e.raw) for e in stream.log]
    assert naive.log.t0_ns - stream.log.t0_ns > far // 2


def test_a_hold_given_in_wall_time_waits_on_the_local_clock() -> None:
    hold = _clock.Hold()
    hold.until(time.time_ns() + 300_000_000)
    hold.until(time.time_ns())  # an earlier pause never shortens it
    t = time.perf_counter()
    asyncio.run(hold.wait())
    assert time.perf_counter() - t >= 0.29


def test_by_default_a_worker_sends_an_open_loop_on_schedule_with_many_long_streams_in_flight() -> (
    None
):
    # 100 requests/s for 1 s, each stream 2 s long: all 100 in flight on one worker at the end. A
    # default cap of 64 queued the last 36 in the worker until the first streams ended (1.4 s late).
    run = nito_nb.run(
        [f"q{i}" for i in range(10)],
        model="sim/chat",
        engine="processes",
        workers=1,
        rate=100,
        duration=1.0,
        progress=False,
        sim={"tps": 0, "ttft_ms": 2000},
    )
    r = run.wait(timeout=120).results()
    assert (r["status"] == "done").all() and len(r) == 100
    assert r["send_delay"].max() < 0.25, r["send_delay"].describe()


def test_sent_at_is_the_workers_own_send_so_a_queue_in_the_worker_shows_as_delay() -> None:
    # One worker, one stream at a time, 5 requests due 0.1 s apart, each ~0.25 s long: they queue
    # in the worker. sent_at is when the worker really sent each (not when the driver handed it
    # over), so each starts after the previous one ended.
    run = nito_nb.run(
        [f"q{i}" for i in range(5)],
        model="sim/chat",
        engine="processes",
        workers=1,
        per_worker=1,
        rate=10,
        duration=0.5,
        max_tokens=5,
        progress=False,
        sim={"tps": 20, "ttft_ms": 0},
    )
    r = run.wait(timeout=120).results().sort_values("scheduled_at")
    assert (r["status"] == "done").all() and len(r) == 5
    sent, e2e = r["sent_at"].to_numpy(), r["e2e"].to_numpy()
    assert (sent[1:] >= sent[:-1] + e2e[:-1] - 0.002).all(), (sent, e2e)
    assert r["send_delay"].iloc[-1] > r["send_delay"].iloc[0]


def test_a_processes_run_lines_up_on_the_drivers_timeline_with_the_right_phases() -> None:
    before = datetime.now(timezone.utc)
    run = nito_nb.run(
        [f"q{i}" for i in range(4)],
        model="sim/chat",
        engine="processes",
        workers=2,
        rate=10,
        duration=2.0,
        warmup=0.5,
        cooldown=0.5,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
    )
    r = run.wait(timeout=120).results()
    after = datetime.now(timezone.utc)
    assert len(r) == 20 and (r["status"] == "done").all()
    assert (r["sent_at"] >= r["scheduled_at"] - 0.002).all()  # never before its time
    assert (r["sent_at"] >= 0).all() and (r["sent_at"] <= (after - before).total_seconds()).all()
    assert ((r["started_at"] >= before) & (r["started_at"] <= after)).all()
    assert r.groupby("phase").size().to_dict() == {"cooldown": 5, "measure": 10, "warmup": 5}
    assert set(r["worker"]) == {"proc-0", "proc-1"}


# -- a 429 on any worker pauses every worker (the run's shared backoff) ----------------------------


def assert_a_429_paused_every_worker(engine: str) -> None:
    """30 requests at 10/s on 2 workers sharing one simulator; q9 (picked by seed 51) gets a 429
    with Retry-After: 1 once. No worker sends anything in the second after it (but the few in
    flight with it, hence 0.25 s); then the held requests go, and every request ends done."""
    from nito_nb.sim import ensure_server, token

    run = nito_nb.run(
        [f"q{i}" for i in range(30)],
        model="sim/echo",
        engine=engine,
        workers=2,
        rate=10,
        duration=3.0,
        base_url=ensure_server(),
        api_key=token(),
        progress=False,
        sim={
            "tps": 0,
            "ttft_ms": 0,
            "fail_rate": 0.05,
            "fail_status": 429,
            "retry_after": 1,
            "seed": 51,
        },
    )
    r = run.wait(timeout=180).results()
    assert run.error is None
    assert len(r) == 30 and r["key"].is_unique and (r["status"] == "done").all()
    limited = r[r["attempts"] > 1]
    assert limited["content"].tolist() == ["q9"] and limited["attempts"].tolist() == [2]
    assert run.n_attempts == int(r["attempts"].sum()) == 31 and run.backoff.n_rate_limited == 1
    t = float(limited["sent_at"].iloc[0])  # its 429 came back within milliseconds (tps 0, ttft 0)
    others = r[r["attempts"] == 1]["sent_at"]
    paused = others[(others > t + 0.25) & (others < t + 1.0)]
    assert paused.empty, f"sent during the pause: {paused.round(3).tolist()} (429 at {t:.3f})"
    held = r[(r["scheduled_at"] > t + 0.25) & (r["scheduled_at"] < t + 1.0)]
    # due during the pause: sent after it
    assert len(held) >= 5 and (held["sent_at"] >= t + 1.0).all()
    assert r["worker"].nunique() == 2


def test_a_429_on_one_worker_pauses_every_worker_for_retry_after() -> None:
    assert_a_429_paused_every_worker("processes")


def assert_a_429_holds_what_workers_have_queued(engine: str) -> None:
    """One stream at a time per worker, requests due faster than they end: they queue in the
    workers. q7 (picked by seed 15) gets a 429 with Retry-After: 1 once; what the workers had
    queued waits out that second too (the driver's pause reaches every worker)."""
    from nito_nb.sim import ensure_server, token

    run = nito_nb.run(
        [f"q{i}" for i in range(20)],
        model="sim/chat",
        engine=engine,
        workers=2,
        per_worker=1,
        rate=10,
        duration=2.0,
        max_tokens=8,
        base_url=ensure_server(),
        api_key=token(),
        progress=False,
        sim={
            "tps": 20,
            "ttft_ms": 0,
            "fail_rate": 0.05,
            "fail_status": 429,
            "retry_after": 1,
            "seed": 15,
        },
    )
    r = run.wait(timeout=180).results()
    assert run.error is None and len(r) == 20 and (r["status"] == "done").all()
    limited = r[r["attempts"] > 1]
    assert limited["row"].tolist() == [7] and run.backoff.n_rate_limited == 1
    t = float(limited["sent_at"].iloc[0])
    others = r[r["attempts"] == 1]["sent_at"]
    paused = others[(others > t + 0.25) & (others < t + 1.0)]
    assert paused.empty, f"sent during the pause: {paused.round(3).tolist()} (429 at {t:.3f})"
    assert (others > t + 1.0).sum() >= 4  # queued before the 429, sent after the pause


def test_a_429_holds_the_requests_queued_in_every_worker() -> None:
    assert_a_429_holds_what_workers_have_queued("processes")


def test_what_crosses_from_a_worker_is_the_ended_state_without_the_key(scripted: Any) -> None:
    # A done stream crosses as its state (nothing parsed again on the driver); the key it was
    # sent with never does; a stream with an error crosses as its log and keeps its error.
    from conftest import chunk_line
    from scripted_server import Script

    key = "sk-crossing-4f1d2a9c7e"
    ok = scripted.add(
        "cross-ok", Script(parts=[chunk_line({"content": f"echo {key}"}), b"data: [DONE]\n\n"])
    )
    cut = scripted.add("cross-cut", Script(parts=[chunk_line({"content": "part"})], drop=True))

    async def one(base: str) -> Any:
        return (
            await nito_nb.AsyncClient(api_key=key, base_url=base)
            .stream("hi", model="m", raise_errors=False)
            .wait()
        )

    done, broken = asyncio.run(one(ok)), asyncio.run(one(cut))
    wire = to_wire(done)
    assert type(wire).__name__ == "StreamState"
    data = pickle.dumps(wire)
    # the key (echoed, redacted) and the state's copy of it stay here
    assert key.encode() not in data
    back = from_wire(pickle.loads(data))
    assert back.content == done.content == "echo [redacted]" and back.status == "done"
    assert back.wait(timeout=1) is back  # ended, settled: nothing to wait for
    # an error's .stream is the owner: the log goes
    assert isinstance(to_wire(broken), type(broken.log))
    again = from_wire(pickle.loads(pickle.dumps(to_wire(broken))))
    assert again.status == broken.status == "truncated" and type(again.exception) is type(
        broken.exception
    )
    assert again.content == "part"


def test_the_least_loaded_worker_and_ties_in_turn() -> None:
    from nito_nb._runs.ray import least_loaded

    names = ["w0", "w1", "w2"]
    picked, last = [], None
    for _ in range(4):  # all idle: each request ended before the next (ties went to w0 every time)
        last = least_loaded(names, dict.fromkeys(names, 0), last)
        picked.append(last)
    assert picked == ["w0", "w1", "w2", "w0"]
    assert least_loaded(names, {"w0": 2, "w1": 1, "w2": 3}, "w0") == "w1"  # the least loaded first


def assert_handed_over_ahead_sent_on_time_and_left_out_if_stopped_before(
    engine: str, monkeypatch: Any
) -> None:
    """As with the default engine (test_runs_load.py): the driver hands each request over a second
    ahead (SEND_LEAD, monkeypatched), with its wall time; the worker sends it then, and one
    stopped while it waits was never sent, so it is not a result."""
    from test_runs_load import _stop_once_sent

    from nito_nb._runs import dispatch as _dispatch

    monkeypatch.setattr(_dispatch, "SEND_LEAD", 1.0)
    run = nito_nb.run(
        ["a"],
        model="sim/chat",
        engine=engine,
        workers=1,
        rate=1,
        duration=5.0,
        progress=False,
        sim={"tps": 0, "ttft_ms": 0},
    )
    _stop_once_sent(run, 2)
    r = run.results().sort_values("scheduled_at")
    assert r["scheduled_at"].tolist() == [0.0, 1.0] and (r["status"] == "done").all()
    assert (r["send_delay"] >= 0).all()


def test_a_request_handed_to_a_worker_ahead_is_sent_at_its_time_and_left_out_if_stopped_before(
    monkeypatch: Any,
) -> None:
    assert_handed_over_ahead_sent_on_time_and_left_out_if_stopped_before("processes", monkeypatch)


def test_a_worker_starts_its_embedded_simulator_before_the_schedule_and_only_for_sim_models() -> (
    None
):
    # A worker's first sim/ request started the worker's own embedded simulator (70 ms) between
    # its hand-over and its send: every worker's first request left 28-70 ms late.
    from nito_nb._client import endpoint
    from nito_nb._runs.ray import start_endpoints

    started: list[str] = []
    real, real_apart = endpoint._simulator, endpoint._apart
    endpoint.register_simulator(lambda: started.append("sim") or "http://127.0.0.1:9/v1")
    try:
        start_endpoints({}, ["sim/chat", "z-ai/glm-5.2", "sim/echo"])
        assert started == ["sim", "sim"]  # once per sim/ model (the real start is idempotent)
        started.clear()
        # a simulator of the user's
        start_endpoints({"base_url": "http://127.0.0.1:9/v1"}, ["sim/chat"])
        assert started == []
        # wrong: the request will say so
        start_endpoints({"base_url": "ftp://nowhere"}, ["z-ai/glm-5.2"])
    finally:
        endpoint.register_simulator(real, real_apart)


def assert_a_stopped_run_keeps_what_arrived(engine: str, worker: str) -> None:
    """As with the default engine, a request stopped as it streamed keeps its chunks: the driver
    recalls it from its worker, which stops the stream and gives back what arrived (worker
    processes and Ray actors came back with no chunk at all)."""
    run = nito_nb.run(
        ["tell me a long story"],
        model="sim/chat",
        engine=engine,
        workers=1,
        progress=False,
        sim={"tps": 20, "ttft_ms": 0},
        max_tokens=400,
    )  # 20 s of answer
    time.sleep(2.0)
    run.stop()
    run.wait(timeout=60)
    r = run.results()
    assert r["status"].tolist() == ["stopped"], r[["status", "error"]]
    assert r["n_token_chunks"].iloc[0] >= 5 and len(r["content"].iloc[0]) > 0
    assert r["worker"].tolist() == [worker] and r["sent_at"].notna().all()
    assert len(run.frame()) > 5


def test_a_stopped_processes_run_keeps_what_arrived_in_the_worker() -> None:
    assert_a_stopped_run_keeps_what_arrived("processes", "proc-0")


def test_a_worker_answers_every_request_even_when_its_client_fails(monkeypatch: Any) -> None:
    # A worker whose request raised something unexpected sent nothing back, and the run waited for
    # it forever (a base URL with a bad port, before such URLs were refused up front). The worker
    # loop runs here, in a thread, with its pipe; its stream is made to fail.
    import multiprocessing
    import threading

    from nito_nb._runs import processes as _processes

    async def broken(*args: Any) -> Any:
        raise RuntimeError("no such port: sk-test-secret-key-123")

    monkeypatch.setattr(_processes, "worker_stream", broken)
    driver, child = multiprocessing.Pipe()
    connection = {"api_key": "sk-test-secret-key-123"}
    thread = threading.Thread(
        target=asyncio.run, args=(_processes._serve(child, connection, 2, []),), daemon=True
    )
    thread.start()
    assert driver.poll(30) and driver.recv() == _processes.READY
    driver.send((7, [{"role": "user", "content": "hi"}], "sim/chat", {}, None))
    assert driver.poll(30)
    rid, sent, _, _ = driver.recv()
    driver.send(None)
    thread.join(30)
    stream = from_wire(sent)
    assert rid == 7 and stream.status == "failed"
    assert "the worker failed: RuntimeError: no such port" in str(stream.exception)
    assert "sk-test-secret-key-123" not in str(stream.exception)
    assert stream.log.request["model"] == "sim/chat"


def test_a_worker_freezes_what_its_streams_made_while_they_stream(monkeypatch: Any) -> None:
    # A worker's loop reads its streams: a full pass of the collector stops it, the chunks that
    # arrive meanwhile are read together, and each is stamped with the last one's arrival. The
    # worker froze what existed once, at its start, so its full passes walked everything its
    # streams had made since (500 paced streams on two workers: passes of 70 ms of CPU over
    # 150,000 objects, spread p99 - median 30-100 ms; docs/LOAD.md). It now freezes what is old
    # while it streams, as the driver does (_runs/gc.py), and gives it back when it ends. The
    # worker loop runs here, in a thread, with its pipe; its streams go to the embedded simulator.
    import gc
    import multiprocessing
    import threading

    from nito_nb._runs import processes as _processes

    freezes: list[int] = []
    freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (freezes.append(time.perf_counter_ns()), freeze())[1])
    driver, child = multiprocessing.Pipe()
    thread = threading.Thread(
        target=asyncio.run, args=(_processes._serve(child, {}, 4, ["sim/chat"]),), daemon=True
    )
    thread.start()
    assert driver.poll(60) and driver.recv() == _processes.READY
    params = {"sim": {"tps": 20, "ttft_ms": 0}, "max_tokens": 30}  # about 1.5 s each
    started = time.perf_counter_ns()
    for rid in range(4):
        driver.send((rid, [{"role": "user", "content": f"q{rid}"}], "sim/chat", params, None))
    replies = []
    while len(replies) < 4 and driver.poll(60):
        replies.append(driver.recv())
    ended = time.perf_counter_ns()
    driver.send(None)
    thread.join(30)
    assert sorted(rid for rid, *_ in replies) == [0, 1, 2, 3]
    assert all(from_wire(sent).status == "done" for _, sent, _, _ in replies)
    # while the streams were read, what they had made was frozen again and again
    assert len([t for t in freezes if started < t < ended]) >= 2, freezes
    assert not thread.is_alive() and gc.get_freeze_count() == 0  # given back at the worker's end


def test_a_worker_reads_its_streams_while_the_driver_is_slow_to_take_its_replies() -> None:
    # A reply waits in the pipe until the driver reads it; when the pipe was full, the worker's
    # loop waited in the send and read nothing meanwhile, and the chunks that arrived were read
    # together, each stamped with the last one's arrival: at the end of 500 paced streams on two
    # workers, 24-31 sends of a worker's 250 waited over 1 ms, up to 42 ms (docs/LOAD.md). Here the
    # driver does not read for a while, as a busy one does not, while large replies fill the
    # pipe and a paced stream (a chunk every 50 ms) is read: its chunks keep reads of their own.
    import multiprocessing
    import threading

    from nito_nb._runs import processes as _processes

    driver, child = multiprocessing.Pipe()
    thread = threading.Thread(
        target=asyncio.run, args=(_processes._serve(child, {}, 20, ["sim/chat"]),), daemon=True
    )
    thread.start()
    assert driver.poll(60) and driver.recv() == _processes.READY
    paced = {"sim": {"tps": 20, "ttft_ms": 0}, "max_tokens": 30}  # about 1.5 s
    driver.send((0, [{"role": "user", "content": "paced"}], "sim/chat", paced, None))
    time.sleep(0.3)  # it streams
    large = [{"role": "user", "content": "x " * 50_000}]  # each reply carries its request
    for rid in range(1, 11):  # 1 MB of replies: more than the pipe holds
        driver.send((rid, large, "sim/chat", {"sim": {"tps": 0}, "max_tokens": 1}, None))
    time.sleep(2.5)  # the driver is busy: nothing is read meanwhile
    replies = {}
    while len(replies) < 11 and driver.poll(60):
        rid, sent, _, _ = driver.recv()
        replies[rid] = from_wire(sent)
    driver.send(None)
    thread.join(30)
    assert sorted(replies) == list(range(11))
    assert all(stream.status == "done" for stream in replies.values())
    times = list(replies[0].log.times_ns())
    # Events read together carry one time. Most of this stream's chunks came while the driver was
    # not reading: they were about 2 reads for 33 events; the last few events come in one write.
    assert len(times) > 30 and len(set(times)) >= len(times) // 2, times


def test_too_many_workers_for_the_machine_is_one_clear_line() -> None:
    # They are started one after another: workers=10**6 spawned interpreters until killed.
    from nito_nb._runs.processes import max_workers

    cores = os.cpu_count() or 1
    t = time.perf_counter()
    for workers in (10**6, max_workers(cores) + 1):
        with pytest.raises(
            nito_nb.ConfigurationError,
            match=f"workers={workers} is more local processes than .* at most "
            f"{max_workers(cores)} .* engine='ray'",
        ):
            nito_nb.run(
                ["a"], model="sim/chat", engine="processes", workers=workers, progress=False
            )
    assert time.perf_counter() - t < 5  # refused before any process starts


def test_bad_model_and_template_types_are_one_clear_line() -> None:
    for model in (None, 5):
        with pytest.raises(
            nito_nb.ConfigurationError, match="model= is required: a model id or a list of them"
        ):
            nito_nb.run(["a"], model=model, progress=False)
    with pytest.raises(
        nito_nb.ConfigurationError, match=r"template= is a string with \{fields\}.* not 5"
    ):
        nito_nb.run(["a"], model="sim/chat", template=5, progress=False)
    import numpy as np  # an array of model ids is a list of them

    run = nito_nb.run(["a"], model=np.array(["sim/echo"]), progress=False, sim={"tps": 0}).wait(
        timeout=60
    )
    assert run.results()["model"].tolist() == ["sim/echo"]
