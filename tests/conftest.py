"""Shared fixtures. Test data lives in tests/data; nothing here touches the outside network."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_server import ScriptedServer

DATA = Path(__file__).parent / "data"
REAL = DATA / "real"

# The simulator paces like a real model by default; tests want it as fast as possible
# unless a test asks for pacing in its request.
os.environ.setdefault("NITO_SIM_TPS", "0")
os.environ.setdefault("NITO_SIM_TTFT_MS", "0")
# sim/replay reads only under its replay directories: the recordings of tests/data, wherever
# pytest runs from (a test that replays a file of its own uses the `replay_dir` fixture).
os.environ.setdefault("NITO_SIM_REPLAY_DIRS", str(DATA))


def real_recordings() -> list[Path]:
    return sorted(REAL.glob("*.sse"))


def recording_sources() -> dict[str, dict[str, str]]:
    lines = (REAL / "SOURCES.tsv").read_text().splitlines()
    names = lines[0].split("\t")
    return {row.split("\t")[0]: dict(zip(names, row.split("\t"), strict=True)) for row in lines[1:]}


def chunk_line(delta: dict | None = None, *, finish: str | None = None, **extra: object) -> bytes:
    """One ``data:`` event of a chunk, as a gateway sends it."""
    chunk = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1751299200,
        "model": "test/model",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"


#: A whole answer as a gateway streams it: a comment, content in two chunks (one with a
#: two-byte character), the finish, a usage chunk, [DONE].
HELLO = [
    b": PROCESSING\n\n",
    chunk_line({"role": "assistant", "content": "Hel"}),
    chunk_line({"content": "lo wörld"}),
    chunk_line({}, finish="stop"),
    b'data: {"id":"gen-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n',
    b"data: [DONE]\n\n",
]


@contextlib.contextmanager
def sigint_after(seconds: float) -> Iterator[None]:
    """What the kernel's stop button does: SIGINT to this (the main) thread after ``seconds``.

    A real signal, delivered to the thread even when it is blocked in a socket read or a wait
    (``_thread.interrupt_main()`` only sets a flag, which a blocking read never looks at).
    """
    # A pytest-xdist worker (make check runs the fast tier in two) ignores SIGINT, so that Ctrl-C
    # reaches only the controller: give the test Python's own handler back for its duration.
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, signal.pthread_kill, (threading.get_ident(), signal.SIGINT))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def replay_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path``, made a replay directory of the simulators nito_nb starts (beside tests/data)."""
    monkeypatch.setenv("NITO_SIM_REPLAY_DIRS", os.pathsep.join([str(tmp_path), str(DATA)]))
    return tmp_path


@pytest.fixture(scope="session")
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    yield server
    server.stop()


# -- clients shared by several test modules ---------------------------------

KEY = "sk-test-SECRET-0123456789abcdef"
_OPEN_CLIENTS: list[Any] = []


def open_client(base: str, **kwargs: Any) -> Any:
    """A ``nito_nb.Client`` to ``base`` with the test key, closed after the test."""
    import nito_nb

    c = nito_nb.Client(api_key=KEY, base_url=base, **kwargs)
    _OPEN_CLIENTS.append(c)
    return c


def close_clients() -> None:
    # An httpx client left open keeps its pooled socket until garbage collection, which
    # pytest (warnings as errors) reports as an unclosed socket.
    while _OPEN_CLIENTS:
        _OPEN_CLIENTS.pop().close()


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_clients()


# -- the IPython shell with the magic: test_magic, test_magic_store, test_security ----------------------


@pytest.fixture(scope="module")
def shell() -> Any:
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    # start_ipython() returns the shell the first time only; another test module may have started it.
    ip = start_ipython() or get_ipython()
    assert ip is not None
    return ip


@pytest.fixture
def ip(shell: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The shell with the extension freshly loaded (default settings, no chats, no history).

    Each test registers a new ``NitoMagics``; IPython keeps every registered Magics in
    ``shell.configurables`` for the session, and each keeps its Client (a connection pool to the
    embedded simulator) open. Left there, dozens of pooled sockets were finalized at interpreter
    exit, after pytest, as "unclosed socket" ResourceWarnings (whether they print depends on the
    shutdown order, which is why moving these fixtures here made them appear). So the teardown
    closes the test's magics' client and drops it.
    """
    from nito_nb import _magic as _magic
    from nito_nb._magic.magics import NitoMagics

    shell.configurables[:] = [c for c in shell.configurables if not isinstance(c, _magic.Nito)]
    shell.config.pop("Nito", None)  # %config merges into the shell's config: undo earlier tests'
    for name in ("NITO_API_KEY", "NITO_BASE_URL", "NITO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    # as fast as possible, whatever the caller's environment
    monkeypatch.setenv("NITO_SIM_TPS", "0")
    monkeypatch.setenv("NITO_SIM_TTFT_MS", "0")
    _magic.load_ipython_extension(shell)
    shell.run_line_magic("nito", "reset")
    yield shell
    for name in ("_nito", "answer", "weather", "schema", "topic", "os", "settings"):
        shell.user_ns.pop(name, None)
    shell.configurables[:] = [c for c in shell.configurables if not isinstance(c, _magic.Nito)]
    shell.config.pop("Nito", None)  # a setting such as Nito.store must not outlive its test
    for magics in [c for c in shell.configurables if isinstance(c, NitoMagics)]:
        if magics._sync_client is not None:
            magics._sync_client.close()
            magics._sync_client = None
    shell.configurables[:] = [c for c in shell.configurables if not isinstance(c, NitoMagics)]


@pytest.fixture
def switch_every_microsecond() -> Iterator[None]:
    """The GIL handed between threads every microsecond: for the stress tests of the one lock."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def start_tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag of ``html`` with its attributes, in order, as a browser's parser reads them
    (for the tests that check what markup an output carries)."""
    from html.parser import HTMLParser

    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, attrs))

    Tags().feed(html)
    return found


def joined_text(pieces: list[tuple[bool, str]]) -> str:
    """The texts of a cell's outputs, in order, as one string: ``(is_stream, text)`` pieces joined
    by a newline, except one stream piece after another, which are joined as they are. A print can
    reach the notebook in several stream messages (ipykernel flushes stdout when another message,
    such as a widget's update from a run's thread, goes out), and a newline put between its pieces
    split one printed line in two."""
    out: list[str] = []
    for i, (is_stream, text) in enumerate(pieces):
        if i and not (is_stream and pieces[i - 1][0]):
            out.append("\n")
        out.append(text)
    return "".join(out)


def execute_cells(cells: list[str], cwd: Path, timeout: int = 120) -> Any:
    """Run ``cells`` in a real kernel (nbclient, the notebook's folder ``cwd``; a cell's error is
    kept as its output and the next cell runs) and return the executed notebook."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    ).execute()
    return nb


def _whole(body: bytes, coding: str | None) -> bytes:
    """A stored body as it arrived, whole (``_runs/bodies.py``'s codings)."""
    import zlib

    import pyarrow as pa

    if coding is None:
        return body
    if coding == "zlib":
        return zlib.decompress(body)
    assert coding == "lz4", coding
    return pa.input_stream(pa.py_buffer(body), compression="lz4").read()


def stored_bytes(folder: Path) -> dict[Path, bytes]:
    """Every file under a run store, as a search for a secret must see it: a Parquet file's pages
    are compressed, so its table is added as CSV text, and the database's request bodies are
    compressed too (``body_coding``), so they are added as they arrived (raw bytes alone would
    hide a key)."""
    import duckdb
    import pyarrow.parquet as pq

    from nito_nb._runs.store_open import DB_NAME

    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".parquet":
            data += pq.read_table(path).to_pandas().to_csv().encode()
        if path.name == DB_NAME:
            with duckdb.connect(str(path), read_only=True) as con:
                for body, coding in con.execute(
                    "SELECT body, body_coding FROM requests"
                ).fetchall():
                    data += _whole(bytes(body or b""), coding)
        out[path] = data
    return out


# -- the fast tier (`make check`) ------------------------------------------------------------
#: Set by `make check`, which runs the tests that start no kernel, no Python process, no browser
#: and no Ray (`-m "not spawns and not browser and not ray"`). Under it, a test without the
#: `spawns` mark that starts a Python process fails, naming the mark: the tier stays what it says.
FAST_TIER = os.environ.get("NITO_FAST_TIER") == "1"
#: The one process a fast test may start: the simulator process that Runs of `sim/` models share
#: (started once per session, by whichever test first runs one).
SHARED_PROCESSES = ("nito_nb.sim._process",)


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    if not FAST_TIER or request.node.get_closest_marker("spawns") is not None:
        yield
        return
    import subprocess

    real_init = subprocess.Popen.__init__

    def refuse(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        command = [str(a) for a in args] if isinstance(args, (list, tuple)) else [str(args)]
        python = Path(command[0]).name.startswith("python") or command[0] == sys.executable
        if python and not any(shared in command for shared in SHARED_PROCESSES):
            pytest.fail(
                f"{request.node.nodeid} starts a Python process ({' '.join(command)[:80]}): "
                "mark it @pytest.mark.spawns (make check leaves such tests to make test)"
            )
        real_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]


@contextlib.contextmanager
def bodies_read() -> Iterator[Any]:
    """``body_read(stream)``: the body an AsyncStream read (a PushedBody, or httpx's reads), kept
    as it started: an ended AsyncStream lets go of it (``_stream.py``)."""
    import weakref

    from nito_nb._stream import AsyncStream

    bodies: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
    read = AsyncStream._aread

    async def _aread(self: AsyncStream, out: Any) -> None:
        bodies[self] = self._body
        await read(self, out)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AsyncStream, "_aread", _aread)
        yield bodies.get


@pytest.fixture
def body_read() -> Iterator[Any]:
    """:func:`bodies_read` for the test."""
    with bodies_read() as body_read:
        yield body_read


def frame_parsed_whole(stream: Any) -> Any:
    """``nito_nb.frame(stream)`` with every chunk parsed whole, no skeleton trusted and no
    reading made from another chunk's (``_frame/ids.py``): the slow path the frame's skeletons
    must agree with (the frame tests compare the two)."""
    from unittest.mock import patch

    import nito_nb
    from nito_nb._frame import build, ids

    with (
        patch.object(build._Builder, "_skeleton", lambda self, key, padded=False, echoed=False: -1),
        patch.object(ids.ByChunkId, "made", lambda self, name, chunk_id: None),
    ):
        return nito_nb.frame(stream)
