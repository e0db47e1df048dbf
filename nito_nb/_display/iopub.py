"""A live view's messages in a kernel, without the flushes that would send nothing.

ipykernel (6 and 7) flushes stdout and stderr before every display and update_display message
(``ZMQDisplayPublisher._flush_streams``), so that text printed before an output shows above it.
Each flush is a round trip to the kernel's IOPub thread (``OutStream.flush`` hands it the work and
waits), and it is made even when nothing was printed. With the stream's reader thread holding the
GIL, every hand-over waits for the GIL's switch interval: a message took milliseconds (tens on a
busy machine) in a ``%%nito`` cell of 0.2 s, most of the display's cost (bench/bench_magic.py
--kernel, docs/JUPYTER.md).

Inside ``quiet_flushes()``, in that thread only, the kernel's display publisher flushes stdout and
stderr only when one of them holds something not yet sent (``OutStream._flush_pending``, set by
every write until the IOPub thread has sent it): a flush with nothing pending sends nothing, and
the message itself goes through the IOPub thread's queue after anything already handed to it, so
the frontend receives everything in the same order as before. Anything else (a stream that is not
ipykernel's, one that echoes to a terminal, a publisher without ``_flush_streams``) is flushed as
ipykernel does. Other threads, and displays outside the block, are not touched.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["quiet_flushes"]

_local = threading.local()


def _pending(stream: Any) -> bool:
    """Whether flushing ``stream`` could send something (True unless it says it would not)."""
    if stream is None:
        return False
    if getattr(stream, "echo", None) is not None:  # its flush also flushes a terminal's copy
        return True
    return bool(getattr(stream, "_flush_pending", True)) or bool(
        getattr(stream, "_subprocess_flush_pending", False)
    )


class _FlushWhenPending:
    """Replaces one publisher's ``_flush_streams``: as ipykernel's, except in a ``quiet_flushes()``
    block with nothing pending on stdout or stderr."""

    def __init__(self, flush: Callable[[], Any]) -> None:
        self.flush = flush

    def __call__(self) -> Any:
        if getattr(_local, "quiet", False) and not (_pending(sys.stdout) or _pending(sys.stderr)):
            return None
        return self.flush()


def _install() -> bool:
    """Give the kernel's display publisher the conditional flush (once); False outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return False
    publisher = getattr(get_ipython(), "display_pub", None)
    flush = getattr(publisher, "_flush_streams", None)
    if flush is None:
        return False
    if not isinstance(flush, _FlushWhenPending):
        publisher._flush_streams = _FlushWhenPending(flush)  # type: ignore[union-attr]
    return True


@contextmanager
def quiet_flushes() -> Iterator[None]:
    """Display messages sent in this block, in this thread, skip flushes that would send nothing."""
    if getattr(_local, "quiet", False) or not _install():
        yield
        return
    _local.quiet = True
    try:
        yield
    finally:
        _local.quiet = False
