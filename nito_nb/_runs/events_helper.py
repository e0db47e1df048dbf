"""The helper process that writes a run store's events files (``events.py``'s ``write_events``).

Why a helper process: building a batch's frame rows from the logs held the GIL that the run's
sending loop needs (``events.py``). It is ``python -m nito_nb._runs.events_main`` over two pipes,
not a ``multiprocessing`` child: ``spawn`` re-imports the user's script, so a script without an
``if __name__ == "__main__"`` guard would have run itself again. It ignores SIGINT (an interrupt
in the notebook stops the run, not the writing of what finished) and ends when its pipe closes,
also when the run's process is killed. Where it cannot run (Windows: no inherited pipe
descriptors) or dies, the writer thread builds the files itself (``loop_first``), as the magic
always does.

Starting one costs about 0.7 s of CPU (it imports pandas, pyarrow and nito_nb), which a
1,000-request run paid again each time, on the cores its sending loop and its server need. So a
writer that closes hands its helper back, and the next store writer of this process takes it:
one is kept idle, for ``IDLE_SECONDS`` at most, then let go (its pipe closed: it ends).

A batch travels as ``EndedStream`` records (the log and four facts; a Stream's lock cannot
cross), pickled with the logs' columns (times, offsets, kinds, bytes: about 58 KB per ``sim/chat``
request) out of band (``_dumps``): each is written to the pipe as it is, not copied into the
pickle first and out of it again on the other side (a 7 MB pickle per batch, 0.2 ms per request
on the writer thread, under the GIL).
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import warnings
from array import array
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .events import write_events
from .gil import loop_first

if TYPE_CHECKING:
    from .._frame import EndedStream

__all__ = ["IDLE_SECONDS", "EventsHelper", "main"]

#: How long a helper left by a closed store writer waits for the next one (a notebook's next
#: run) before it is let go (seconds).
IDLE_SECONDS = 60.0


#: The room asked for in the pipe a batch goes through (bytes; Linux's ceiling for a process
#: without privileges, ``/proc/sys/fs/pipe-max-size``). A batch is about 7 MB (128 ``sim/chat``
#: logs); through the default 64 KiB the writer thread and the helper took turns over a hundred
#: times a batch, each a wake-up on the cores the run's loop and its server keep busy.
PIPE_SIZE = 1 << 20


def _widen(fd: int) -> None:
    """Ask for ``PIPE_SIZE`` of room in the pipe ``fd`` writes to, where the system allows it
    (Linux; elsewhere, or refused, the pipe stays as it is: slower, never wrong)."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (ImportError, AttributeError, OSError):
        pass


class _Process:
    """One helper process and this side's ends of its two pipes."""

    def __init__(self) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        # it never sends anything
        env = {k: v for k, v in os.environ.items() if k != "NITO_API_KEY"}
        # The helper imports this very nito_nb: the parent's import path, first.
        env["PYTHONPATH"] = os.pathsep.join(
            [p for p in sys.path if p] + [env.get("PYTHONPATH", "")]
        )
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    # -P: not the current folder first (-m puts it there), which may hold another
                    # nito_nb than this process's (a checkout): its helper spoke another protocol
                    *(["-P"] if sys.version_info >= (3, 11) else []),
                    "-m",
                    "nito_nb._runs.events_main",
                    str(to_child),
                    str(from_child),
                ],
                pass_fds=(to_child, from_child),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # its stderr is this process's: a crash says why there
            )
        except OSError:
            os.close(from_parent)
            os.close(to_parent)
            raise
        finally:
            os.close(to_child)  # the helper's ends: its copies are its own
            os.close(from_child)
        _widen(from_parent)
        self.send = Connection(from_parent, readable=False)
        self.recv = Connection(to_parent, writable=False)
        self.owner = os.getpid()  # a forked child has copies of the pipes: not its helper
        self.expiry: threading.Timer | None = None

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def close(self) -> None:
        """Close the pipes (the helper ends) and reap it."""
        for conn in (self.send, self.recv):
            conn.close()
        try:
            self.proc.wait(timeout=10)  # it ends when its pipe closes
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_idle_lock = threading.Lock()
_idle: _Process | None = None  # the helper a closed writer left, for the next one


def _take_idle() -> _Process | None:
    """The idle helper, if one is there and alive (else it is let go)."""
    global _idle
    with _idle_lock:
        helper, _idle = _idle, None
    if helper is None:
        return None
    if helper.expiry is not None:
        helper.expiry.cancel()
    if helper.alive():
        return helper
    if helper.owner == os.getpid():
        helper.close()
    return None


def _give_back(helper: _Process) -> None:
    """Keep ``helper`` for the next writer, for IDLE_SECONDS; a helper already kept goes."""
    global _idle
    helper.expiry = threading.Timer(IDLE_SECONDS, _expire, (helper,))
    helper.expiry.daemon = True
    other: _Process | None
    with _idle_lock:  # _expire waits for it: the helper is in place before it looks
        try:
            helper.expiry.start()
        except RuntimeError:  # Python is exiting: no new thread, and no next writer either
            other = helper
        else:
            other, _idle = _idle, helper
    if other is not None:
        if other.expiry is not None:
            other.expiry.cancel()
        other.close()


def _expire(helper: _Process) -> None:
    global _idle
    with _idle_lock:
        if _idle is not helper:  # taken meanwhile
            return
        _idle = None
    helper.close()


@atexit.register
def _let_idle_go() -> None:
    """At exit: the idle helper is let go and reaped (it would end anyway, its pipe closed)."""
    helper = _take_idle()
    if helper is not None:
        helper.close()


def _rebuilt_array(typecode: str, data: Any) -> array:
    out = array(typecode)
    out.frombytes(data)
    return out


class _Pickler(pickle.Pickler):
    """Pickles the logs' columns (bytearrays, arrays) out of band (``_dumps``)."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is bytearray:
            return bytearray, (pickle.PickleBuffer(obj),)
        if type(obj) is array:
            return _rebuilt_array, (obj.typecode, pickle.PickleBuffer(obj))
        return NotImplemented


def _dumps(job: Any) -> list[Any]:
    """The messages that carry ``job``: its columns' count and the pickle, then each column as
    it is (``_receive`` reads them)."""
    import io

    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(job)
    return [struct.pack("<Q", len(buffers)) + out.getbuffer(), *(b.raw() for b in buffers)]


def _receive(conn: Connection) -> Any:
    """What ``_send`` sent."""
    head = conn.recv_bytes()
    (n,) = struct.unpack_from("<Q", head)
    buffers = [conn.recv_bytes() for _ in range(n)]
    return pickle.loads(memoryview(head)[8:], buffers=buffers)


class EventsHelper:
    """The helper process of one store writer: one batch at a time, ``submit`` then ``wait``;
    ``process=False``: no helper, ``submit`` writes the file.

    If the helper cannot start or dies, the batch is written here instead (and so are the next
    ones): nothing is lost, the run is only slower."""

    def __init__(self, *, process: bool = True) -> None:
        self._helper: _Process | None = None
        self._job: tuple[Any, ...] | None = None
        self._sent = False  # the helper has the job: its answer is to be taken
        self.failure: str | None = None  # why the batches are written here, when they are
        if not process:  # the caller writes them (the magic: one stream per cell)
            return
        if sys.platform == "win32":
            self.failure = "no helper process on Windows"
            return
        helper = _take_idle()
        if helper is None:
            try:
                helper = _Process()
            except OSError as exc:
                self.failure = f"the helper process did not start ({exc})"
                return
        self._helper = helper

    @property
    def _proc(self) -> subprocess.Popen[bytes] | None:
        """The helper process (None: the batches are written here)."""
        return None if self._helper is None else self._helper.proc

    def submit(
        self, folder: Path, batch: str, run_id: str | None, ended: Mapping[str, EndedStream]
    ) -> None:
        self._job = (str(folder), batch, run_id, dict(ended))
        if self._helper is not None:
            try:
                messages = _dumps(self._job)  # pickled whole before a byte is written
            except Exception:  # a log that does not pickle: this batch is written here
                messages = []
            if messages:
                # From the first byte on, the helper owes an answer: a writer stopped before it
                # took it lets the helper go (close), never hands it on out of step.
                self._sent = True
                try:
                    for message in messages:
                        self._helper.send.send_bytes(message)
                    return
                except OSError as exc:
                    self._sent = False
                    self._lost(f"the helper process ended ({exc})")
        self._write_here()

    def wait(self) -> None:
        """Return when the submitted batch's file is in place; raise what the helper raised."""
        job, self._job = self._job, None
        if job is None or not self._sent or self._helper is None:
            return
        try:
            reply = self._helper.recv.recv()
        except (EOFError, OSError) as exc:
            self._sent = False
            self._lost(f"the helper process ended ({type(exc).__name__})")
            self._job = job
            self._write_here()
            return
        self._sent = False  # only now: stopped in recv, the answer is still owed (close)
        if reply is not None:
            raise OSError(f"writing the store's events: {reply}")

    def _write_here(self) -> None:
        assert self._job is not None
        job, self._job = self._job, None
        with loop_first():  # the sending loop keeps its turns meanwhile (_gil.py)
            write_events(*job)

    def _lost(self, why: str) -> None:
        self.failure = why
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()
        warnings.warn(
            f"nito_nb: {why}: the run store's events are now written by this process (nothing is "
            "lost; the run is slower)",
            RuntimeWarning,
            stacklevel=2,
        )

    def close(self) -> None:
        """Let the helper go: kept for the next writer of this process when it is well and has
        no batch under way (else its pipe is closed, and it ends)."""
        helper, self._helper = self._helper, None
        if helper is None:
            return
        if self._sent or not helper.alive():  # an answer never taken would be the next one's
            helper.close()
        else:
            _give_back(helper)


def _serve(receive: Connection, reply: Connection) -> None:
    """The helper: write each batch received, answer None or why it failed; end at EOF."""
    while True:
        try:
            job = _receive(receive)
        except (EOFError, OSError):
            return
        try:
            write_events(*job)
        except BaseException as exc:  # told to the writer thread, which stops the run with it
            answer: str | None = f"{type(exc).__name__}: {exc}"
        else:
            answer = None
        try:
            reply.send(answer)
        # the run's process exited meanwhile (a script ended mid-run): nobody to tell
        except OSError:
            return


def main(argv: list[str]) -> None:
    """The helper process (``python -m nito_nb._runs.events_main READ_FD WRITE_FD``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _serve(Connection(int(argv[1]), writable=False), Connection(int(argv[2]), readable=False))
