"""The simulator in a process of its own, for load runs (``nito_nb.run``/``sweep`` of ``sim/`` models).

The in-process simulator (``_server.py``) serves from a thread of the caller's process, so its
work takes the same GIL as the run's sending loop: a sweep of ``sim/chat`` measured its own
simulator, not the client (bench/bench_sweep_sim.py; the figures in docs/BENCHMARKS.md). In a
process of its own, the simulator takes the other core and the run's loop only sends and reads.

The parent binds a loopback port and hands the listening socket to ``python -m
nito_nb.sim._process FD`` (so the port is known at once and nobody can take it meanwhile). Its key
goes first down the child's stdin, one JSON line, never on its command line (which ``ps`` shows to
every user). The child says ``ready`` on its stdout once it serves, and ends when its stdin
closes: when the parent stops it, exits, or dies (a killed kernel leaves no simulator behind).
POSIX only (the socket crosses by ``pass_fds``); elsewhere :func:`ensure_process` raises and the
caller keeps the in-process simulator.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ._access import TOKEN_HINT, token

__all__ = ["SimProcess", "ensure_process"]

#: How long the child may take to start serving (a busy machine imports starlette slowly).
STARTUP_TIMEOUT_S = 30.0
#: After its stdin closes, how long the child gets to end before it is killed.
STOP_TIMEOUT_S = 3.0
READY = b"ready\n"


class SimProcess:
    """The simulator served by a child process on a free loopback port. Clients must send
    `Authorization: Bearer <api_key>`: the key given, else a random one (``self.api_key``)."""

    def __init__(
        self, *, host: str = "127.0.0.1", api_key: str | None = None, key_hint: str | None = None
    ) -> None:
        if api_key is None:
            api_key = secrets.token_urlsafe(32)
            key_hint = (
                key_hint
                or "this simulator's key, SimProcess.api_key, in the Python process that started it"
            )
        self.api_key = api_key
        self.key_hint = key_hint
        self.host = host
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        if self._proc is None:
            raise RuntimeError("the simulator process is not running: call start() first")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> str:
        """Start the child and return its base URL once it serves; RuntimeError if it cannot."""
        if self._proc is not None:
            raise RuntimeError("this SimProcess was already started")
        if os.name != "posix":
            raise RuntimeError(
                "a simulator process of its own needs POSIX (it inherits its socket)"
            )
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        errors = tempfile.TemporaryFile()
        try:
            sock.bind((self.host, 0))
            sock.listen(2048)
            self.port = sock.getsockname()[1]
            fd = sock.fileno()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "nito_nb.sim._process", str(fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                pass_fds=(fd,),
                env=_child_env(),
                start_new_session=True,  # the notebook's interrupt (SIGINT to the group) is not for it
            )
        except OSError as exc:
            errors.close()
            raise RuntimeError(f"the simulator process did not start: {exc}") from None
        finally:
            sock.close()  # the child has its own copy
        told = _tell(self._proc, {"api_key": self.api_key, "key_hint": self.key_hint})
        if not told or not _wait_ready(self._proc, STARTUP_TIMEOUT_S):
            try:  # its stdout ends a moment before it can be reaped
                code: int | None = self._proc.wait(0.5)
            except subprocess.TimeoutExpired:
                code = None
            self.stop()
            errors.seek(0)
            said = errors.read().decode("utf-8", "replace").strip().splitlines()
            errors.close()
            why = (
                f"it exited with code {code}"
                if code is not None
                else f"not serving after {STARTUP_TIMEOUT_S:g} s"
            )
            raise RuntimeError(
                f"the simulator process did not start ({why})" + (f": {said[-1]}" if said else "")
            )
        errors.close()
        return self.base_url

    def stop(self) -> None:
        """Close the child's stdin (it ends its streams and exits); kill it if it does not."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(STOP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = f" {self.base_url} pid {self.pid}" if self._proc is not None else ""
        return f"<SimProcess {state}{where}>"


def _tell(proc: subprocess.Popen[bytes], settings: dict[str, str | None]) -> bool:
    """Write the child's settings (its key) down its stdin, one JSON line; False if it is gone."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(settings).encode() + b"\n")
        proc.stdin.flush()
    except OSError:  # it exited already: start() says why
        return False
    return True


def _child_env() -> dict[str, str]:
    """This environment, with this copy of nito_nb first on the child's path: the parent may have
    found it through a ``sys.path`` entry of its own (a script's ``sys.path.insert``, a notebook
    started elsewhere), which the child would not have. Without ``NITO_API_KEY``: the simulator
    never needs the gateway's key, so its process does not hold it."""
    env = dict(os.environ)
    env.pop("NITO_API_KEY", None)
    here = str(Path(__file__).resolve().parents[2])  # the folder that holds the nito_nb package
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _wait_ready(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether the child wrote ``READY`` within ``timeout`` seconds (False as soon as it ends: not
    only at the end of its stdout, which a process forked meanwhile elsewhere could hold open)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    fd, got = proc.stdout.fileno(), b""
    while (left := deadline - time.monotonic()) > 0 and proc.poll() is None:
        readable, _, _ = select.select([fd], [], [], min(left, 0.1))
        if not readable:
            continue
        piece = os.read(fd, len(READY) - len(got))
        if not piece:  # it exited
            return False
        got += piece
        if got == READY:
            return True
    return False


_lock = threading.Lock()
_shared: SimProcess | None = None


_settings: dict[str, str] = {}


def _sim_settings() -> dict[str, str]:
    """The environment the simulator reads its defaults from (``NITO_SIM_TPS``..., and
    ``NITO_SIM_REPLAY_DIRS``), and the working directory (its replay directory by default)."""
    settings = {k: v for k, v in os.environ.items() if k.startswith("NITO_SIM_")}
    try:
        settings[""] = os.getcwd()
    except OSError:  # gone: a new child could not start there either
        pass
    return settings


def ensure_process() -> str:
    """The base URL of this process's simulator process, started on first use (thread-safe), and
    again if it died or if ``NITO_SIM_*`` or the working directory changed since (the in-process
    simulator reads them at each request, a child only has those it was started with); stopped
    when the interpreter exits. It asks for this process's ``token()``, as the in-process one.
    RuntimeError if it cannot start."""
    global _shared, _settings
    with _lock:
        settings = _sim_settings()
        if _shared is None or not _shared.running or settings != _settings:
            first = _shared is None
            if _shared is not None:
                _shared.stop()
            server = SimProcess(api_key=token(), key_hint=TOKEN_HINT)
            server.start()
            _shared, _settings = server, settings
            if first:
                atexit.register(_stop_shared)
        return _shared.base_url


def _stop_shared() -> None:
    if _shared is not None:
        _shared.stop()


# -- the child --------------------------------------------------------------------------------


def _serve(fd: int) -> None:
    import uvicorn

    from ._app import KEY_HINT, create_app
    from ._server import embedded_config

    sock = socket.socket(fileno=fd)
    # The parent's first line: this simulator's key (and where a refused client finds it).
    settings = json.loads(sys.stdin.buffer.readline() or b"null")
    if not isinstance(settings, dict) or not isinstance(settings.get("api_key"), str):
        sys.exit("the simulator process got no key on its stdin (started by nito_nb only)")
    app = create_app(settings["api_key"], key_hint=settings.get("key_hint") or KEY_HINT)
    server = uvicorn.Server(embedded_config(app))

    def watch() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.005)
        if server.started:
            sys.stdout.buffer.write(READY)
            sys.stdout.buffer.flush()
        while sys.stdin.buffer.read(65536):  # until the parent closes it, or is gone
            pass
        app.state.shutdown.trigger()
        server.should_exit = True

    threading.Thread(target=watch, name="nito_nb-sim-watch", daemon=True).start()
    server.run(sockets=[sock])


def _main(argv: list[str]) -> Any:
    if len(argv) != 1 or not argv[0].isdigit():
        return "usage: python -m nito_nb.sim._process FD (started by nito_nb; use python -m nito_nb.sim)"
    _serve(int(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
