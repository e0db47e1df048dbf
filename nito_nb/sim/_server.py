"""Running the simulator: in-process on a free loopback port (a daemon thread), or standalone.

uvicorn is imported here, lazily, so that `import nito_nb.sim` stays cheap.
"""

from __future__ import annotations

import atexit
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from ._access import TOKEN_HINT, token
from ._app import KEY_HINT, create_app

STARTUP_TIMEOUT_S = 10.0
# Open streams (a stalled one, say) must not hold up the interpreter's exit for long.
SHUTDOWN_GRACE_S = 1


def embedded_config(app: Any) -> Any:
    """How the embedded simulator is served (a uvicorn.Config), in a thread here or in a child
    process (``_process.py``): on sockets it is given, quiet, and quick to stop."""
    import uvicorn

    return uvicorn.Config(
        app,
        log_config=None,  # never reconfigure the logging of the notebook or test run
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        loop="asyncio",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )


class SimServer:
    """The simulator served by uvicorn in a daemon thread, on `host` and a free port.

    `start()` returns once the server accepts connections; `base_url` is then
    `http://127.0.0.1:PORT/v1`. Also a context manager (`with SimServer() as base_url:`).

    Clients must send `Authorization: Bearer <api_key>`: the key given, else a random one made
    for this server (read it from `server.api_key`; another local user cannot). `key_hint` is
    where a refused client is told to find it; `replay_dirs`, the folders `sim/replay` may read
    (default: `NITO_SIM_REPLAY_DIRS`, else the working directory).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        key_hint: str | None = None,
        replay_dirs: Sequence[str] | None = None,
    ):
        if api_key is None:
            api_key = secrets.token_urlsafe(32)
            key_hint = (
                key_hint
                or "this server's key, SimServer.api_key, in the Python process that started it"
            )
        self.api_key = api_key
        self.key_hint = key_hint or KEY_HINT
        self.replay_dirs = replay_dirs
        self.host = host
        self.port = port
        self._server: Any = None
        self._app: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the simulator is not running: call start() first")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> str:
        if self._server is not None:
            raise RuntimeError("this SimServer was already started")
        import uvicorn

        # Bind first, in this thread: the port is known at once and a bind error raises here.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self._app = create_app(self.api_key, key_hint=self.key_hint, replay_dirs=self.replay_dirs)
        server = uvicorn.Server(embedded_config(self._app))
        failure: list[BaseException] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # reported by start(), the thread just ends
                failure.append(exc)
            finally:
                sock.close()

        thread = threading.Thread(target=run, name=f"nito_nb-sim:{self.port}", daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the simulator did not start: {failure or 'timed out'}")
            time.sleep(0.005)
        return self.base_url

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving (open streams get `SHUTDOWN_GRACE_S` to finish) and wait for the thread."""
        if self._server is not None:
            self._app.state.shutdown.trigger()
            self._server.should_exit = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = f" {self.base_url}" if self._server is not None else ""
        return f"<SimServer {state}{where}>"


_lock = threading.Lock()
_shared: SimServer | None = None


def ensure_server() -> str:
    """The base URL of the in-process simulator, started on first use (thread-safe).

    One server per process, on a free loopback port, in a daemon thread; reused by every later
    call and stopped when the interpreter exits. It asks for this process's :func:`token`.
    """
    global _shared
    with _lock:
        if _shared is None or not _shared.running:
            first = _shared is None
            server = SimServer(api_key=token(), key_hint=TOKEN_HINT)
            server.start()
            _shared = server
            if first:
                atexit.register(_stop_shared)
        return _shared.base_url


def _stop_shared() -> None:
    if _shared is not None:
        _shared.stop()


def serve(
    port: int = 8765,
    host: str = "127.0.0.1",
    api_key: str | None = None,
    replay_dirs: Sequence[str] | None = None,
    key_hint: str = KEY_HINT,
) -> None:
    """Serve the simulator in the foreground (`python -m nito_nb.sim`) until Ctrl-C."""
    import uvicorn

    config = uvicorn.Config(
        create_app(api_key, key_hint=key_hint, replay_dirs=replay_dirs),
        host=host,
        port=port,
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    uvicorn.Server(config).run()
