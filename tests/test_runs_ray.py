"""engine="ray": a run's requests sent by Ray actors on a local cluster started here (no
dashboard, no network), with the simulator; a worker killed mid-run fails only its in-flight
requests, with the reason, and the run goes on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import nito_nb

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'nito_nb[ray]' to test engine='ray'")


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_a_ray_run_gives_the_same_results_with_worker_and_node(cluster: None) -> None:
    prompts = [f"q{i}" for i in range(12)]
    run = nito_nb.run(prompts, model="sim/echo", engine="ray", workers=2, progress=False, sim={"tps": 0})
    run.wait(timeout=120)
    assert run.error is None
    r = run.results()
    assert len(r) == 12 and (r["status"] == "done").all()
    assert r["content"].tolist() == prompts  # sim/echo answers with the prompt
    assert set(r["worker"]) == {"ray-0", "ray-1"} and r["node"].notna().all()
    assert (r["ttft"] > 0).all() and (r["e2e"] >= r["ttft"]).all()  # the worker's own clock
    local = nito_nb.run(prompts, model="sim/echo", progress=False, sim={"tps": 0}).wait().results()
    assert set(local["worker"]) == {"local"} and list(local.columns) == list(r.columns)


def test_a_killed_worker_fails_its_in_flight_requests_and_the_run_goes_on(cluster: None) -> None:
    # Paced streams (~1.5 s each), 2 workers: kill one while it holds streams in flight.
    sim: dict[str, Any] = {"tps": 20, "ttft_ms": 0, "seed": 1}
    run = nito_nb.run([f"p{i}" for i in range(16)], model="sim/chat", engine="ray", workers=2, per_worker=4,
                      concurrency=8, max_tokens=30, progress=False, sim=sim)
    engine = run._engine
    assert engine is not None
    deadline = time.monotonic() + 60
    while engine._load.get("ray-1", 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    ray.kill(engine.actor("ray-1"))
    run.wait(timeout=180)
    assert run.error is None
    r = run.results()
    assert len(r) == 16 and r["key"].is_unique  # every request accounted for, none lost
    failed = r[r["status"] == "failed"]
    assert len(failed) >= 1 and (failed["worker"] == "ray-1").all()
    assert failed["error_message"].str.contains("the Ray worker ray-1 died").all()
    done = r[r["status"] == "done"]
    assert len(done) == 16 - len(failed) and (done["worker"] == "ray-0").any()
    assert engine.alive == [] or "ray-1" not in engine.alive


def test_a_bad_engine_is_one_clear_error() -> None:
    with pytest.raises(nito_nb.ConfigurationError, match="engine must be 'asyncio', 'processes' or 'ray'"):
        nito_nb.run(["a"], model="sim/echo", engine="threads", progress=False)
