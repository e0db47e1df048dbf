"""engine="processes": a run's requests sent by local worker processes; a worker killed mid-run
fails only its in-flight requests, with the reason, and the run goes on."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import nito_nb


def test_a_processes_run_gives_the_same_results_with_worker_and_node() -> None:
    prompts = [f"q{i}" for i in range(12)]
    run = nito_nb.run(prompts, model="sim/echo", engine="processes", workers=2, progress=False, sim={"tps": 0})
    run.wait(timeout=120)
    assert run.error is None
    r = run.results()
    assert len(r) == 12 and (r["status"] == "done").all()
    assert r["content"].tolist() == prompts
    assert set(r["worker"]) == {"proc-0", "proc-1"} and r["node"].notna().all()
    assert (r["ttft"] > 0).all() and (r["e2e"] >= r["ttft"]).all()


def test_an_open_loop_run_on_processes_keeps_its_schedule_columns() -> None:
    run = nito_nb.run(["a", "b"], model="sim/chat", engine="processes", workers=2, rate=10, duration=1.0,
                      progress=False, sim={"tps": 0, "ttft_ms": 0})
    run.wait(timeout=120)
    r = run.results()
    assert len(r) == 10 and (r["status"] == "done").all()
    assert r["send_delay"].notna().all() and set(r["phase"]) == {"measure"}


def test_a_killed_worker_fails_its_in_flight_requests_and_the_run_goes_on() -> None:
    sim: dict[str, Any] = {"tps": 20, "ttft_ms": 0, "seed": 1}
    run = nito_nb.run([f"p{i}" for i in range(16)], model="sim/chat", engine="processes", workers=2,
                      per_worker=4, concurrency=8, max_tokens=30, progress=False, sim=sim)
    engine = run._engine
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
