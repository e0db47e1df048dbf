"""The simulator in a process of its own (nito_nb/sim/_process.py): Runs send their sim/ models there,
so that the simulator's work is not the run's; it ends with its parent, even a killed one; where it
cannot start, runs fall back to the in-process simulator with one warning."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import nito_nb
from nito_nb._client import AsyncClient
from nito_nb._client.endpoint import Simulator, simulator_apart
from nito_nb._runs.plan import Request
from nito_nb.sim import SimServer
from nito_nb.sim._process import SimProcess

ROOT = Path(__file__).resolve().parent.parent

#: Every test here starts a simulator process: `make check` leaves them to `make test`.
pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="the simulator process needs POSIX"),
    pytest.mark.spawns,
]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def _wait_gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_simulator_process_serves_streams_and_ends_when_stopped() -> None:
    sim = SimProcess()
    base_url = sim.start()
    try:
        assert sim.running and sim.pid != os.getpid()
        assert (
            httpx.get(
                f"{base_url}/models", headers={"Authorization": f"Bearer {sim.api_key}"}
            ).status_code
            == 200
        )
        stream = nito_nb.stream(
            "hello", model="sim/echo", base_url=base_url, api_key=sim.api_key, sim={"tps": 0}
        )
        assert stream.wait().content == "hello"
        assert "SimProcess running" in repr(sim)
    finally:
        sim.stop()
    assert not sim.running and _wait_gone(sim.pid or 0, 5)


def test_the_simulator_process_ends_with_its_parent_even_a_killed_one(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from nito_nb.sim import _process as _apart
        _apart.ensure_process()
        print(_apart._shared.pid, flush=True)
        time.sleep(120)
    """)
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)  # no atexit: only the closed stdin tells the child
        parent.wait()
        assert _wait_gone(child, 15), "the simulator process outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_run_sends_its_sim_models_to_the_simulator_process_not_its_own(tmp_path: Path) -> None:
    # A fresh interpreter: which simulator ran is then the run's doing alone.
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        import nito_nb
        from nito_nb.sim import _process as _apart, _server
        run = nito_nb.run(["a", "b", "c"], model="sim/echo", rate=20, duration=0.15, progress=False,
                          sim={{"tps": 0}})
        run.wait(timeout=60)
        assert run.error is None and (run.results()["status"] == "done").all(), run.results()
        assert _server._shared is None, "the in-process simulator was started"
        assert _apart._shared.running and _apart._shared.pid != os.getpid()
        assert not run.client.simulator and not run.client.report()["client_runs_simulator"]
        # A plain stream still uses the in-process one, as before.
        assert nito_nb.stream("x", model="sim/echo", sim={{"tps": 0}}).wait().content == "x"
        assert _server._shared is not None
        print("ok")
    """)
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_a_run_to_the_simulator_process_sends_its_token_never_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NITO_API_KEY", "sk-never-for-the-simulator")
    with simulator_apart() as apart:
        assert apart is not None and apart.base_url.startswith("http://127.0.0.1:")
        target, headers, _, _, key = AsyncClient()._build("hi", "sim/chat", None, None, {})
    assert target.startswith(apart.base_url) and key == apart.token == nito_nb.sim.token()
    assert headers["Authorization"] == f"Bearer {nito_nb.sim.token()}"
    assert "sk-never" not in repr(headers) and nito_nb.sim.token() not in repr(apart)
    # Outside the context, sim/ models go to the in-process simulator again.
    target, _, _, _, _ = AsyncClient()._build("hi", "sim/chat", None, None, {})
    assert not target.startswith(apart.base_url)


def sent_to_a_simulator_that_wants_a_key(
    make_engine: Callable[[Simulator], Any], token: str | None = None
) -> tuple[int | None, Any]:
    """(the HTTP status, the engine) of one sim/ request sent by ``make_engine(simulator)``'s
    workers, given a simulator that wants a key, and ``token`` as the key to send it: its sim/
    request is refused there (401) without the right one, which shows where it went, and answered
    with it, which shows that the token crossed to the workers. Also for Ray's actors
    (tests/test_runs_ray.py)."""
    with SimServer(api_key="sk-only-here") as url:
        engine = make_engine(Simulator(url, token))
        try:
            request = Request(
                key="k",
                row=0,
                model="sim/echo",
                repeat=0,
                messages=[{"role": "user", "content": "hi"}],
                params={"sim": {"tps": 0}},
            )
            sent = asyncio.run(engine.send(request))
        finally:
            engine.close()
    return sent.stream.log.status_code, engine


def test_processes_workers_send_sim_models_to_the_simulator_they_are_given() -> None:
    from nito_nb._runs.processes import ProcessEngine

    def engine(simulator: Simulator) -> Any:
        return ProcessEngine(1, 4, {}, ["sim/echo"], simulator=simulator)

    assert sent_to_a_simulator_that_wants_a_key(engine)[0] == 401
    assert sent_to_a_simulator_that_wants_a_key(engine, "sk-only-here")[0] == 200


def test_where_the_simulator_process_cannot_start_runs_use_the_in_process_one_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(nito_nb, "_apart_failed", None)
    sim = SimProcess()
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match=r"did not start \(it exited with code 1\)"):
        sim.start()

    def cannot() -> str:
        raise RuntimeError("the simulator process did not start (test)")

    monkeypatch.setattr("nito_nb.sim.ensure_process", cannot)
    with pytest.warns(
        RuntimeWarning, match=r"did not start \(test\); this run's sim/ models use the simulator in"
    ):
        here, apart = nito_nb._simulator_apart()
    assert not apart and here == Simulator(nito_nb.sim.ensure_server(), nito_nb.sim.token())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert nito_nb._simulator_apart() == (here, False)
    run = nito_nb.run(
        ["a"], model="sim/echo", rate=10, duration=0.1, progress=False, sim={"tps": 0}
    )
    run.wait(timeout=60)
    # the note then says the simulator's work counts
    assert run.error is None and run.client.simulator


def test_the_simulator_process_finds_the_parents_copy_of_nito_nb_and_never_holds_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A parent that found nito_nb through a sys.path entry of its own (a script's sys.path.insert)
    # gives its child that folder first, and keeps the PYTHONPATH it had.
    from nito_nb.sim._process import _child_env

    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    monkeypatch.setenv("NITO_API_KEY", "sk-not-for-the-simulator")
    env = _child_env()
    assert "NITO_API_KEY" not in env  # the simulator never needs the gateway's key
    path = env["PYTHONPATH"].split(os.pathsep)
    assert path == [str(Path(nito_nb.__file__).resolve().parent.parent), "/somewhere/else"]
    monkeypatch.delenv("PYTHONPATH")
    assert _child_env()["PYTHONPATH"] == str(Path(nito_nb.__file__).resolve().parent.parent)


def test_the_simulator_process_follows_a_changed_nito_sim_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The in-process simulator reads NITO_SIM_* at each request; the child has the environment it
    # was started with, so a changed setting starts a new one, which then uses it.
    from nito_nb.sim import _process as _apart

    monkeypatch.delenv("NITO_SIM_TTFT_MS", raising=False)
    url = _apart.ensure_process()
    first = _apart._shared
    assert _apart.ensure_process() == url and _apart._shared is first  # unchanged: the same child
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "300")
    _apart.ensure_process()
    assert _apart._shared is not first and not first.running
    stream = nito_nb.stream(
        "x",
        model="sim/echo",
        base_url=_apart._shared.base_url,
        api_key=nito_nb.sim.token(),
        sim={"tps": 0},
    ).wait()
    assert stream.ttft is not None and stream.ttft >= 0.3
