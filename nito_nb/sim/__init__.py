"""The embedded simulator: a Nito-compatible gateway for demos, tests and benchmarks.

    >>> from nito_nb import sim
    >>> base_url = sim.ensure_server()   # http://127.0.0.1:PORT/v1, started once per process
    >>> base_url = sim.ensure_process()  # the same, served by a child process (load runs use it)
    >>> openai.OpenAI(base_url=base_url, api_key=sim.token())  # both ask for this process's token

or `python -m nito_nb.sim --port 8765`. Every simulator answers only requests addressed to a
loopback name or address and POST bodies sent as JSON; `sim/replay` reads only under its replay
directories (`_access.py`, `_files.py`). Models `sim/...` (see `SIM_MODELS`) are scenarios:
prose, reasoning, tool calls, faults, replay of recordings. Per-request settings go in an extra
body field `"sim": {...}` (`ttft_ms`, `tps`, `jitter`, `seed`, ...: see `_options.SimOptions`);
`NITO_SIM_TPS`, `NITO_SIM_TTFT_MS` and `NITO_SIM_JITTER` set the default pacing
(`NITO_SIM_TPS=0`: as fast as possible). `sim/server` (and any model given `sim.capacity`)
saturates like a real server: slots, a queue, then 429. Requests with `stream: false` get one
`chat.completion` object, the merge of the same scenario's stream; `response_format` makes the
models that answer in words answer JSON (of the request's schema). docs/SIMULATOR.md describes the
models, their options and both.

Importing this package is cheap: Starlette and uvicorn load when a server or app is made.

Layout (imports point down; everything below `_app` is pure, standard library only):

    _server (uvicorn in a thread), _process (the same in a child process)
        ->  _app (Starlette: HTTP)  ->  _access (Host, key, body type; the token), _files
        (which recordings may be read), _sending (paced writes), _batching (the capacity's
        schedulers, and the body of a request that holds a slot)
    _scenarios (SIM_MODELS, scenario())  ->  _stories, _tool_calls, _faults  ->  _texts
    _structured (JSON answers, sim/json-*), _judge (sim/judge)  ->  _writer (ChunkWriter, tokens, usage)
        ->  _request  ->  _options (every `sim` option), _schema (a value of a JSON schema)
    _recordings, _pacing, _completion  ->  _reply (events, replies, error bodies)
    _options  ->  _capacity (slots, queue, the batch's pace: pure, its clock injected)

What nito_nb itself knows of the wire format is not written again here: a recording is cut into
events by `_core/sse.py`, a saved log read by `_core/log.py`, and a non-streaming answer merged
by `_core/chunk.py` and `_core/accumulate.py` (the standard library only, like the pure part).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._scenarios import SIM_MODELS

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ._server import SimServer

__all__ = [
    "SIM_MODELS",
    "SimServer",
    "app",
    "create_app",
    "ensure_process",
    "ensure_server",
    "serve",
    "token",
]


def create_app(
    api_key: str | None = None, *, replay_dirs: Sequence[str] | None = None
) -> Starlette:
    """The simulator as an ASGI app; with `api_key`, requests must send `Bearer <api_key>`.
    `sim/replay` reads only under `replay_dirs` (default: `NITO_SIM_REPLAY_DIRS`, else the
    working directory)."""
    from ._app import create_app as _create_app

    return _create_app(api_key, replay_dirs=replay_dirs)


def token() -> str:
    """The key that the simulators nito_nb starts in this process (`ensure_server()`,
    `ensure_process()`, the ones `sim/` models go to) ask for: random, the same until the process
    ends. nito_nb sends it itself; another client passes it as its API key
    (`openai.OpenAI(base_url=sim.ensure_server(), api_key=sim.token())`)."""
    from ._access import token as _token

    return _token()


def ensure_server() -> str:
    """The base URL (`http://127.0.0.1:PORT/v1`) of the in-process simulator, started once."""
    from ._server import ensure_server as _ensure_server

    return _ensure_server()


def ensure_process() -> str:
    """The base URL of a simulator served by a child process of this one, started once (POSIX;
    RuntimeError where it cannot start). Load runs send ``sim/`` models there: it keeps the
    simulator's work off their loop's GIL (``_process.py``)."""
    from ._process import ensure_process as _ensure_process

    return _ensure_process()


def serve(
    port: int = 8765,
    host: str = "127.0.0.1",
    api_key: str | None = None,
    replay_dirs: Sequence[str] | None = None,
) -> None:
    """Serve the simulator in the foreground until interrupted (`python -m nito_nb.sim`)."""
    from ._server import serve as _serve

    _serve(port, host, api_key, replay_dirs)


# Not named `_app`: that is the submodule's name, and importing it would overwrite the cache.
_default_app: Any = None


def __getattr__(name: str) -> Any:
    # `app` (for `uvicorn nito_nb.sim:app`) and `SimServer` load Starlette on first access only.
    global _default_app
    if name == "app":
        if _default_app is None:
            _default_app = create_app()
        return _default_app
    if name == "SimServer":
        from ._server import SimServer

        return SimServer
    raise AttributeError(f"module 'nito_nb.sim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
